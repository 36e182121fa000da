//! Overhead of the whole rpc stack over plain tonic, and of its metrics and traces.
//!
//! Every stack serves the same echo service on loopback over one HTTP/2 connection:
//! - plain: tonic's `Server` and a tonic `Channel`;
//! - rpc: an `Application` provider (provider filters, health service) found through the
//!   in-process registry by an `Application` consumer (directory, P2C, failover,
//!   blacklist, consumer filters), with metrics and tracing on (the default);
//! - rpc-off: the same with `metrics.enabled` and `tracing.enabled` false.
//!
//! "Tracing on" is measured as a service runs it in production: a subscriber installed
//! for the whole run logs at INFO (to nowhere), so the DEBUG call and attempt spans are
//! built only as far as the span macros' interest check. Metrics on means every call is
//! timed on both sides and every attempt once more.
//!
//! They run alternately in this process, in back-to-back triples (the order rotates),
//! at 1, 16, 64 and 256 concurrent calls (closed loop). Each stack's median run is printed,
//! and the medians of the per-triple ratios (a triple shares the machine's conditions,
//! so this resists noise from other tenants): rpc against plain, and rpc against
//! rpc-off. The last two lines are `overhead: qps_ratio=X p99_ratio=Y` (rpc / plain)
//! and `observability: qps_ratio=X p99_ratio=Y` (metrics and tracing on / off), both for
//! 16 concurrent calls.
//!
//! Environment: `OVERHEAD_MILLIS` per run (default 1500), `OVERHEAD_ROUNDS` triples per
//! concurrency (default 7), `OVERHEAD_PROFILE=plain|plain-h2|rpc|rpc-off|rpc-traced|rpc-client|rpc-server`
//! to run one configuration for `OVERHEAD_PROFILE_MILLIS` (default 3000) at
//! `OVERHEAD_PROFILE_CALLS` (default 16) calls for a profiler, printing the requests made
//! and the CPU time per request (`plain-h2`: the same echo over the `h2` crate's
//! client directly against tonic's server, the floor of a client; `rpc-client`: our consumer against tonic's
//! server; `rpc-server`: tonic's client against our provider; `rpc-traced`: the rpc stack
//! with each call made in a trace, as a handler's call is, so it carries a `traceparent`
//! the provider continues — what propagation costs, against `rpc`, whose calls are in
//! no trace and carry none). `OVERHEAD_CONNECTIONS=N`
//! gives our consumer N connections per instance. `OVERHEAD_PAYLOAD=BYTES` echoes that
//! much payload (default 64; `OVERHEAD_PAYLOAD=1048576 bash benches/instructions.sh
//! overhead plain rpc` compares the stacks at 1 MiB). `OVERHEAD_LIMIT=on` runs
//! the rpc providers with the adaptive concurrency limit (`provider.limit`).

use std::time::Duration;

use rpc_benches::plain_h2::{plain_h2_calls, plain_h2_client};
use rpc_benches::stacks::{echo_calls, our_consumer_of, ours, plain_client, plain_server};
use rpc_benches::{
    BoxedCall, drive, env_u64, median_of, median_run, profile, ratios, trace_as_in_production,
};
use rpc_testkit::measure::Measured;

/// 256: where one connection's lock (hyperium/h2#531) would show first.
const CONCURRENCY: [usize; 4] = [1, 16, 64, 256];

/// The median run of each stack and the medians of the per-triple ratios, for one
/// concurrency.
struct Row {
    plain: Measured,
    on: Measured,
    off: Measured,
    /// rpc / plain: (qps, p50, p99).
    over_plain: (f64, f64, f64),
    /// rpc / rpc-off: (qps, p50, p99).
    on_over_off: (f64, f64, f64),
}

/// `rounds` back-to-back triples of runs at `concurrency`, the order rotating.
async fn row<P, O, F>(
    plain: P,
    on: O,
    off: F,
    concurrency: usize,
    seconds: Duration,
    rounds: usize,
) -> Row
where
    P: Fn() -> BoxedCall + Clone + Send + 'static,
    O: Fn() -> BoxedCall + Clone + Send + 'static,
    F: Fn() -> BoxedCall + Clone + Send + 'static,
{
    let mut runs: [Vec<Measured>; 3] = Default::default();
    let (mut over_plain, mut on_over_off) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut triple: [Option<Measured>; 3] = Default::default();
        for slot in (0..3).map(|k| (round + k) % 3) {
            triple[slot] = Some(match slot {
                0 => drive(plain.clone(), concurrency, seconds).await,
                1 => drive(on.clone(), concurrency, seconds).await,
                _ => drive(off.clone(), concurrency, seconds).await,
            });
        }
        let [Some(p), Some(n), Some(f)] = triple else {
            unreachable!("every slot of a triple runs")
        };
        over_plain.push(ratios(&n, &p));
        on_over_off.push(ratios(&n, &f));
        for (all, run) in runs.iter_mut().zip([p, n, f]) {
            all.push(run);
        }
    }
    Row {
        plain: median_run(&runs[0]),
        on: median_run(&runs[1]),
        off: median_run(&runs[2]),
        over_plain: median_of(&over_plain),
        on_over_off: median_of(&on_over_off),
    }
}

/// `calls`, each made inside a served call's context with a trace of its own (a new
/// trace per call: two random ids, which a handler's call would not pay).
fn traced_calls(
    calls: impl Fn() -> BoxedCall + Clone + Send + 'static,
) -> impl Fn() -> BoxedCall + Clone + Send + 'static {
    move || -> BoxedCall {
        let context = rpc::CallContext::new().with_trace(rpc::core::TraceContext::new_root());
        Box::pin(context.scope(calls()))
    }
}

#[tokio::main]
async fn main() {
    // What "tracing on" means here (see the module docs).
    trace_as_in_production();
    let seconds = Duration::from_millis(env_u64("OVERHEAD_MILLIS", 1_500));
    let rounds = env_u64("OVERHEAD_ROUNDS", 7) as usize;
    let plain_stub = plain_client(plain_server().await).await;
    let (our_client, _apps) = ours(true).await;
    let (quiet_client, _quiet_apps) = ours(false).await;
    let plain = echo_calls(plain_stub, "plain");
    let ours = echo_calls(our_client, "rpc");
    let quiet = echo_calls(quiet_client, "rpc-off");
    if let Ok(stack) = std::env::var("OVERHEAD_PROFILE") {
        let duration = Duration::from_millis(env_u64("OVERHEAD_PROFILE_MILLIS", 3_000));
        let calls = env_u64("OVERHEAD_PROFILE_CALLS", 16) as usize;
        match stack.as_str() {
            "plain" => profile(&stack, plain, calls, duration).await,
            "plain-h2" => {
                // The floor: h2's client directly against tonic's server.
                let send = plain_h2_client(plain_server().await).await;
                profile(&stack, plain_h2_calls(send), calls, duration).await
            }
            "rpc-off" => profile(&stack, quiet, calls, duration).await,
            "rpc-server" => {
                // A plain tonic client against our provider.
                let client = plain_client(_apps[1].local_addr().unwrap()).await;
                profile(&stack, echo_calls(client, "rpc-server"), calls, duration).await
            }
            "rpc-traced" => {
                let traced = traced_calls(ours);
                profile(&stack, traced, calls, duration).await
            }
            "rpc-client" => {
                // Our consumer against a plain tonic server.
                let (client, _app) = our_consumer_of(&[plain_server().await]).await;
                profile(&stack, echo_calls(client, "rpc-client"), calls, duration).await
            }
            _ => profile(&stack, ours, calls, duration).await,
        }
        return;
    }
    // Warm all three: connections, allocator, P2C estimates, every method's series.
    drive(plain.clone(), 16, Duration::from_secs(1)).await;
    drive(ours.clone(), 16, Duration::from_secs(1)).await;
    drive(quiet.clone(), 16, Duration::from_secs(1)).await;

    println!(
        "{:>11} {:>6} {:>10} {:>9} {:>9}",
        "stack", "calls", "qps", "p50 µs", "p99 µs"
    );
    let mut at_16 = None;
    for concurrency in CONCURRENCY {
        let row = row(
            plain.clone(),
            ours.clone(),
            quiet.clone(),
            concurrency,
            seconds,
            rounds,
        )
        .await;
        for (name, run) in [
            ("plain tonic", &row.plain),
            ("rpc", &row.on),
            ("rpc-off", &row.off),
        ] {
            println!(
                "{name:>11} {concurrency:>6} {:>10.0} {:>9} {:>9}",
                run.qps, run.p50_us, run.p99_us
            );
        }
        for (name, (qps, p50, p99)) in [
            ("rpc/plain", row.over_plain),
            ("rpc/rpc-off", row.on_over_off),
        ] {
            println!(
                "{name:>11} {concurrency:>6} qps_ratio={qps:.3} p50_ratio={p50:.3} p99_ratio={p99:.3} (median of {rounds} triples)"
            );
        }
        if concurrency == 16 {
            at_16 = Some((row.over_plain, row.on_over_off));
        }
    }
    if let Some((over_plain, on_over_off)) = at_16 {
        println!(
            "overhead: qps_ratio={:.3} p99_ratio={:.3}",
            over_plain.0, over_plain.2
        );
        println!(
            "observability: qps_ratio={:.3} p99_ratio={:.3}",
            on_over_off.0, on_over_off.2
        );
    }
}
