//! An instance and its stored form in ZooKeeper: one ephemeral znode per instance. In
//! our format `<root>/<service.path_segment()>/providers/<node name of the instance id>`,
//! holding the instance's JSON; in Dubbo's `<root>/<interface>/providers/<the provider
//! URL, encoded>`, holding the URL (see "Layout" in the module documentation).

use rpc_core::{Instance, ServiceKey};
use zookeeper_client::{Acl, Acls, CreateMode, CreateOptions, Permission};

use crate::RegistryFormat;
use crate::dubbo::{self, DubboUrl, Entry};

/// Instance znodes of an authenticated client: all rights for its user, read for anyone.
static AUTHENTICATED_NODE_ACLS: [Acl; 2] = [
    Acl::new_const(Permission::ALL, "auth", ""),
    Acl::new_const(Permission::READ, "world", "anyone"),
];

/// Where the instances of every service live in the znode tree, and in which form.
#[derive(Clone, Debug)]
pub(super) struct NodeLayout {
    /// Root path, starting with `/`, without a trailing `/`.
    root: String,
    /// Our layout or Dubbo's.
    format: RegistryFormat,
}

impl NodeLayout {
    /// The layout under `root` (absolute, no trailing `/`) in `format`.
    pub(super) fn new(root: String, format: RegistryFormat) -> Self {
        Self { root, format }
    }

    /// The path of the directory that holds the instances of `service`: one per service
    /// key in our format, one per interface in Dubbo's (its entries carry version and
    /// group).
    pub(super) fn providers_path(&self, service: &ServiceKey) -> String {
        match self.format {
            RegistryFormat::Rpc => format!("{}/{}/providers", self.root, service.path_segment()),
            RegistryFormat::Dubbo => {
                format!("{}/{}/providers", self.root, node_name(&service.interface))
            }
        }
    }

    /// The path of `instance`'s znode.
    pub(super) fn instance_path(&self, instance: &Instance) -> String {
        let name = match self.format {
            RegistryFormat::Rpc => node_name(instance.id.as_str()),
            RegistryFormat::Dubbo => dubbo::provider_url(instance).node_name(),
        };
        format!("{}/{name}", self.providers_path(&instance.service))
    }

    /// Whether a child's data must be read to know what it is (our format); Dubbo's
    /// names say it all.
    pub(super) fn reads_data(&self) -> bool {
        self.format == RegistryFormat::Rpc
    }

    /// The data of `instance`'s znode: its JSON, or its provider URL.
    ///
    /// # Errors
    /// When the instance does not serialize (its metadata cannot be JSON).
    pub(super) fn encode(&self, instance: &Instance) -> Result<Vec<u8>, serde_json::Error> {
        match self.format {
            RegistryFormat::Rpc => serde_json::to_vec(instance),
            RegistryFormat::Dubbo => Ok(dubbo::provider_url(instance).to_string().into_bytes()),
        }
    }

    /// What the child `name` (holding `data`) of the providers directory of `wanted` is:
    /// in our format the instance its JSON holds, in Dubbo's the provider its name is.
    pub(super) fn decode(&self, wanted: &ServiceKey, name: &str, data: &[u8]) -> Entry {
        match self.format {
            RegistryFormat::Rpc => match serde_json::from_slice::<Instance>(data) {
                Ok(instance) => Entry::Provider(instance),
                Err(error) => Entry::Unusable(format!("not an instance's JSON: {error}")),
            },
            RegistryFormat::Dubbo => match DubboUrl::from_node_name(name) {
                Ok(url) => dubbo::entry(&url, wanted),
                Err(reason) => Entry::Unusable(format!("not a Dubbo URL: {reason}")),
            },
        }
    }
}

/// How an instance znode is created: ephemeral (it goes with the session that created it),
/// writable only by the client's user when it `authenticated`, else by anyone.
pub(super) fn instance_node(authenticated: bool) -> CreateOptions<'static> {
    let acls = if authenticated {
        Acls::new(&AUTHENTICATED_NODE_ACLS)
    } else {
        Acls::anyone_all()
    };
    CreateMode::Ephemeral.with_acls(acls)
}

/// How a providers directory (and each missing parent) is created: persistent and open to
/// anyone, so that providers of any user can register in it, as in Dubbo.
pub(super) fn directory_node() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// A node name for an instance id: characters outside `[A-Za-z0-9._:@-]` percent-encoded,
/// so any id gives one valid znode name (never `.`, `..` or containing `/`).
fn node_name(id: &str) -> String {
    let mut name = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'@' | b'-') {
            name.push(byte as char);
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    if name.is_empty() || name.bytes().all(|b| b == b'.') {
        name = name.replace('.', "%2E");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;

    #[test]
    fn node_names_are_valid_for_any_id() {
        assert_eq!(node_name("10.0.0.1:80-00ff"), "10.0.0.1:80-00ff");
        assert_eq!(node_name("a/b c%"), "a%2Fb%20c%25");
        assert_eq!(node_name(".."), "%2E%2E");
        assert_eq!(node_name("é"), "%C3%A9");
    }

    #[test]
    fn an_instance_is_one_znode_named_for_its_id_in_its_providers_directory() {
        let layout = NodeLayout::new("/x/y".into(), RegistryFormat::Rpc);
        let grouped = ServiceKey::new("a.B").with_group("g");
        for (id, node) in [("i-1", "i-1"), ("a/b", "a%2Fb"), ("..", "%2E%2E")] {
            let path = format!("{}/{node}", layout.providers_path(&grouped));
            testing::assert_stored_form(
                (grouped.clone(), id),
                (|instance| layout.instance_path(instance), &path),
                |instance| layout.encode(instance),
                |data| match layout.decode(&grouped, "any", data) {
                    Entry::Provider(instance) => Some(instance),
                    _ => None,
                },
            );
        }
        assert_eq!(layout.providers_path(&grouped), "/x/y/a.B@g/providers");
    }

    #[test]
    fn in_dubbo_format_an_instance_is_its_provider_url_under_its_interface() {
        let layout = NodeLayout::new("/dubbo".into(), RegistryFormat::Dubbo);
        let service = ServiceKey::new("a.B").with_version("1").with_group("g");
        let instance = Instance::new(service.clone(), "10.0.0.1", 8080);
        assert_eq!(layout.providers_path(&service), "/dubbo/a.B/providers");
        let path = layout.instance_path(&instance);
        let name = path.strip_prefix("/dubbo/a.B/providers/").unwrap();
        assert!(
            name.starts_with("tri%3A%2F%2F10.0.0.1%3A8080%2Fa.B%3F"),
            "{name}"
        );
        let data = layout.encode(&instance).unwrap();
        assert!(data.starts_with(b"tri://10.0.0.1:8080/a.B?"));
        assert_eq!(
            layout.decode(&service, name, b"10.0.0.1"),
            Entry::Provider(instance)
        );
        assert!(matches!(
            layout.decode(&service, "dubbo%3A%2F%2Fh%3A1%2Fa.B", b""),
            Entry::Unusable(reason) if reason.contains("protocol `dubbo`")
        ));
        assert!(matches!(
            layout.decode(&service, "%zz", b""),
            Entry::Unusable(_)
        ));
    }
}
