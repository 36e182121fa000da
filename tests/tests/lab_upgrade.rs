//! Hot upgrades with the consumer on another host (issue 26, scenario 8), in a lab of
//! network namespaces (`rpc_testkit::netlab`): etcd on host 0; the only echo provider
//! on host 1, as a process of its own (`src/bin/lab_echo_provider.rs`, started with
//! `ip netns exec`); a consumer on host 2 sending 500 idempotent calls/s of 20 ms.
//! The provider is upgraded in place five times (`POST /upgrade` on its admin endpoint,
//! from inside its host, as an operator would): each new process inherits the listening socket,
//! registers the same instance, and the old one drains and exits. No call may fail,
//! and none may be refused ("closing, not executed") or broken under it: nothing is
//! refused after a hand-over.

mod common;

use std::time::Duration;

use common::lab::{Discovery, consumer, phases};
use common::lab_process::Program;
use rpc::cluster::FailureKind;
use rpc_testkit::netlab::{Host, Lab};
use rpc_testkit::registry_server::Backend;
use rpc_tests::lab_load::{Tally, print_tallies};
use tokio::sync::{oneshot, watch};
use tokio::time::timeout;

/// Upgrades in the run.
const UPGRADES: usize = 5;
/// How long the load runs before the first upgrade and after the last.
const STEADY: Duration = Duration::from_secs(2);
/// The provider's port (a fixed one: every generation serves on the same socket).
const PORT: u16 = 31_000;
/// The provider's admin endpoint, on its host's loopback.
const ADMIN_PORT: u16 = 22_222;
/// Bound on the provider's start and on each upgrade.
const STEP: Duration = Duration::from_secs(60);
/// Nothing in this test may take longer.
const BOUND: Duration = Duration::from_secs(240);

/// Runs one hot upgrade of the provider on `host` through its admin endpoint. A refusal
/// because the previous upgrade is not over yet — the new generation refuses while its
/// predecessor drains, and the old one, whose endpoint may still take the request until
/// it exits, answers "handed over already" — is asked again, as an operator would, until
/// the upgrade is decided (bounded).
async fn upgrade(host: &Host) {
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], ADMIN_PORT));
    let asked = host.run(move || async move {
        loop {
            let answer = rpc_testkit::http::post(admin, "/upgrade", None)
                .await
                .expect("the admin endpoint answers");
            let not_over_yet = answer.status == 409
                && (answer.body.contains("\"predecessor-draining\"")
                    || answer.body.contains("\"handed-over\""));
            if !not_over_yet {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let answer = timeout(STEP, asked)
        .await
        .expect("the upgrade is decided in time");
    assert_eq!(answer.status, 200, "the upgrade succeeded: {}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_upgrades_with_the_consumer_on_another_host_lose_and_refuse_nothing() {
    let test = "hot_upgrades_with_the_consumer_on_another_host_lose_and_refuse_nothing";
    common::logs();
    let Some(lab) = Lab::for_test(test, 3) else {
        return;
    };
    let Some(etcd) = common::lab::registry_in(test, Backend::Etcd, lab.host(0)).await else {
        return;
    };
    let url = format!("{}?ttl=5s", etcd.url());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("provider.yaml");
    std::fs::write(
        &config,
        format!(
            "application: {{ name: lab-upgrade-provider, logging: false }}\n\
             registries: {{ default: {{ url: \"{url}\" }} }}\n\
             protocol: {{ host: {}, port: {PORT} }}\n\
             admin: {{ host: 127.0.0.1, port: {ADMIN_PORT} }}\n\
             graceful_shutdown: {{ timeout: 20s, step_timeout: 3s, internal_signal: true }}\n\
             upgrade: {{ ready_timeout: 20s }}\n",
            lab.host(1).address()
        ),
    )
    .expect("the provider's configuration is written");
    let mut provider = Program::start(
        "provider",
        lab.host(1),
        env!("CARGO_BIN_EXE_lab_echo_provider"),
        &[config.to_str().expect("a UTF-8 path")],
    );
    provider.line_starting("pid ").await;

    let (phase, phase_rx) = watch::channel(0);
    let (stats_tx, stats) = oneshot::channel();
    let discovery = Discovery::Url(url);
    let load = lab.host(2).run(move || async move {
        let (client, app) = consumer(discovery).await;
        let tallies = phases(&client, phase_rx).await;
        let _ = stats_tx.send(app.references()[0].stats());
        let _ = app.before_shutdown().await;
        tallies
    });
    let script = async {
        tokio::time::sleep(STEADY).await;
        phase.send_replace(1);
        let mut handed_over = Vec::new();
        for _ in 0..UPGRADES {
            upgrade(lab.host(1)).await;
            // The new generation serves; the old one drains, hands over and exits.
            provider.line_starting("pid ").await;
            handed_over.push(provider.line_starting("shutdown ").await);
        }
        phase.send_replace(2);
        tokio::time::sleep(STEADY).await;
        drop(phase);
        handed_over
    };
    let (handed_over, tallies): (Vec<String>, Vec<Tally>) =
        timeout(BOUND, async { tokio::join!(script, load) })
            .await
            .expect("the run ends within its bound");
    let stats = stats.await.expect("the consumer reports its counts");
    print_tallies(test, &tallies);
    println!(
        "{test}: {} upgrades; consumer retries: not sent {}, rejected {}, broken {}",
        handed_over.len(),
        stats.retries_after(FailureKind::NotSent),
        stats.retries_after(FailureKind::Rejected),
        stats.retries_after(FailureKind::Transport)
    );
    for report in &handed_over {
        assert!(
            report.starts_with("handed over to pid") && report.contains("clean"),
            "each old generation handed over and stopped cleanly: {report}"
        );
    }
    common::lab::assert_none_failed(test, &tallies);
    assert_eq!(tallies.len(), 3, "every phase sent calls");
    assert_eq!(
        stats.retries_after(FailureKind::Rejected),
        0,
        "nothing is refused after a hand-over"
    );
    assert_eq!(
        stats.retries_after(FailureKind::Transport),
        0,
        "no connection broke under a sent call"
    );
}
