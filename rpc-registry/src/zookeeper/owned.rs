//! Writing and deleting instance znodes by their owner: an ephemeral znode belongs to
//! the session that created it (its `ephemeralOwner`), and what this client does to a
//! znode it finds depends on who owns it (see "Ownership" in the module documentation).
//! Every replacement and deletion is at the version read, so that a znode changed in
//! between (another session replaced it) is read and judged again, never overwritten
//! blindly.

use zookeeper_client::{Client, Error as ZkError};

use crate::zookeeper::codec::{directory_node, instance_node};

/// What to do with a znode found at a registration's path, by its `ephemeralOwner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Replace it (delete + create, at the version read).
    Replace,
    /// Keep it: it is this session's already.
    Keep,
    /// Leave it: another session holds it.
    Leave,
}

/// How creating an instance znode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Created {
    /// This session holds it now.
    Held,
    /// Another session (this id) holds it, and it was left to it.
    Foreign(i64),
}

/// Creates the ephemeral znode `path` holding `data` in `client`'s session (`secured`:
/// with credentials, see `codec::instance_node`). A znode already there is replaced,
/// kept or left as `found` says for its owner (replaced in one transaction at the version
/// read, so that a change in between is seen and judged again).
pub(super) async fn create_instance_node(
    client: &Client,
    path: &str,
    data: &[u8],
    secured: bool,
    found: impl Fn(i64) -> Found,
) -> Result<Created, ZkError> {
    let (parent, _) = path.rsplit_once('/').unwrap_or((path, ""));
    let options = instance_node(secured);
    let directory = directory_node();
    for _ in 0..3 {
        match client.create(path, data, &options).await {
            Ok(_) => return Ok(Created::Held),
            Err(ZkError::NoNode) => client.mkdir(parent, &directory).await?,
            Err(ZkError::NodeExists) => {
                let Some(stat) = client.check_stat(path).await? else {
                    // Deleted meanwhile: create again.
                    continue;
                };
                match found(stat.ephemeral_owner) {
                    Found::Keep => return Ok(Created::Held),
                    Found::Leave => return Ok(Created::Foreign(stat.ephemeral_owner)),
                    Found::Replace => {}
                }
                let mut writer = client.new_multi_writer();
                writer.add_delete(path, Some(stat.version))?;
                writer.add_create(path, data, &options)?;
                match writer.commit().await {
                    Ok(_) => return Ok(Created::Held),
                    Err(error) => match ZkError::from(error) {
                        // Deleted or changed meanwhile: look again.
                        ZkError::NoNode | ZkError::BadVersion => continue,
                        other => return Err(other),
                    },
                }
            }
            Err(error) => return Err(error),
        }
    }
    Err(ZkError::UnexpectedError(format!(
        "{path} kept changing while it was created"
    )))
}

/// Deletes `path` at the version read if one of the sessions `ours` owns it: `None` when
/// deleted (or already gone), else the foreign owner, whose znode is left alone.
pub(super) async fn delete_if_owned(
    client: &Client,
    path: &str,
    ours: &[i64],
) -> Result<Option<i64>, ZkError> {
    for _ in 0..3 {
        let Some(stat) = client.check_stat(path).await? else {
            return Ok(None);
        };
        if !ours.contains(&stat.ephemeral_owner) {
            return Ok(Some(stat.ephemeral_owner));
        }
        match client.delete(path, Some(stat.version)).await {
            Ok(()) | Err(ZkError::NoNode) => return Ok(None),
            // Changed since it was read: read it again.
            Err(ZkError::BadVersion) => continue,
            Err(error) => return Err(error),
        }
    }
    Err(ZkError::UnexpectedError(format!(
        "{path} kept changing while it was deleted"
    )))
}
