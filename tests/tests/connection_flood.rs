//! Issue 35, item 5: a provider stays up against a flood of connections that never
//! speak. The echo provider runs as a process of its own with `ulimit -n 1024`; the
//! test opens 1 100 TCP connections to it that never send a byte — more than it has
//! descriptors — then calls it with a plain tonic client.
//!
//! Measured before the server's protections (same setting, no preface timeout,
//! connection limit or shedding): the tonic client was never answered (25 s), and every
//! silent connection was still open 20 s later. Asserted now, in both ways the server
//! makes room — at its connection limit (by default 7/8 of its descriptors, 896), and
//! when `accept` fails with `EMFILE` (a limit above the descriptors):
//!
//! - the tonic client is answered within a quarter of the preface timeout: the silent
//!   connections made room for it, it did not wait for them to time out;
//! - every silent connection is closed by the server (a read on each ends) within the
//!   preface timeout of its opening, and each one is counted once, as shed or as a
//!   preface timeout (`/metrics`);
//! - the provider serves on afterwards.
//!
//! Everything binds 127.0.0.1; every wait is bounded; the provider's process group is
//! killed when the test ends, however it ends.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::lab_process::{Program, config_file};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};

/// Connections that never send a byte: more than the provider's 1 024 descriptors.
const SILENT: usize = 1_100;
/// The provider's descriptor limit.
const PROVIDER_NOFILE: u32 = 1_024;
/// The provider's preface timeout in this test: long beside the time the flood takes to
/// open (0.25–0.41 s), so that the silent connections are all open at once and reach
/// the limits under test. (The flood took 5.4–7.3 s while the listen backlog was the
/// standard library's 128 — each SYN past it waited a second for its retransmission —
/// and the first connections timed out before the last were opened.)
const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on each connect and on the provider's start.
const STEP: Duration = Duration::from_secs(30);

/// The echo provider as a process with `ulimit -n 1024`: where it serves and answers
/// its admin endpoint.
struct Provider {
    serving: SocketAddr,
    admin: SocketAddr,
    _program: Program,
    _config: tempfile::TempDir,
}

impl Provider {
    /// Starts one on 127.0.0.1:0 with `max_connections` (`None`: the default limit).
    async fn start(max_connections: Option<usize>) -> Self {
        let mut config = common::config("flooded-provider");
        config.protocol.host = "127.0.0.1".to_owned();
        config.protocol.port = 0;
        config.protocol.preface_timeout = PREFACE_TIMEOUT;
        config.protocol.max_connections = max_connections;
        config.admin.host = "127.0.0.1".to_owned();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = config_file(dir.path(), "provider", &config);
        let mut command = tokio::process::Command::new("sh");
        command.args([
            "-c",
            &format!("ulimit -n {PROVIDER_NOFILE} && exec \"$0\" \"$@\""),
            env!("CARGO_BIN_EXE_lab_echo_provider"),
            path.to_str().expect("a UTF-8 path"),
        ]);
        let mut program = Program::spawn("provider", command);
        let serving = program.line_starting("serving ").await;
        let admin = program.line_starting("admin ").await;
        Self {
            serving: serving.parse().expect("a socket address"),
            admin: admin.parse().expect("a socket address"),
            _program: program,
            _config: dir,
        }
    }

    /// One echo call over a new plain tonic channel, bounded by `bound`.
    async fn call(&self, bound: Duration) -> Result<(), String> {
        let uri = format!("http://{}", self.serving);
        let call = async {
            let channel = tonic::transport::Endpoint::from_shared(uri)
                .map_err(|error| error.to_string())?
                .connect()
                .await
                .map_err(|error| format!("connect: {error}"))?;
            let request = EchoRequest {
                payload: bytes::Bytes::from_static(b"still served"),
                delay_ms: None,
            };
            let reply = EchoClient::new(channel)
                .echo(request)
                .await
                .map_err(|status| format!("call: {status}"))?;
            assert_eq!(reply.into_inner().payload, &b"still served"[..]);
            Ok(())
        };
        timeout(bound, call)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {bound:?}")))
    }

    /// A counter of its `/metrics`, by its series (name and labels).
    async fn counter(&self, series: &str) -> u64 {
        let scrape = timeout(STEP, rpc_testkit::http::get(self.admin, "/metrics"))
            .await
            .expect("the admin endpoint answers in time")
            .expect("the admin endpoint answers");
        scrape
            .body
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{series} not in {}", scrape.body))
    }
}

/// Raises this process's soft descriptor limit so that the silent connections (of both
/// tests, which run side by side) fit.
fn room_for_the_flood() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    // Both tests' silent connections, with room for everything else of the process.
    let wanted = 2 * SILENT as u64 + 512;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("the descriptor limit");
    if soft < wanted {
        assert!(
            hard >= wanted,
            "the test needs {wanted} descriptors; the hard limit is {hard}"
        );
        setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).expect("the soft limit raised");
    }
}

/// Opens `count` connections to `addr` that send nothing.
async fn open_silent(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut silent = Vec::with_capacity(count);
    for _ in 0..count {
        let stream = timeout(STEP, TcpStream::connect(addr))
            .await
            .expect("connected in time")
            .expect("connected");
        silent.push(stream);
    }
    silent
}

/// How many of `silent` the server has closed by `deadline`: reading ends, at EOF or a
/// reset, rather than waits (after what the server sent first: its SETTINGS).
async fn closed_by(silent: Vec<TcpStream>, deadline: Instant) -> usize {
    let reads = silent.into_iter().map(|mut stream| {
        tokio::spawn(async move {
            let mut buffer = [0u8; 256];
            let read_to_end = async { while let Ok(1..) = stream.read(&mut buffer).await {} };
            timeout_at(deadline, read_to_end).await.is_ok()
        })
    });
    let mut closed = 0;
    for read in reads.collect::<Vec<_>>() {
        closed += usize::from(read.await.expect("the read task ends"));
    }
    closed
}

/// The flood, the call, and what the server closed (shed, accepts short of a
/// descriptor); `max_connections` as configured.
async fn flood(max_connections: Option<usize>) -> (u64, u64) {
    room_for_the_flood();
    let provider = Provider::start(max_connections).await;
    let flood_began = Instant::now();
    let silent = open_silent(provider.serving, SILENT).await;
    let flood_took = flood_began.elapsed();
    println!("{SILENT} silent connections open after {flood_took:?}");
    assert!(
        flood_took < PREFACE_TIMEOUT / 2,
        "the flood must be open at once to test the limits: it took {flood_took:?}"
    );

    let call_began = Instant::now();
    let answered = provider.call(PREFACE_TIMEOUT / 4).await;
    println!(
        "a tonic client answered after {:?}: {answered:?}",
        call_began.elapsed()
    );
    assert_eq!(answered, Ok(()), "the client is served despite the flood");

    // Each silent connection is closed within the preface timeout of its opening (the
    // last opened before the call), with a second's margin for the reads.
    let closed = closed_by(
        silent,
        call_began + PREFACE_TIMEOUT + Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        closed, SILENT,
        "every silent connection is closed by the server"
    );

    let shed = provider
        .counter("rpc_server_connections_shed_total{reason=\"never_spoken\"}")
        .await;
    let timed_out = provider
        .counter("rpc_server_connections_preface_timeout_total")
        .await;
    let shortages = provider
        .counter("rpc_server_accept_descriptor_shortages_total")
        .await;
    println!("shed {shed}, timed out {timed_out}, accepts short of a descriptor {shortages}");
    assert_eq!(
        shed + timed_out,
        SILENT as u64,
        "each silent connection closed once, shed or timed out"
    );
    assert_eq!(
        provider
            .counter("rpc_server_connections_refused_total")
            .await,
        0
    );
    assert_eq!(
        provider.call(STEP).await,
        Ok(()),
        "served on after the flood"
    );
    (shed, shortages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_flood_is_shed_at_the_connection_limit() {
    let (shed, shortages) = flood(None).await;
    // The default limit, 896, sheds the silent ones past it (and one more for the tonic
    // client) before the descriptors run out.
    assert!(shed as usize > SILENT - 896, "shed {shed}");
    assert_eq!(
        shortages, 0,
        "the limit was reached before the descriptors ran out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_flood_past_the_descriptors_is_shed_when_accept_fails() {
    // A limit above the descriptors: `accept` fails with EMFILE, and each failure sheds.
    let (shed, shortages) = flood(Some(100_000)).await;
    assert!(shortages > 0, "accept ran out of descriptors");
    assert!(shed > 0, "descriptors were freed by shedding");
}
