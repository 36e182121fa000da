//! The settings of an etcd client, read from its URL: the lease TTL and the key prefix,
//! besides the [`NetworkSettings`] every network backend takes.

use std::time::Duration;

use rpc_core::RegistryError;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::remote::NetworkSettings;
use crate::url::RegistryUrl;

/// Port used when the URL gives none.
pub const DEFAULT_PORT: u16 = 2379;
/// Lease time-to-live when the URL has no `ttl`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// Key prefix when the URL has no `prefix`.
pub const DEFAULT_PREFIX: &str = "/rpc";

/// The query parameters of an `etcd://` URL besides [`NetworkSettings::PARAMS`].
const PARAMS: [&str; 6] = [
    "ttl",
    "prefix",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_domain",
];

/// TLS to etcd, from the URL's `tls_*` parameters: the files are read when the URL is
/// (so a configuration naming a file that is not there is refused at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdTls {
    /// PEM of the CA etcd's certificate must chain to (`tls_ca`).
    pub ca: Vec<u8>,
    /// PEM of this client's certificate and key (`tls_cert`, `tls_key`), for an etcd
    /// started with `--client-cert-auth`. Default none.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name etcd's certificate must carry (`tls_domain`). Default: the host dialled.
    pub domain: Option<String>,
}

impl EtcdTls {
    /// tonic's TLS settings for a connection to a member: trust only `ca`, present
    /// `identity` when there is one, expect `domain` (else the host dialled) in etcd's
    /// certificate. The PEM is parsed when the channel is set up.
    pub(super) fn client_config(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca));
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        config
    }

    /// The `tls_*` parameters of `url`, if any.
    fn from_url(url: &RegistryUrl) -> Result<Option<Self>, RegistryError> {
        let read = |name: &str| -> Result<Option<Vec<u8>>, RegistryError> {
            url.param(name)
                .map(|path| {
                    std::fs::read(path).map_err(|error| {
                        url.invalid(format!("parameter `{name}`: cannot read `{path}`: {error}"))
                    })
                })
                .transpose()
        };
        let (ca, cert, key) = (read("tls_ca")?, read("tls_cert")?, read("tls_key")?);
        let domain = url.param("tls_domain").map(str::to_owned);
        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(url.invalid(
                    "parameters `tls_cert` and `tls_key` go together (a client certificate and its key)".to_owned(),
                ));
            }
        };
        match ca {
            Some(ca) => Ok(Some(Self {
                ca,
                identity,
                domain,
            })),
            None if identity.is_some() || domain.is_some() => Err(url.invalid(
                "parameter `tls_ca` is missing: TLS to etcd needs the CA its certificate chains to"
                    .to_owned(),
            )),
            None => Ok(None),
        }
    }
}

/// Settings of an [`EtcdRegistry`](crate::etcd::EtcdRegistry), from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdConfig {
    /// The cluster members, the credentials (for etcd authentication) and the time bounds;
    /// `connect_timeout` bounds connecting and the first request.
    pub network: NetworkSettings,
    /// Lease time-to-live: how long after its process dies an instance disappears.
    pub ttl: Duration,
    /// Key prefix, without a trailing `/` (`/rpc`).
    pub prefix: String,
    /// TLS (HTTPS to every member), when the URL has `tls_ca`. Default none.
    pub tls: Option<EtcdTls>,
}

impl EtcdConfig {
    /// Reads the settings of an `etcd://` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault: an unknown parameter, a duration that
    /// does not parse, a `ttl` under one second or not whole seconds, a `prefix` that does
    /// not start with `/`, those of [`NetworkSettings::from_url`] (a user without
    /// password, no host, a zero timeout), then a `tls_*` file that cannot be read,
    /// `tls_cert` without `tls_key` (or the reverse), or a `tls_*` without `tls_ca`.
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        NetworkSettings::expect_params(url, &PARAMS)?;
        let ttl = url.duration_param("ttl", DEFAULT_TTL)?;
        if ttl < Duration::from_secs(1) || ttl.subsec_nanos() != 0 {
            return Err(url.invalid(format!(
                "parameter `ttl`: {ttl:?} is not a whole number of seconds of at least 1s (etcd leases count seconds)"
            )));
        }
        let prefix = url.param("prefix").unwrap_or(DEFAULT_PREFIX);
        if !prefix.starts_with('/') {
            return Err(url.invalid(format!(
                "parameter `prefix`: `{prefix}` must start with `/`"
            )));
        }
        Ok(Self {
            network: NetworkSettings::from_url(url, DEFAULT_PORT, "etcd credentials")?,
            ttl,
            prefix: prefix.trim_end_matches('/').to_owned(),
            tls: EtcdTls::from_url(url)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;

    fn config(url: &str) -> Result<EtcdConfig, String> {
        testing::parse(url, EtcdConfig::from_url)
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = config("etcd://127.0.0.1").unwrap();
        assert_eq!(plain.network.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(plain.ttl, DEFAULT_TTL);
        assert_eq!(plain.prefix, "/rpc");
        assert_eq!(plain.network.connect_timeout, crate::DEFAULT_TIMEOUT);
        assert!(plain.network.credentials.is_none());

        let full =
            config("etcd://u:p@a:1,b:2?ttl=3s&prefix=/x/&connect_timeout=500ms&request_timeout=2s")
                .unwrap();
        assert_eq!(full.network.endpoints, ["a:1", "b:2"]);
        assert_eq!(full.network.credentials, Some(("u".into(), "p".into())));
        assert_eq!(full.ttl, Duration::from_secs(3));
        assert_eq!(full.prefix, "/x");
        assert_eq!(full.network.connect_timeout, Duration::from_millis(500));
        assert_eq!(full.network.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn tls_parameters_read_their_files_and_go_together() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "CA").unwrap();
        let ca = ca.display();
        let tls = config(&format!("etcd://h?tls_ca={ca}&tls_domain=etcd.local"))
            .unwrap()
            .tls
            .unwrap();
        assert_eq!(tls.ca, b"CA");
        assert_eq!(tls.domain.as_deref(), Some("etcd.local"));
        assert_eq!(tls.identity, None);
        assert!(config("etcd://h").unwrap().tls.is_none());
        let missing = config("etcd://h?tls_ca=/nonexistent/ca.pem").unwrap_err();
        assert!(missing.contains("parameter `tls_ca`"), "{missing}");
        let alone = config(&format!("etcd://h?tls_ca={ca}&tls_cert={ca}")).unwrap_err();
        assert!(alone.contains("`tls_cert` and `tls_key`"), "{alone}");
        let no_ca = config("etcd://h?tls_domain=x").unwrap_err();
        assert!(no_ca.contains("`tls_ca` is missing"), "{no_ca}");
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            config("etcd://h?tll=3s")
                .unwrap_err()
                .contains("unknown parameter `tll`")
        );
        assert!(
            config("etcd://h?ttl=soon")
                .unwrap_err()
                .contains("parameter `ttl`")
        );
        assert!(
            config("etcd://h?ttl=500ms")
                .unwrap_err()
                .contains("parameter `ttl`")
        );
        assert!(
            config("etcd://h?ttl=1500ms")
                .unwrap_err()
                .contains("parameter `ttl`")
        );
        assert!(
            config("etcd://h?prefix=rpc")
                .unwrap_err()
                .contains("parameter `prefix`")
        );
        assert!(
            config("etcd://h?connect_timeout=0s")
                .unwrap_err()
                .contains("parameter `connect_timeout`")
        );
        assert!(
            config("etcd://h?request_timeout=x")
                .unwrap_err()
                .contains("parameter `request_timeout`")
        );
        assert!(
            config("etcd://")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            config("etcd://user@h")
                .unwrap_err()
                .contains("user:password@")
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        testing::assert_password_hidden(
            EtcdConfig::from_url,
            "etcd://root:hunter2@h?ttl=x",
            "etcd://root:hunter2@h",
        );
    }
}
