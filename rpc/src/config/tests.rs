use std::time::Duration;

use super::*;

fn yaml(text: &str) -> Result<Config, ConfigError> {
    Config::from_str(text, ConfigFormat::Yaml, "test.yaml")
}

#[test]
fn a_configuration_remembers_where_it_came_from() {
    assert_eq!(yaml("").unwrap().origin(), "test.yaml");
    assert_eq!(Config::default().origin(), "configuration built in code");
    let toml = Config::from_str("[protocol]\nport = 7\n", ConfigFormat::Toml, "app.toml");
    assert_eq!(toml.unwrap().origin(), "app.toml");
}

/// The registry may come from code (`ApplicationBuilder::registry`), so the file alone
/// cannot tell that the name is unknown; start-up checks it.
#[test]
fn consumer_registry_may_name_a_registry_given_in_code() {
    let config = yaml("consumer:\n  registry: supplied-in-code\n").unwrap();
    assert_eq!(
        config.consumer.registry.as_deref(),
        Some("supplied-in-code")
    );
}

#[test]
fn an_unknown_registry_scheme_names_the_key() {
    let error = yaml("registries:\n  main:\n    url: foo://x\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("registries.main.url"), "{error}");
    assert!(error.contains("unknown scheme `foo`"), "{error}");
}

#[test]
fn the_design_example_loads() {
    let config = yaml(
        r#"
application: { name: greeter-provider }
registries:
  main: { url: "etcd://127.0.0.1:2379" }
protocol: { name: tri, port: 20880 }
provider:
  services:
    org.example.Greeter: { version: "1.0.0", weight: 100 }
consumer:
  check: true
  references:
    org.example.Greeter: { cluster: failover, retries: 2, loadbalance: p2c, timeout: 3s }
graceful_shutdown:
  timeout: 60s
  step_timeout: 3s
  consumer_update_wait_time: 3s
  offline_request_window_timeout: 500ms
  internal_signal: true
"#,
    )
    .unwrap();
    assert_eq!(config.protocol.port, 20880);
    assert_eq!(
        config.provider.services["org.example.Greeter"].version,
        "1.0.0"
    );
    assert_eq!(config.consumer.references["org.example.Greeter"].retries, 2);
    assert_eq!(
        config.graceful_shutdown.offline_request_window_timeout,
        Duration::from_millis(500)
    );
    assert_eq!(config.registries["main"].url, "etcd://127.0.0.1:2379");
}

#[test]
fn replay_limits_read_as_numbers_or_with_units() {
    let config = yaml(
            "consumer:\n  references:\n    a.B: { max_replay_bytes: 8 MiB, max-replay-stream-bytes: 65536 }\n",
        )
        .unwrap();
    let reference = &config.consumer.references["a.B"];
    assert_eq!(reference.max_replay_bytes, 8 << 20);
    assert_eq!(reference.max_replay_stream_bytes, 64 << 10);
    let (key, _) =
        invalid_key("consumer:\n  references:\n    a.B: { max_replay_stream_bytes: lots }\n");
    assert_eq!(key, "consumer.references.a.B.max_replay_stream_bytes");
}

#[test]
fn compression_loads_and_bad_values_name_the_key() {
    let config = yaml(
        "provider:\n  services:\n    a.B: { compression: gzip }\n\
             consumer:\n  references:\n    a.B: { compression: zstd }\n",
    )
    .unwrap();
    assert_eq!(
        config.provider.services["a.B"].compression,
        rpc_core::Compression::Gzip
    );
    assert_eq!(
        config.consumer.references["a.B"].compression,
        rpc_core::Compression::Zstd
    );
    let defaults = yaml("provider:\n  services:\n    a.B: {}\n").unwrap();
    assert_eq!(
        defaults.provider.services["a.B"].compression,
        rpc_core::Compression::None
    );
    let (key, message) = invalid_key("provider:\n  services:\n    a.B: { compression: brotli }\n");
    assert_eq!(key, "provider.services.a.B.compression");
    assert!(message.contains("brotli"), "{message}");
    let (key, _) = invalid_key("consumer:\n  references:\n    a.B: { compression: lz4 }\n");
    assert_eq!(key, "consumer.references.a.B.compression");
}

#[test]
fn reflection_is_off_unless_turned_on() {
    assert!(!yaml("").unwrap().provider.reflection);
    assert!(
        yaml("provider: { reflection: true }\n")
            .unwrap()
            .provider
            .reflection
    );
    let (key, _) = invalid_key("provider: { reflection: sometimes }\n");
    assert_eq!(key, "provider.reflection");
}

#[test]
fn the_upgrade_section_reads_durations_and_paths() {
    let config = yaml("upgrade:\n  ready_timeout: 45s\n  pid-file: /run/x.pid\n").unwrap();
    assert_eq!(config.upgrade.ready_timeout, Duration::from_secs(45));
    assert_eq!(
        config.upgrade.pid_file.as_deref(),
        Some(std::path::Path::new("/run/x.pid"))
    );
    assert_eq!(config.upgrade.binary, None);
    assert!(config.upgrade.enabled, "on unless turned off");
    let (key, _) = invalid_key("upgrade:\n  ready_timeout: soon\n");
    assert_eq!(key, "upgrade.ready_timeout");
    let off = yaml("upgrade: { enabled: false }\n").unwrap();
    assert!(!off.upgrade.enabled);
    let (key, _) = invalid_key("upgrade: { enabled: maybe }\n");
    assert_eq!(key, "upgrade.enabled");
}

#[test]
fn the_admin_section_loads_and_its_rules_name_the_key() {
    let config = yaml("admin: { port: 0, token: s3cret, host: 0.0.0.0 }\n").unwrap();
    assert_eq!(config.admin.port, 0);
    assert_eq!(config.admin.token(), Some("s3cret"));
    assert!(config.admin.enabled, "on by default");
    assert_eq!(
        yaml("").unwrap().admin.port,
        crate::admin::DEFAULT_ADMIN_PORT
    );

    let (key, message) = invalid_key("admin: { host: 0.0.0.0 }\n");
    assert_eq!(key, "admin.token");
    assert!(message.contains("not a loopback address"), "{message}");
    let (key, _) = invalid_key("admin: { host: admin.example }\n");
    assert_eq!(key, "admin.host");
    let (key, _) = invalid_key("admin: { port: 70000 }\n");
    assert_eq!(key, "admin.port");
    let (key, _) = invalid_key("admin: { colour: blue }\n");
    assert_eq!(key, "admin.colour");
    // Disabled, its rules do not apply.
    assert!(yaml("admin: { enabled: false, host: 0.0.0.0 }\n").is_ok());
}

/// Issue 35, item 6: the names the admin endpoint answers to besides IP addresses
/// and localhost; an entry that is no host name is an error naming the key.
#[test]
fn admin_allowed_hosts_are_host_names_and_a_bad_one_names_the_key() {
    assert!(
        yaml("").unwrap().admin.allowed_hosts.is_empty(),
        "none by default"
    );
    let config =
        yaml("admin:\n  allowed_hosts: [greeter.internal, \"admin.example:22222\"]\n").unwrap();
    assert_eq!(
        config.admin.allowed_hosts,
        ["greeter.internal", "admin.example:22222"]
    );
    for bad in ["\"\"", "\"http://greeter.internal\"", "greeter.internal/x"] {
        let (key, message) = invalid_key(&format!("admin: {{ allowed_hosts: [{bad}] }}\n"));
        assert_eq!(key, "admin.allowed_hosts", "{bad}");
        assert!(message.contains("is not a host name"), "{bad}: {message}");
    }
    let (key, _) = invalid_key("admin: { allowed_hosts: 3 }\n");
    assert_eq!(key, "admin.allowed_hosts");
}

#[test]
fn dubbo_go_spellings_are_aliases() {
    let config = yaml("shutdown:\n  step-timeout: 1s\n  consumer-update-wait-time: 2s\n").unwrap();
    assert_eq!(
        config.graceful_shutdown.step_timeout,
        Duration::from_secs(1)
    );
    assert_eq!(
        config.graceful_shutdown.consumer_update_wait_time,
        Duration::from_secs(2)
    );
}

/// Issue 25, point 6: a 5 s shutdown (kitex's and pingora's default) is accepted
/// when `callback_timeout` is not set; set too large, it is refused naming the key
/// and the file.
#[test]
fn a_five_second_shutdown_loads_unless_callback_timeout_is_set_as_large() {
    let config = yaml("graceful_shutdown:\n  timeout: 5s\n").unwrap();
    assert_eq!(
        config.graceful_shutdown.callback_time(),
        Duration::from_millis(2_500)
    );
    let (key, message) = invalid_key("graceful_shutdown:\n  timeout: 5s\n  callback_timeout: 5s\n");
    assert_eq!(key, "graceful_shutdown.callback_timeout");
    assert!(message.contains("less than timeout"), "{message}");
}

#[test]
fn an_empty_file_gives_the_defaults_and_the_memory_registry() {
    let config = yaml("").unwrap();
    assert_eq!(config.registries["default"].url, "memory://");
    assert_eq!(config.graceful_shutdown, ShutdownConfig::default());
    assert!(config.consumer.check);
}

fn invalid_key(text: &str) -> (String, String) {
    match yaml(text).unwrap_err() {
        ConfigError::Invalid {
            origin,
            key,
            message,
        } => {
            assert_eq!(origin, "test.yaml");
            (key, message)
        }
        other => panic!("expected Invalid, got {other}"),
    }
}

#[test]
fn an_unquoted_version_that_would_change_is_named() {
    let (key, message) = invalid_key("provider:\n  services:\n    a.B:\n      version: 1.0\n");
    assert_eq!(key, "provider.services.a.B.version");
    assert!(message.contains("quoted: \"1.0\""), "{message}");
    // Quoted, or a number that reads back as written, is kept.
    for version in ["\"1.0\"", "1.5", "2"] {
        let text = format!("provider:\n  services:\n    a.B:\n      version: {version}\n");
        let config = Config::from_str_with_env(&text, ConfigFormat::Yaml, "test.yaml", []);
        assert!(config.is_ok(), "{version}: {config:?}");
    }
}

#[test]
fn errors_name_the_key_and_the_file() {
    let (key, message) = invalid_key("graceful_shutdown:\n  timout: 3s\n");
    assert_eq!(key, "graceful_shutdown.timout");
    assert!(message.contains("unknown field"), "{message}");

    let (key, message) = invalid_key("graceful_shutdown:\n  timeout: soon\n");
    assert_eq!(key, "graceful_shutdown.timeout");
    assert!(message.contains("duration"), "{message}");

    let (key, _) = invalid_key("graceful_shutdown:\n  step_timeout: -3s\n");
    assert_eq!(key, "graceful_shutdown.step_timeout");

    let (key, _) = invalid_key("provider:\n  services:\n    a.B: { weight: -5 }\n");
    assert_eq!(key, "provider.services.a.B.weight");

    let (key, _) = invalid_key("colour: blue\n");
    assert_eq!(key, "colour");

    let (key, message) = invalid_key("consumer:\n  blacklist: { jitter: 7.5 }\n");
    assert_eq!(key, "consumer.blacklist.jitter");
    assert!(message.contains("0.0..=1.0"), "{message}");

    let (key, _) = invalid_key("consumer:\n  references:\n    a.B: { forks: 0 }\n");
    assert_eq!(key, "consumer.references.a.B.forks");

    let (key, message) = invalid_key("registries:\n  main: { url: \"redis://x\" }\n");
    assert_eq!(key, "registries.main.url");
    assert!(message.contains("unknown scheme `redis`"), "{message}");

    let (key, message) = invalid_key("graceful_shutdown:\n  timeout: 0s\n");
    assert_eq!(key, "graceful_shutdown.timeout");
    assert!(message.contains("more than 0"), "{message}");
    let (key, _) = invalid_key("shutdown:\n  step-timeout: 0ms\n");
    assert_eq!(key, "graceful_shutdown.step_timeout");

    let (key, _) = invalid_key("protocol: { host: not-a-host }\n");
    assert_eq!(key, "protocol.host");

    let error = yaml("protocol: [").unwrap_err().to_string();
    assert!(error.starts_with("test.yaml: "), "{error}");
}

#[test]
fn a_references_retry_budget_and_failback_load_in_either_spelling() {
    let config = yaml(
        "consumer:\n  references:\n    a.B:\n      cluster: failback\n      \
             retry_budget: { ratio: 0.5, min_per_second: 1, ttl: 2s }\n      \
             failback: { retry-period: 100ms, retries: 2, queue-capacity: 16 }\n    \
             c.D:\n      retry-budget: { min-per-second: 3 }\n",
    )
    .unwrap();
    let a = &config.consumer.references["a.B"];
    assert_eq!(a.retry_budget.ratio, 0.5);
    assert_eq!(a.retry_budget.ttl, Duration::from_secs(2));
    assert_eq!(a.failback.retry_period, Duration::from_millis(100));
    assert_eq!(a.failback.queue_capacity, 16);
    assert_eq!(
        config.consumer.references["c.D"]
            .retry_budget
            .min_per_second,
        3
    );

    let (key, message) =
        invalid_key("consumer:\n  references:\n    a.B: { retry_budget: { ttl: 500ms } }\n");
    assert_eq!(key, "consumer.references.a.B.retry_budget.ttl");
    assert!(message.contains("whole seconds"), "{message}");
    let (key, _) = invalid_key("consumer:\n  references:\n    a.B: { failback: { retries: 0 } }\n");
    assert_eq!(key, "consumer.references.a.B.failback.retries");
}
