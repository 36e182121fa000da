//! A small HTTP/1.1 client for the admin endpoint (hyper's connection API, one request
//! per connection): what tests and `rolling-deploy --admin` use to ask an instance
//! `GET /ready` or to `POST /offline`.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::header::{AUTHORIZATION, HOST};
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

async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<Answer, Error> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.to_string());
    if let Some(token) = token {
        request = request.header(AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = sender
        .send_request(request.body(Empty::<Bytes>::new())?)
        .await?;
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
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        content_type,
        allow,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
