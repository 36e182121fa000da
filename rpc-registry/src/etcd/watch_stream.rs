//! One prefix watch of etcd: opening it (`EtcdClient::watch_prefix`), the stream of its
//! responses and the sender of its later requests (progress checks), for `watch.rs` to
//! follow, with what every watch on the same member heard of it.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::etcd::auth::with_token;
use crate::etcd::client::EtcdClient;
use crate::etcd::codec::prefix_end;
use crate::etcd::error::EtcdError;
use crate::etcd::member_heard::MemberHeard;
use crate::etcd::proto::etcdserverpb::watch_client::WatchClient;
use crate::etcd::proto::etcdserverpb::{
    WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse, watch_request,
};

impl EtcdClient {
    /// Watches the keys starting with `prefix`, from `start_revision` (inclusive) on.
    pub(super) async fn watch_prefix(
        &self,
        prefix: &[u8],
        start_revision: i64,
    ) -> Result<Watch, EtcdError> {
        let create = WatchRequest {
            request_union: Some(watch_request::RequestUnion::CreateRequest(
                WatchCreateRequest {
                    key: prefix.to_vec(),
                    range_end: prefix_end(prefix),
                    start_revision,
                    ..WatchCreateRequest::default()
                },
            )),
        };
        let ((requests, responses), member) = self
            .authorized_on(|channel, token| {
                // One watch per stream: the create request goes out with the call, and
                // later only progress requests (`Watch::check_member`). The request
                // half stays open until the watch is dropped, which resets the stream
                // and ends the watch in etcd.
                let (requests, queued) = mpsc::channel(1);
                let stream = tokio_stream::once(create.clone()).chain(ReceiverStream::new(queued));
                let request = with_token(stream, token);
                async move {
                    let responses = WatchClient::new(channel).watch(request).await?.into_inner();
                    Ok((requests, responses))
                }
            })
            .await?;
        Ok(Watch::new(requests, responses, member))
    }
}

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
