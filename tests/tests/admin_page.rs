//! The admin status page in a real browser: headless Chromium loads `GET /`, runs its
//! script, and the rendered DOM shows the phase and the instances; after `POST
//! /offline` it shows the instance offline.
//!
//! Chromium is Debian's `chromium` package, which `scripts/test.sh` installs and names
//! in `RPC_TEST_CHROMIUM` (with `RPC_TEST_REQUIRE_BROWSER=1`, so that a missing browser
//! fails CI rather than skipping). Without it the test looks for `chromium` on `PATH`,
//! and skips if there is none. `RPC_TEST_SCREENSHOT=path.png` also saves a screenshot
//! of the page (how `docs/admin-page.png` was made).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc_testkit::http;
use rpc_testkit::services::GreeterProvider;

/// Longest a browser run may take before the test fails.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

/// The browser to use, or `None` to skip.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RPC_TEST_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("RPC_TEST_REQUIRE_BROWSER").is_none(),
            "RPC_TEST_REQUIRE_BROWSER is set but no chromium was found (RPC_TEST_CHROMIUM or PATH)"
        );
        eprintln!("skipped: no chromium (install Debian's `chromium`, or run scripts/test.sh)");
    }
    found
}

/// Runs headless Chromium on `url` with `action` (`--dump-dom`, `--screenshot=...`)
/// after the page's script ran for a few seconds of virtual time; returns its stdout.
async fn browse(chromium: &Path, url: &str, action: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,960",
            // The page refreshes every second: let it draw a few times.
            "--virtual-time-budget=4000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(action)
        .arg(url)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(BROWSER_TIMEOUT, run)
        .await
        .expect("chromium finishes within its bound")
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn the_page_renders_the_phase_and_the_instances_and_shows_an_offline() {
    let Some(chromium) = chromium() else {
        return;
    };
    let hub = MemoryHub::new();
    let echo = [
        common::echo_provider(&hub, 0, common::config("echo-a")).await,
        common::echo_provider(&hub, 0, common::config("echo-b")).await,
    ];
    // A gateway: provides the greeter, calls the echo providers.
    let mut builder = common::builder("gateway", &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    let mut client = EchoClient::new(builder.reference("echo.Echo"));
    let gateway = builder.start().await.unwrap();
    for _ in 0..20 {
        client
            .echo(EchoRequest {
                payload: bytes::Bytes::from_static(b"page"),
                delay_ms: None,
            })
            .await
            .unwrap();
    }
    let admin = gateway.admin_addr().unwrap();
    let url = format!("http://{admin}/");

    let page = browse(&chromium, &url, "--dump-dom").await;
    assert!(
        page.contains(r#"id="phase" class="badge ok">serving</span>"#),
        "the phase, drawn by the script: {page}"
    );
    assert!(
        page.contains(r#"<h1 id="application">gateway</h1>"#),
        "{page}"
    );
    assert!(page.contains("ready: serving and online"), "{page}");
    for provider in &echo {
        let address = provider.local_addr().unwrap().to_string();
        assert!(
            page.contains(&format!(r#"<td class="mono">{address}</td>"#)),
            "instance {address} listed: {page}"
        );
    }
    assert!(
        page.contains(r#"<td class="text-ok">healthy</td>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<td class="text-ok">registered</td>"#),
        "{page}"
    );
    if let Some(path) = std::env::var_os("RPC_TEST_SCREENSHOT") {
        let path = std::path::absolute(PathBuf::from(path)).unwrap();
        browse(&chromium, &url, &format!("--screenshot={}", path.display())).await;
        assert!(path.is_file(), "screenshot written to {}", path.display());
    }

    let offline = http::post(admin, "/offline", None).await.unwrap();
    assert_eq!(offline.status, 200, "{offline:?}");
    let page = browse(&chromium, &url, "--dump-dom").await;
    assert!(
        page.contains("not ready: manually offline: helloworld.Greeter"),
        "{page}"
    );
    assert!(
        page.contains(r#"<td class="text-warn">offline</td>"#),
        "{page}"
    );
    assert!(
        !page.contains(r#"<td class="text-ok">registered</td>"#),
        "{page}"
    );

    gateway.before_shutdown().await;
    for provider in &echo {
        provider.before_shutdown().await;
    }
}
