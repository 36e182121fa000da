//! Reading PEM files into rustls configurations: the provider's certificate chain and
//! key (and the CA its clients' certificates must chain to, for mutual TLS).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use super::TlsError;

/// How often the files are checked for a change by default: 10 s. A rotation is
/// typically announced minutes ahead (cert-manager renews at two thirds of a
/// certificate's life; Kubernetes updates a mounted secret within about a minute).
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The files of a provider's TLS: PEM, read at start-up and again whenever one changes
/// (the `protocol.tls` section of the configuration).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key of the leaf (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates a client's certificate must chain to: with it, mutual TLS (a
    /// client without such a certificate cannot connect); without it, clients are not
    /// asked for one. Default none.
    #[serde(default, alias = "client-ca")]
    pub client_ca: Option<PathBuf>,
    /// How often the files are checked for a change; more than 0. Default
    /// [`DEFAULT_RELOAD_INTERVAL`].
    #[serde(
        default = "default_reload_interval",
        with = "humantime_serde",
        alias = "reload-interval"
    )]
    pub reload_interval: Duration,
}

fn default_reload_interval() -> Duration {
    DEFAULT_RELOAD_INTERVAL
}

impl ServerTlsFiles {
    /// Server TLS from `cert` and `key`, without client certificates, checked for
    /// changes every [`DEFAULT_RELOAD_INTERVAL`].
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }

    /// The files, in the order their changes are looked for.
    pub(super) fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }

    /// Reads the files into a rustls server configuration offering HTTP/2 (ALPN `h2`).
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be read or holds no usable certificate
    /// or key, or the key that does not match the certificate.
    pub(super) fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        // ring: see `ClientTls::client_config`.
        #[allow(deprecated)]
        let provider = Arc::new(ring::default_provider());
        let chain = certificates(&self.cert)?;
        let key = private_key(&self.key)?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Config(error.to_string()))?;
        let builder = match &self.client_ca {
            Some(ca) => builder.with_client_cert_verifier(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider)
                    .build()
                    .map_err(|error| TlsError::File {
                        path: ca.clone(),
                        reason: error.to_string(),
                    })?,
            ),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|error| TlsError::File {
                path: self.key.clone(),
                reason: format!("does not go with {}: {error}", self.cert.display()),
            })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The certificates of a PEM file, in order; at least one.
pub(super) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let unreadable = |reason: String| TlsError::File {
        path: path.to_owned(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|error| unreadable(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| unreadable(error.to_string()))?;
    if chain.is_empty() {
        return Err(unreadable("no PEM certificate in it".to_owned()));
    }
    Ok(chain)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub(super) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| TlsError::File {
        path: path.to_owned(),
        reason: format!("no private key: {error}"),
    })
}

/// The CA certificates of a PEM file as trust anchors.
pub(super) fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates(path)?);
    if added == 0 {
        return Err(TlsError::File {
            path: path.to_owned(),
            reason: "no usable CA certificate in it".to_owned(),
        });
    }
    Ok(roots)
}
