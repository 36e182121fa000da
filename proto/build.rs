//! Generates the tonic stubs with a `protoc` shipped as a crate, so building needs no
//! system package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    config.bytes(["."]);
    tonic_prost_build::configure().compile_with_config(
        config,
        &[
            "proto/greeter.proto",
            "proto/echo.proto",
            "proto/interop/test.proto",
        ],
        &["proto"],
    )?;
    Ok(())
}
