//! One gRPC call written by hand over the `h2` crate: any headers, any body bytes, so a
//! test can send what no gRPC library would (a malformed `grpc-timeout`, a message that
//! is not protobuf, a length prefix that lies), and see what no gRPC library shows (the
//! compressed flag of each response message: [`exchange`]).

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderMap, Request};
use tokio::net::TcpStream;
use tonic::Code;

/// A gRPC message as it travels: the compressed flag, the big-endian length (or
/// `declared`, to lie about it), then the bytes.
pub fn framed(compressed: bool, message: &[u8], declared: Option<u32>) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.put_u8(u8::from(compressed));
    frame.put_u32(declared.unwrap_or(u32::try_from(message.len()).unwrap_or(u32::MAX)));
    frame.put_slice(message);
    frame.freeze()
}

/// Sends one call of `path` (`/package.Service/Method`) with `headers` and `body` on a
/// fresh HTTP/2 connection and returns the gRPC status code of the answer (from the
/// headers of a trailers-only answer, or from the trailers).
///
/// # Errors
/// What went wrong, in words: no connection, no HTTP/2, an HTTP status other than 200,
/// no `grpc-status`.
pub async fn call(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Code, String> {
    exchange(addr, path, headers, body)
        .await?
        .code()
        .ok_or_else(|| "no grpc-status in the headers or the trailers".to_owned())
}

/// All of one answer, as it came: what [`exchange`] returns.
#[derive(Debug)]
pub struct Exchange {
    /// The response headers (`grpc-encoding`, `grpc-accept-encoding`, a trailers-only
    /// answer's `grpc-status`).
    pub headers: HeaderMap,
    /// The body's bytes: the gRPC messages, each behind its 5-byte prefix.
    pub body: Bytes,
    /// The trailers, unless the answer was trailers-only.
    pub trailers: Option<HeaderMap>,
}

impl Exchange {
    /// The gRPC status code, from the headers of a trailers-only answer or from the
    /// trailers.
    pub fn code(&self) -> Option<Code> {
        status_of(&self.headers).or_else(|| self.trailers.as_ref().and_then(status_of))
    }

    /// The body's messages as they travelled: each one's compressed flag and bytes.
    ///
    /// # Errors
    /// A body that is not whole messages (a prefix that overstates what follows).
    pub fn messages(&self) -> Result<Vec<(bool, Bytes)>, String> {
        let mut rest = self.body.clone();
        let mut messages = Vec::new();
        while !rest.is_empty() {
            if rest.len() < 5 {
                return Err(format!("{} bytes left, less than a prefix", rest.len()));
            }
            let prefix = rest.split_to(5);
            let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
            if rest.len() < length {
                return Err(format!("a message of {length} bytes, {} left", rest.len()));
            }
            messages.push((prefix[0] == 1, rest.split_to(length)));
        }
        Ok(messages)
    }
}

/// Sends one call on a fresh HTTP/2 connection and returns all of the answer: headers, body bytes
/// and trailers, so a test can see what travelled (a message's compressed flag, the
/// `grpc-encoding` of a response).
///
/// # Errors
/// What went wrong, in words: no connection, no HTTP/2, an HTTP status other than 200,
/// a body or trailers that fail.
pub async fn exchange(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Exchange, String> {
    let mut client = connect(addr).await?;
    let mut request = request(addr, path);
    for (name, value) in headers {
        let name = http::HeaderName::try_from(*name).map_err(|e| format!("header: {e}"))?;
        let value = http::HeaderValue::try_from(*value).map_err(|e| format!("header: {e}"))?;
        // One content-type: the given one replaces gRPC's.
        if name == http::header::CONTENT_TYPE {
            request.headers_mut().insert(name, value);
        } else {
            request.headers_mut().append(name, value);
        }
    }
    let (response, mut send) = client
        .send_request(request, false)
        .map_err(|e| format!("send: {e}"))?;
    // A provider may answer (and close the stream) before it reads a request it refuses
    // from its headers alone: then the body has nowhere to go, and the answer is what
    // counts.
    let _ = send.send_data(body, true);
    let response = response.await.map_err(|e| format!("response: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("HTTP status {}", response.status()));
    }
    let headers = response.headers().clone();
    let mut stream = response.into_body();
    let mut body = BytesMut::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk.map_err(|e| format!("data: {e}"))?;
        let _ = stream.flow_control().release_capacity(chunk.len());
        body.extend_from_slice(&chunk);
    }
    let trailers = stream
        .trailers()
        .await
        .map_err(|e| format!("trailers: {e}"))?;
    Ok(Exchange {
        headers,
        body: body.freeze(),
        trailers,
    })
}

/// A fresh HTTP/2 connection to `addr`, ready for a request (its connection task runs
/// in the background).
pub(super) async fn connect(addr: SocketAddr) -> Result<SendRequest<Bytes>, String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (client, connection) = h2::client::handshake(tcp)
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(connection);
    client.ready().await.map_err(|e| format!("ready: {e}"))
}

/// The headers of a gRPC call of `path` on `addr`, without a body.
pub(super) fn request(addr: SocketAddr, path: &str) -> Request<()> {
    let mut request = Request::new(());
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = format!("http://{addr}{path}")
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("http://127.0.0.1/"));
    let headers = request.headers_mut();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc"),
    );
    headers.insert("te", http::HeaderValue::from_static("trailers"));
    request
}

fn status_of(headers: &HeaderMap) -> Option<Code> {
    headers
        .get("grpc-status")
        .map(|value| Code::from_bytes(value.as_bytes()))
}
