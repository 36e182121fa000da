//! `grpc.testing.TestService` as the interop test descriptions define its server
//! features: EmptyCall, UnaryCall, StreamingInputCall, StreamingOutputCall and
//! FullDuplexCall, with Echo Status, CompressedRequest, CompressedResponse and paced
//! responses (`interval_us`). Echo Metadata is done around it, by
//! [`Echo`](super::echo::Echo), since tonic gives a handler no way to add trailers of its
//! own.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt, stream};
use proto::interop::test_service_server::TestService;
use proto::interop::{
    BoolValue, EchoStatus, Empty, Payload, PayloadType, ResponseParameters, SimpleRequest,
    SimpleResponse, StreamingInputCallRequest, StreamingInputCallResponse,
    StreamingOutputCallRequest, StreamingOutputCallResponse,
};
use tonic::{Request, Response, Status, Streaming};

use super::message_flags::RequestFlags;

/// The RPCs of `TestService`, for counting calls per method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `EmptyCall`.
    Empty,
    /// `UnaryCall`.
    Unary,
    /// `StreamingOutputCall` (server stream).
    StreamingOutput,
    /// `StreamingInputCall` (client stream).
    StreamingInput,
    /// `FullDuplexCall` (bidi stream).
    FullDuplex,
}

/// Calls that reached each method's handler, for tests that must show where a call
/// went (or that it never went anywhere twice).
#[derive(Debug, Default)]
pub struct CallCounts([AtomicUsize; 5]);

impl CallCounts {
    /// Calls of `method` that reached this server's handler.
    pub fn get(&self, method: Method) -> usize {
        self.0[method as usize].load(Ordering::SeqCst)
    }

    fn note(&self, method: Method) {
        self.0[method as usize].fetch_add(1, Ordering::SeqCst);
    }
}

/// The interop test service. Cheap to clone; clones share the call counts.
#[derive(Clone, Debug, Default)]
pub struct InteropService {
    calls: Arc<CallCounts>,
}

impl InteropService {
    /// A service with zeroed call counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// The calls that reached each handler.
    pub fn calls(&self) -> &Arc<CallCounts> {
        &self.calls
    }
}

/// A response stream of this service.
pub type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl TestService for InteropService {
    async fn empty_call(&self, _request: Request<Empty>) -> Result<Response<Empty>, Status> {
        self.calls.note(Method::Empty);
        Ok(Response::new(Empty {}))
    }

    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.calls.note(Method::Unary);
        let server_id = request
            .local_addr()
            .map(|addr| addr.to_string())
            .unwrap_or_default();
        let was_compressed = RequestFlags::of(request.extensions()).and_then(|f| f.next());
        let request = request.into_inner();
        check_compression(request.expect_compressed.as_ref(), was_compressed)?;
        echo_status(request.response_status.as_ref())?;
        let payload = payload(request.response_type, request.response_size)?;
        let mut response = Response::new(SimpleResponse {
            payload: Some(payload),
            server_id: if request.fill_server_id {
                server_id
            } else {
                String::new()
            },
            ..SimpleResponse::default()
        });
        // CompressedResponse: compressed when the request asks for it, else not — also
        // when the client accepts gzip anyway, as rpc's references always say they do
        // (what is not asked for stays as it was: a response over the encoding limit is
        // refused as such, not shrunk under it by compression).
        if !request.response_compressed.is_some_and(|c| c.value) {
            response.disable_compression();
        }
        Ok(response)
    }

    type StreamingOutputCallStream = ResponseStream;

    async fn streaming_output_call(
        &self,
        request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.calls.note(Method::StreamingOutput);
        let request = request.into_inner();
        let responses = responses_to(&request)?;
        let status = request.response_status.clone();
        let tail = stream::once(async move { echo_status(status.as_ref()) })
            .filter_map(|result| async move { result.err().map(Err) });
        Ok(Response::new(Box::pin(responses.chain(tail))))
    }

    async fn streaming_input_call(
        &self,
        request: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        self.calls.note(Method::StreamingInput);
        let flags = RequestFlags::of(request.extensions());
        let mut messages = request.into_inner();
        let mut aggregated = 0usize;
        while let Some(message) = messages.message().await? {
            let was_compressed = flags.as_ref().and_then(RequestFlags::next);
            check_compression(message.expect_compressed.as_ref(), was_compressed)?;
            aggregated += message.payload.map_or(0, |p| p.body.len());
        }
        let aggregated_payload_size = i32::try_from(aggregated)
            .map_err(|_| Status::invalid_argument("aggregated payload size over i32"))?;
        Ok(Response::new(StreamingInputCallResponse {
            aggregated_payload_size,
        }))
    }

    type FullDuplexCallStream = ResponseStream;

    async fn full_duplex_call(
        &self,
        request: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.calls.note(Method::FullDuplex);
        Ok(Response::new(Box::pin(full_duplex(request.into_inner()))))
    }

    async fn unimplemented_call(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented(
            "grpc.testing.TestService/UnimplementedCall is not implemented",
        ))
    }
}

/// The responses one request message asks for, each after its `interval_us`.
fn responses_to(
    request: &StreamingOutputCallRequest,
) -> Result<
    impl Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send + 'static + use<>,
    Status,
> {
    let response_type = request.response_type;
    payload(response_type, 0)?;
    let parameters: Vec<ResponseParameters> = request.response_parameters.clone();
    Ok(stream::iter(parameters).then(move |parameters| async move {
        let interval = u64::try_from(parameters.interval_us).unwrap_or(0);
        if interval > 0 {
            tokio::time::sleep(Duration::from_micros(interval)).await;
        }
        Ok(StreamingOutputCallResponse {
            payload: Some(payload(response_type, parameters.size)?),
        })
    }))
}

/// FullDuplexCall: answers each request message as it arrives, in order; ends after
/// the client half-closes and every response is out, or at the first request that asks
/// for a status (which ends the call with it, reading nothing more).
fn full_duplex(
    requests: Streaming<StreamingOutputCallRequest>,
) -> impl Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send + 'static {
    requests
        .map(|message| {
            let request = message?;
            echo_status(request.response_status.as_ref())?;
            responses_to(&request)
        })
        .scan(false, |ended, item| {
            // The first error is the call's status; nothing after it is read.
            let out = if *ended { None } else { Some(item) };
            *ended |= matches!(out, Some(Err(_)));
            std::future::ready(out)
        })
        .flat_map(|item| match item {
            Ok(responses) => responses.left_stream(),
            Err(status) => stream::once(std::future::ready(Err(status))).right_stream(),
        })
}

/// Echo Status: the status the request asks for, as an error; `Ok` for none or OK.
fn echo_status(status: Option<&EchoStatus>) -> Result<(), Status> {
    match status {
        Some(status) if status.code != 0 => Err(Status::new(
            tonic::Code::from_i32(status.code),
            status.message.clone(),
        )),
        _ => Ok(()),
    }
}

/// CompressedRequest: with `expect_compressed` set, the message must have been sent
/// compressed (true) or not (false); otherwise the call fails with INVALID_ARGUMENT.
fn check_compression(expected: Option<&BoolValue>, was: Option<bool>) -> Result<(), Status> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let Some(was) = was else {
        return Err(Status::internal(
            "the compression of the request message was not recorded",
        ));
    };
    if expected.value == was {
        return Ok(());
    }
    Err(Status::invalid_argument(if expected.value {
        "expected a compressed message, got an uncompressed one"
    } else {
        "expected an uncompressed message, got a compressed one"
    }))
}

/// A payload of `size` zero bytes, of `response_type` (only COMPRESSABLE exists).
fn payload(response_type: i32, size: i32) -> Result<Payload, Status> {
    if PayloadType::try_from(response_type).is_err() {
        return Err(Status::invalid_argument(format!(
            "unsupported payload type {response_type}"
        )));
    }
    let size = usize::try_from(size)
        .map_err(|_| Status::invalid_argument(format!("negative payload size {size}")))?;
    Ok(Payload {
        r#type: response_type,
        body: Bytes::from(vec![0u8; size]),
    })
}
