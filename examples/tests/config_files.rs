//! The example configuration files load, in both formats, and mean the same thing.

use std::time::Duration;

use rpc::{Config, ConfigError};

const YAML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.yaml");
const TOML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.toml");
const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/reference.yaml");

/// The README's configuration (quoted from this file) loads, and its reference finds
/// its provider: the same group and version on both sides (issue 15).
#[test]
fn the_readme_reference_configuration_loads_and_agrees_with_itself() {
    let config = Config::from_file(REFERENCE).unwrap();
    let provided = &config.provider.services["helloworld.Greeter"];
    let reference = &config.consumer.references["helloworld.Greeter"];
    assert_eq!(
        (&provided.group, &provided.version),
        (&reference.group, &reference.version)
    );
    assert_eq!(reference.max_replay_bytes, 4 * 1024 * 1024);
    assert!(config.application.logging);
    assert_eq!(config.origin(), REFERENCE);
}

#[test]
fn the_yaml_and_toml_examples_load_and_agree() {
    let yaml = Config::from_file(YAML).unwrap();
    let toml = Config::from_file(TOML).unwrap();
    assert_eq!(yaml.application.name, "greeter-provider");
    assert_eq!(yaml.graceful_shutdown.timeout, Duration::from_secs(25));
    assert_eq!(
        yaml.graceful_shutdown.offline_request_window_timeout,
        Duration::from_millis(500)
    );
    assert_eq!(yaml.graceful_shutdown, toml.graceful_shutdown);
    assert_eq!(yaml.protocol, toml.protocol);
    assert_eq!(yaml.registries, toml.registries);
    assert_eq!(yaml.admin, toml.admin);
    assert_eq!(
        yaml.provider.services["helloworld.Greeter"].weight,
        toml.provider.services["helloworld.Greeter"].weight
    );
}

#[test]
fn a_bad_file_names_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "graceful_shutdown:\n  step_timeout: three seconds\n").unwrap();
    let error = Config::from_file(&path).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, ConfigError::Invalid { .. }), "{message}");
    assert!(message.contains("bad.yaml"), "{message}");
    assert!(
        message.contains("graceful_shutdown.step_timeout"),
        "{message}"
    );

    let missing = Config::from_file(dir.path().join("missing.yaml"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("missing.yaml"), "{missing}");
    let unknown_format = Config::from_file(dir.path().join("x.json"))
        .unwrap_err()
        .to_string();
    assert!(
        unknown_format.contains(".yaml, .yml or .toml"),
        "{unknown_format}"
    );
}

/// Issue 25, point 8: provider.toml spells the section dubbo-go's way (`[shutdown]`); an
/// override spelled ours merges with it instead of failing start-up ("duplicate field
/// `graceful_shutdown`"). The configuration check (`RPC_UPGRADE=check`) loads it and
/// starts nothing.
#[test]
fn the_toml_example_and_an_override_in_our_spelling_pass_the_configuration_check() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_greeter-provider"))
        .args(["--config", TOML])
        .env("RPC_GRACEFUL_SHUTDOWN__TIMEOUT", "20s")
        .env("RPC_UPGRADE", "check")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("configuration checked"), "{stderr}");
}

#[test]
fn a_bad_environment_override_names_the_variable() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_greeter-provider"))
        .args(["--config", YAML])
        .env("RPC_GRACEFUL_SHUTDOWN__TIMEOUT", "soon")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("environment variable RPC_GRACEFUL_SHUTDOWN__TIMEOUT"),
        "{stderr}"
    );
    assert!(stderr.contains("graceful_shutdown.timeout"), "{stderr}");
}
