//! What zookeeper-client's errors mean here: [`is_session_lost`] tells that a session is
//! gone for good (a new one must be opened and every registration created again in it),
//! [`is_refused`] that a server answered but refused this client (a connection error, not
//! an unreachable server).

use zookeeper_client::Error as ZkError;

/// Whether `error` means the session is gone for good (a new one is needed).
/// `UnexpectedError` is what requests get once the library's session task is gone without
/// reporting a terminal state.
pub(super) fn is_session_lost(error: &ZkError) -> bool {
    matches!(
        error,
        ZkError::SessionExpired
            | ZkError::ClientClosed
            | ZkError::SessionMoved
            | ZkError::AuthFailed
            | ZkError::UnexpectedError(_)
    )
}

/// Whether opening a session failed because a server refused it (failed authentication)
/// rather than because none answered.
pub(super) fn is_refused(error: &ZkError) -> bool {
    matches!(error, ZkError::AuthFailed | ZkError::NoAuth)
}
