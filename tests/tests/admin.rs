//! The admin endpoint end to end: every endpoint's answer, bad input (4xx with one line,
//! never a change), the token rule, what a web page sends (refused, never a change;
//! curl's plain POST works), manual offline and online under traffic (our consumers
//! stop sending within one response, no call fails, traffic comes back), and the admin
//! port in use.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::switched_registry::{SwitchedRegistry, Switches};

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationError, Config, Phase, ReferenceChannel};
use rpc_testkit::http::{self, Answer};
use rpc_testkit::services::GreeterProvider;
use serde_json::Value;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn hello() -> HelloRequest {
    HelloRequest {
        name: "admin".to_owned(),
        count: 0,
    }
}

/// A greeter provider on `hub` with the configuration `config` (admin on a free port).
async fn provider(hub: &MemoryHub, config: Config) -> Result<Application, ApplicationError> {
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.start().await
}

/// A consumer of the greeter on `hub`, hearing of registry changes `delay` late.
async fn consumer(
    hub: &MemoryHub,
    delay: Duration,
) -> (Application, GreeterClient<ReferenceChannel>) {
    let mut builder = common::builder("consumer", hub, delay);
    let client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    (builder.start().await.expect("consumer starts"), client)
}

/// The error of a start-up that must fail.
fn refused(started: Result<Application, ApplicationError>) -> ApplicationError {
    match started {
        Ok(_) => panic!("start-up should have failed"),
        Err(error) => error,
    }
}

fn admin(app: &Application) -> SocketAddr {
    app.admin_addr()
        .expect("the admin endpoint is on by default")
}

async fn get(app: &Application, path: &str) -> Answer {
    http::get(admin(app), path)
        .await
        .expect("the admin endpoint answers")
}

async fn post(app: &Application, path: &str) -> Answer {
    http::post(admin(app), path, None)
        .await
        .expect("the admin endpoint answers")
}

fn json(answer: &Answer) -> Value {
    assert_eq!(answer.content_type.as_deref(), Some("application/json"));
    serde_json::from_str(&answer.body).expect("a JSON body")
}

/// A one-line text answer with `status`, whose line contains `needle`.
#[track_caller]
fn assert_line(answer: &Answer, status: u16, needle: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.body.lines().count(), 1, "one line: {answer:?}");
    assert!(answer.body.contains(needle), "`{needle}` in {answer:?}");
    assert!(
        answer
            .content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/plain")),
        "{answer:?}"
    );
}

async fn health(app: &Application, service: &str) -> ServingStatus {
    let addr = app.local_addr().expect("a provider");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let status = client
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    ServingStatus::try_from(status).unwrap()
}

#[tokio::test]
async fn probes_status_and_page_answer_and_shutdown_runs_the_sequence() {
    common::logs();
    let hub = MemoryHub::new();
    let provider = provider(&hub, common::config("greeter-provider"))
        .await
        .unwrap();
    let (consumer, mut client) = consumer(&hub, Duration::ZERO).await;
    let provider_addr = provider.local_addr().unwrap().to_string();
    for _ in 0..5 {
        client.say_hello(hello()).await.unwrap();
    }

    assert_line(&get(&provider, "/live").await, 200, "live (phase serving)");
    assert_line(&get(&provider, "/startup").await, 200, "started");
    assert_line(
        &get(&provider, "/ready").await,
        200,
        "ready: serving and online",
    );

    let status = json(&get(&provider, "/status").await);
    assert_eq!(status["application"], "greeter-provider");
    assert_eq!(status["phase"], "serving");
    let phases: Vec<&str> = status["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["created", "starting", "serving"]);
    assert_eq!(status["probes"]["ready"]["passed"], true);
    assert_eq!(status["listeners"][0], provider_addr);
    let registration = &status["registries"][0]["registrations"][0];
    assert_eq!(status["registries"][0]["registry"], "memory://");
    assert_eq!(registration["service"], "helloworld.Greeter");
    assert_eq!(registration["address"], provider_addr);
    assert_eq!(registration["state"], "registered");
    assert_eq!(status["in_flight"]["inbound"], 0);

    let status = json(&get(&consumer, "/status").await);
    let reference = &status["references"][0];
    assert_eq!(reference["service"], "helloworld.Greeter");
    assert_eq!(reference["loadbalance"], "p2c");
    assert_eq!(reference["calls"], 5);
    let instance = &reference["instances"][0];
    assert_eq!(instance["address"], provider_addr);
    assert_eq!(instance["weight"], 100);
    assert_eq!(instance["state"], "healthy");
    assert_eq!(instance["in_flight"], 0);
    assert_eq!(instance["dispatched"], 5);
    assert!(instance["latency_ms"].as_f64().unwrap() > 0.0);

    let page = get(&provider, "/").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.content_type.as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert!(
        page.body.contains("fetch(\"status\""),
        "the page draws /status"
    );
    assert!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "no external asset"
    );

    let metrics = get(&provider, "/metrics").await;
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert_eq!(
        metrics.content_type.as_deref(),
        Some(rpc::Metrics::CONTENT_TYPE)
    );
    assert!(
        metrics
            .body
            .contains(r#"rpc_lifecycle_phase{phase="serving"} 1"#),
        "{}",
        metrics.body
    );

    // POST /shutdown answers at once and runs the same sequence as SIGTERM; the admin
    // endpoint answers (not ready) until step 6 closes it. Step 2 waits for one quiet
    // offline window (500 ms): status and metrics show the sequence meanwhile.
    let mut phases = provider.watch_phase();
    assert_line(
        &post(&provider, "/shutdown").await,
        202,
        "graceful shutdown started",
    );
    phases
        .wait_for(|p| *p >= Phase::WaitingForConsumers)
        .await
        .unwrap();
    assert_line(
        &get(&provider, "/ready").await,
        503,
        "not ready: shutting down",
    );
    assert_line(&get(&provider, "/live").await, 200, "live");
    let status = json(&get(&provider, "/status").await);
    assert_eq!(status["shutdown"]["steps"][0]["step"], "unregister");
    assert_eq!(status["shutdown"]["steps"][0]["outcome"], "completed");
    let metrics = get(&provider, "/metrics").await.body;
    assert!(
        metrics.contains(r#"rpc_lifecycle_phase{phase="serving"} 0"#),
        "the scrape sees the phase move: {metrics}"
    );
    let report = provider.wait().await;
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.steps.len(), 7, "the whole sequence ran");
    assert!(
        http::get(admin(&provider), "/live").await.is_err(),
        "closed in step 6"
    );
    consumer.before_shutdown().await;
}

/// Issue 36: a registration its registry client is writing again (a lost session) shows
/// in `/status` and in `rpc_registrations_pending`, and stops showing once it holds.
#[tokio::test]
async fn a_registration_written_again_shows_in_status_and_metrics() {
    let hub = MemoryHub::new();
    let switches = Switches::default();
    let restoring = switches.reregistering.clone();
    let unwritable = switches.unwritable.clone();
    let mut builder = Application::builder(common::config("greeter-provider"));
    builder.registry(
        "default",
        Arc::new(SwitchedRegistry {
            inner: hub.client(),
            switches,
        }),
    );
    builder.service(GreeterServer::new(GreeterProvider));
    let provider = builder.start().await.expect("provider starts");
    let shows = |pending: bool| {
        let provider = &provider;
        async move {
            let status = json(&get(provider, "/status").await);
            let state = &status["registries"][0]["registrations"][0]["state"];
            let metrics = get(provider, "/metrics").await.body;
            let gauge = format!("rpc_registrations_pending {}\n", u8::from(pending));
            assert_eq!(
                status["pending_registrations"],
                u8::from(pending),
                "{status}"
            );
            assert!(metrics.contains(&gauge), "{gauge} in {metrics}");
            state.as_str().unwrap_or_default().to_owned()
        }
    };
    assert_eq!(shows(false).await, "registered");
    restoring.store(true, Ordering::SeqCst);
    assert_eq!(shows(true).await, "reregistering");
    restoring.store(false, Ordering::SeqCst);
    assert_eq!(shows(false).await, "registered");

    // An offline whose withdrawal the registry refuses: offline all the same, the
    // withdrawal retried until the registry takes it.
    let key = rpc::ServiceKey::new("helloworld.Greeter");
    unwritable.store(true, Ordering::SeqCst);
    assert_eq!(post(&provider, "/offline").await.status, 200);
    assert_eq!(shows(true).await, "withdrawing");
    assert_eq!(hub.instances(&key).len(), 1, "still listed");
    unwritable.store(false, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !hub.instances(&key).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the withdrawal held within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shows(false).await, "offline");
    assert_eq!(post(&provider, "/online").await.status, 200);
    assert_eq!(shows(false).await, "registered");
    let status = json(&get(&provider, "/status").await);
    let registration = &status["registries"][0]["registrations"][0];
    assert_eq!(registration["online_revision"], "1", "{status}");
    provider.before_shutdown().await;
}

#[tokio::test]
async fn without_metrics_get_metrics_says_so() {
    let hub = MemoryHub::new();
    let mut config = common::config("greeter-provider");
    config.metrics.enabled = false;
    let provider = provider(&hub, config).await.unwrap();
    assert_line(&get(&provider, "/metrics").await, 404, "metrics are off");
    provider.before_shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_a_one_line_4xx_and_changes_nothing() {
    let hub = MemoryHub::new();
    let provider = provider(&hub, common::config("greeter-provider"))
        .await
        .unwrap();

    assert_line(
        &get(&provider, "/nope").await,
        404,
        "no such endpoint: /nope",
    );
    let wrong = get(&provider, "/offline").await;
    assert_line(
        &wrong,
        405,
        "GET /offline is not allowed: it changes state: use POST",
    );
    assert_eq!(wrong.allow.as_deref(), Some("POST"));
    assert_line(&get(&provider, "/shutdown").await, 405, "use POST");
    assert_line(
        &post(&provider, "/status").await,
        405,
        "POST /status is not allowed",
    );
    assert_line(&post(&provider, "/ready").await, 405, "use GET");
    // The hint follows the endpoint, whatever the method.
    let put = http::request(admin(&provider), "PUT", "/upgrade", None)
        .await
        .expect("the admin endpoint answers");
    assert_line(
        &put,
        405,
        "PUT /upgrade is not allowed: it changes state: use POST",
    );
    // An endpoint that takes no parameter refuses one rather than acting without it.
    assert_line(
        &post(&provider, "/upgrade?dry_run=1").await,
        400,
        "unknown field `dry_run`",
    );
    assert_line(
        &post(&provider, "/shutdown?now=1").await,
        400,
        "unknown field `now`",
    );
    assert_line(
        &post(&provider, "/offline?service=helloworld.(Greeter").await,
        400,
        "service: `helloworld.(Greeter` is not a valid regex: unclosed group",
    );
    assert_line(
        &post(&provider, "/offline?service=a)|(b").await,
        400,
        "not a valid regex",
    );
    assert_line(
        &post(&provider, "/offline?colour=blue").await,
        400,
        "unknown field `colour`",
    );
    assert_line(
        &post(&provider, "/offline?service=org.example.Nope").await,
        404,
        "offline: service `org.example.Nope`: no provided service matches (provided: helloworld.Greeter)",
    );
    // The regex must match the whole name.
    assert_line(
        &post(&provider, "/online?service=Greeter").await,
        404,
        "no provided service matches",
    );
    // A body is refused, whatever its type: a JSON selection would otherwise be ignored
    // and every service taken offline.
    let host = admin(&provider).to_string();
    let json = [
        ("host", host.as_str()),
        ("content-type", "application/json"),
    ];
    let body = r#"{"service":"nope"}"#;
    for path in ["/offline", "/online", "/shutdown", "/upgrade"] {
        let answer = http::request_as(admin(&provider), "POST", path, &json, body)
            .await
            .expect("the admin endpoint answers");
        assert_line(
            &answer,
            415,
            &format!("POST {path} takes no body (18 bytes of application/json sent)"),
        );
    }

    // Nothing changed.
    assert_line(
        &get(&provider, "/ready").await,
        200,
        "ready: serving and online",
    );
    assert_eq!(provider.lifecycle().registrations().len(), 1);
    provider.before_shutdown().await;
}

#[tokio::test]
async fn beyond_loopback_a_token_is_required_and_every_state_change_carries_it() {
    let hub = MemoryHub::new();
    let mut config = common::config("greeter-provider");
    config.admin.host = "0.0.0.0".to_owned();
    let error = refused(provider(&hub, config.clone()).await).to_string();
    assert!(error.contains("admin.token"), "{error}");
    assert!(error.contains("RPC_ADMIN__TOKEN"), "{error}");

    config.admin.token = Some("s3cret".to_owned());
    let provider = provider(&hub, config).await.unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], admin(&provider).port()));
    let missing = http::post(addr, "/offline", None).await.unwrap();
    assert_line(&missing, 401, "Authorization: Bearer");
    let wrong = http::post(addr, "/offline", Some("guess")).await.unwrap();
    assert_line(&wrong, 401, "wrong admin token");
    assert_line(
        &http::post(addr, "/shutdown", None).await.unwrap(),
        401,
        "Bearer",
    );
    // Reading needs no token.
    assert_line(&http::get(addr, "/ready").await.unwrap(), 200, "ready");
    assert_eq!(provider.phase(), Phase::Serving, "nothing changed");

    let offline = http::post(addr, "/offline", Some("s3cret")).await.unwrap();
    assert_eq!(offline.status, 200, "{offline:?}");
    let online = http::post(addr, "/online", Some("s3cret")).await.unwrap();
    assert_eq!(online.status, 200, "{online:?}");
    provider.before_shutdown().await;
}

/// The provider is serving, online, and no shutdown began: what a refused request must
/// leave untouched.
#[track_caller]
fn untouched(provider: &Application) {
    assert_eq!(provider.phase(), Phase::Serving, "no shutdown, no upgrade");
    assert!(
        provider.lifecycle().offline_services().is_empty(),
        "nothing taken offline"
    );
}

/// The four endpoints that change state.
const CHANGING: [&str; 4] = ["/offline", "/online", "/shutdown", "/upgrade"];

/// Issue 35, item 6: what a page in a browser sends to each endpoint that changes state
/// — a foreign `Origin`, a `text/plain` body, no token, the `Sec-Fetch-*` headers — is
/// refused with a one-line 403 or 415 before any handler runs, and changes nothing;
/// the endpoint never answers a preflight with a CORS grant.
#[tokio::test]
async fn a_web_page_cannot_change_state() {
    let hub = MemoryHub::new();
    let provider = provider(&hub, common::config("greeter-provider"))
        .await
        .unwrap();
    let addr = admin(&provider);
    let host = addr.to_string();
    let page = |origin| {
        [
            ("host", host.clone()),
            ("origin", origin),
            ("content-type", "text/plain;charset=UTF-8".to_owned()),
            ("sec-fetch-site", "cross-site".to_owned()),
            ("sec-fetch-mode", "no-cors".to_owned()),
        ]
    };
    let send = async |method: &str, path: &str, headers: &[(&str, String)], body: &str| {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        http::request_as(addr, method, path, &headers, body)
            .await
            .expect("the admin endpoint answers")
    };

    for path in CHANGING {
        let forged = send("POST", path, &page("http://evil.example".to_owned()), "go").await;
        assert_line(
            &forged,
            403,
            &format!("Origin `http://evil.example` is not this endpoint (http://{host})"),
        );
        untouched(&provider);
        // Another port of the same host is another origin.
        let other_port = format!("http://127.0.0.1:{}", addr.port() + 1);
        assert_line(
            &send("POST", path, &page(other_port), "").await,
            403,
            "is not this endpoint",
        );
        // Without Origin (a page cannot drop it, but the rules stand alone): a simple
        // content type is refused, and so is a browser's POST without a custom header.
        let text_body = [
            ("host", host.clone()),
            ("content-type", "text/plain".to_owned()),
        ];
        assert_line(
            &send("POST", path, &text_body, "go").await,
            415,
            "takes no body",
        );
        let no_cors = [
            ("host", host.clone()),
            ("sec-fetch-mode", "no-cors".to_owned()),
        ];
        assert_line(
            &send("POST", path, &no_cors, "").await,
            403,
            "must carry `X-Rpc-Admin: 1`",
        );
        untouched(&provider);

        let preflight = [
            ("host", host.clone()),
            ("origin", "http://evil.example".to_owned()),
            ("access-control-request-method", "POST".to_owned()),
            ("access-control-request-headers", "x-rpc-admin".to_owned()),
        ];
        for headers in [&preflight[..], &preflight[..1]] {
            let answer = send("OPTIONS", path, headers, "").await;
            assert!(matches!(answer.status, 403 | 405), "{answer:?}");
            assert!(
                answer
                    .headers
                    .keys()
                    .all(|name| !name.as_str().starts_with("access-control-")),
                "never a CORS grant: {answer:?}"
            );
        }
    }
    assert_line(
        &get(&provider, "/ready").await,
        200,
        "ready: serving and online",
    );
    let refused = &json(&get(&provider, "/status").await)["browser_refusals"];
    assert_eq!(refused["foreign_origin"], 4 * 2 + 4, "{refused}");
    assert_eq!(refused["simple_content_type"], 4, "{refused}");
    assert_eq!(refused["browser_post"], 4, "{refused}");
    provider.before_shutdown().await;
}

/// Issue 35, item 6: a page on a domain that resolves to this host (DNS rebinding)
/// sends its own name as `Host`: reading is refused naming `admin.allowed_hosts`, the
/// probes still answer, and a listed name is answered.
#[tokio::test]
async fn a_foreign_host_is_refused_except_by_the_probes_and_a_listed_name_is_answered() {
    let hub = MemoryHub::new();
    let mut config = common::config("greeter-provider");
    config.admin.allowed_hosts = vec!["greeter.internal".to_owned()];
    let provider = provider(&hub, config).await.unwrap();
    let addr = admin(&provider);
    let as_host = async |host: &str, path: &str| {
        http::request_as(addr, "GET", path, &[("host", host)], "")
            .await
            .expect("the admin endpoint answers")
    };
    let rebound = format!("rebind.example:{}", addr.port());
    for path in ["/status", "/metrics", "/", "/nope"] {
        assert_line(
            &as_host(&rebound, path).await,
            403,
            &format!("Host `{rebound}` does not name this endpoint"),
        );
    }
    assert_line(
        &as_host(&rebound, "/status").await,
        403,
        "admin.allowed_hosts",
    );
    assert_line(&as_host(&rebound, "/live").await, 200, "live");
    assert_line(&as_host(&rebound, "/ready").await, 200, "ready");
    assert_line(&as_host(&rebound, "/startup").await, 200, "started");

    let listed = format!("Greeter.Internal:{}", addr.port());
    assert_eq!(json(&as_host(&listed, "/status").await)["phase"], "serving");
    assert_eq!(
        as_host(&format!("localhost:{}", addr.port()), "/status")
            .await
            .status,
        200
    );
    assert_eq!(
        as_host(&format!("[::1]:{}", addr.port()), "/status")
            .await
            .status,
        200
    );
    let missing = http::request_as(addr, "GET", "/status", &[], "")
        .await
        .unwrap();
    assert_line(&missing, 400, "no Host header");
    assert_eq!(
        json(&get(&provider, "/status").await)["browser_refusals"]["foreign_host"],
        5
    );
    provider.before_shutdown().await;
}

/// What docs/lifecycle.md, getting-started.md and upgrade.md show: `curl -X POST` (no
/// Origin, no Sec-Fetch-*, no body) works as it always did, and so does a browser's POST
/// from the endpoint's own origin with `X-Rpc-Admin`.
#[tokio::test]
async fn curl_post_works_as_documented() {
    let hub = MemoryHub::new();
    let provider = provider(&hub, common::config("greeter-provider"))
        .await
        .unwrap();
    let addr = admin(&provider);
    let host = addr.to_string();
    let curl = [
        ("host", host.as_str()),
        ("user-agent", "curl/8.5.0"),
        ("accept", "*/*"),
    ];
    let offline = http::request_as(addr, "POST", "/offline", &curl, "")
        .await
        .unwrap();
    assert_eq!(offline.status, 200, "{offline:?}");
    assert_eq!(json(&offline)["offline_now"][0], "helloworld.Greeter");
    let own_origin = format!("http://{host}");
    let own_page = [
        ("host", host.as_str()),
        ("origin", own_origin.as_str()),
        ("sec-fetch-site", "same-origin"),
        ("sec-fetch-mode", "cors"),
        ("x-rpc-admin", "1"),
    ];
    let online = http::request_as(addr, "POST", "/online", &own_page, "")
        .await
        .unwrap();
    assert_eq!(online.status, 200, "{online:?}");
    untouched(&provider);
    let shutdown = http::request_as(addr, "POST", "/shutdown", &curl, "")
        .await
        .unwrap();
    assert_line(&shutdown, 202, "graceful shutdown started");
    assert_eq!(provider.wait().await.exit_code(), 0);
}

/// Sends one call and returns which provider answered; panics on a failure: the point
/// is that none fails.
async fn call(client: &mut GreeterClient<ReferenceChannel>) -> String {
    client
        .say_hello(hello())
        .await
        .expect("no call fails")
        .into_inner()
        .provider
}

#[tokio::test]
async fn offline_moves_consumers_away_within_one_response_and_online_brings_them_back() {
    common::logs();
    let hub = MemoryHub::new();
    let a = provider(&hub, common::config("provider-a")).await.unwrap();
    let b = provider(&hub, common::config("provider-b")).await.unwrap();
    let a_addr = a.local_addr().unwrap().to_string();
    // The registry tells this consumer 500 ms late: until then, only the closing mark
    // on A's responses can move it away.
    let (consumer, mut client) = consumer(&hub, Duration::from_millis(500)).await;

    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..40 {
        *calls.entry(call(&mut client).await).or_default() += 1;
    }
    assert_eq!(calls.len(), 2, "both providers in use: {calls:?}");

    let offline = post(&a, "/offline").await;
    assert_eq!(offline.status, 200, "{offline:?}");
    let changed = json(&offline);
    assert_eq!(changed["action"], "offline");
    assert_eq!(changed["changed"][0]["service"], "helloworld.Greeter");
    assert_eq!(changed["changed"][0]["registries"][0], "memory://");
    assert_eq!(changed["offline_now"][0], "helloworld.Greeter");
    assert_eq!(a.phase(), Phase::Serving, "offline does not stop");
    assert_line(
        &get(&a, "/ready").await,
        503,
        "not ready: manually offline: helloworld.Greeter",
    );
    assert_line(&get(&a, "/startup").await, 200, "started");
    assert_eq!(
        health(&a, "helloworld.Greeter").await,
        ServingStatus::NotServing
    );
    assert_eq!(health(&a, "").await, ServingStatus::NotServing);
    let status = json(&get(&a, "/status").await);
    assert_eq!(
        status["registries"][0]["registrations"][0]["state"],
        "offline"
    );

    // Within one response: at most the call that brought the closing mark reaches A.
    let mut after_offline = 0u64;
    for _ in 0..100 {
        if call(&mut client).await == a_addr {
            after_offline += 1;
        }
    }
    assert!(
        after_offline <= 1,
        "{after_offline} calls reached A after offline"
    );
    assert_eq!(
        consumer.references()[0].stats().blacklist.closing_marks,
        after_offline,
        "the call that reached A brought back the closing mark"
    );
    // Asked again: nothing left to change.
    let again = json(&post(&a, "/offline").await);
    assert_eq!(again["changed"], Value::Array(Vec::new()));

    let online = post(&a, "/online").await;
    assert_eq!(online.status, 200, "{online:?}");
    assert_eq!(json(&online)["changed"][0]["service"], "helloworld.Greeter");
    assert_line(&get(&a, "/ready").await, 200, "ready");
    assert_eq!(health(&a, "").await, ServingStatus::Serving);
    // Traffic comes back once the consumer hears of the registration (bounded).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut back = false;
    while !back && tokio::time::Instant::now() < deadline {
        back = call(&mut client).await == a_addr;
    }
    assert!(back, "A never answered again after online");

    consumer.before_shutdown().await;
    for provider in [&a, &b] {
        assert_eq!(provider.before_shutdown().await.exit_code(), 0);
    }
}

#[tokio::test]
async fn offline_of_one_service_leaves_the_others_in_traffic_and_is_refused_during_shutdown() {
    let hub = MemoryHub::new();
    let mut builder = common::builder("two-services", &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.service(proto::echo::echo_server::EchoServer::new(
        rpc_testkit::services::EchoProvider::default(),
    ));
    let app = builder.start().await.unwrap();

    let changed = json(&post(&app, "/offline?service=echo%5C.Echo").await);
    assert_eq!(changed["changed"].as_array().unwrap().len(), 1);
    assert_eq!(changed["changed"][0]["service"], "echo.Echo");
    assert_eq!(health(&app, "echo.Echo").await, ServingStatus::NotServing);
    assert_eq!(
        health(&app, "helloworld.Greeter").await,
        ServingStatus::Serving
    );
    let states: BTreeMap<String, String> =
        json(&get(&app, "/status").await)["registries"][0]["registrations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["service"].as_str().unwrap().to_owned(),
                    r["state"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
    assert_eq!(states["echo.Echo"], "offline");
    assert_eq!(states["helloworld.Greeter"], "registered");

    // During shutdown: refused, saying why.
    let mut phases = app.watch_phase();
    let shutdown = tokio::spawn(app.before_shutdown());
    phases
        .wait_for(|p| *p >= Phase::Unregistering)
        .await
        .unwrap();
    let refused = post(&app, "/offline").await;
    assert_line(
        &refused,
        409,
        "offline refused: the application is shutting down",
    );
    assert_line(&post(&app, "/online").await, 409, "online refused");
    assert_eq!(shutdown.await.unwrap().exit_code(), 0);
}

#[tokio::test]
async fn the_admin_port_in_use_fails_start_up_naming_admin_port_and_start_up_undoes_itself() {
    let hub = MemoryHub::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut config = common::config("greeter-provider");
    config.admin.port = port;
    let error = refused(provider(&hub, config.clone()).await);
    let message = error.to_string();
    assert!(matches!(error, ApplicationError::Admin(_)), "{message}");
    assert!(message.contains("admin.port"), "{message}");
    assert!(
        message.contains("is in use") && message.contains("another instance on this host"),
        "{message}"
    );

    // A failure later in start-up closes the admin endpoint again: its port is free.
    drop(taken);
    let mut failing = config.clone();
    failing.consumer.check_timeout = Duration::from_millis(100);
    let mut builder = common::builder_with(failing, &hub, Duration::ZERO);
    let _client = builder.reference("org.example.Missing");
    assert!(
        builder.start().await.is_err(),
        "no provider of the reference"
    );
    let app = provider(&hub, config)
        .await
        .expect("the admin port was released");
    assert_eq!(admin(&app).port(), port);
    app.before_shutdown().await;
}
