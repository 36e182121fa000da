//! The settings of a ZooKeeper client, read from its URL: the session timeout and the root
//! path, besides the [`NetworkSettings`] every network backend takes.

use std::time::Duration;

use rpc_core::RegistryError;

use crate::RegistryFormat;
use crate::remote::NetworkSettings;
use crate::url::RegistryUrl;

/// Port used when the URL gives none.
pub const DEFAULT_PORT: u16 = 2181;
/// Session timeout when the URL has no `session_timeout`.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Root path when the URL has no `root`.
pub const DEFAULT_ROOT: &str = "/rpc";

/// The query parameters of a `zookeeper://` URL besides [`NetworkSettings::PARAMS`].
const PARAMS: [&str; 2] = ["session_timeout", "root"];

/// Settings of a [`ZooKeeperRegistry`](crate::zookeeper::ZooKeeperRegistry), from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZooKeeperConfig {
    /// The servers, the credentials (for `digest` authentication) and the time bounds;
    /// `connect_timeout` bounds opening a session, the first and every new one.
    pub network: NetworkSettings,
    /// Requested session timeout: how long after its process dies an instance disappears.
    pub session_timeout: Duration,
    /// Root path, starting with `/`, without a trailing `/`. Default `/rpc` in our
    /// format, `/dubbo` in Dubbo's.
    pub root: String,
    /// The layout of the entries (the URL's [`RegistryUrl::format`]).
    pub format: RegistryFormat,
}

impl ZooKeeperConfig {
    /// Reads the settings of a `zookeeper://` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault: an unknown parameter, a
    /// `session_timeout` that does not parse or is zero, a `root` that is not an absolute
    /// path without trailing or double `/`, then those of [`NetworkSettings::from_url`] (a
    /// user without password, no host, a timeout that does not parse or is zero).
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        NetworkSettings::expect_params(url, &PARAMS)?;
        let session_timeout = url.duration_param("session_timeout", DEFAULT_SESSION_TIMEOUT)?;
        if session_timeout.is_zero() {
            return Err(url.invalid("parameter `session_timeout` must be greater than zero".into()));
        }
        let root = url.param("root").unwrap_or(match url.format() {
            RegistryFormat::Rpc => DEFAULT_ROOT,
            RegistryFormat::Dubbo => crate::dubbo::DEFAULT_ZOOKEEPER_ROOT,
        });
        if !root.starts_with('/') || root.len() < 2 || root.ends_with('/') || root.contains("//") {
            return Err(url.invalid(format!(
                "parameter `root`: `{root}` must be an absolute path like `/rpc` (no trailing or double `/`)"
            )));
        }
        if url.format() == RegistryFormat::Rpc && root == crate::dubbo::DEFAULT_ZOOKEEPER_ROOT {
            return Err(url.invalid(format!(
                "parameter `root`: `{root}` is Dubbo's root, where Dubbo consumers would read \
                 our entries as broken providers: use the `dubbo` format there, or another root"
            )));
        }
        Ok(Self {
            network: NetworkSettings::from_url(url, DEFAULT_PORT, "ZooKeeper digest credentials")?,
            session_timeout,
            root: root.to_owned(),
            format: url.format(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;

    fn config(url: &str) -> Result<ZooKeeperConfig, String> {
        testing::parse(url, ZooKeeperConfig::from_url)
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = config("zookeeper://127.0.0.1").unwrap();
        assert_eq!(plain.network.endpoints, ["127.0.0.1:2181"]);
        assert_eq!(plain.session_timeout, DEFAULT_SESSION_TIMEOUT);
        assert_eq!(plain.root, "/rpc");
        assert!(plain.network.credentials.is_none());
        assert_eq!(plain.format, RegistryFormat::Rpc);

        let url = RegistryUrl::parse("zookeeper://h").unwrap();
        let dubbo = ZooKeeperConfig::from_url(&url.with_format(RegistryFormat::Dubbo)).unwrap();
        assert_eq!(
            (dubbo.root.as_str(), dubbo.format),
            ("/dubbo", RegistryFormat::Dubbo)
        );

        let full = config("zookeeper://u:p@a:1,b?session_timeout=2s&root=/x/y&connect_timeout=1s&request_timeout=500ms")
            .unwrap();
        assert_eq!(full.network.endpoints, ["a:1", "b:2181"]);
        assert_eq!(full.network.credentials, Some(("u".into(), "p".into())));
        assert_eq!(full.session_timeout, Duration::from_secs(2));
        assert_eq!(full.root, "/x/y");
        assert_eq!(full.network.connect_timeout, Duration::from_secs(1));
        assert_eq!(full.network.request_timeout, Duration::from_millis(500));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            config("zookeeper://h?session=2s")
                .unwrap_err()
                .contains("unknown parameter `session`")
        );
        assert!(
            config("zookeeper://h?session_timeout=2")
                .unwrap_err()
                .contains("parameter `session_timeout`")
        );
        assert!(
            config("zookeeper://h?session_timeout=0s")
                .unwrap_err()
                .contains("parameter `session_timeout`")
        );
        assert!(
            config("zookeeper://h?root=/dubbo")
                .unwrap_err()
                .contains("is Dubbo's root")
        );
        for root in ["rpc", "/", "/rpc/", "/a//b"] {
            assert!(
                config(&format!("zookeeper://h?root={root}"))
                    .unwrap_err()
                    .contains("parameter `root`"),
                "{root}"
            );
        }
        assert!(
            config("zookeeper://h?connect_timeout=0ms")
                .unwrap_err()
                .contains("parameter `connect_timeout`")
        );
        assert!(
            config("zookeeper://")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            config("zookeeper://user@h")
                .unwrap_err()
                .contains("user:password@")
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        testing::assert_password_hidden(
            ZooKeeperConfig::from_url,
            "zookeeper://root:hunter2@h?root=x",
            "zookeeper://root:hunter2@h",
        );
    }
}
