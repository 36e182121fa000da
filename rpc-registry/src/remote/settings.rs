//! Where a network backend's servers are, how to log in, and how long to wait for them:
//! [`NetworkSettings`], read alike from every network backend's URL.
//!
//! What each backend makes of them (which authentication the credentials enable, what
//! exactly `connect_timeout` covers) is said in its own module, as are its own parameters.

use std::fmt;
use std::time::Duration;

use rpc_core::RegistryError;

use crate::DEFAULT_TIMEOUT;
use crate::url::RegistryUrl;

/// Where a network backend's servers are, how to log in, and how long to wait for them.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkSettings {
    /// `host:port` of each server, in the URL's order, with the backend's default port
    /// where the URL gives none.
    pub endpoints: Vec<String>,
    /// User name and password, if the URL has them.
    pub credentials: Option<(String, String)>,
    /// Bound on connecting at start-up (parameter `connect_timeout`).
    pub connect_timeout: Duration,
    /// Bound on each later request (parameter `request_timeout`).
    pub request_timeout: Duration,
}

/// By hand rather than derived: the password must never reach a log.
impl fmt::Debug for NetworkSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkSettings")
            .field("endpoints", &self.endpoints)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl NetworkSettings {
    /// The query parameters [`NetworkSettings::from_url`] reads, which every network
    /// backend accepts besides its own.
    pub const PARAMS: [&'static str; 2] = ["connect_timeout", "request_timeout"];

    /// Checks that every query parameter of `url` is one of `own` (the backend's) or of
    /// [`NetworkSettings::PARAMS`]. Backends call it before reading anything, so that a
    /// misspelt parameter is the first fault reported.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the first unknown parameter and the known ones,
    /// the backend's first.
    pub(crate) fn expect_params(url: &RegistryUrl, own: &[&str]) -> Result<(), RegistryError> {
        url.expect_params(&[own, &Self::PARAMS[..]].concat())
    }

    /// Reads the servers, credentials and time bounds of a network backend's URL.
    /// `default_port` is the backend's; `credentials` names what the credentials are for
    /// in the error about a user without password (e.g. `etcd credentials`).
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault, checked in this order: a user
    /// without password, no host, a timeout that does not parse or is zero.
    pub fn from_url(
        url: &RegistryUrl,
        default_port: u16,
        credentials: &str,
    ) -> Result<Self, RegistryError> {
        let credentials = match (url.username(), url.password()) {
            (None, _) => None,
            (Some(user), Some(password)) => Some((user.to_owned(), password.to_owned())),
            (Some(_), None) => {
                return Err(url.invalid(format!("{credentials} need `user:password@`")));
            }
        };
        Ok(Self {
            endpoints: url.endpoints(default_port)?,
            credentials,
            connect_timeout: timeout_param(url, "connect_timeout")?,
            request_timeout: timeout_param(url, "request_timeout")?,
        })
    }
}

/// The duration parameter `name` of `url` (default [`DEFAULT_TIMEOUT`]), which must not be
/// zero: a zero bound would give up every request at once.
fn timeout_param(url: &RegistryUrl, name: &str) -> Result<Duration, RegistryError> {
    let value = url.duration_param(name, DEFAULT_TIMEOUT)?;
    if value.is_zero() {
        return Err(url.invalid(format!("parameter `{name}` must be greater than zero")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> Result<NetworkSettings, String> {
        let url = RegistryUrl::parse(url).map_err(|e| e.to_string())?;
        NetworkSettings::expect_params(&url, &["own"]).map_err(|e| e.to_string())?;
        NetworkSettings::from_url(&url, 7, "test credentials").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = settings("x://h").unwrap();
        assert_eq!(plain.endpoints, ["h:7"]);
        assert!(plain.credentials.is_none());
        assert_eq!(plain.connect_timeout, DEFAULT_TIMEOUT);
        assert_eq!(plain.request_timeout, DEFAULT_TIMEOUT);

        let full = settings("x://u:p@a:1,b?own=1&connect_timeout=1s&request_timeout=2s").unwrap();
        assert_eq!(full.endpoints, ["a:1", "b:7"]);
        assert_eq!(full.credentials, Some(("u".into(), "p".into())));
        assert_eq!(full.connect_timeout, Duration::from_secs(1));
        assert_eq!(full.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn faults_are_named_in_order() {
        let unknown = settings("x://h?bogus=1").unwrap_err();
        assert!(
            unknown.contains("(known: own, connect_timeout, request_timeout)"),
            "{unknown}"
        );
        assert!(
            settings("x://user@?connect_timeout=0s")
                .unwrap_err()
                .contains("test credentials need `user:password@`")
        );
        assert!(
            settings("x://?connect_timeout=0s")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            settings("x://h?connect_timeout=0s&request_timeout=0s")
                .unwrap_err()
                .contains("parameter `connect_timeout` must be greater than zero")
        );
        assert!(
            settings("x://h?request_timeout=soon")
                .unwrap_err()
                .contains("parameter `request_timeout`")
        );
    }

    #[test]
    fn debug_hides_the_password() {
        let debug = format!("{:?}", settings("x://root:hunter2@h").unwrap());
        assert!(
            !debug.contains("hunter2") && debug.contains("root"),
            "{debug}"
        );
    }
}
