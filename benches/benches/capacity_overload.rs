//! Overload of a provider whose capacity is its own, with the adaptive concurrency limit
//! (`provider.limit`) off and on.
//!
//! The provider's handler needs one of `WORKERS` workers (a semaphore) for `WORK` (a
//! sleep): it serves at most about `WORKERS / WORK` requests a second, as a service
//! bound by a database pool or a thread pool does, while this machine keeps CPU to spare
//! (the whole chain then costs a fraction of a core). The capacity is measured first:
//! closed-loop calls, twice as many as the workers, for 2 s (a sleep lasts a little
//! longer than asked, so it is below the nominal 2 000 req/s). That is the overload a provider's limit
//! is for. (`benches/overload.sh` overloads the whole machine instead: every instance
//! and the load client share two cores, so refusing costs as much CPU as serving.)
//!
//! One consumer (a reference, default stack, 1 s timeout per attempt: a caller's
//! deadline) sends open-loop load through the in-process registry to one provider. Each
//! run starts fresh applications, warms them at half the capacity for `OVERLOAD_WARM_MS`
//! (so the limit learns the healthy round-trip time, as a provider in service has), then
//! measures `OVERLOAD_MILLIS` at the rate of the row: the reference at 0.67× capacity,
//! then 1.1× and 1.5×, each with the limit off and on. Goodput is successful calls per
//! second of sending; `p99_ok_ms` the p99 of the successful calls; `xref` that p99 over
//! the reference's. The last line, `overload: goodput=X p99_ratio=Y`, is the limit on at
//! 1.5× (issue 16 asks goodput ≥ 0.9× capacity and p99 ≤ 5× the steady p99). The
//! limit's floor (`min_limit`) is 40: at or above the requests the instance is meant to
//! run at once (its workers and as many waiting), as the configuration reference advises.
//!
//! Environment: `OVERLOAD_MILLIS` per measured run (default 10 000), `OVERLOAD_WARM_MS`
//! (default 3 000).

use std::sync::Arc;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use rpc::registry::MemoryHub;
use rpc::{Application, ReferenceChannel};
use rpc_benches::stacks::config;
use rpc_benches::{drive, env_u64};
use rpc_testkit::load::{self, LoadOptions, LoadRecord};
use tokio::sync::Semaphore;

/// Workers of the provider: requests it serves at once.
const WORKERS: usize = 20;
/// How long a request holds its worker (10 ms: long against the timer's 1 ms grain).
const WORK: Duration = Duration::from_millis(10);

/// An echo service with `WORKERS` workers, each busy for `WORK` per request.
#[derive(Clone)]
struct Pooled {
    workers: Arc<Semaphore>,
}

#[tonic::async_trait]
impl Echo for Pooled {
    async fn echo(
        &self,
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<EchoReply>, tonic::Status> {
        let _worker = self
            .workers
            .acquire()
            .await
            .map_err(|_| tonic::Status::unavailable("workers closed"))?;
        tokio::time::sleep(WORK).await;
        Ok(tonic::Response::new(EchoReply {
            payload: request.into_inner().payload,
            provider: String::new(),
        }))
    }
}

/// A provider with the limit on or off and a consumer of it; the consumer's stub and
/// both applications.
async fn chain(limit: bool) -> (EchoClient<ReferenceChannel>, [Application; 2]) {
    let hub = MemoryHub::new();
    let mut provider_config = config("pooled-provider", true);
    provider_config.provider.limit.enabled = limit;
    // As the configuration reference advises: the floor at about the concurrency the
    // instance is meant to run (its workers and as many waiting), not the default 50.
    provider_config.provider.limit.min_limit = 2 * WORKERS as u32;
    let mut provider = Application::builder(provider_config);
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(Pooled {
        workers: Arc::new(Semaphore::new(WORKERS)),
    }));
    let provider = provider.start().await.expect("the provider starts");
    let mut consumer_config = config("overload-consumer", true);
    consumer_config
        .consumer
        .references
        .entry("echo.Echo".to_owned())
        .or_default()
        .timeout = Some(Duration::from_secs(1));
    let mut consumer = Application::builder(consumer_config);
    consumer.registry("default", Arc::new(hub.client()));
    let client = EchoClient::new(consumer.reference("echo.Echo"));
    let consumer = consumer.start().await.expect("the consumer starts");
    (client, [consumer, provider])
}

/// Open-loop load of `rate` req/s for `duration` through `client`.
async fn load(client: &EchoClient<ReferenceChannel>, rate: u32, duration: Duration) -> LoadRecord {
    let payload = bytes::Bytes::from_static(&[7u8; 64]);
    load::run(
        LoadOptions::new(rate, duration),
        |_| {
            let mut client = client.clone();
            let request = EchoRequest {
                payload: payload.clone(),
                delay_ms: None,
            };
            async move { client.echo(request).await.map(|_| String::new()) }
        },
        |_| {},
    )
    .await
}

/// One row: fresh applications, warmed, then measured at `rate`.
struct Row {
    rate: u32,
    limit: bool,
    goodput: f64,
    failed: u64,
    p99_ok_ms: f64,
    failed_by_code: String,
}

/// Requests a second the provider serves when saturated, closed loop, limit off.
async fn capacity() -> u32 {
    let (client, apps) = chain(false).await;
    let call = move || {
        let mut client = client.clone();
        async move {
            let request = EchoRequest {
                payload: bytes::Bytes::from_static(&[7u8; 64]),
                delay_ms: None,
            };
            if let Err(status) = client.echo(request).await {
                panic!("calibration echo succeeds: {status}");
            }
        }
    };
    let measured = drive(call, 2 * WORKERS, Duration::from_secs(2)).await;
    for app in apps {
        app.before_shutdown().await;
    }
    measured.qps as u32
}

async fn row(capacity: u32, rate: u32, limit: bool, warm: Duration, measured: Duration) -> Row {
    let (client, apps) = chain(limit).await;
    load(&client, capacity / 2, warm).await;
    let record = load(&client, rate, measured).await;
    for app in apps {
        app.before_shutdown().await;
    }
    let failed_by_code = if record.failed_by_code.is_empty() {
        "none".to_owned()
    } else {
        record
            .failed_by_code
            .iter()
            .map(|(code, n)| format!("{code}={n}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    Row {
        rate,
        limit,
        goodput: record.succeeded as f64 / measured.as_secs_f64(),
        failed: record.failed(),
        p99_ok_ms: record.succeeded_latency.value_at_quantile(0.99) as f64 / 1e3,
        failed_by_code,
    }
}

#[tokio::main]
async fn main() {
    let measured = Duration::from_millis(env_u64("OVERLOAD_MILLIS", 10_000));
    let warm = Duration::from_millis(env_u64("OVERLOAD_WARM_MS", 3_000));
    let capacity = capacity().await;
    let reference = row(capacity, capacity * 2 / 3, false, warm, measured).await;
    println!(
        "capacity {capacity} req/s measured ({WORKERS} workers × {} ms); {} s per run after {} s at half capacity",
        WORK.as_millis(),
        measured.as_secs_f64(),
        warm.as_secs_f64()
    );
    println!(
        "{:>6} {:>5} {:>8} {:>9} {:>7} {:>9} {:>6}  failed_by_code",
        "rate", "limit", "goodput", "xcapacity", "failed", "p99_ok_ms", "xref"
    );
    let print = |row: &Row| {
        println!(
            "{:>6} {:>5} {:>8.0} {:>9.2} {:>7} {:>9.2} {:>6.1}  {}",
            row.rate,
            if row.limit { "on" } else { "off" },
            row.goodput,
            row.goodput / f64::from(capacity),
            row.failed,
            row.p99_ok_ms,
            row.p99_ok_ms / reference.p99_ok_ms,
            row.failed_by_code
        );
    };
    print(&reference);
    let mut last = None;
    for rate in [capacity * 11 / 10, capacity * 3 / 2] {
        for limit in [false, true] {
            let row = row(capacity, rate, limit, warm, measured).await;
            print(&row);
            last = Some(row);
        }
    }
    if let Some(row) = last {
        println!(
            "overload: goodput={:.2} p99_ratio={:.1}",
            row.goodput / f64::from(capacity),
            row.p99_ok_ms / reference.p99_ok_ms
        );
    }
}
