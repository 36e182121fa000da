//! One running provider of one service, as a registry stores it.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::ServiceKey;

/// Default weight of an instance (Dubbo's default).
pub const DEFAULT_WEIGHT: u32 = 100;

/// Unique identifier of one instance. Stable for the life of the provider process's
/// export of that service (it survives re-registration after a lost registry session),
/// never reused by another export.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstanceId(Arc<str>);

impl InstanceId {
    /// An id from a given string (for instances read back from a registry).
    pub fn new(id: impl AsRef<str>) -> Self {
        Self(Arc::from(id.as_ref()))
    }

    /// A fresh id for an instance at `host:port`: the address plus 64 random bits, so
    /// a restarted provider on the same port gets a different id.
    pub fn generate(host: &str, port: u16) -> Self {
        Self::new(format!("{host}:{port}-{:016x}", fastrand::u64(..)))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A provider instance of one service: where it listens and how it wants to be treated.
///
/// Registries store it as JSON (the serde form of this struct); consumers build one
/// invoker per instance id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The service this instance provides.
    pub service: ServiceKey,
    /// Host or IP consumers dial.
    pub host: String,
    /// TCP port consumers dial.
    pub port: u16,
    /// Unique id (see [`InstanceId`]).
    pub id: InstanceId,
    /// Relative weight for load balancing; 0 means "never pick". Default 100.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Free-form key/value metadata (zone, protocol, application name, ...).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// When the provider started serving, in milliseconds since the Unix epoch. Used
    /// for information; warm-up counts from when the *consumer* first saw the instance.
    #[serde(default)]
    pub start_time_ms: u64,
}

fn default_weight() -> u32 {
    DEFAULT_WEIGHT
}

impl Instance {
    /// An instance of `service` at `host:port` with a fresh id, weight 100, no metadata
    /// and the current time as start time.
    pub fn new(service: ServiceKey, host: impl Into<String>, port: u16) -> Self {
        let host = host.into();
        let id = InstanceId::generate(&host, port);
        Self {
            service,
            host,
            port,
            id,
            weight: DEFAULT_WEIGHT,
            metadata: BTreeMap::new(),
            start_time_ms: now_ms(),
        }
    }

    /// An instance at a socket address (see [`Instance::new`]).
    pub fn at(service: ServiceKey, addr: SocketAddr) -> Self {
        Self::new(service, addr.ip().to_string(), addr.port())
    }

    /// This instance with another weight.
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// This instance with one more metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// `host:port`, the authority consumers dial.
    pub fn authority(&self) -> String {
        format_authority(&self.host, self.port)
    }
}

/// `host:port`, with brackets around an IPv6 host.
pub fn format_authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_differ_for_the_same_address() {
        let a = InstanceId::generate("127.0.0.1", 1);
        let b = InstanceId::generate("127.0.0.1", 1);
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("127.0.0.1:1-"));
    }

    #[test]
    fn json_round_trip_keeps_every_field() {
        let instance = Instance::new(ServiceKey::new("a.B").with_version("1"), "10.0.0.1", 80)
            .with_weight(7)
            .with_metadata("zone", "z1");
        let json = serde_json::to_string(&instance).unwrap();
        let back: Instance = serde_json::from_str(&json).unwrap();
        assert_eq!(back, instance);
    }

    #[test]
    fn ipv6_authority_is_bracketed() {
        assert_eq!(format_authority("::1", 5), "[::1]:5");
        assert_eq!(format_authority("h", 5), "h:5");
    }
}
