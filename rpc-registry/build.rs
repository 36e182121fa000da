//! Generates the etcd v3 client stubs of the `etcd` feature from the vendored protos in
//! `proto/etcd/` (KV, Watch, Lease and Auth; clients only).
//!
//! `protoc` is the binary of the `protoc-bin-vendored` crate, passed by its path. No
//! `PROTOC` variable, no system package and no `.cargo/config.toml` is involved, so the
//! build works the same inside this repository and in a project that merely depends on
//! `rpc` (whose build never reads this repository's cargo configuration).
//!
//! Without the `etcd` feature there is nothing to generate, and the build-dependencies
//! this needs are not even compiled.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    // Cargo says which features are on in `CARGO_FEATURE_*`; the `cfg` is still needed
    // because without the feature the build-dependencies `generate` uses do not exist.
    if std::env::var_os("CARGO_FEATURE_ETCD").is_some() {
        #[cfg(feature = "etcd")]
        etcd::generate()?;
    }
    Ok(())
}

#[cfg(feature = "etcd")]
mod etcd {
    /// The protos to compile, and the directory their imports are relative to.
    const PROTOS: [&str; 3] = [
        "proto/etcd/api/etcdserverpb/rpc.proto",
        "proto/etcd/api/mvccpb/kv.proto",
        "proto/etcd/api/authpb/auth.proto",
    ];
    const INCLUDE: &str = "proto";

    pub(super) fn generate() -> Result<(), Box<dyn std::error::Error>> {
        println!("cargo:rerun-if-changed={INCLUDE}");
        let mut config = prost_build::Config::new();
        config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
        tonic_prost_build::configure()
            .build_server(false)
            .build_client(true)
            .compile_with_config(config, &PROTOS, &[INCLUDE])?;
        Ok(())
    }
}
