//! The admin status page in a real browser: headless Chromium loads `GET /`, runs its
//! script, and the rendered DOM shows the phase and the instances; after `POST
//! /offline` it shows the instance offline. And the admin endpoint against a real
//! browser's pages (issue 35, item 6): a page of another origin that POSTs to
//! `/offline` and `/shutdown` changes nothing, and a page reached through DNS
//! rebinding cannot read `/status`.
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
/// and the `extra` flags, after the page's script ran for a few seconds of virtual time;
/// returns its stdout.
async fn browse(chromium: &Path, url: &str, action: &str, extra: &[&str]) -> String {
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
        .args(extra)
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

    let page = browse(&chromium, &url, "--dump-dom", &[]).await;
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
        browse(
            &chromium,
            &url,
            &format!("--screenshot={}", path.display()),
            &[],
        )
        .await;
        assert!(path.is_file(), "screenshot written to {}", path.display());
    }

    let offline = http::post(admin, "/offline", None).await.unwrap();
    assert_eq!(offline.status, 200, "{offline:?}");
    let page = browse(&chromium, &url, "--dump-dom", &[]).await;
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

/// A page of another origin that, as any web page may without asking, POSTs to
/// `/offline` and `/shutdown` with `mode: "no-cors"` and a `text/plain` body, then
/// writes "done" into its DOM.
fn forging_page(admin: std::net::SocketAddr) -> String {
    format!(
        r#"<!doctype html>
<html><head><link rel="icon" href="data:,"></head><body><p id="result">pending</p>
<script>
(async () => {{
  const sent = [];
  for (const path of ["/offline", "/shutdown"]) {{
    try {{
      await fetch("http://{admin}" + path, {{
        method: "POST", mode: "no-cors", headers: {{ "Content-Type": "text/plain" }}, body: "go",
      }});
      sent.push(path + " sent");
    }} catch (error) {{
      sent.push(path + " failed: " + error);
    }}
  }}
  document.getElementById("result").textContent = "done: " + sent.join(", ");
}})();
</script></body></html>"#
    )
}

/// A page that reads `/status` of its own origin and writes the answer into its DOM:
/// what a page served from a domain rebound to 127.0.0.1 would try.
const READING_PAGE: &str = r#"<!doctype html>
<html><head><link rel="icon" href="data:,"></head><body><p id="result">pending</p>
<script>
fetch("/status", { cache: "no-store" })
  .then(async (response) => {
    document.getElementById("result").textContent =
      "read " + response.status + ": " + (await response.text());
  })
  .catch((error) => { document.getElementById("result").textContent = "failed: " + error; });
</script></body></html>"#;

/// What `GET /status` says each browser rule refused.
async fn refusals(admin: std::net::SocketAddr) -> serde_json::Value {
    let status = http::get(admin, "/status").await.unwrap();
    let status: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    status["browser_refusals"].clone()
}

/// Issue 35, item 6: a real browser loads a page of another origin (a second local
/// server, another port) whose script POSTs to `/offline` and `/shutdown`; the requests
/// reach the admin endpoint (two refusals counted) and nothing changes.
#[tokio::test]
async fn a_page_of_another_origin_cannot_take_the_provider_offline_or_stop_it() {
    let Some(chromium) = chromium() else {
        return;
    };
    let hub = MemoryHub::new();
    let provider = common::greeter_provider(&hub).await;
    let admin = provider.admin_addr().unwrap();
    let pages =
        common::page_server::PageServer::start(vec![("/forge.html", forging_page(admin))], admin)
            .await;

    let url = format!("http://{}/forge.html", pages.addr());
    let page = browse(&chromium, &url, "--dump-dom", &[]).await;
    assert!(
        page.contains("done: /offline sent, /shutdown sent"),
        "the script ran and the browser sent both: {page}"
    );
    assert_eq!(provider.phase(), rpc::Phase::Serving, "not shutting down");
    assert!(
        provider.lifecycle().offline_services().is_empty(),
        "still online"
    );
    let refused = refusals(admin).await;
    assert_eq!(
        refused["foreign_origin"], 2,
        "both reached the admin endpoint: {refused}"
    );
    let ready = http::get(admin, "/ready").await.unwrap();
    assert_eq!(ready.status, 200, "{ready:?}");
    assert_eq!(provider.before_shutdown().await.exit_code(), 0);
}

/// Issue 35, item 6: DNS rebinding in a real browser. Chromium resolves
/// `rebind.example` to 127.0.0.1 (`--host-resolver-rules`) and loads a page from it
/// whose script reads `/status` of its own origin; the page server relays that read,
/// as sent, to the admin endpoint, as the rebound name would deliver it. The read is
/// refused (the `Host` names `rebind.example`) — unless an operator lists the name in
/// `admin.allowed_hosts`, which shows the same page would otherwise read it.
#[tokio::test]
async fn a_rebound_page_cannot_read_the_status() {
    let Some(chromium) = chromium() else {
        return;
    };
    let hub = MemoryHub::new();
    let guarded = common::greeter_provider(&hub).await;
    let mut config = common::config("greeter-listed");
    config.admin.allowed_hosts = vec!["rebind.example".to_owned()];
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    let listed = builder.start().await.unwrap();
    let flags = [
        "--host-resolver-rules=MAP rebind.example 127.0.0.1",
        // Keep the page on http:// as loaded (no automatic HTTPS attempt first).
        "--disable-features=HttpsUpgrades",
    ];

    let mut reads = Vec::new();
    for app in [&guarded, &listed] {
        let admin = app.admin_addr().unwrap();
        let pages = common::page_server::PageServer::start(
            vec![("/read.html", READING_PAGE.to_owned())],
            admin,
        )
        .await;
        let url = format!("http://rebind.example:{}/read.html", pages.addr().port());
        reads.push(browse(&chromium, &url, "--dump-dom", &flags).await);
    }
    assert!(
        reads[0].contains("read 403: Host `rebind.example:")
            && reads[0].contains("admin.allowed_hosts"),
        "refused, naming the key to set: {}",
        reads[0]
    );
    assert!(
        !reads[0].contains("\"phase\""),
        "nothing of the status: {}",
        reads[0]
    );
    assert_eq!(
        refusals(guarded.admin_addr().unwrap()).await["foreign_host"],
        1
    );
    assert!(
        reads[1].contains("read 200: {") && reads[1].contains(r#""phase": "serving""#),
        "a listed name is answered: {}",
        reads[1]
    );
    for app in [guarded, listed] {
        assert_eq!(app.before_shutdown().await.exit_code(), 0);
    }
}
