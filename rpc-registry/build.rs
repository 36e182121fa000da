//! No code generation happens here. The build script exists so that the optional
//! build-dependency `protoc-bin-vendored` (enabled by the `etcd` feature) is part of the
//! build graph: cargo then unpacks it before etcd-client's build script runs `protoc`
//! through `scripts/protoc` (see `.cargo/config.toml`), even when only this crate is built.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
