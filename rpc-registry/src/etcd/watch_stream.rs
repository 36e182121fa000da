//! One prefix watch of etcd: the stream of its responses and the sender of its later
//! requests (progress checks), for `watch.rs` to follow, with what every watch on the
//! same member heard of it.

use std::sync::Arc;

use tokio::sync::mpsc;
use tonic::Streaming;

use crate::etcd::error::EtcdError;
use crate::etcd::member_heard::MemberHeard;
use crate::etcd::proto::etcdserverpb::{
    WatchProgressRequest, WatchRequest, WatchResponse, watch_request,
};

/// A watch of a prefix; dropping it cancels it.
pub(super) struct Watch {
    requests: mpsc::Sender<WatchRequest>,
    responses: Streaming<WatchResponse>,
    /// The member it is on, as every watch there heard it.
    member: Arc<MemberHeard>,
    /// This watch asked the member for the member's check, and has no answer yet.
    asked: bool,
}

impl Watch {
    /// The watch on `member` whose later requests go through `requests` and whose
    /// responses come on `responses`.
    pub(super) fn new(
        requests: mpsc::Sender<WatchRequest>,
        responses: Streaming<WatchResponse>,
        member: Arc<MemberHeard>,
    ) -> Self {
        Self {
            requests,
            responses,
            member,
            asked: false,
        }
    }

    /// What the watches on this watch's member heard of it.
    pub(super) fn member(&self) -> &Arc<MemberHeard> {
        &self.member
    }

    /// Asks the member for a progress notification (etcd answers with an empty
    /// response carrying its current revision), unless another watch on the member is
    /// asking already: the proof that a quiet member still answers. A member cut off
    /// without a reset answers nothing, and nothing else would tell before HTTP/2's
    /// keep-alive (10 s + the request timeout).
    pub(super) fn check_member(&mut self) {
        if self.asked || !self.member.begin_check() {
            return;
        }
        let progress = WatchRequest {
            request_union: Some(watch_request::RequestUnion::ProgressRequest(
                WatchProgressRequest {},
            )),
        };
        self.asked = true;
        // Full: a request is already on its way, and one answer covers both.
        let _ = self.requests.try_send(progress);
    }

    /// etcd's next watch response (the first says `created`); `None` when etcd ended the
    /// stream. Every response is news of the member for all its watches.
    pub(super) async fn message(&mut self) -> Result<Option<WatchResponse>, EtcdError> {
        let message = self.responses.message().await?;
        if message.is_some() {
            self.member.heard();
            self.end_check();
        }
        Ok(message)
    }

    fn end_check(&mut self) {
        if std::mem::take(&mut self.asked) {
            self.member.end_check();
        }
    }
}

impl Drop for Watch {
    /// A check this watch began ends with it: another quiet watch on the member asks.
    fn drop(&mut self) {
        self.end_check();
    }
}
