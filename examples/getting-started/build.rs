// Generates the client and server of proto/hello.proto into OUT_DIR; src/lib.rs
// includes them. protoc comes from the protoc-bin-vendored crate, so nothing needs
// installing; with a system protoc, `tonic_prost_build::compile_protos("proto/hello.proto")`
// alone does the same.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure().compile_with_config(
        config,
        &["proto/hello.proto"],
        &["proto"],
    )?;
    Ok(())
}
