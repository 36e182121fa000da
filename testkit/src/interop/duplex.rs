//! A FullDuplexCall as the cases drive it: opened with its first messages queued, fed
//! one message at a time, read one response at a time.

use proto::interop::{StreamingOutputCallRequest, StreamingOutputCallResponse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status, Streaming};

use super::case::Verdict;
use super::checks::{Checked, call_failed, fail, show};
use super::client::InteropClient;

/// An open FullDuplexCall: the sender of its further requests (`None` once
/// half-closed), the response's initial metadata and its response stream.
pub(super) type Duplex = (
    Option<mpsc::Sender<StreamingOutputCallRequest>>,
    MetadataMap,
    Streaming<StreamingOutputCallResponse>,
);

/// Opens a FullDuplexCall with `metadata` and its `first` messages already queued (and
/// the request stream closed after them when `half_close`). Queued first because tonic
/// returns a call only once its response headers came, and a server may send those
/// only with its first response (grpc-core does): waiting for them before sending
/// would never end.
pub(super) async fn open_duplex(
    client: &InteropClient,
    metadata: MetadataMap,
    first: Vec<StreamingOutputCallRequest>,
    half_close: bool,
) -> Result<Duplex, Status> {
    let (requests, receiver) = mpsc::channel(first.len().max(4));
    for message in first {
        // Cannot fail: the receiver is alive and the channel has room for all of them.
        let _ = requests.try_send(message);
    }
    let requests = (!half_close).then_some(requests);
    let mut request = Request::new(ReceiverStream::new(receiver));
    *request.metadata_mut() = metadata;
    let responses = client.test.clone().full_duplex_call(request).await?;
    let (initial, responses, _) = responses.into_parts();
    Ok((requests, initial, responses))
}

pub(super) async fn send(
    requests: Option<&mpsc::Sender<StreamingOutputCallRequest>>,
    request: StreamingOutputCallRequest,
) -> Checked {
    let Some(requests) = requests else {
        return Err(fail("the request stream was already closed"));
    };
    requests
        .send(request)
        .await
        .map_err(|_| fail("the call ended while the client was still sending"))
}

pub(super) async fn next_response(
    responses: &mut Streaming<StreamingOutputCallResponse>,
) -> Result<StreamingOutputCallResponse, Verdict> {
    match responses.message().await {
        Ok(Some(response)) => Ok(response),
        Ok(None) => Err(fail("the stream ended before the expected response")),
        Err(status) => Err(call_failed(status)),
    }
}

pub(super) async fn expect_end(responses: &mut Streaming<StreamingOutputCallResponse>) -> Checked {
    match responses.message().await {
        Ok(None) => Ok(()),
        Ok(Some(response)) => Err(fail(format!(
            "one response too many ({} bytes)",
            response.payload.map_or(0, |p| p.body.len())
        ))),
        Err(status) => Err(fail(format!("the stream ended with {}", show(&status)))),
    }
}
