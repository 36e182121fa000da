//! What the transport's integration tests share: a server whose handlers hold, stall
//! or read their requests, and a raw h2 client to misbehave with.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use lossless_rpc_transport::{Server, ServerHandle, ServerOptions};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};

/// Every wait on the real clock ends within this, whatever the code under test does.
pub const BOUND: Duration = Duration::from_secs(20);

/// What the test service does, by path: `/hold` waits for `release` (holding its
/// request, body unread), `/stall` holds its request for ever, anything else reads
/// the whole request and answers its length. Each request is announced on `entered`.
#[derive(Clone)]
pub struct Handlers {
    pub release: Arc<Notify>,
    pub entered: mpsc::UnboundedSender<String>,
}

impl Handlers {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<String>) {
        let (entered, entries) = mpsc::unbounded_channel();
        let handlers = Self {
            release: Arc::new(Notify::new()),
            entered,
        };
        (handlers, entries)
    }

    async fn handle(self, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let path = request.uri().path().to_owned();
        let _ = self.entered.send(path.clone());
        let answer = match path.as_str() {
            "/hold" => {
                self.release.notified().await;
                drop(request);
                0
            }
            "/stall" => {
                let _unread = request;
                std::future::pending::<()>().await;
                0
            }
            _ => request
                .into_body()
                .collect()
                .await
                .map_or(0, |body| body.to_bytes().len()),
        };
        Ok(Response::new(Full::new(Bytes::from(answer.to_string()))))
    }
}

/// A server on 127.0.0.1:0 with `options`, serving `handlers`.
pub async fn serve(options: ServerOptions, handlers: &Handlers) -> (ServerHandle, SocketAddr) {
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let handlers = handlers.clone();
    let service = tower::service_fn(move |request| handlers.clone().handle(request));
    let handle = server.serve(service);
    let addr = handle.local_addr();
    (handle, addr)
}

/// An h2 client on a new connection to `addr`, its connection driven in the background
/// (the task ends when the server closes the connection).
pub async fn h2_client(
    addr: SocketAddr,
) -> (h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (client, driver)
}

/// A POST of gRPC to `path`, its body sent by the caller.
pub fn post(path: &str) -> Request<()> {
    Request::post(format!("http://test{path}"))
        .header("content-type", "application/grpc")
        .body(())
        .unwrap()
}
