//! An instance and its stored form in etcd: one key per instance,
//! `<prefix>/<service.path_segment()>/providers/<instance id>`, its value the instance's
//! JSON (see "Layout" in the module documentation); and the range of keys a prefix read
//! covers.

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

/// The end of the range of every key that starts with `prefix` (etcd's `range_end`):
/// the prefix with its last byte below 0xff incremented and what follows it dropped;
/// `\0` (every key from `prefix` on) when every byte is 0xff.
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_the_last_key_with_the_prefix() {
        assert_eq!(prefix_end(b"/rpc/a/"), b"/rpc/a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }
    use crate::remote::testing;

    #[test]
    fn an_instance_is_one_key_under_its_service_prefix_holding_its_json() {
        let layout = KeyLayout::new("/rpc".into());
        let service = ServiceKey::new("a.B").with_version("1");
        assert_eq!(layout.service_prefix(&service), "/rpc/a.B:1/providers/");
        testing::assert_stored_form(
            (service, "i-1"),
            (|instance| layout.key(instance), "/rpc/a.B:1/providers/i-1"),
            encode,
            |value| decode("etcd://h", b"k", value),
        );
    }
}
