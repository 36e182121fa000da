use super::*;
use crate::config::{Config, ConfigError, ConfigFormat};

fn protocol(text: &str) -> Result<ProtocolConfig, ConfigError> {
    Config::from_str(text, ConfigFormat::Yaml, "test.yaml").map(|c| c.protocol)
}

fn invalid_key(text: &str) -> String {
    match protocol(text).unwrap_err() {
        ConfigError::Invalid { key, origin, .. } => {
            assert_eq!(origin, "test.yaml");
            key
        }
        other => panic!("expected Invalid, got {other}"),
    }
}

#[test]
fn the_defaults_are_the_transports() {
    let protocol = protocol("").unwrap();
    assert_eq!(protocol.server_options(), ServerOptions::default());
    assert_eq!(protocol.message_limits(), MessageLimits::default());
    assert_eq!(protocol.max_decoding_message_size, 4 << 20);
}

#[test]
fn sizes_read_as_numbers_or_with_units() {
    let protocol = protocol(
        "protocol:\n  max_decoding_message_size: 8 MiB\n  max-server-send-msg-size: 1048576\n  \
         max_header_list_size: 32KiB\n  keepalive_interval: 10s\n",
    )
    .unwrap();
    assert_eq!(protocol.max_decoding_message_size, 8 << 20);
    assert_eq!(protocol.max_encoding_message_size, 1 << 20);
    assert_eq!(protocol.max_header_list_size, 32 << 10);
    let options = protocol.server_options();
    assert_eq!(
        options.http2_keepalive_interval,
        Some(Duration::from_secs(10))
    );
    assert_eq!(options.max_header_list_size, 32 << 10);
}

#[test]
fn the_protections_read_from_their_keys_and_zero_turns_them_off() {
    let options = protocol(
        "protocol:\n  preface_timeout: 2s\n  idle-timeout: 1m\n  max_connections: 5000\n  \
         tcp_user_timeout: 30s\n  keepalive_interval: 15s\n  keepalive_timeout: 5s\n  \
         listen-backlog: 4096\n",
    )
    .unwrap()
    .server_options();
    assert_eq!(options.preface_timeout, Duration::from_secs(2));
    assert_eq!(options.idle_timeout, Some(Duration::from_secs(60)));
    assert_eq!(options.max_connections, Some(5000));
    assert_eq!(options.connection_limit(), 5000);
    assert_eq!(options.tcp_user_timeout, Some(Duration::from_secs(30)));
    assert_eq!(
        options.http2_keepalive_interval,
        Some(Duration::from_secs(15))
    );
    assert_eq!(options.http2_keepalive_timeout, Duration::from_secs(5));
    assert_eq!(options.listen_backlog, 4096);

    let off =
        protocol("protocol: { idle_timeout: 0s, tcp_user_timeout: 0s, keepalive_interval: 0s }")
            .unwrap()
            .server_options();
    assert_eq!(off.idle_timeout, None);
    assert_eq!(off.tcp_user_timeout, None);
    assert_eq!(off.http2_keepalive_interval, None);
    let null = protocol("protocol: { keepalive_interval: null }").unwrap();
    assert_eq!(null.server_options().http2_keepalive_interval, None);
}

#[test]
fn the_flow_control_windows_read_from_their_keys() {
    let options = protocol(
        "protocol:\n  initial_stream_window_size: 256 KiB\n  initial-connection-window-size: 1MiB\n",
    )
    .unwrap()
    .server_options();
    assert_eq!(options.initial_stream_window_size, 256 << 10);
    assert_eq!(options.initial_connection_window_size, 1 << 20);
}

#[test]
fn bad_limits_name_their_key() {
    assert_eq!(
        invalid_key("protocol: { max_concurrent_streams: 0 }"),
        "protocol.max_concurrent_streams"
    );
    assert_eq!(
        invalid_key("protocol: { max_header_list_size: 100 }"),
        "protocol.max_header_list_size"
    );
    assert_eq!(
        invalid_key("protocol: { max_header_list_size: 8 GiB }"),
        "protocol.max_header_list_size"
    );
    assert_eq!(
        invalid_key("protocol: { max_decoding_message_size: lots }"),
        "protocol.max_decoding_message_size"
    );
    assert_eq!(
        invalid_key("protocol: { max_encoding_message_size: -1 }"),
        "protocol.max_encoding_message_size"
    );
    assert_eq!(
        invalid_key("protocol: { keepalive_timeout: 0s }"),
        "protocol.keepalive_timeout"
    );
    assert_eq!(
        invalid_key("protocol: { preface_timeout: 0s }"),
        "protocol.preface_timeout"
    );
    assert_eq!(
        invalid_key("protocol: { max_connections: 0 }"),
        "protocol.max_connections"
    );
    assert_eq!(
        invalid_key("protocol: { listen_backlog: 0 }"),
        "protocol.listen_backlog"
    );
    assert_eq!(
        invalid_key("protocol: { initial_stream_window_size: 1000 }"),
        "protocol.initial_stream_window_size"
    );
    assert_eq!(
        invalid_key("protocol: { initial_stream_window_size: 4 GiB }"),
        "protocol.initial_stream_window_size"
    );
    assert_eq!(
        invalid_key("protocol: { initial_stream_window_size: 2GiB }"),
        "protocol.initial_stream_window_size",
        "its own bound, before the connection window's"
    );
    assert_eq!(
        invalid_key(
            "protocol: { initial_stream_window_size: 2MiB, initial_connection_window_size: 1MiB }"
        ),
        "protocol.initial_connection_window_size"
    );
    assert_eq!(
        invalid_key("protocol: { idle_timeout: soon }"),
        "protocol.idle_timeout"
    );
}

#[test]
fn tls_files_must_be_readable_and_named_by_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "not read yet").unwrap();
    let text = |key: &str| {
        format!(
            "protocol:\n  tls:\n    cert: {}\n    key: {key}\n    reload-interval: 1s\n",
            cert.display()
        )
    };
    assert_eq!(
        invalid_key(&text("/nonexistent/key.pem")),
        "protocol.tls.key"
    );
    let read = protocol(&text(&cert.display().to_string())).unwrap();
    let tls = read.server_options().tls.unwrap();
    assert_eq!(tls.reload_interval, Duration::from_secs(1));
    assert_eq!(tls.client_ca, None);
    let error = protocol("protocol: { tls: { cert: a.pem } }").unwrap_err();
    assert!(error.to_string().contains("protocol.tls.key"), "{error}");
}
