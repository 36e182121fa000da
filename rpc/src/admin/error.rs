//! Why the admin endpoint could not start. Each message names the key to change, and
//! where to change it.

use std::net::SocketAddr;

use crate::config::origin::BUILT_IN_CODE;

/// Why the admin endpoint could not start (start-up fails with it, undone).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// `admin.host` or `admin.token` breaks a rule (see
    /// [`AdminConfig::bind_addr`](super::AdminConfig::bind_addr)), or an entry of
    /// `admin.allowed_hosts` is not a host name.
    #[error("key `{key}`: {message}")]
    Invalid {
        /// `admin.host`, `admin.token` or `admin.allowed_hosts`.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The port is taken by another process (or another application in this one). The
    /// default port is Dubbo QoS's 22222, so a second instance on one host collides
    /// unless one of them sets `admin.port`; the message says so, in one line.
    #[error(
        "admin.port {} is in use on {} (another instance on this host?): set admin.port \
         (0 = any free port) {}",
        .addr.port(),
        .addr.ip(),
        where_to_set(.origin)
    )]
    PortInUse {
        /// The address asked for.
        addr: SocketAddr,
        /// Where the configuration came from (`Config::origin`).
        origin: String,
    },
    /// Another failure to listen (permission, address not available, ...).
    #[error(
        "admin.port {}: cannot listen on {addr}: {source}; set admin.port (0 = any free \
         port) {}",
        .addr.port(),
        where_to_set(.origin)
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
        /// Where the configuration came from (`Config::origin`).
        origin: String,
    },
    /// The bound listener could not be handed to the runtime.
    #[error("admin endpoint: cannot serve its listener: {0}")]
    Serve(std::io::Error),
}

/// Where `admin.port` can be changed for a configuration from `origin`: in its file or
/// the environment, or in the code that built it.
fn where_to_set(origin: &str) -> String {
    if origin == BUILT_IN_CODE {
        "in the code that builds the configuration (config.admin.port)".to_owned()
    } else {
        format!("in {origin} or RPC_ADMIN__PORT")
    }
}

#[cfg(test)]
mod tests {
    use crate::admin::{AdminConfig, AdminServer};

    /// Issue 25, point 13: the default port is Dubbo QoS's, so a second instance on one
    /// host finds it taken; the error says so in one line, and where to set another.
    #[test]
    fn a_port_in_use_says_another_instance_may_hold_it_and_where_to_set_one() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let config = AdminConfig {
            port,
            ..AdminConfig::default()
        };
        let message = AdminServer::bind(&config, "provider.yaml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            format!(
                "admin.port {port} is in use on 127.0.0.1 (another instance on this host?): \
                 set admin.port (0 = any free port) in provider.yaml or RPC_ADMIN__PORT"
            )
        );
        let in_code = AdminServer::bind(&config, crate::config::origin::BUILT_IN_CODE)
            .unwrap_err()
            .to_string();
        assert!(
            in_code.ends_with("in the code that builds the configuration (config.admin.port)"),
            "{in_code}"
        );
        assert!(!message.contains('\n') && !in_code.contains('\n'));
    }
}
