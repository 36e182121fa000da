//! Generates the tonic stubs with a `protoc` shipped as a crate, so building needs no
//! system package, and the encoded `FileDescriptorSet` of every file (for gRPC server
//! reflection: `proto::FILE_DESCRIPTOR_SET`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    config.bytes(["."]);
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("proto_descriptors.bin"))
        .compile_with_config(
            config,
            &[
                "proto/greeter.proto",
                "proto/echo.proto",
                "proto/feed.proto",
                "proto/interop/test.proto",
            ],
            &["proto"],
        )?;
    Ok(())
}
