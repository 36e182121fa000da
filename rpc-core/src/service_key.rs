//! The identity of a service: interface, group and version, as in Dubbo.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The identity under which a service is registered and referenced.
///
/// Two services are the same only when all three parts match. `interface` is the
/// fully-qualified gRPC service name (`helloworld.Greeter`), which is also the path prefix
/// of its methods. `group` and `version` partition one interface into independent pools
/// of providers (Dubbo's grouping): a consumer of `1.0.0` never reaches a `2.0.0` provider.
/// Empty `group` / `version` mean "none".
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceKey {
    /// Fully-qualified gRPC service name, e.g. `helloworld.Greeter`.
    pub interface: Arc<str>,
    /// Group; empty for none.
    #[serde(default)]
    pub group: Arc<str>,
    /// Version; empty for none.
    #[serde(default)]
    pub version: Arc<str>,
}

impl ServiceKey {
    /// A key with the given interface and no group or version.
    pub fn new(interface: impl AsRef<str>) -> Self {
        Self {
            interface: Arc::from(interface.as_ref()),
            group: Arc::from(""),
            version: Arc::from(""),
        }
    }

    /// This key with `group` set.
    pub fn with_group(mut self, group: impl AsRef<str>) -> Self {
        self.group = Arc::from(group.as_ref());
        self
    }

    /// This key with `version` set.
    pub fn with_version(mut self, version: impl AsRef<str>) -> Self {
        self.version = Arc::from(version.as_ref());
        self
    }

    /// A string usable as one path segment in a registry (no `/`), unique per key:
    /// `interface`, then `:version` and `@group` when set. Characters outside
    /// `[A-Za-z0-9._:@-]` are percent-encoded so that any input gives a valid key.
    pub fn path_segment(&self) -> String {
        let mut out = String::with_capacity(self.interface.len() + 16);
        encode_into(&self.interface, &mut out);
        if !self.version.is_empty() {
            out.push(':');
            encode_into(&self.version, &mut out);
        }
        if !self.group.is_empty() {
            out.push('@');
            encode_into(&self.group, &mut out);
        }
        out
    }
}

fn encode_into(part: &str, out: &mut String) {
    for byte in part.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

impl fmt::Display for ServiceKey {
    /// Dubbo's spelling: `group/interface:version`, leaving out the empty parts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}/", self.group)?;
        }
        f.write_str(&self.interface)?;
        if !self.version.is_empty() {
            write!(f, ":{}", self.version)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_leaves_out_empty_parts() {
        assert_eq!(ServiceKey::new("a.B").to_string(), "a.B");
        let key = ServiceKey::new("a.B").with_group("g").with_version("1.0");
        assert_eq!(key.to_string(), "g/a.B:1.0");
    }

    #[test]
    fn path_segment_is_unique_and_slash_free() {
        let plain = ServiceKey::new("a.B");
        let versioned = ServiceKey::new("a.B").with_version("1");
        let grouped = ServiceKey::new("a.B").with_group("x/y");
        assert_eq!(plain.path_segment(), "a.B");
        assert_eq!(versioned.path_segment(), "a.B:1");
        assert_eq!(grouped.path_segment(), "a.B@x%2Fy");
        assert_ne!(plain.path_segment(), versioned.path_segment());
    }
}
