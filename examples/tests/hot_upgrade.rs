//! `hot-upgrade` runs, short and bounded: without a registry (with the failure paths),
//! and through etcd, ZooKeeper and Nacos (`RPC_TEST_*_URL`, as the other registry tests;
//! SKIPPED without them unless `RPC_TEST_REQUIRE_REGISTRIES=1`).
//!
//! Each run is held to `Summary::lossless`, the binary's own definition of nothing
//! lost. Its latency criterion (p99 during upgrades within max(3 × steady, steady +
//! 50 ms), `Summary::latency_within_bound`) is a wall-clock figure: runs of the
//! binary show it (docs/hot-upgrade.md), these tests do not assert it.

use std::time::Duration;

use rpc_examples::hot_upgrade::{self, ChildBehaviour, Options, StreamMode, Summary, Trigger};

fn short() -> Options {
    Options {
        rate: 300,
        duration: Duration::from_secs(6),
        upgrades: 2,
        streams: 4,
        ..Options::new(env!("CARGO_BIN_EXE_hot-upgrade").into())
    }
}

fn assert_lossless(summary: &Summary) {
    print!("{}", summary.table());
    assert_eq!(summary.failed, 0, "{:?}", summary.failure_samples);
    assert_eq!(summary.connections_refused, 0);
    assert_eq!(summary.connection_calls_failed, 0);
    assert_eq!(summary.streams_cut, 0, "{:?}", summary.failure_samples);
    assert!(summary.same_socket(), "{:?}", summary.generations);
    assert_eq!((summary.processes_at_end, summary.zombies), (1, 0));
    assert_eq!(summary.fds_after, summary.fds_before);
    match (&summary.registry, &summary.registry_presence) {
        // No registry: nothing watched, so nothing is claimed about it.
        (None, None) => {}
        (Some(_), Some(presence)) => {
            assert!(
                presence.seen,
                "the watcher never saw the instance: {presence:?}"
            );
            assert_eq!(
                presence.snapshots_without, 0,
                "snapshots without the instance during the upgrades: {presence:?}"
            );
        }
        (registry, presence) => panic!("registry {registry:?} but presence {presence:?}"),
    }
    for generation in &summary.generations {
        assert_eq!(generation.exit_code, Some(0), "{generation:?}");
    }
    assert!(summary.lossless(), "the binary's own verdict");
}

/// Two feeds of an event every 100 ms followed for 32 s (over 300 events each) through 5
/// hot upgrades of the only provider: each feed is moved at every hand-over and
/// re-opened on the new process, with no event skipped or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumable_streams_of_300_events_survive_five_upgrades() {
    let summary = hot_upgrade::run(Options {
        duration: Duration::from_secs(32),
        upgrades: 5,
        streams: 2,
        stream_mode: StreamMode::Resumable,
        ..short()
    })
    .await
    .expect("the run starts");
    assert_lossless(&summary);
    assert_eq!(summary.upgrades, 5);
    assert_eq!(
        summary.streams_opened, 2,
        "each feed opened once, followed to the end"
    );
    // Each feed moved at each upgrade; a re-open can reach the old process before its
    // GOAWAY does and be moved again at once (seen: 11 moves of 2 feeds in 5 upgrades).
    assert!(summary.streams_moved >= 2 * 5, "{}", summary.streams_moved);
    assert!(
        summary.stream_events >= 2 * 300,
        "{} events",
        summary.stream_events
    );
    let handed_over: Vec<&String> = summary
        .shutdown_reports
        .iter()
        .filter(|report| report.starts_with("handed over"))
        .collect();
    assert_eq!(handed_over.len(), 5, "{:?}", summary.shutdown_reports);
    for report in handed_over {
        let moved: usize = report
            .split("streams_moved=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        assert!(moved >= 2, "each generation moved both feeds: {report}");
        assert!(!report.contains("streams_cut"), "{report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_upgrades_lose_nothing_and_leave_one_process() {
    let summary = hot_upgrade::run(short()).await.expect("the run starts");
    assert_lossless(&summary);
    assert_eq!(summary.upgrades, 2);
    assert_eq!(summary.generations.len(), 3);

    // --plot: the timeline names the outcome and shows both upgrades.
    assert_eq!(summary.upgrade_windows.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hot-upgrade.svg");
    hot_upgrade::write_plot(&summary, &path).expect("plot written");
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.contains("0 failed of"), "the title");
    let labels = svg.lines().filter(|line| line.trim() == "upgrade").count();
    assert_eq!(labels, 2 * 2, "a band label per upgrade and chart");
}

/// `--message-size`: requests of 1 MiB (and greetings as large back) through two
/// upgrades, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_upgrades_lose_nothing_at_1_mib_messages() {
    let summary = hot_upgrade::run(Options {
        rate: 50,
        message_size: 1024 * 1024,
        ..short()
    })
    .await
    .expect("the run starts");
    assert_lossless(&summary);
    assert_eq!(summary.upgrades, 2);
}

/// Both upgrades are sent to the admin address the *first* generation printed: the
/// second reaches the second generation only because it serves the inherited admin
/// socket (the first has exited by then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_by_post_upgrade_keep_the_admin_port_across_generations() {
    let options = Options {
        trigger: Trigger::Admin,
        ..short()
    };
    let summary = hot_upgrade::run(options).await.expect("the run starts");
    assert_lossless(&summary);
    assert_eq!(summary.upgrades, 2);
}

/// The failure is reported when the new process exits, not when its ready timeout
/// passes: with a ready timeout far longer than the run, the wait for readiness ends
/// as failed (not at its bound), before the timeout could have fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_binary_that_fails_is_reported_at_its_exit_and_the_next_upgrade_succeeds() {
    let ready_timeout = Duration::from_secs(60);
    let options = Options {
        child: ChildBehaviour::Fail,
        ready_timeout,
        ..short()
    };
    let summary = hot_upgrade::run(options).await.expect("the run starts");
    assert_lossless(&summary);
    assert_eq!((summary.upgrades_failed, summary.upgrades), (1, 1));
    let failed = &summary.upgrade_details[0];
    assert!(!failed.succeeded());
    let wait = failed
        .step(lossless_rpc::lifecycle::UpgradeStep::WaitReady)
        .expect("it waited");
    assert_eq!(wait.outcome, lossless_rpc::StepOutcome::Failed, "{failed}");
    assert!(wait.duration < ready_timeout, "{failed}");
    assert!(
        failed
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("this build is broken"),
        "the new process's own stderr: {failed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_binary_that_hangs_is_killed_at_the_ready_timeout() {
    let options = Options {
        child: ChildBehaviour::Hang,
        ready_timeout: Duration::from_secs(2),
        ..short()
    };
    let summary = hot_upgrade::run(options).await.expect("the run starts");
    assert_lossless(&summary);
    assert_eq!((summary.upgrades_failed, summary.upgrades), (1, 1));
    // Ended by its bound, which cannot pass early; that the new process was then killed
    // and reaped is the one process and no zombie at the end (assert_lossless).
    let wait = summary.upgrade_details[0]
        .step(lossless_rpc::lifecycle::UpgradeStep::WaitReady)
        .expect("it waited");
    assert_eq!(
        wait.outcome,
        lossless_rpc::StepOutcome::TimedOut,
        "{wait:?}"
    );
    assert!(wait.duration >= Duration::from_secs(2), "{wait:?}");
}

/// Issue 36, "serve only when ready": a new process that binds the inherited socket and
/// starts serving, then fails in its readiness gate (1.5 s later), or hangs there until
/// the ready timeout kills it. Under the run's load — our consumer's calls, and a new
/// connection dialled every 10 ms for one plain call — nothing fails: the new process
/// accepts no connection before its gates passed, so the kernel gives every dial to the
/// old one, which serves throughout (`assert_lossless`: no failed call, no refused or
/// failed connection, one process at the end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_binary_whose_readiness_gate_fails_after_binding_takes_no_call() {
    for (child, outcome) in [
        (ChildBehaviour::GateFails, lossless_rpc::StepOutcome::Failed),
        (
            ChildBehaviour::GateHangs,
            lossless_rpc::StepOutcome::TimedOut,
        ),
    ] {
        let options = Options {
            child,
            ready_timeout: Duration::from_secs(3),
            ..short()
        };
        let summary = hot_upgrade::run(options).await.expect("the run starts");
        assert_lossless(&summary);
        assert_eq!(
            (summary.upgrades_failed, summary.upgrades),
            (1, 1),
            "{child:?}"
        );
        let wait = summary.upgrade_details[0]
            .step(lossless_rpc::lifecycle::UpgradeStep::WaitReady)
            .expect("it waited");
        assert_eq!(wait.outcome, outcome, "{child:?}: {wait:?}");
        println!(
            "{child:?}: {} new connections, {} calls on them failed",
            summary.connections_attempted, summary.connection_calls_failed
        );
    }
}

async fn through(var: &str) {
    let Ok(url) = std::env::var(var) else {
        assert!(
            std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
            "{var} is not set but RPC_TEST_REQUIRE_REGISTRIES is"
        );
        println!("SKIPPED: {var} is not set (scripts/test.sh starts the registries)");
        return;
    };
    let options = Options {
        registry: Some(url),
        ..short()
    };
    let summary = hot_upgrade::run(options).await.expect("the run starts");
    assert_lossless(&summary);
    assert_eq!(summary.upgrades, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_through_etcd_keep_the_instance_registered() {
    through("RPC_TEST_ETCD_URL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_through_zookeeper_keep_the_instance_registered() {
    through("RPC_TEST_ZOOKEEPER_URL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_through_nacos_keep_the_instance_registered() {
    through("RPC_TEST_NACOS_URL").await;
}
