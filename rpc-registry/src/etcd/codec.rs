//! An instance and its stored form in etcd: one key per instance,
//! `<prefix>/<service.path_segment()>/providers/<instance id>`, its value the instance's
//! JSON (see "Layout" in the module documentation).

use rpc_core::{Instance, ServiceKey};

/// Where the instances of every service live in etcd's key space.
#[derive(Clone, Debug)]
pub(super) struct KeyLayout {
    /// Key prefix of every key of this client, without a trailing `/` (`/rpc`).
    prefix: String,
}

impl KeyLayout {
    /// The layout under `prefix` (no trailing `/`).
    pub(super) fn new(prefix: String) -> Self {
        Self { prefix }
    }

    /// The key prefix under which the instances of `service` live (ends with `/`): a
    /// prefix read of it is exactly one service.
    pub(super) fn service_prefix(&self, service: &ServiceKey) -> String {
        format!("{}/{}/providers/", self.prefix, service.path_segment())
    }

    /// The key of `instance`.
    pub(super) fn key(&self, instance: &Instance) -> String {
        format!("{}{}", self.service_prefix(&instance.service), instance.id)
    }
}

/// The value stored for `instance`: its JSON.
///
/// # Errors
/// When the instance does not serialize (its metadata cannot be JSON).
pub(super) fn encode(instance: &Instance) -> Result<String, serde_json::Error> {
    serde_json::to_string(instance)
}

/// The instance stored under `key`, or `None` for a value that is not one (a key some
/// other program wrote under the prefix), which is logged with `url` and skipped.
pub(super) fn decode(url: &str, key: &[u8], value: &[u8]) -> Option<Instance> {
    match serde_json::from_slice::<Instance>(value) {
        Ok(instance) => Some(instance),
        Err(error) => {
            tracing::warn!(%url, key = %String::from_utf8_lossy(key), %error, "ignoring an etcd key that is not an instance");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_round_trips_under_its_service_prefix() {
        let layout = KeyLayout::new("/rpc".into());
        let service = ServiceKey::new("a.B").with_version("1");
        let instance = Instance::new(service.clone(), "10.0.0.1", 80);
        let key = layout.key(&instance);
        assert!(key.starts_with(&layout.service_prefix(&service)), "{key}");
        assert!(key.ends_with(instance.id.as_str()), "{key}");
        let value = encode(&instance).unwrap();
        assert_eq!(
            decode("etcd://h", key.as_bytes(), value.as_bytes()),
            Some(instance)
        );
        assert_eq!(decode("etcd://h", key.as_bytes(), b"not json"), None);
    }
}
