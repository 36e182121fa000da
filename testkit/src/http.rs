//! A small HTTP/1.1 client for the admin endpoint (hyper's connection API, one request
//! per connection): what tests and `rolling-deploy --admin` use to ask an instance
//! `GET /ready` or to `POST /offline` — and, with [`request_as`], to send exactly the
//! headers a web page's browser would (a foreign `Origin` or `Host`, `Sec-Fetch-*`).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, HOST};
use hyper::{HeaderMap, Request};
use hyper_util::rt::TokioIo;

/// Longest wait for one answer, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// One answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The `Allow` header, if any.
    pub allow: Option<String>,
    /// The body, as text (lossy UTF-8).
    pub body: String,
    /// Every header of the answer.
    pub headers: HeaderMap,
}

/// Why no answer came.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// `GET path` on `addr`.
///
/// # Errors
/// Connection refused or lost, a malformed answer, or none within [`TIMEOUT`].
pub async fn get(addr: SocketAddr, path: &str) -> Result<Answer, Error> {
    request(addr, "GET", path, None).await
}

/// `POST path` on `addr` with an empty body, and `Authorization: Bearer <token>` when a
/// token is given.
///
/// # Errors
/// As [`get`].
pub async fn post(addr: SocketAddr, path: &str, token: Option<&str>) -> Result<Answer, Error> {
    request(addr, "POST", path, token).await
}

/// `method path` on `addr`, bounded by [`TIMEOUT`].
///
/// # Errors
/// As [`get`].
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<Answer, Error> {
    request_within(addr, method, path, token, TIMEOUT).await
}

/// `method path` on `addr`, bounded by `within` (for an answer that comes when a long
/// operation ends, such as `POST /upgrade`).
///
/// # Errors
/// As [`get`], with `within` for [`TIMEOUT`].
pub async fn request_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    within: Duration,
) -> Result<Answer, Error> {
    tokio::time::timeout(within, exchange(addr, method, path, token))
        .await
        .map_err(|_| format!("no answer from {addr} within {within:?}"))?
}

/// `method path` on `addr` with exactly `headers` — no `Host` unless one is among them —
/// and `body`, bounded by [`TIMEOUT`]: a request shaped as a browser, or a page forging
/// one, would send it.
///
/// # Errors
/// As [`get`].
pub async fn request_as(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Answer, Error> {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::copy_from_slice(body.as_bytes())))?;
    tokio::time::timeout(TIMEOUT, send(addr, request))
        .await
        .map_err(|_| format!("no answer from {addr} within {TIMEOUT:?}"))?
}

async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<Answer, Error> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.to_string());
    if let Some(token) = token {
        request = request.header(AUTHORIZATION, format!("Bearer {token}"));
    }
    send(addr, request.body(Full::default())?).await
}

/// Sends `request` on a new connection to `addr` and reads the whole answer.
async fn send(addr: SocketAddr, request: Request<Full<Bytes>>) -> Result<Answer, Error> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await?;
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|value: &hyper::header::HeaderValue| value.to_str().ok())
            .map(str::to_owned)
    };
    let status = response.status().as_u16();
    let content_type = header(hyper::header::CONTENT_TYPE);
    let allow = header(hyper::header::ALLOW);
    let headers = response.headers().clone();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        content_type,
        allow,
        body: String::from_utf8_lossy(&body).into_owned(),
        headers,
    })
}
