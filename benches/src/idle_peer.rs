//! The other side of `benches/idle_connections.rs`, in a child process (that bench's
//! binary again, with `ROLE` set): tonic clients of a provider, or tonic servers for a
//! consumer, driven by lines on its standard input, one answer line each.

use std::net::SocketAddr;
use std::process::Stdio;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc_testkit::services::EchoProvider;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::stacks::{self, request};

/// The environment variable that makes the bench's binary a child of this module, and
/// names its role (`clients` or `servers`).
pub const ROLE: &str = "IDLE_CONNECTIONS_ROLE";
/// Connections the child dials at once.
const DIAL_BATCH: usize = 32;

/// `client` after one echo through it.
pub async fn called<T>(mut client: EchoClient<T>) -> EchoClient<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    client.echo(request()).await.expect("the echo succeeds");
    client
}

/// The child process holding a case's other side: it answers each line sent with one
/// line, and ends when its input closes.
pub struct Peer {
    child: Child,
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
}

impl Peer {
    /// Starts this binary as the child `role`, given `argument`.
    pub async fn start(role: &str, argument: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this binary's path"))
            .env(ROLE, role)
            .env("IDLE_CONNECTIONS_ARGUMENT", argument)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the child starts");
        let input = child.stdin.take().expect("piped");
        let output = BufReader::new(child.stdout.take().expect("piped")).lines();
        Self {
            child,
            input,
            output,
        }
    }

    /// Sends `line`, returns the child's answer.
    pub async fn ask(&mut self, line: &str) -> String {
        self.input
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("the child reads");
        self.output
            .next_line()
            .await
            .expect("the child answers")
            .expect("the child answers before it ends")
    }

    /// Closes the child's input and waits for it to end well.
    pub async fn stop(mut self) {
        drop(self.input);
        let status = self.child.wait().await.expect("the child ends");
        assert!(status.success(), "the child ended with {status}");
    }
}

/// The child's roles.
pub mod role {
    use super::*;

    /// Tonic clients of the address given: `open K` opens K more connections, each
    /// making one echo call, and answers `opened`.
    pub async fn clients() {
        let addr: SocketAddr = argument().parse().expect("a socket address");
        let mut held = Vec::new();
        serve_lines(
            |line| {
                let count: usize = line
                    .strip_prefix("open ")
                    .and_then(|n| n.parse().ok())
                    .expect("open K");
                async move {
                    // A few dozen dials at a time, as clients of a fleet arrive: a thousand at
                    // once overflow the listener's queue of a provider slowed by dhat.
                    let mut channels = Vec::with_capacity(count);
                    while channels.len() < count {
                        let batch = (count - channels.len()).min(DIAL_BATCH);
                        let dials = (0..batch)
                            .map(|_| async { called(stacks::plain_client(addr).await).await });
                        channels.extend(futures_util::future::join_all(dials).await);
                    }
                    channels
                }
            },
            |channels| {
                held.extend(channels);
                "opened".to_owned()
            },
        )
        .await;
    }

    /// As many tonic echo servers as the argument says; `addresses` answers their
    /// addresses, space-separated.
    pub async fn servers() {
        let count: usize = argument().parse().expect("a count");
        let mut addrs = Vec::with_capacity(count);
        for _ in 0..count {
            let (addr, incoming) = stacks::loopback_incoming().await;
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(EchoServer::new(EchoProvider::default()))
                    .serve_with_incoming(incoming),
            );
            addrs.push(addr.to_string());
        }
        let list = addrs.join(" ");
        serve_lines(|_| async {}, |()| list.clone()).await;
    }

    fn argument() -> String {
        std::env::var("IDLE_CONNECTIONS_ARGUMENT").expect("the parent sets the argument")
    }

    /// Answers each input line with `answer(work(line).await)` until the input closes.
    async fn serve_lines<W, F, T>(work: W, mut answer: impl FnMut(T) -> String)
    where
        W: Fn(String) -> F,
        F: Future<Output = T>,
    {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let mut out = tokio::io::stdout();
        while let Some(line) = lines.next_line().await.expect("stdin reads") {
            let done = work(line).await;
            out.write_all(format!("{}\n", answer(done)).as_bytes())
                .await
                .expect("stdout writes");
            out.flush().await.expect("stdout flushes");
        }
    }
}
