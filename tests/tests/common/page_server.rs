//! A second local web server, for browser tests of the admin endpoint: another origin
//! (its own port on 127.0.0.1) that serves the pages a test gives it, and relays every
//! other request, byte for byte, to a target — as DNS rebinding would deliver a page's
//! same-origin request to the admin endpoint, its `Host` header unchanged.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Largest request head read before a request is given up on.
const MAX_HEAD: usize = 64 << 10;

/// A running page server; dropping it stops it (and every connection it holds).
pub struct PageServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl PageServer {
    /// Serves `pages` (path → HTML) on 127.0.0.1 at a free port, and relays any other
    /// path to `relay_to`.
    pub async fn start(pages: Vec<(&str, String)>, relay_to: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pages: Arc<HashMap<String, String>> = Arc::new(
            pages
                .into_iter()
                .map(|(path, html)| (path.to_owned(), html))
                .collect(),
        );
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                connections.spawn(serve(stream, pages.clone(), relay_to));
            }
        });
        Self { addr, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        // The accept loop owns the JoinSet: aborting it aborts every connection too.
        self.task.abort();
    }
}

/// One connection: a page answered and closed, or the whole connection relayed.
async fn serve(mut stream: TcpStream, pages: Arc<HashMap<String, String>>, relay_to: SocketAddr) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let path = String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    if let Some(html) = pages.get(&path) {
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
             cache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
            html.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    let Ok(mut upstream) = TcpStream::connect(relay_to).await else {
        return;
    };
    if upstream.write_all(&head).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
    }
}

/// The bytes of the connection up to the end of the first request's head (and
/// whatever came with them); `None` if it closed or grew too large first.
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        if head.len() > MAX_HEAD || stream.read_buf(&mut head).await.ok()? == 0 {
            return None;
        }
    }
    Some(head)
}
