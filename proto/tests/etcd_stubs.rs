//! lossless-rpc-registry's etcd client runs on stubs generated from the etcd protos in
//! `rpc-registry/proto/etcd` and committed in `rpc-registry/src/etcd/generated/`, so that
//! building the framework needs no `protoc` (issue 40). This test runs the generator
//! that crate's build script used to run — tonic-prost-build, clients only, with the
//! `protoc` of protoc-bin-vendored — into a temporary directory and checks that the
//! committed files are exactly its output, byte for byte, behind their header.
//!
//! After changing the protos or the versions of those crates:
//!
//! ```text
//! RPC_WRITE_ETCD_STUBS=1 cargo test -p proto --test etcd_stubs
//! ```
//!
//! writes the files instead of comparing; review the diff and commit it.

use std::path::{Path, PathBuf};

/// The protos to compile, relative to [`INCLUDE`] (their imports are relative to it).
const PROTOS: [&str; 3] = [
    "etcd/api/etcdserverpb/rpc.proto",
    "etcd/api/mvccpb/kv.proto",
    "etcd/api/authpb/auth.proto",
];

/// The directory of lossless-rpc-registry the protos' imports are relative to.
const INCLUDE: &str = "proto";

/// Where the generated files are committed, in lossless-rpc-registry.
const GENERATED: &str = "src/etcd/generated";

/// What the generator writes: one file per proto package.
const FILES: [&str; 3] = ["authpb.rs", "etcdserverpb.rs", "mvccpb.rs"];

/// The lines above the generator's output in each committed file.
const HEADER: &str = "\
// @generated from the etcd v3 protos in rpc-registry/proto/etcd (clients only) by
// tonic-prost-build, with the protoc of protoc-bin-vendored. Do not edit: after changing
// the protos or those crates' versions, regenerate with
//     RPC_WRITE_ETCD_STUBS=1 cargo test -p proto --test etcd_stubs
// and review the diff; without the variable that test checks this file is up to date.
";

/// The folder of lossless-rpc-registry (this crate is proto/, its sibling).
fn registry() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rpc-registry")
}

/// Runs the generator into `out` and returns each file's text, header included.
fn generate(out: &Path) -> Vec<(&'static str, String)> {
    let include = registry().join(INCLUDE);
    let protos: Vec<PathBuf> = PROTOS.iter().map(|proto| include.join(proto)).collect();
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path().expect("protoc"));
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .out_dir(out)
        .compile_with_config(config, &protos, &[include])
        .expect("the etcd protos compile");
    let mut written: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written, FILES,
        "the generator wrote other files than the committed ones: update FILES here and \
         the modules of rpc-registry/src/etcd/proto.rs"
    );
    FILES
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(out.join(name)).unwrap();
            (*name, format!("{HEADER}{text}"))
        })
        .collect()
}

#[test]
fn the_committed_etcd_stubs_are_what_the_protos_generate() {
    let out = tempfile::tempdir().unwrap();
    let generated = generate(out.path());
    let committed = registry().join(GENERATED);
    if std::env::var_os("RPC_WRITE_ETCD_STUBS").is_some_and(|value| value == "1") {
        for (name, text) in &generated {
            std::fs::write(committed.join(name), text).unwrap();
        }
        eprintln!("wrote {} files to {}", generated.len(), committed.display());
        return;
    }
    let stale: Vec<&str> = generated
        .iter()
        .filter(|(name, text)| {
            std::fs::read_to_string(committed.join(name)).ok().as_ref() != Some(text)
        })
        .map(|(name, _)| *name)
        .collect();
    assert!(
        stale.is_empty(),
        "{stale:?} in {} differ from what the etcd protos generate; run \
         `RPC_WRITE_ETCD_STUBS=1 cargo test -p proto --test etcd_stubs` and review the diff",
        committed.display()
    );
}
