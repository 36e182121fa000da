//! `POST /upgrade` on the admin endpoint, with stand-in binaries (shell scripts) as the
//! "new build": a build whose configuration check fails is reported with its own
//! message as 500 and the instance serves on; a second trigger while one is under way
//! is 409 with the reason. The full upgrade through the admin endpoint (the new process
//! answering on the inherited admin port) is `examples/tests/hot_upgrade.rs`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{Application, Config};
use rpc_testkit::http;
use rpc_testkit::services::GreeterProvider;
use serde_json::Value;

/// Writes an executable shell script `body` as `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("script written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A greeter provider whose upgrades start `binary`.
async fn provider(binary: PathBuf, ready_timeout: Duration) -> Application {
    let hub = MemoryHub::new();
    let mut config: Config = common::config("upgraded");
    config.upgrade.binary = Some(binary);
    config.upgrade.ready_timeout = ready_timeout;
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.start().await.expect("the provider starts")
}

fn json(answer: &http::Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{e}: {}", answer.body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_whose_check_fails_is_reported_with_its_message_and_the_instance_serves_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = script(
        dir.path(),
        "broken-build",
        "echo \"key \\`protocol.port\\`: not a number (in app.yaml)\" >&2; exit 2",
    );
    let app = provider(broken, Duration::from_secs(10)).await;
    let admin = app.admin_addr().expect("admin endpoint");

    let answer = http::post(admin, "/upgrade", None).await.expect("answered");
    assert_eq!(answer.status, 500, "{}", answer.body);
    let report = json(&answer);
    assert_eq!(report["result"], "failed");
    let reason = report["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("key `protocol.port`: not a number"),
        "{reason}"
    );

    let ready = http::get(admin, "/ready").await.expect("answered");
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(report["total_ms"].is_f64(), "durations in ms: {report}");
    let status = json(&http::get(admin, "/status").await.expect("answered"));
    assert_eq!(status["pid"], std::process::id());
    assert_eq!(status["last_upgrade"]["result"], "failed", "{status}");
    assert_eq!(app.lifecycle().upgrade_counts().failed, 1);
    let report = app.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}

/// Issue 36: a manual offline and an upgrade never race. An upgrade of a process with a
/// service manually offline goes ahead (the new process would start it offline; here
/// the broken build's check ends it) and the service stays offline; an offline asked
/// while the upgrade runs is refused with 409 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_service_stays_offline_through_an_upgrade_and_offline_waits_for_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = script(dir.path(), "broken-build", "echo broken >&2; exit 2");
    let app = provider(broken, Duration::from_secs(10)).await;
    let admin = app.admin_addr().expect("admin endpoint");
    assert_eq!(
        http::post(admin, "/offline", None).await.unwrap().status,
        200
    );
    let tried = http::post(admin, "/upgrade", None).await.expect("answered");
    assert_eq!(
        tried.status, 500,
        "it ran, to the broken build's check: {}",
        tried.body
    );
    assert_eq!(
        http::get(admin, "/ready").await.unwrap().status,
        503,
        "still offline"
    );
    assert_eq!(
        http::post(admin, "/online", None).await.unwrap().status,
        200
    );

    // An upgrade whose check never ends: an offline meanwhile is refused, naming it.
    let slow = script(dir.path(), "slow-build", "exec sleep 60");
    let app_slow = provider(slow, Duration::from_secs(60)).await;
    let admin = app_slow.admin_addr().expect("admin endpoint");
    let upgrade = tokio::spawn(async move { http::post(admin, "/upgrade", None).await });
    let under_way = async {
        while app_slow.lifecycle().upgrade_steps().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), under_way)
        .await
        .expect("the upgrade starts");
    let refused = http::post(admin, "/offline", None).await.expect("answered");
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("upgrade"), "{}", refused.body);
    assert_eq!(
        http::get(admin, "/ready").await.unwrap().status,
        200,
        "nothing changed"
    );
    let report = app_slow.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
    let _ = upgrade.await;
    let report = app.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_trigger_while_one_is_under_way_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Its configuration check never ends: the first upgrade stays under way.
    let slow = script(dir.path(), "slow-build", "exec sleep 60");
    let app = provider(slow, Duration::from_secs(60)).await;
    let admin = app.admin_addr().expect("admin endpoint");

    let first = tokio::spawn(async move { http::post(admin, "/upgrade", None).await });
    let under_way = async {
        while app.lifecycle().upgrade_steps().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), under_way)
        .await
        .expect("the first upgrade starts");

    let second = http::post(admin, "/upgrade", None).await.expect("answered");
    assert_eq!(second.status, 409, "{}", second.body);
    let report = json(&second);
    assert_eq!(report["result"], "refused");
    assert_eq!(report["refusal"], "in-progress");
    assert!(
        report["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("already under way"),
        "{report}"
    );
    assert_eq!(app.lifecycle().upgrade_counts().refused, 1);

    // A shutdown cuts the check short (the check process is killed) and ends as usual.
    let report = app.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
    first.abort();
}
