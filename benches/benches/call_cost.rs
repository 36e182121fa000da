//! Heap allocations per call of each echo stack, counted with dhat.
//!
//! Calls are made one at a time (so every allocation belongs to the call in flight,
//! both sides of it included, apart from the runtime's own rare housekeeping), after a
//! warm-up that opens the connection and fills every lazily built table. Stacks (see
//! `rpc_benches::stacks`):
//! - plain: tonic client and server;
//! - rpc: our consumer and provider, metrics and tracing on (the default);
//! - rpc-off: the same with metrics and tracing off;
//! - rpc-client: our consumer against tonic's server;
//! - rpc-server: tonic's client against our provider.
//!
//! Prints heap blocks and bytes per call for each, and what rpc adds over plain on each
//! side. Environment: `CALL_COST_CALLS` counted calls per stack (default 5 000);
//! `CALL_COST_PROFILE=<stack>` measures that stack alone and writes dhat's heap profile
//! (`dhat-heap.json`, every allocation site with its call stack) to read in dhat's viewer.

use std::future::Future;

use rpc::registry::MemoryHub;
use rpc_benches::env_u64;
use rpc_benches::stacks::{
    our_consumer_of, our_provider, ours, plain_client, plain_server, request,
};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// Heap blocks and bytes allocated per call, over `calls` calls made one at a time.
async fn per_call<C, F>(call: C, calls: u64) -> (f64, f64)
where
    C: Fn() -> F,
    F: Future<Output = ()>,
{
    for _ in 0..500 {
        call().await;
    }
    let before = dhat::HeapStats::get();
    for _ in 0..calls {
        call().await;
    }
    let after = dhat::HeapStats::get();
    let per = |a: u64, b: u64| (a - b) as f64 / calls as f64;
    (
        per(after.total_blocks, before.total_blocks),
        per(after.total_bytes, before.total_bytes),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let only = std::env::var("CALL_COST_PROFILE").ok();
    let _profiler = match only {
        Some(_) => dhat::Profiler::new_heap(),
        None => dhat::Profiler::builder().testing().build(),
    };
    let calls = env_u64("CALL_COST_CALLS", 5_000);
    let plain_addr = plain_server().await;
    let hub = MemoryHub::new();
    let provider = our_provider(&hub, true).await;
    let provider_addr = provider.local_addr().expect("the provider listens");

    let plain = plain_client(plain_addr).await;
    let (on, _on_apps) = ours(true).await;
    let (off, _off_apps) = ours(false).await;
    let (our_client, _consumer) = our_consumer_of(&[plain_addr]).await;
    let tonic_to_ours = plain_client(provider_addr).await;

    let mut rows = Vec::new();
    macro_rules! measure {
        ($name:expr, $client:expr, $what:expr) => {{
            if only.as_deref().is_none_or(|only| only == $name) {
                let client = $client.clone();
                let cost = per_call(
                    || {
                        let mut client = client.clone();
                        async move {
                            client.echo(request()).await.expect($what);
                        }
                    },
                    calls,
                )
                .await;
                rows.push(($name, cost));
            }
        }};
    }
    measure!("plain", plain, "plain echo succeeds");
    measure!("rpc", on, "rpc echo succeeds");
    measure!("rpc-off", off, "rpc-off echo succeeds");
    measure!("rpc-client", our_client, "our consumer's echo succeeds");
    measure!("rpc-server", tonic_to_ours, "echo to our provider succeeds");

    println!("{:>11} {:>12} {:>12}", "stack", "blocks/call", "bytes/call");
    for (name, (blocks, bytes)) in &rows {
        println!("{name:>11} {blocks:>12.1} {bytes:>12.0}");
    }
    let blocks = |name: &str| {
        rows.iter()
            .find(|(n, _)| *n == name)
            .map_or(f64::NAN, |(_, (blocks, _))| *blocks)
    };
    println!(
        "call_cost: rpc_over_plain={:.1} consumer_over_tonic={:.1} provider_over_tonic={:.1} (blocks per call)",
        blocks("rpc") - blocks("plain"),
        blocks("rpc-client") - blocks("plain"),
        blocks("rpc-server") - blocks("plain"),
    );
    drop(provider);
}
