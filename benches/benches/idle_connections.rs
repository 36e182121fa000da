//! Memory and CPU each idle connection costs, on each side of ours against the same side
//! of plain tonic, in one run.
//!
//! In each case this process holds one side alone and a child process (this binary
//! again, `IDLE_CONNECTIONS_ROLE` set) holds the other, so the heap counted is one
//! side's:
//!
//! - `side=provider`: our `Application` provider (metrics and tracing on) against tonic's
//!   `Server`, each with `IDLE_CONNECTIONS` connections of tonic `Channel`s from the
//!   child, every one of which made one echo call;
//! - `side=consumer`: our `Application` consumer (round robin over that many instances of
//!   a static registry, one call each, so each instance has its connection) against as
//!   many tonic `Channel`s, to as many tonic servers in the child.
//!
//! Heap: bytes that the opening of all but the first `WARM` connections allocated and
//! still hold a second after the last one's call, as dhat counts them, per connection
//! (one-time costs such as the method's metric series and the allocator's pools are
//! paid before the count). CPU, with dhat stopped: this process's user + system time
//! over the `IDLE_SECONDS` all are idle, less its rate with only `WARM` open, per
//! connection per second. The default 65 s holds one keep-alive
//! period of each side (a provider PINGs a peer silent for 30 s; our consumer PINGs an
//! idle connection every 60 s). The kernel's socket buffers are in neither figure.
//!
//! A third case per side, `plain-keepalive`, is tonic with the keep-alive our defaults
//! have (tonic sends no PINGs unless asked; an idle connection's CPU is its PINGs).
//! Prints per case `idle_connections: side=… stack=plain|plain-keepalive|rpc
//! connections=N heap_bytes_per_connection=… cpu_us_per_connection_s=…`, then per side
//! `idle_connections: side=… heap_ratio=… cpu_ratio_to_keepalive=…` (ours / plain, ours /
//! plain-keepalive).
//! `IDLE_CONNECTIONS` (default 500, at least 100), `IDLE_SECONDS` (default 65; under 61
//! the window holds no PING of some stack, and a ratio over nothing measured prints
//! `n/a`), `IDLE_CONNECTIONS_SIDES` (`provider`, `consumer`; default both);
//! `IDLE_CONNECTIONS_PROFILE=plain|rpc` runs that stack's case of the first side alone
//! and writes `dhat-heap.json` (in `benches/` under `cargo bench`) while its connections
//! are open (every allocation site and the bytes it holds "at t-end", for dhat's viewer).
//! CPU figures move with the machine's other tenants (3× on a loaded 2-core machine);
//! compare the stacks within one run.

use std::net::SocketAddr;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::cluster::{LoadBalanceKind, ReferenceConfig};
use rpc::registry::MemoryHub;
use rpc::transport::{
    DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL, DEFAULT_CLIENT_KEEPALIVE_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL, DEFAULT_KEEPALIVE_TIMEOUT,
};
use rpc::{Application, ReferenceChannel};
use rpc_benches::idle_peer::{Peer, ROLE, called, role};
use rpc_benches::stacks;
use rpc_benches::{cpu_time, env_at_least, env_name, env_names};
use rpc_testkit::services::EchoProvider;
use tonic::transport::Channel;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// dhat's profiler while a case opens its connections: counting only, or
/// (`IDLE_CONNECTIONS_PROFILE`) writing the heap of that case.
static PROFILER: std::sync::Mutex<Option<dhat::Profiler>> = std::sync::Mutex::new(None);

/// Connections opened before the first count, so one-time costs are not per connection.
const WARM: usize = 10;
/// Fewest connections a run takes (`IDLE_CONNECTIONS`): with fewer measured, the CPU
/// figure is the noise of the process's own timers.
const LEAST_CONNECTIONS: u64 = 100;
/// How long the rate of CPU with only `WARM` connections is measured.
const BASE_WINDOW: Duration = Duration::from_secs(5);
/// From the last connection's call to the heap's count: what the calls left in flight
/// (a response's buffers, a stream's last frames) is freed by then.
const SETTLE: Duration = Duration::from_secs(1);
const ECHO: &str = "echo.Echo";

/// One case's figures.
struct Idle {
    heap_bytes: f64,
    cpu_us_per_s: f64,
}

#[tokio::main]
async fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("clients") => return role::clients().await,
        Ok("servers") => return role::servers().await,
        _ => {}
    }
    let sides = env_names("IDLE_CONNECTIONS_SIDES", &["provider", "consumer"]);
    let profiled = std::env::var_os("IDLE_CONNECTIONS_PROFILE")
        .map(|_| env_name("IDLE_CONNECTIONS_PROFILE", &["plain", "rpc"]));
    let (sides, profiled) = match (sides, profiled.transpose()) {
        (Ok(sides), Ok(profiled)) => (sides, profiled),
        (Err(error), _) | (_, Err(error)) => {
            eprintln!("{error}");
            std::process::exit(2)
        }
    };
    let (connections, seconds) = match (
        env_at_least("IDLE_CONNECTIONS", 500, LEAST_CONNECTIONS),
        env_at_least("IDLE_SECONDS", 65, 1),
    ) {
        (Ok(connections), Ok(seconds)) => (connections as usize, seconds),
        (Err(error), _) | (_, Err(error)) => {
            eprintln!("{error}");
            std::process::exit(2)
        }
    };
    if seconds < 61 {
        eprintln!(
            "idle_connections: an idle window of {seconds} s holds no keep-alive PING of a \
             consumer (every 60 s), and under 31 s none of a provider: CPU is then timers only"
        );
    }
    let window = Duration::from_secs(seconds);
    if let Some(stack) = profiled {
        // One case, its heap written by dhat while every connection is still open.
        let stack = if stack == "rpc" {
            Stack::Ours
        } else {
            Stack::Plain
        };
        let idle = case(&sides[0], stack, connections, window).await;
        return print_case(&sides[0], "profiled", connections, &idle);
    }
    for side in sides {
        let plain = case(&side, Stack::Plain, connections, window).await;
        let pinging = case(&side, Stack::PlainKeepalive, connections, window).await;
        let ours = case(&side, Stack::Ours, connections, window).await;
        print_case(&side, "plain", connections, &plain);
        print_case(&side, "plain-keepalive", connections, &pinging);
        print_case(&side, "rpc", connections, &ours);
        // CPU against tonic with the same keep-alive: an idle connection's CPU is its
        // PINGs, and plain tonic sends none unless asked.
        // No CPU measured for tonic's connections (a window without a PING): no ratio.
        let cpu_ratio = if pinging.cpu_us_per_s > 0.0 {
            format!("{:.2}", ours.cpu_us_per_s / pinging.cpu_us_per_s)
        } else {
            "n/a".to_owned()
        };
        println!(
            "idle_connections: side={side} heap_ratio={:.2} cpu_ratio_to_keepalive={cpu_ratio}",
            ours.heap_bytes / plain.heap_bytes,
        );
    }
}

fn print_case(side: &str, stack: &str, connections: usize, idle: &Idle) {
    println!(
        "idle_connections: side={side} stack={stack} connections={connections} \
         heap_bytes_per_connection={:.0} cpu_us_per_connection_s={:.3}",
        idle.heap_bytes, idle.cpu_us_per_s
    );
}

/// The stacks of each side.
#[derive(Clone, Copy)]
enum Stack {
    /// Tonic as it comes: no keep-alive PINGs.
    Plain,
    /// Tonic with our defaults' keep-alive: a provider PINGs a peer silent for 30 s, a
    /// consumer PINGs an idle connection every 60 s; 10 s for the answer.
    PlainKeepalive,
    Ours,
}

/// One side held by `stack` here, with `connections` idle.
async fn case(side: &str, stack: Stack, connections: usize, window: Duration) -> Idle {
    match side {
        "provider" => provider_side(stack, connections, window).await,
        _ => consumer_side(stack, connections, window).await,
    }
}

/// A provider of `stack` held here, `connections` tonic clients idle in a child.
async fn provider_side(stack: Stack, connections: usize, window: Duration) -> Idle {
    let hub = MemoryHub::new();
    let (addr, app) = match stack {
        Stack::Plain => (stacks::plain_server().await, None),
        Stack::PlainKeepalive => (pinging_server().await, None),
        Stack::Ours => {
            let app = stacks::our_provider(&hub, true).await;
            let addr = app.local_addr().expect("the provider listens");
            (addr, Some(app))
        }
    };
    let mut clients = Peer::start("clients", &addr.to_string()).await;
    clients.ask(&format!("open {WARM}")).await;
    let more = connections - WARM;
    let idle = measure(window, more, clients.ask(&format!("open {more}"))).await;
    clients.stop().await;
    if let Some(app) = app {
        app.abort().await;
    }
    idle
}

/// A consumer of `stack` held here with one connection to each of `connections` tonic
/// servers in a child.
async fn consumer_side(stack: Stack, connections: usize, window: Duration) -> Idle {
    let mut servers = Peer::start("servers", &connections.to_string()).await;
    let addrs: Vec<SocketAddr> = servers
        .ask("addresses")
        .await
        .split(' ')
        .map(|addr| addr.parse().expect("the child prints socket addresses"))
        .collect();
    let idle = match stack {
        Stack::Plain | Stack::PlainKeepalive => {
            let pinging = matches!(stack, Stack::PlainKeepalive);
            let mut channels = Vec::new();
            for addr in &addrs[..WARM] {
                channels.push(called(plain_client(*addr, pinging).await).await);
            }
            let open_rest = async {
                for addr in &addrs[WARM..] {
                    channels.push(called(plain_client(*addr, pinging).await).await);
                }
            };
            measure(window, connections - WARM, open_rest).await
        }
        Stack::Ours => {
            let (client, app) = round_robin_consumer(&addrs).await;
            for _ in 0..WARM {
                called(client.clone()).await;
            }
            let open_rest = async {
                for _ in WARM..connections {
                    called(client.clone()).await;
                }
            };
            let idle = measure(window, connections - WARM, open_rest).await;
            app.abort().await;
            idle
        }
    };
    servers.stop().await;
    idle
}

/// Tonic's echo server on `127.0.0.1:0` with our provider's default keep-alive; its
/// address.
async fn pinging_server() -> SocketAddr {
    let (addr, incoming) = stacks::loopback_incoming().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(DEFAULT_KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(DEFAULT_KEEPALIVE_TIMEOUT))
            .add_service(EchoServer::new(EchoProvider::default()))
            .serve_with_incoming(incoming),
    );
    addr
}

/// Tonic's echo client of `addr`, connected; with our consumer's keep-alive of an idle
/// connection when `pinging`.
async fn plain_client(addr: SocketAddr, pinging: bool) -> EchoClient<Channel> {
    if !pinging {
        return stacks::plain_client(addr).await;
    }
    let channel = stacks::plain_endpoint(addr)
        .http2_keep_alive_interval(DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(DEFAULT_CLIENT_KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .connect()
        .await
        .expect("connect to the plain server");
    EchoClient::new(channel)
}

/// Our consumer of the echo service at `addrs` (a static registry), round robin so that
/// as many calls as instances reach each once.
async fn round_robin_consumer(addrs: &[SocketAddr]) -> (EchoClient<ReferenceChannel>, Application) {
    let mut config = stacks::config("consumer", true);
    let mut reference = ReferenceConfig::default();
    reference.loadbalance = LoadBalanceKind::RoundRobin;
    config
        .consumer
        .references
        .insert(ECHO.to_owned(), reference);
    stacks::our_consumer_with(config, addrs).await
}

/// The steps every case shares, with `WARM` connections open: the CPU rate with those;
/// then, with dhat counting, `open` (which opens `more`: the sockets here must grow by
/// as many) and the heap its connections hold a moment later; then, dhat stopped (it
/// takes a global lock and records a call stack at each allocation, which would be
/// counted as the connections' CPU), the CPU rate over `window`; per-connection figures.
async fn measure(window: Duration, more: usize, open: impl Future) -> Idle {
    let base_rate = cpu_rate(BASE_WINDOW).await;
    *PROFILER.lock().unwrap() = Some(match std::env::var_os("IDLE_CONNECTIONS_PROFILE") {
        // Written when dropped below, every connection open: its bytes "at t-end".
        Some(_) => dhat::Profiler::new_heap(),
        None => dhat::Profiler::builder().testing().build(),
    });
    let before = count_sockets();
    open.await;
    let opened = count_sockets() - before;
    assert!(
        opened >= more,
        "{more} connections opened, {opened} sockets more here"
    );
    tokio::time::sleep(SETTLE).await;
    let heap = dhat::HeapStats::get().curr_bytes;
    drop(PROFILER.lock().unwrap().take());
    let idle_rate = cpu_rate(window).await;
    let per_connection = |total: f64| total / more as f64;
    Idle {
        heap_bytes: per_connection(heap as f64),
        cpu_us_per_s: per_connection((idle_rate - base_rate).max(0.0)),
    }
}

/// This process's CPU time per second of wall time over `window`, in microseconds.
async fn cpu_rate(window: Duration) -> f64 {
    let start = cpu_time();
    tokio::time::sleep(window).await;
    (cpu_time() - start).as_secs_f64() * 1e6 / window.as_secs_f64()
}

/// Sockets this process has open (listeners and connections), from /proc/self/fd.
fn count_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd is readable")
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .count()
}
