//! The main job, short: 2 proxies and 2 providers rolled once under 500 requests/s on
//! the in-process registry. Graceful on: 0 failed and every restart happened.

use std::time::Duration;

use rpc_examples::rolling::{self, Options};

fn short(graceful: bool) -> Options {
    Options {
        rate: 500,
        duration: Duration::from_secs(10),
        proxies: 2,
        providers: 2,
        rounds: 1,
        graceful,
        progress: false,
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_roll_loses_no_request() {
    let summary = rolling::run(short(true)).await.expect("the run starts");
    print!("{}", summary.table());
    assert_eq!(summary.sent, 5_000);
    assert_eq!(summary.failed, 0, "{:?}", summary.failure_samples);
    assert_eq!(summary.succeeded, summary.sent);
    assert_eq!(
        summary.restarts, 4,
        "every proxy and provider was restarted"
    );
    for restart in &summary.restart_details {
        let report = restart.report.as_ref().expect("graceful restarts report");
        assert_eq!(report.exit_code(), 0, "{}: {report}", restart.instance);
        assert!(!restart.replacement.is_empty());
    }
    assert!(summary.lossless());
}

#[tokio::test]
async fn processes_mode_refuses_the_in_process_registry() {
    let options = Options {
        mode: rolling::Mode::Processes,
        ..short(true)
    };
    let error = rolling::run(options)
        .await
        .expect_err("memory:// cannot span processes");
    assert!(
        error
            .to_string()
            .contains("--mode processes needs a registry"),
        "{error}"
    );
}
