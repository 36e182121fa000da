//! `admin:`, the admin endpoint's section of the configuration, and the rules that
//! protect it: beyond loopback, a token; against DNS rebinding, the names it answers to.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Deserializer, Serialize};

use super::browser::AllowedHosts;

/// Dubbo's QoS port, the admin endpoint's default.
pub const DEFAULT_ADMIN_PORT: u16 = 22222;

/// `admin`: the admin endpoint (probes, manual offline/online, status, metrics).
///
/// ```yaml
/// admin:
///   enabled: true        # default
///   host: 127.0.0.1      # default; anything else requires `token`
///   port: 22222          # default (Dubbo's QoS port); 0 picks a free port
///   token: "..."         # or RPC_ADMIN__TOKEN; required beyond loopback
///   allowed_hosts: []    # default; names `Host` may give besides IPs and localhost
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AdminConfig {
    /// Serve the admin endpoint. Default true.
    pub enabled: bool,
    /// IP address to bind. Default `127.0.0.1`. Any address that is not loopback
    /// (`0.0.0.0` on Kubernetes, so the kubelet can probe the pod IP) requires `token`.
    pub host: String,
    /// Port to bind; 0 picks a free one. Default 22222 (Dubbo's QoS port), so a second
    /// instance on the same host must set another (or 0). Already in use: start-up
    /// fails naming `admin.port` and where to set it.
    pub port: u16,
    /// Bearer token every request that changes state (`POST /offline`, `/online`,
    /// `/shutdown`, `/upgrade`) must carry as `Authorization: Bearer <token>`; reading (probes,
    /// status, metrics) never needs it. Default none, allowed only on loopback. Set it
    /// from the environment (`RPC_ADMIN__TOKEN`) rather than in a file. Never printed:
    /// `Debug` shows `<redacted>` and serializing leaves it out.
    #[serde(skip_serializing)]
    pub token: Option<String>,
    /// Names a request's `Host` may give besides an IP address and `localhost`, which
    /// are always answered: the DNS names operators reach the endpoint by
    /// (`greeter.internal` for any port, `greeter.internal:22222` for that port only;
    /// case-insensitive). Any other `Host` is refused with 403 on every endpoint but
    /// the probes, so that a web page on a domain made to resolve to this host (DNS
    /// rebinding) cannot read it. Default empty. From the environment, one text with
    /// the names separated by commas (`RPC_ADMIN__ALLOWED_HOSTS=a.internal,b.internal`).
    /// An entry that is empty or a URL (a scheme, a `/`) is a configuration error
    /// naming `admin.allowed_hosts`.
    #[serde(deserialize_with = "names")]
    pub allowed_hosts: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            host: "127.0.0.1".to_owned(),
            port: DEFAULT_ADMIN_PORT,
            token: None,
            allowed_hosts: Vec::new(),
        }
    }
}

impl fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminConfig")
            .field("enabled", &self.enabled)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .finish()
    }
}

impl AdminConfig {
    /// The token, if one is set and not empty.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref().filter(|token| !token.is_empty())
    }

    /// The address to bind, once the rules hold: `host` is an IP address, and one that
    /// is not loopback comes with a token.
    ///
    /// # Errors
    /// The key at fault (`admin.host` or `admin.token`) and what is wrong.
    pub fn bind_addr(&self) -> Result<SocketAddr, (&'static str, String)> {
        let ip: IpAddr = self.host.parse().map_err(|_| {
            (
                "admin.host",
                format!("`{}` is not an IP address to bind", self.host),
            )
        })?;
        if !ip.is_loopback() && self.token().is_none() {
            return Err((
                "admin.token",
                format!(
                    "required when admin.host ({ip}) is not a loopback address: anyone who \
                     can reach it could take the instance offline or stop it; set \
                     RPC_ADMIN__TOKEN, or bind 127.0.0.1"
                ),
            ));
        }
        Ok(SocketAddr::new(ip, self.port))
    }

    /// Checks that every entry of `allowed_hosts` is a host name with an optional port.
    ///
    /// # Errors
    /// `admin.allowed_hosts` and the first entry that is not (empty, a URL).
    pub(crate) fn check_allowed_hosts(&self) -> Result<(), (&'static str, String)> {
        AllowedHosts::parse(&self.allowed_hosts)
            .map(drop)
            .map_err(|message| ("admin.allowed_hosts", message))
    }
}

/// A list of names: a list in a file, or one text with the names separated by commas
/// (what an environment variable can give; empty: none).
fn names<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct Names;
    impl<'de> serde::de::Visitor<'de> for Names {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of host names, or one text of names separated by commas")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            if text.trim().is_empty() {
                return Ok(Vec::new());
            }
            Ok(text.split(',').map(|name| name.trim().to_owned()).collect())
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut names = Vec::new();
            while let Some(name) = seq.next_element()? {
                names.push(name);
            }
            Ok(names)
        }
    }
    deserializer.deserialize_any(Names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_loopback_dubbos_qos_port_and_no_token() {
        let config = AdminConfig::default();
        assert!(config.enabled);
        assert_eq!(
            config.bind_addr().unwrap(),
            "127.0.0.1:22222".parse().unwrap()
        );
        assert_eq!(config.token(), None);
    }

    #[test]
    fn beyond_loopback_a_token_is_required() {
        let mut config = AdminConfig {
            host: "0.0.0.0".into(),
            ..AdminConfig::default()
        };
        let (key, message) = config.bind_addr().unwrap_err();
        assert_eq!(key, "admin.token");
        assert!(message.contains("RPC_ADMIN__TOKEN"), "{message}");
        config.token = Some(String::new());
        assert_eq!(
            config.bind_addr().unwrap_err().0,
            "admin.token",
            "empty is none"
        );
        config.token = Some("s3cret".into());
        assert_eq!(
            config.bind_addr().unwrap(),
            "0.0.0.0:22222".parse().unwrap()
        );
        let ipv6 = AdminConfig {
            host: "::1".into(),
            ..AdminConfig::default()
        };
        assert!(ipv6.bind_addr().is_ok(), "IPv6 loopback needs no token");
    }

    #[test]
    fn a_host_that_is_not_an_ip_names_admin_host() {
        let config = AdminConfig {
            host: "localhost".into(),
            ..AdminConfig::default()
        };
        assert_eq!(config.bind_addr().unwrap_err().0, "admin.host");
    }

    #[test]
    fn the_token_is_never_printed() {
        let config = AdminConfig {
            token: Some("s3cret".into()),
            ..AdminConfig::default()
        };
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("s3cret") && debug.contains("<redacted>"),
            "{debug}"
        );
    }
}
