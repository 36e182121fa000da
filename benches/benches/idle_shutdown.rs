//! How long an idle provider takes from the shutdown trigger to the end of the
//! sequence, against its offline window (500 ms by default). Target: at most the window
//! plus 0.2 s (issue 12, rule 1), and exit code 0. Three cases, 10 runs each: no client
//! at all; one idle tonic client connected (so the GOAWAY exchange is part of it); and
//! five peers that never finish a graceful close (silent, mute to the PING, half-closed,
//! ignoring GOAWAY, idle tonic: `rpc_testkit::peers`).

use std::sync::Arc;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::registry::MemoryHub;
use rpc::{Application, Config};
use rpc_testkit::measure::median;
use rpc_testkit::peers::StubbornPeers;
use rpc_testkit::services::EchoProvider;
use tokio::time::Instant;

const RUNS: usize = 10;

async fn provider(hub: &MemoryHub) -> Application {
    let mut config = Config::default();
    config.graceful_shutdown.internal_signal = false;
    config.admin.enabled = false;
    let mut builder = Application::builder(config);
    builder.registry("default", Arc::new(hub.client()));
    builder.service(EchoServer::new(EchoProvider::default()));
    builder.start().await.expect("provider starts")
}

/// Who is connected when the shutdown is triggered.
#[derive(Clone, Copy)]
enum Peers {
    None,
    IdleClient,
    Stubborn,
}

async fn measure(peers: Peers) -> Vec<f64> {
    let mut overheads = Vec::new();
    for _ in 0..RUNS {
        let hub = MemoryHub::new();
        let app = provider(&hub).await;
        let window = app.lifecycle().config().offline_request_window_timeout;
        let _stubborn = match peers {
            Peers::Stubborn => Some(StubbornPeers::connect(app.local_addr().unwrap()).await),
            _ => None,
        };
        let _client = if matches!(peers, Peers::IdleClient) {
            let addr = app.local_addr().unwrap();
            let mut client = EchoClient::connect(format!("http://{addr}")).await.unwrap();
            client
                .echo(EchoRequest {
                    payload: bytes::Bytes::from_static(b"x"),
                    delay_ms: None,
                })
                .await
                .unwrap();
            // Let the request age past the window: the provider is idle when triggered.
            tokio::time::sleep(window + Duration::from_millis(100)).await;
            Some(client)
        } else {
            None
        };
        let started = Instant::now();
        let report = app.before_shutdown().await;
        let elapsed = started.elapsed();
        assert_eq!(report.exit_code(), 0, "{report}");
        overheads.push((elapsed.as_secs_f64() - window.as_secs_f64()) * 1e3);
    }
    overheads
}

#[tokio::main]
async fn main() {
    println!(
        "idle provider, trigger to end of shutdown, minus the 500 ms offline window ({RUNS} runs)"
    );
    for (label, peers) in [
        ("no client", Peers::None),
        ("one idle client", Peers::IdleClient),
        ("5 stubborn peers", Peers::Stubborn),
    ] {
        let overheads = measure(peers).await;
        let max = overheads.iter().copied().fold(f64::MIN, f64::max);
        println!(
            "  {label:<16} median +{:.1} ms   max +{max:.1} ms   (target ≤ +200 ms)",
            median(&overheads)
        );
    }
}
