//! A consumer's TLS: the CA it trusts, the name it expects, and its own certificate for
//! mutual TLS, as a rustls client configuration offering HTTP/2 (ALPN `h2`).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::ServerName;

use super::TlsError;
use super::files::{certificates, private_key, roots};

/// How a consumer verifies providers over TLS (and proves itself, for mutual TLS): the
/// `consumer.tls` section of the configuration.
///
/// The files are read each time a connection to an instance is made, so a rotated CA or
/// client certificate is used by every connection made after the rotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTls {
    /// CA certificates (PEM) a provider's certificate must chain to.
    pub ca: PathBuf,
    /// The name the provider's certificate must carry. Default: the host the connection
    /// dials (an IP address then needs an IP address in the certificate).
    #[serde(default)]
    pub domain: Option<String>,
    /// This consumer's certificate chain (PEM), for providers that ask for one.
    /// Default none; given with `key`.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM).
    #[serde(default)]
    pub key: Option<PathBuf>,
}

/// What a TLS dial needs: the configuration and the name the certificate must carry.
#[derive(Clone, Debug)]
pub(crate) struct ClientTlsConfig {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) server_name: ServerName<'static>,
}

impl ClientTls {
    /// The rustls settings from the files, for dialling `host` (the name expected when
    /// [`ClientTls::domain`] is not set).
    ///
    /// # Errors
    /// [`TlsError`] naming a file that cannot be read, a certificate without its key, or
    /// a name that is neither a DNS name nor an IP address.
    pub(crate) fn client_config(&self, host: &str) -> Result<ClientTlsConfig, TlsError> {
        // ring, deprecated by rustls 0.23.48 for its lack of post-quantum key exchange, is
        // kept: aws-lc-rs needs cmake and a C toolchain to build (docs/limitations.md).
        #[allow(deprecated)]
        let provider = Arc::new(ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Config(error.to_string()))?
            .with_root_certificates(roots(&self.ca)?);
        let mut config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(certificates(cert)?, private_key(key)?)
                .map_err(|error| TlsError::File {
                    path: key.clone(),
                    reason: format!("does not go with {}: {error}", cert.display()),
                })?,
            (None, None) => builder.with_no_client_auth(),
            (Some(path), None) | (None, Some(path)) => {
                return Err(TlsError::File {
                    path: path.clone(),
                    reason: "a client certificate needs both `cert` and `key`".to_owned(),
                });
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = self.domain.as_deref().unwrap_or(host);
        // An IPv6 host comes bracketed from an authority.
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(bare.to_owned())
            .map_err(|error| TlsError::Config(format!("server name `{name}`: {error}")))?;
        Ok(ClientTlsConfig {
            config: Arc::new(config),
            server_name,
        })
    }
}
