use std::convert::Infallible;

use http_body_util::Full;
use hyper_util::rt::TokioExecutor;
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::connection_table::ConnectionTable;

/// What one idle connection's task holds is its largest state: a plain connection's
/// must not carry room for a TLS session (in this debug build its future took 12 696
/// bytes before the TLS branch was boxed, 5 360 after; `cargo bench --bench
/// idle_connections` measures the whole heap).
#[tokio::test]
async fn a_plain_connections_task_has_no_room_for_a_tls_session() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = TcpStream::connect(addr).await.unwrap();
    let (stream, peer) = listener.accept().await.unwrap();
    let info = TcpConnectInfo {
        local_addr: Some(addr),
        remote_addr: Some(peer),
    };
    let service = tower::service_fn(|_: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
    });
    let limits = Limits {
        preface_deadline: Instant::now(),
        idle_timeout: None,
    };
    let admitted = ConnectionTable::new(1).admit().unwrap();
    let task = serve(
        (stream, info),
        None,
        service,
        http2::Builder::new(TokioExecutor::new()),
        Arc::default(),
        admitted,
        limits,
    );
    let size = std::mem::size_of_val(&task);
    assert!(size <= 6 * 1024, "a connection's task takes {size} bytes");
}
