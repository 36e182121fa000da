//! An instance and its stored form in ZooKeeper: one ephemeral znode per instance,
//! `<root>/<service.path_segment()>/providers/<node name of the instance id>`, holding the
//! instance's JSON (see "Layout" in the module documentation).

use rpc_core::{Instance, ServiceKey};
use zookeeper_client::{Acl, Acls, CreateMode, CreateOptions, Permission};

/// Instance znodes of an authenticated client: all rights for its user, read for anyone.
static AUTHENTICATED_NODE_ACLS: [Acl; 2] = [
    Acl::new_const(Permission::ALL, "auth", ""),
    Acl::new_const(Permission::READ, "world", "anyone"),
];

/// Where the instances of every service live in the znode tree.
#[derive(Clone, Debug)]
pub(super) struct NodeLayout {
    /// Root path, starting with `/`, without a trailing `/`.
    root: String,
}

impl NodeLayout {
    /// The layout under `root` (absolute, no trailing `/`).
    pub(super) fn new(root: String) -> Self {
        Self { root }
    }

    /// The path of the directory that holds the instances of `service`.
    pub(super) fn providers_path(&self, service: &ServiceKey) -> String {
        format!("{}/{}/providers", self.root, service.path_segment())
    }

    /// The path of `instance`'s znode.
    pub(super) fn instance_path(&self, instance: &Instance) -> String {
        format!(
            "{}/{}",
            self.providers_path(&instance.service),
            node_name(instance.id.as_str())
        )
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

/// The data of `instance`'s znode: its JSON.
///
/// # Errors
/// When the instance does not serialize (its metadata cannot be JSON).
pub(super) fn encode(instance: &Instance) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(instance)
}

/// The instance the znode at `path` holds, or `None` for data that is not one (a znode
/// some other program created), which is logged with `url` and skipped.
pub(super) fn decode(url: &str, path: &str, data: &[u8]) -> Option<Instance> {
    match serde_json::from_slice::<Instance>(data) {
        Ok(instance) => Some(instance),
        Err(error) => {
            tracing::warn!(%url, %path, %error, "ignoring a znode that is not an instance");
            None
        }
    }
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
        let layout = NodeLayout::new("/x/y".into());
        let grouped = ServiceKey::new("a.B").with_group("g");
        for (id, node) in [("i-1", "i-1"), ("a/b", "a%2Fb"), ("..", "%2E%2E")] {
            let path = format!("{}/{node}", layout.providers_path(&grouped));
            testing::assert_stored_form(
                (grouped.clone(), id),
                (|instance| layout.instance_path(instance), &path),
                encode,
                |data| decode("zookeeper://h", &path, data),
            );
        }
        assert_eq!(layout.providers_path(&grouped), "/x/y/a.B@g/providers");
    }
}
