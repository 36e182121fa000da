//! The fleet's providers: stand-ins that speak gRPC over HTTP/2 (the `h2` crate, on an
//! in-memory pipe the consumer's transport dials through its `NetworkStack` seam) and
//! go through the observable steps of the framework's graceful stop at the plan's
//! times — a full server per instance does not fit ten thousand times in one process.
//!
//! From a consumer's side they are what a provider of the framework is: they answer an
//! echo in 1–19 ms; once unregistered every response carries the closing mark; from
//! shutdown step 3 on a new call is refused "closing, not executed" without running;
//! at exit every connection gets GOAWAY, calls in flight are answered, and later dials
//! are refused.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::BoxFuture;
use h2::RecvStream;
use h2::server::SendResponse;
use http::{HeaderMap, HeaderValue, Request, Response};
use prost::Message;
use proto::echo::{EchoReply, EchoRequest};
use rpc::core::metadata::{CLOSING, CLOSING_VALUE, NOT_EXECUTED, NOT_EXECUTED_CLOSING};
use rpc::transport::{BoxStream, NetworkListener, NetworkStack};
use tokio::io::DuplexStream;
use tokio::time::Instant;

use super::plan::RollPlan;
use super::tally::ConsumerTally;
use crate::hosts::CALL_ID;

/// Bytes an in-memory connection buffers each way.
const PIPE_BUFFER: usize = 64 * 1024;

/// Dials from one consumer to the plan's stand-ins, each connection served by a task
/// on the consumer's runtime.
pub struct StandInNetwork {
    plan: Arc<RollPlan>,
    origin: Instant,
    tally: Arc<ConsumerTally>,
}

impl StandInNetwork {
    /// The network of a consumer whose time zero is `origin`, recording in `tally`.
    pub fn new(plan: Arc<RollPlan>, origin: Instant, tally: Arc<ConsumerTally>) -> Self {
        Self {
            plan,
            origin,
            tally,
        }
    }
}

impl NetworkStack for StandInNetwork {
    fn connect(&self, authority: &str) -> BoxFuture<'static, io::Result<BoxStream>> {
        let at = self.origin.elapsed();
        let found = self.plan.provider(authority).map(|(index, _)| index);
        let listening = found.filter(|index| self.plan.providers[*index].listening(at));
        let Some(index) = listening else {
            self.tally.note_dial_refused();
            let error = io::Error::new(io::ErrorKind::ConnectionRefused, "nothing listens");
            return Box::pin(async move { Err(error) });
        };
        let provider = StandIn {
            plan: self.plan.clone(),
            index,
            origin: self.origin,
            tally: self.tally.clone(),
        };
        Box::pin(async move {
            let (client, server) = tokio::io::duplex(PIPE_BUFFER);
            tokio::spawn(provider.serve(server));
            Ok(Box::new(client) as BoxStream)
        })
    }

    fn bind(&self, _addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn NetworkListener>>> {
        Box::pin(async { Err(io::Error::other("the fleet's consumers listen on nothing")) })
    }
}

/// One stand-in provider, as one connection sees it.
#[derive(Clone)]
struct StandIn {
    plan: Arc<RollPlan>,
    index: usize,
    origin: Instant,
    tally: Arc<ConsumerTally>,
}

impl StandIn {
    /// Serves one connection until the provider exits (GOAWAY, then the calls in flight).
    async fn serve(self, io: DuplexStream) {
        let Ok(mut connection) = h2::server::handshake(io).await else {
            return;
        };
        let exits = self.plan.providers[self.index]
            .stop
            .map(|stop| self.origin + stop.exits);
        let exit = async move {
            match exits {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(exit);
        let mut exiting = false;
        loop {
            tokio::select! {
                request = connection.accept() => match request {
                    Some(Ok((request, respond))) => {
                        tokio::spawn(self.clone().answer(request, respond));
                    }
                    _ => return,
                },
                () = &mut exit, if !exiting => {
                    connection.graceful_shutdown();
                    exiting = true;
                }
            }
        }
    }

    /// Answers one call: refused once the provider rejects, else run and echoed.
    async fn answer(self, request: Request<RecvStream>, respond: SendResponse<Bytes>) {
        let provider = &self.plan.providers[self.index];
        let arrived = self.origin.elapsed();
        if provider.stop.is_some_and(|stop| arrived >= stop.rejects) {
            self.tally.note_refused();
            refuse(respond);
            return;
        }
        let id = call_id(request.headers());
        let Some(message) = read_message(request.into_body()).await else {
            return;
        };
        self.tally.executed(id);
        let work = Duration::from_millis(1 + id.wrapping_mul(2_654_435_761) % 19);
        tokio::time::sleep(work).await;
        let closing = provider
            .stop
            .is_some_and(|stop| self.origin.elapsed() >= stop.unregistered);
        if closing {
            self.tally.note_closing_mark();
        }
        let reply = EchoReply {
            payload: message.payload,
            provider: provider.instance.authority(),
        };
        // The consumer may have gone (its call timed out): nothing to answer then.
        let _ = send_reply(respond, &reply, closing);
    }
}

/// The call id the consumer put in the metadata (0 when absent).
fn call_id(headers: &HeaderMap) -> u64 {
    headers
        .get(CALL_ID)
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(0)
}

/// The request's one gRPC message; `None` if the stream broke or it is not one.
async fn read_message(mut body: RecvStream) -> Option<EchoRequest> {
    let mut bytes = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    EchoRequest::decode(bytes.get(5..)?).ok()
}

/// A trailers-only "closing, not executed" answer, as the framework's provider filter
/// gives from shutdown step 3 on.
fn refuse(mut respond: SendResponse<Bytes>) {
    let response = Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .header("grpc-status", "14")
        .header(
            "grpc-message",
            "provider is shutting down; request not executed",
        )
        .header(NOT_EXECUTED, NOT_EXECUTED_CLOSING)
        .header(CLOSING, CLOSING_VALUE)
        .body(())
        .expect("a valid response");
    let _ = respond.send_response(response, true);
}

/// Headers (with the closing mark when `closing`), the reply, `grpc-status: 0`.
fn send_reply(
    mut respond: SendResponse<Bytes>,
    reply: &EchoReply,
    closing: bool,
) -> Result<(), h2::Error> {
    let mut response = Response::builder()
        .status(200)
        .header("content-type", "application/grpc");
    if closing {
        response = response.header(CLOSING, CLOSING_VALUE);
    }
    let response = response.body(()).expect("a valid response");
    let mut stream = respond.send_response(response, false)?;
    let mut frame = BytesMut::with_capacity(5 + reply.encoded_len());
    frame.put_u8(0);
    frame.put_u32(reply.encoded_len() as u32);
    reply.encode(&mut frame).expect("room was reserved");
    stream.send_data(frame.freeze(), false)?;
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    stream.send_trailers(trailers)
}
