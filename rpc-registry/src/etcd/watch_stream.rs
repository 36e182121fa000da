//! One prefix watch of etcd: the stream of its responses and the sender of its later
//! requests (progress checks), for `watch.rs` to follow.

use tokio::sync::mpsc;
use tonic::Streaming;

use crate::etcd::error::EtcdError;
use crate::etcd::proto::etcdserverpb::{
    WatchProgressRequest, WatchRequest, WatchResponse, watch_request,
};

/// A watch of a prefix; dropping it cancels it.
pub(super) struct Watch {
    requests: mpsc::Sender<WatchRequest>,
    responses: Streaming<WatchResponse>,
}

impl Watch {
    /// The watch whose later requests go through `requests` and whose responses come
    /// on `responses`.
    pub(super) fn new(
        requests: mpsc::Sender<WatchRequest>,
        responses: Streaming<WatchResponse>,
    ) -> Self {
        Self {
            requests,
            responses,
        }
    }

    /// Asks the member for a progress notification (etcd answers with an empty
    /// response carrying its current revision): the proof that a quiet watch is still
    /// followed by a member that answers. A member cut off without a reset answers
    /// nothing, and nothing else would tell before HTTP/2's keep-alive (10 s + the
    /// request timeout).
    pub(super) fn request_progress(&self) {
        let progress = WatchRequest {
            request_union: Some(watch_request::RequestUnion::ProgressRequest(
                WatchProgressRequest {},
            )),
        };
        // Full: a check is already on its way, and one answer covers both.
        let _ = self.requests.try_send(progress);
    }

    /// etcd's next watch response (the first says `created`); `None` when etcd ended the
    /// stream.
    pub(super) async fn message(&mut self) -> Result<Option<WatchResponse>, EtcdError> {
        Ok(self.responses.message().await?)
    }
}
