//! The sections of the configuration file, one type each, with their defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_cluster::{BlacklistConfig, DirectoryConfig, ReferenceConfig};
use rpc_core::{Compression, byte_size};
use rpc_registry::RegistryFormat;
use rpc_transport::{ClientTls, TransportError};
use serde::{Deserialize, Serialize};

use super::limit::LimitConfig;

/// `application`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ApplicationConfig {
    /// Name used in logs and registry metadata. Default `rpc-application`.
    pub name: String,
    /// Whether start-up installs the default `tracing` subscriber (stderr, `RUST_LOG`,
    /// else `info` for lossless-rpc's crates and `warn` for others) when the
    /// application has not installed one itself. Default true; false leaves logging
    /// wholly to the application.
    pub logging: bool,
}

impl Default for ApplicationConfig {
    fn default() -> Self {
        Self {
            name: "rpc-application".to_owned(),
            logging: true,
        }
    }
}

/// One entry of `registries`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// `memory://`, `static://h:p,...`, `etcd://...`, `zookeeper://...`, `nacos://...`.
    pub url: String,
    /// The layout of the registry's entries: `rpc` (ours, the default; every backend)
    /// or `dubbo` (Apache Dubbo's interface-level layout, so that Dubbo consumers find
    /// our providers and our consumers find Dubbo's; `zookeeper://` and `nacos://` only).
    #[serde(default)]
    pub format: RegistryFormat,
}

impl RegistryConfig {
    /// The registry at `url`, in our format.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            format: RegistryFormat::Rpc,
        }
    }

    /// The same registry with its entries in `format`.
    pub fn with_format(mut self, format: RegistryFormat) -> Self {
        self.format = format;
        self
    }
}

/// `provider`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// Settings per provided service, by gRPC service name (`helloworld.Greeter`).
    pub services: BTreeMap<String, ServiceConfig>,
    /// The adaptive concurrency limit on inbound requests (off by default).
    pub limit: LimitConfig,
    /// Serve gRPC server reflection (`grpc.reflection.v1` and `v1alpha`), so that tools
    /// such as `grpcurl list` find the services and their messages. Needs the services'
    /// descriptors: `ApplicationBuilder::file_descriptor_set`. Default false.
    pub reflection: bool,
}

/// One entry of `provider.services`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ServiceConfig {
    /// Group. Default none.
    pub group: String,
    /// Version. Default none.
    pub version: String,
    /// Load-balancing weight. Default 100.
    pub weight: u32,
    /// Register this long after the service is ready (delay export). Default 0.
    #[serde(with = "humantime_serde")]
    pub delay: Duration,
    /// Metadata registered with the instance.
    pub metadata: BTreeMap<String, String>,
    /// How its responses are compressed, for clients that accept it (their
    /// `grpc-accept-encoding`): `none`, `gzip` or `zstd`. Compressed requests are read
    /// whatever this says. Default none.
    pub compression: Compression,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            group: String::new(),
            version: String::new(),
            weight: rpc_core::DEFAULT_WEIGHT,
            delay: Duration::ZERO,
            metadata: BTreeMap::new(),
            compression: Compression::None,
        }
    }
}

/// `consumer`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// Fail start-up when a reference has no provider within `check_timeout`.
    /// Default true (Dubbo's default).
    pub check: bool,
    /// Bound on waiting for a provider at start-up. Default 3 s.
    #[serde(with = "humantime_serde", alias = "check-timeout")]
    pub check_timeout: Duration,
    /// Registry references subscribe to, by name. Default: the first one.
    pub registry: Option<String>,
    /// Settings per reference, by gRPC service name.
    pub references: BTreeMap<String, ReferenceConfig>,
    /// Outlier ejection.
    pub blacklist: BlacklistConfig,
    /// How registry notifications are applied (empty protection, closing expiry, P2C).
    pub directory: DirectoryConfig,
    /// TLS to providers: `{ ca, domain, cert, key }` — the CA providers' certificates
    /// must chain to (PEM), the name they must carry (default: the address dialled),
    /// and this consumer's certificate and key for providers that ask for one (mutual
    /// TLS; default none). Default none: plain HTTP/2.
    pub tls: Option<ClientTls>,
    /// Bound on making a connection to a provider (TCP, TLS and the HTTP/2 preface).
    /// Default 1 s; more than 0. A dial that fails is "not sent": the call goes on to
    /// another instance.
    #[serde(with = "humantime_serde", alias = "connect-timeout")]
    pub connect_timeout: Duration,
    /// While calls are open on a connection to a provider, a keep-alive PING is sent
    /// once nothing has been heard from it for this long; `null` sends none. Default
    /// 20 s. A busy connection never pings. It finds a provider that vanished under a
    /// long, quiet stream; a call still waiting for its answer is watched more closely
    /// (`directory.stall_detection`). grpc-go and grpc-java servers allow one PING per 5
    /// minutes while they send nothing and close the connection after three more: for
    /// references to such servers with streams quiet for minutes, set `5m`.
    #[serde(with = "humantime_serde::option", alias = "keepalive-interval")]
    pub keepalive_interval: Option<Duration>,
    /// On a connection with no call open, a keep-alive PING is sent once nothing has been
    /// heard for this long; `null` sends none. Default 60 s: an idle connection to a host
    /// that vanished is found before a call is sent into it.
    #[serde(with = "humantime_serde::option", alias = "idle-keepalive-interval")]
    pub idle_keepalive_interval: Option<Duration>,
    /// How long a keep-alive PING waits for its answer before the connection is closed
    /// and the calls on it fail over. Default 10 s; more than 0.
    #[serde(with = "humantime_serde", alias = "keepalive-timeout")]
    pub keepalive_timeout: Duration,
    /// How long the PING that checks a connection whose call is overdue
    /// (`directory.stall_detection`) waits for its answer before the connection is
    /// closed. Default 1 s; more than 0. A live provider answers a PING from its
    /// connection task in well under a millisecond; the instance takes no new call while
    /// the PING is out anyway.
    #[serde(with = "humantime_serde", alias = "probe-timeout")]
    pub probe_timeout: Duration,
    /// `TCP_USER_TIMEOUT` of each connection to a provider (Linux): data unacknowledged
    /// this long breaks the connection. `null` leaves the kernel's default (about 15
    /// minutes). Default 20 s: a backstop under the PINGs.
    #[serde(with = "humantime_serde::option", alias = "tcp-user-timeout")]
    pub tcp_user_timeout: Option<Duration>,
    /// HTTP/2 connections to each provider instance, taken by calls in turn. Default 1;
    /// 1 to 64.
    #[serde(alias = "connections-per-instance")]
    pub connections_per_instance: usize,
    /// Flow-control window of each call on a connection to a provider, in bytes
    /// (`256KiB`, `2MiB` or a number): response bytes a provider may send before the
    /// caller reads them; 65 535 (the protocol's initial window) to 2 GiB − 1. Default
    /// 2 MiB (hyper's, so tonic's channel's).
    #[serde(with = "byte_size", alias = "initial-stream-window-size")]
    pub initial_stream_window_size: u32,
    /// Flow-control window of a whole connection to a provider, in bytes: response
    /// bytes all its calls may have unread together; from the stream window to
    /// 2 GiB − 1. Default 256 MiB (128 stream windows, Envoy's): callers that stop
    /// reading hold a stream window each, and the other calls go on. Smaller values
    /// (tonic's channel: 5 MiB) cost less memory at large messages and stall the
    /// connection's other calls behind a few paused readers.
    #[serde(with = "byte_size", alias = "initial-connection-window-size")]
    pub initial_connection_window_size: u32,
}

impl ConsumerConfig {
    /// The settings of each connection to a provider, as this section gives them.
    pub fn channel_options(&self) -> rpc_transport::ChannelOptions {
        let mut options = rpc_transport::ChannelOptions::default();
        options.connect_timeout = self.connect_timeout;
        options.http2_keepalive_interval = self.keepalive_interval;
        options.http2_idle_keepalive_interval = self.idle_keepalive_interval;
        options.http2_keepalive_timeout = self.keepalive_timeout;
        options.probe_timeout = self.probe_timeout;
        options.tcp_user_timeout = self.tcp_user_timeout;
        options.connections_per_instance = self.connections_per_instance;
        options.initial_stream_window_size = self.initial_stream_window_size;
        options.initial_connection_window_size = self.initial_connection_window_size;
        options.tls = self.tls.clone();
        options
    }

    /// The connection settings that are out of range: the key (under `consumer.`) and
    /// why.
    pub(super) fn validate_connections(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("connect_timeout", Some(self.connect_timeout)),
            ("keepalive_timeout", Some(self.keepalive_timeout)),
            ("keepalive_interval", self.keepalive_interval),
            ("idle_keepalive_interval", self.idle_keepalive_interval),
            ("probe_timeout", Some(self.probe_timeout)),
            ("tcp_user_timeout", self.tcp_user_timeout),
        ];
        for (key, value) in positive {
            if value.is_some_and(|value| value.is_zero()) {
                return Err((key, "must be more than 0".to_owned()));
            }
        }
        if !(1..=64).contains(&self.connections_per_instance) {
            return Err((
                "connections_per_instance",
                format!("must be 1 to 64, not {}", self.connections_per_instance),
            ));
        }
        // The windows' bounds are the transport's own (`ChannelOptions::check`), whose
        // option names are these keys.
        if let Err(TransportError::InvalidChannelOption { option, reason }) =
            self.channel_options().check()
        {
            return Err((option, reason));
        }
        Ok(())
    }
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            check: true,
            check_timeout: Duration::from_secs(3),
            registry: None,
            references: BTreeMap::new(),
            blacklist: BlacklistConfig::default(),
            directory: DirectoryConfig::default(),
            tls: None,
            connect_timeout: Duration::from_secs(1),
            keepalive_interval: Some(rpc_transport::DEFAULT_CLIENT_KEEPALIVE_INTERVAL),
            idle_keepalive_interval: Some(rpc_transport::DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL),
            keepalive_timeout: rpc_transport::DEFAULT_CLIENT_KEEPALIVE_TIMEOUT,
            probe_timeout: rpc_transport::DEFAULT_PROBE_TIMEOUT,
            tcp_user_timeout: Some(rpc_transport::DEFAULT_CLIENT_TCP_USER_TIMEOUT),
            connections_per_instance: 1,
            initial_stream_window_size: rpc_transport::DEFAULT_CLIENT_STREAM_WINDOW_SIZE,
            initial_connection_window_size: rpc_transport::DEFAULT_CLIENT_CONNECTION_WINDOW_SIZE,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::{Config, ConfigError, ConfigFormat};

    fn consumer(text: &str) -> Result<super::ConsumerConfig, ConfigError> {
        Config::from_str(text, ConfigFormat::Yaml, "test.yaml").map(|c| c.consumer)
    }

    #[test]
    fn the_connection_settings_reach_the_transport() {
        let defaults = consumer("").unwrap().channel_options();
        assert_eq!(defaults.connect_timeout, Duration::from_secs(1));
        assert_eq!(
            defaults.http2_keepalive_interval,
            Some(Duration::from_secs(20)),
            "dead-peer detection is on by default"
        );
        assert_eq!(
            defaults.http2_idle_keepalive_interval,
            Some(Duration::from_secs(60))
        );
        assert_eq!(defaults.http2_keepalive_timeout, Duration::from_secs(10));
        assert_eq!(defaults.probe_timeout, Duration::from_secs(1));
        assert_eq!(defaults.tcp_user_timeout, Some(Duration::from_secs(20)));
        assert_eq!(defaults.connections_per_instance, 1);
        assert_eq!(defaults.initial_stream_window_size, 2 << 20);
        assert_eq!(defaults.initial_connection_window_size, 256 << 20);
        let set = consumer(
            "consumer: { connect_timeout: 250ms, keepalive_interval: 10s, \
             idle_keepalive_interval: null, keepalive_timeout: 2s, probe_timeout: 300ms, \
             tcp_user_timeout: 5s, connections_per_instance: 4, \
             initial_stream_window_size: 1MiB, initial_connection_window_size: 5MiB }",
        )
        .unwrap()
        .channel_options();
        assert_eq!(set.connect_timeout, Duration::from_millis(250));
        assert_eq!(set.http2_keepalive_interval, Some(Duration::from_secs(10)));
        assert_eq!(set.http2_idle_keepalive_interval, None, "null: none");
        assert_eq!(set.http2_keepalive_timeout, Duration::from_secs(2));
        assert_eq!(set.probe_timeout, Duration::from_millis(300));
        assert_eq!(set.tcp_user_timeout, Some(Duration::from_secs(5)));
        assert_eq!(set.connections_per_instance, 4);
        assert_eq!(set.initial_stream_window_size, 1 << 20);
        assert_eq!(set.initial_connection_window_size, 5 << 20);
    }

    #[test]
    fn a_size_too_large_for_an_integer_is_named_as_too_large() {
        let error = consumer("consumer: { initial_connection_window_size: 99999999999999999999 }")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("100000000000000000000 bytes is more than any size"),
            "{error}"
        );
    }

    #[test]
    fn out_of_range_connection_settings_name_their_key() {
        for (text, key) in [
            (
                "consumer: { connect_timeout: 0s }",
                "consumer.connect_timeout",
            ),
            (
                "consumer: { keepalive_interval: 0s }",
                "consumer.keepalive_interval",
            ),
            (
                "consumer: { keepalive_timeout: 0s }",
                "consumer.keepalive_timeout",
            ),
            ("consumer: { probe_timeout: 0s }", "consumer.probe_timeout"),
            (
                "consumer: { tcp_user_timeout: 0s }",
                "consumer.tcp_user_timeout",
            ),
            (
                "consumer: { connections_per_instance: 0 }",
                "consumer.connections_per_instance",
            ),
            (
                "consumer: { connections_per_instance: 65 }",
                "consumer.connections_per_instance",
            ),
            (
                "consumer: { initial_stream_window_size: 1KiB }",
                "consumer.initial_stream_window_size",
            ),
            (
                "consumer: { initial_connection_window_size: 2GiB }",
                "consumer.initial_connection_window_size",
            ),
            (
                "consumer: { initial_stream_window_size: 8MiB, initial_connection_window_size: 4MiB }",
                "consumer.initial_connection_window_size",
            ),
            (
                "consumer: { initial_connection_window_size: 99999999999999999999 }",
                "consumer.initial_connection_window_size",
            ),
        ] {
            match consumer(text).unwrap_err() {
                ConfigError::Invalid {
                    key: named, origin, ..
                } => {
                    assert_eq!(
                        (named.as_str(), origin.as_str()),
                        (key, "test.yaml"),
                        "{text}"
                    );
                }
                other => panic!("{text}: expected Invalid, got {other}"),
            }
        }
    }
}
