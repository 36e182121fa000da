//! The `metrics` and `tracing` sections of the configuration.

use rpc_core::RpcConventions;
use serde::{Deserialize, Serialize};

/// `metrics`: Prometheus metrics of calls, the lifecycle, the cluster and registries.
///
/// ```yaml
/// metrics: { enabled: true, last_stop_file: /var/lib/greeter/last-stop.json }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct MetricsConfig {
    /// Keep metrics. Default true. Off, no call is timed, nothing is counted for them,
    /// and [`Metrics::encode`](super::Metrics::encode) returns an empty text.
    pub enabled: bool,
    /// A file where each stop writes its shutdown report, read back at every scrape and
    /// exported as `rpc_last_stop_*`, so the figures of a stop reach Prometheus after
    /// the process that stopped is gone (the next start, or a hot upgrade's new
    /// generation, exports them). Give every process of one instance the same path
    /// (systemd: under `StateDirectory=`). Default none: nothing is written.
    #[serde(alias = "last-stop-file")]
    pub last_stop_file: Option<std::path::PathBuf>,
    /// Where to export the call-duration histograms over OTLP/gRPC as well (an
    /// OpenTelemetry collector), e.g. `http://127.0.0.1:4317`. Default none. Needs
    /// `lossless-rpc` built with its `otlp` feature; see
    /// `lossless_rpc::observe::otlp_metrics`.
    #[serde(alias = "otlp-endpoint")]
    pub otlp_endpoint: Option<String>,
    /// How often they are exported (cumulative, as the scrape shows them). Default
    /// 60 s, OpenTelemetry's default export interval; more than 0.
    #[serde(with = "humantime_serde", alias = "otlp-interval")]
    pub otlp_interval: std::time::Duration,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            last_stop_file: None,
            otlp_endpoint: None,
            otlp_interval: std::time::Duration::from_secs(60),
        }
    }
}

impl MetricsConfig {
    /// Checks what serde cannot; returns the key (under `metrics`) and what is wrong.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.otlp_interval.is_zero() {
            return Err(("otlp_interval", "must be more than 0".to_owned()));
        }
        match &self.otlp_endpoint {
            Some(endpoint) => check_otlp_endpoint(endpoint, "exporting metrics"),
            None => Ok(()),
        }
    }
}

/// An OTLP endpoint must be an `http` or `https` URL with a host (and a port that is
/// one), and exporting needs the `otlp` feature.
fn check_otlp_endpoint(endpoint: &str, what: &str) -> Result<(), (&'static str, String)> {
    if !cfg!(feature = "otlp") {
        return Err((
            "otlp_endpoint",
            format!("{what} needs rpc built with its `otlp` feature"),
        ));
    }
    let usable = endpoint.parse::<http::Uri>().is_ok_and(|uri| {
        // A port past 65535 parses (the URI then has none), and the scheme's default
        // would be dialled: a port written must be one.
        let port_written = uri
            .authority()
            .and_then(|authority| authority.as_str().rsplit_once(':'))
            .is_some_and(|(_, after)| !after.contains(']'));
        matches!(uri.scheme_str(), Some("http" | "https"))
            && uri.host().is_some_and(|host| !host.is_empty())
            && (!port_written || uri.port_u16().is_some())
    });
    if usable {
        Ok(())
    } else {
        Err((
            "otlp_endpoint",
            format!("`{endpoint}` is not a URL such as http://127.0.0.1:4317"),
        ))
    }
}

/// `access_log`: one JSON line per call on both sides
/// (`lossless_rpc::filter::access_log` says which fields), off by default.
///
/// ```yaml
/// access_log: { enabled: true, path: /var/log/greeter/access.log }   # "-": stdout
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AccessLogConfig {
    /// Write the lines. Default false.
    pub enabled: bool,
    /// Where: a file, appended to (created if missing), or `-` for standard output.
    /// Default `-`.
    pub path: std::path::PathBuf,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            path: std::path::PathBuf::from("-"),
        }
    }
}

/// `tracing`: a `tracing` span per call on both sides, and optional OTLP export.
///
/// ```yaml
/// tracing:
///   enabled: true
///   otlp_endpoint: "http://127.0.0.1:4317"   # needs rpc's `otlp` feature
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct TracingConfig {
    /// Open a span per call (and per attempt on the consumer). Default true. The spans
    /// are at DEBUG level: they cost nothing until a subscriber asks for them.
    pub enabled: bool,
    /// Where to export spans over OTLP/gRPC (an OpenTelemetry collector, Jaeger, ...),
    /// e.g. `http://127.0.0.1:4317`. Default none. Needs `lossless-rpc` built with its
    /// `otlp` feature; see `lossless_rpc::observe::otlp`.
    #[serde(alias = "otlp-endpoint")]
    pub otlp_endpoint: Option<String>,
    /// Which of OpenTelemetry's RPC attribute names the call and attempt spans and the
    /// per-call metrics' labels carry: `old` (v1.37's: `rpc.system`, `rpc.service`,
    /// `rpc.method`, `rpc.grpc.status_code`), `stable` (`rpc.system.name`, a
    /// fully-qualified `rpc.method`, `rpc.response.status_code`, `error.type`) or `dup`
    /// (both, while dashboards move). Default: what `OTEL_SEMCONV_STABILITY_OPT_IN` says
    /// (`rpc` → stable, `rpc/dup` → dup), `old` when it says neither.
    #[serde(alias = "semantic-conventions")]
    pub semantic_conventions: Option<RpcConventions>,
}

impl Default for TracingConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            otlp_endpoint: None,
            semantic_conventions: None,
        }
    }
}

impl TracingConfig {
    /// The attribute names chosen: [`semantic_conventions`](Self::semantic_conventions),
    /// or else `OTEL_SEMCONV_STABILITY_OPT_IN` of this process's environment.
    pub fn semantic_conventions(&self) -> RpcConventions {
        self.semantic_conventions
            .unwrap_or_else(RpcConventions::from_env)
    }

    /// Checks what serde cannot; returns the key (under `tracing`) and what is wrong.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        match &self.otlp_endpoint {
            Some(endpoint) => check_otlp_endpoint(endpoint, "exporting spans"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use rpc_core::RpcConventions;

    use crate::ConfigFormat;

    use crate::{Config, ConfigError};

    fn yaml(text: &str) -> Result<Config, ConfigError> {
        Config::from_str(text, ConfigFormat::Yaml, "test.yaml")
    }

    #[test]
    fn both_sections_default_to_on_and_load_in_either_spelling() {
        let config = yaml("").unwrap();
        assert!(config.metrics.enabled);
        assert!(config.tracing.enabled);
        assert_eq!(config.tracing.otlp_endpoint, None);
        let config = yaml("metrics: { enabled: false }\ntracing: { enabled: false }\n").unwrap();
        assert!(!config.metrics.enabled);
        assert!(!config.tracing.enabled);
    }

    #[test]
    fn bad_values_name_their_key() {
        let error = yaml("metrics: { enabled: maybe }\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("metrics.enabled"), "{error}");
        let error = yaml("tracing: { sample: 1 }\n").unwrap_err().to_string();
        assert!(error.contains("tracing.sample"), "{error}");
        let error = yaml("tracing: { otlp-endpoint: \"not a url\" }\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("tracing.otlp_endpoint"), "{error}");
        if !cfg!(feature = "otlp") {
            assert!(error.contains("`otlp` feature"), "{error}");
        }
        let error = yaml("metrics: { otlp_interval: 0s }\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("metrics.otlp_interval"), "{error}");
        if cfg!(feature = "otlp") {
            for good in [
                "http://127.0.0.1:4317",
                "https://collector",
                "http://[::1]:4317",
            ] {
                let text = format!("metrics: {{ otlp_endpoint: \"{good}\" }}\n");
                assert!(yaml(&text).is_ok(), "{good}");
            }
        }
        for bad in [
            "nowhere",
            "http://127.0.0.1:99999",
            "ftp://127.0.0.1:1",
            "http://",
        ] {
            let error = yaml(&format!("metrics: {{ otlp_endpoint: \"{bad}\" }}\n"))
                .unwrap_err()
                .to_string();
            assert!(error.contains("metrics.otlp_endpoint"), "{bad}: {error}");
        }
        let error = yaml("tracing: { semantic_conventions: newest }\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("tracing.semantic_conventions"), "{error}");
    }

    #[test]
    fn the_semantic_conventions_key_wins_over_the_environment() {
        let config = yaml("tracing: { semantic-conventions: dup }\n").unwrap();
        assert_eq!(config.tracing.semantic_conventions(), RpcConventions::Dup);
        let config = yaml("tracing: { semantic_conventions: stable }\n").unwrap();
        assert_eq!(
            config.tracing.semantic_conventions(),
            RpcConventions::Stable
        );
        let config = yaml("tracing: { semantic_conventions: old }\n").unwrap();
        assert_eq!(config.tracing.semantic_conventions(), RpcConventions::Old);
    }
}
