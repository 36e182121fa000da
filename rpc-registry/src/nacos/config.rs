//! The settings of a Nacos client, read from its URL: namespace, group, cluster and gRPC
//! port, besides the [`NetworkSettings`] every network backend takes.

use rpc_core::RegistryError;

use crate::RegistryFormat;
use crate::remote::NetworkSettings;
use crate::url::RegistryUrl;

/// Port of the HTTP API when the URL gives none.
pub const DEFAULT_PORT: u16 = 8848;
/// Namespace when the URL has no `namespace`.
pub const DEFAULT_NAMESPACE: &str = "public";
/// Group when the URL has no `group`.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// Cluster when the URL has no `cluster`.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";
/// The query parameters of a `nacos://` URL besides [`NetworkSettings::PARAMS`].
const PARAMS: [&str; 4] = ["namespace", "group", "cluster", "grpc_port"];

/// Settings of a [`NacosRegistry`](crate::nacos::NacosRegistry), from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NacosConfig {
    /// Each server's HTTP API, the credentials (for the HTTP login) and the time bounds;
    /// `connect_timeout` bounds connecting and each login.
    pub network: NetworkSettings,
    /// The servers' gRPC port, when not the HTTP port + 1000.
    pub grpc_port: Option<u16>,
    /// Namespace id.
    pub namespace: String,
    /// Group of every service of this client.
    pub group: String,
    /// Cluster this client's instances register in.
    pub cluster: String,
    /// The layout of the entries (the URL's [`RegistryUrl::format`]).
    pub format: RegistryFormat,
}

impl NacosConfig {
    /// Reads the settings of a `nacos://` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault: an unknown parameter, an empty
    /// `namespace`, `group` or `cluster` (or a `group` containing `@@`), a `grpc_port` that
    /// is not a port, then those of [`NetworkSettings::from_url`] (a user without password,
    /// no host, a timeout that does not parse or is zero).
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        NetworkSettings::expect_params(url, &PARAMS)?;
        let text = |name: &str, default: &str| -> Result<String, RegistryError> {
            let value = url.param(name).unwrap_or(default);
            if value.trim().is_empty() {
                return Err(url.invalid(format!("parameter `{name}` must not be empty")));
            }
            Ok(value.to_owned())
        };
        let group = text("group", DEFAULT_GROUP)?;
        if group.contains("@@") {
            return Err(url.invalid(format!(
                "parameter `group`: `{group}` must not contain `@@`"
            )));
        }
        let grpc_port = match url.param("grpc_port") {
            None => None,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => Some(port),
                _ => {
                    return Err(url.invalid(format!(
                        "parameter `grpc_port`: `{port}` is not a port in 1..=65535"
                    )));
                }
            },
        };
        let namespace = text("namespace", DEFAULT_NAMESPACE)?;
        let cluster = text("cluster", DEFAULT_CLUSTER)?;
        Ok(Self {
            network: NetworkSettings::from_url(url, DEFAULT_PORT, "Nacos credentials")?,
            grpc_port,
            namespace,
            group,
            cluster,
            format: url.format(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nacos::login;
    use crate::remote::testing;
    use std::time::Duration;

    fn config(url: &str) -> Result<NacosConfig, String> {
        testing::parse(url, NacosConfig::from_url)
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = config("nacos://127.0.0.1").unwrap();
        assert_eq!(plain.network.endpoints, ["127.0.0.1:8848"]);
        assert_eq!(
            (
                plain.namespace.as_str(),
                plain.group.as_str(),
                plain.cluster.as_str()
            ),
            ("public", "DEFAULT_GROUP", "DEFAULT")
        );
        assert_eq!(plain.grpc_port, None);
        assert!(plain.network.credentials.is_none());

        let full = config(
            "nacos://u:p@a:1,b:2?namespace=dev&group=G&cluster=C&grpc_port=9&connect_timeout=1s&request_timeout=2s",
        )
        .unwrap();
        assert_eq!(full.network.endpoints, ["a:1", "b:2"]);
        assert_eq!(full.network.credentials, Some(("u".into(), "p".into())));
        assert_eq!(
            (
                full.namespace.as_str(),
                full.group.as_str(),
                full.cluster.as_str()
            ),
            ("dev", "G", "C")
        );
        assert_eq!(full.grpc_port, Some(9));
        assert_eq!(full.network.connect_timeout, Duration::from_secs(1));
        assert_eq!(full.network.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            config("nacos://h?namespac=x")
                .unwrap_err()
                .contains("unknown parameter `namespac`")
        );
        assert!(
            config("nacos://h?group=")
                .unwrap_err()
                .contains("parameter `group`")
        );
        assert!(
            config("nacos://h?group=a@@b")
                .unwrap_err()
                .contains("parameter `group`")
        );
        assert!(
            config("nacos://h?cluster=%20")
                .unwrap_err()
                .contains("parameter `cluster`")
        );
        assert!(
            config("nacos://h?grpc_port=0")
                .unwrap_err()
                .contains("parameter `grpc_port`")
        );
        assert!(
            config("nacos://h?grpc_port=x")
                .unwrap_err()
                .contains("parameter `grpc_port`")
        );
        assert!(
            config("nacos://h?request_timeout=0s")
                .unwrap_err()
                .contains("parameter `request_timeout`")
        );
        assert!(
            config("nacos://")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            config("nacos://user@h")
                .unwrap_err()
                .contains("user:password@")
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        testing::assert_password_hidden(
            NacosConfig::from_url,
            "nacos://nacos:hunter2@h?group=",
            "nacos://nacos:hunter2@h",
        );
        let login = login::HttpLogin::new("nacos".into(), "hunter2".into(), Duration::from_secs(1));
        assert!(!format!("{login:?}").contains("hunter2"));
    }
}
