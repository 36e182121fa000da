//! A consumer's TLS: the CA it trusts, the name it expects, and its own certificate for
//! mutual TLS, as tonic's `ClientTlsConfig`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use super::TlsError;

/// How a consumer verifies providers over TLS (and proves itself, for mutual TLS): the
/// `consumer.tls` section of the configuration.
///
/// The files are read each time a channel to an instance is made, so a rotated CA or
/// client certificate is used by every channel made after the rotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTls {
    /// CA certificates (PEM) a provider's certificate must chain to.
    pub ca: PathBuf,
    /// The name the provider's certificate must carry. Default: the host the channel
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

impl ClientTls {
    /// tonic's TLS settings from the files.
    ///
    /// # Errors
    /// [`TlsError`] naming a file that cannot be read, or a certificate without its key.
    pub(crate) fn tonic_config(&self) -> Result<ClientTlsConfig, TlsError> {
        // Parsed here, not only by tonic, so that a bad file is named.
        super::files::roots(&self.ca)?;
        let mut config =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(&self.ca)?));
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            (None, None) => {}
            (Some(path), None) | (None, Some(path)) => {
                return Err(TlsError::File {
                    path: path.clone(),
                    reason: "a client certificate needs both `cert` and `key`".to_owned(),
                });
            }
        }
        Ok(config)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::File {
        path: path.to_owned(),
        reason: error.to_string(),
    })
}
