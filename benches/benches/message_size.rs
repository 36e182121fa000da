//! Unary echo at 1 KiB, 64 KiB, 1 MiB and 4 MiB, plain tonic against the whole rpc
//! stack, with compression off, gzip and zstd.
//!
//! Stacks (both on loopback over one HTTP/2 connection, see `rpc_benches::stacks`):
//! - plain: tonic's `Server` and a tonic `Channel`, compressing with tonic's own codec
//!   (`send_compressed`/`accept_compressed` on both sides);
//! - rpc: an `Application` provider found by an `Application` consumer through the
//!   in-process registry, metrics and tracing on, compressing as configured
//!   (`provider.services.echo.Echo.compression`, `consumer.references.echo.Echo.compression`).
//!
//! The payload is text (words drawn from a small vocabulary by a fixed seed), so gzip and
//! zstd have something to do, as with the JSON or documents users send: ~4× smaller.
//! The largest size is 4 MiB less 64 bytes, under the default 4 MiB message limit of
//! both stacks with the message's own framing.
//!
//! For each size and compression, `MESSAGE_SIZE_ROUNDS` (default 5) back-to-back pairs of
//! `MESSAGE_SIZE_MILLIS` (default 1000) runs at `MESSAGE_SIZE_CALLS` (default 8)
//! concurrent calls; one line each:
//! `message_size: size=1MiB compression=gzip plain_qps=… rpc_qps=… rpc_mb_s=…
//! qps_ratio=X p99_ratio=Y` (rpc / plain, medians of the per-pair ratios; MB/s is the
//! payload echoed, counted once). `plain_qps` and `rpc_qps` are each stack's median run
//! on its own, so on a noisy machine they may lean the other way from `qps_ratio`, which
//! compares the runs of a pair, made side by side. The last line is
//! `message_size: min_qps_ratio=X`.
//! `MESSAGE_SIZE_SIZES=1MiB,4MiB` and `MESSAGE_SIZE_COMPRESSIONS=none,zstd` measure only
//! those (comma-separated names as printed); a name it does not know exits 2, as does a
//! `MESSAGE_SIZE_BYTES` that is not a size from 1 to 4 MiB less 64. Counts and durations
//! that are 0 or not numbers fall back to their defaults.
//!
//! `MESSAGE_SIZE_PROFILE=plain|rpc|rpc-client|rpc-server` runs one stack alone for a profiler or
//! `benches/instructions.sh message_size`, at `MESSAGE_SIZE_BYTES` (default 1048576) and
//! `MESSAGE_SIZE_COMPRESSION=none|gzip|zstd` (default none), for
//! `MESSAGE_SIZE_PROFILE_MILLIS` (default 3000) at `MESSAGE_SIZE_PROFILE_CALLS`
//! (default 8) calls, printing the requests made (`rpc-client`: our consumer against
//! tonic's server; `rpc-server`: tonic's client against our provider; both uncompressed).
//!
//! `PROVIDER_CONNECTION_WINDOW=1048576` gives our provider the connection window of
//! plain tonic's (one stream window instead of eight; `protocol.initial_connection_window_size`),
//! `CONSUMER_CONNECTION_WINDOW=5242880` our consumer the one of tonic's channel (5 MiB
//! instead of 256 MiB; `consumer.initial_connection_window_size`), and
//! `CONSUMER_MAX_REPLAY_BYTES=0` keeps no request for a retry, as plain tonic keeps none
//! (`consumer.references.echo.Echo.max_replay_bytes`, default 4 MiB): the three buffers
//! behind the 1 MiB row. Each exits 2, naming itself, when it is not a number of bytes
//! the setting takes.

use std::time::Duration;

use bytes::Bytes;
use proto::echo::EchoRequest;
use rpc::core::Compression;
use rpc_benches::stacks::{
    echo_calls_of, our_consumer_of, ours_with, plain_client_with, plain_server_with,
};
use rpc_benches::{
    BoxedCall, compare, drive, env_name, env_names, env_u64, profile, trace_as_in_production,
};
use tonic::codec::CompressionEncoding;

/// The sizes measured, with their names.
const SIZES: [(usize, &str); 4] = [
    (1024, "1KiB"),
    (64 * 1024, "64KiB"),
    (1024 * 1024, "1MiB"),
    (LARGEST, "4MiB"),
];

/// The largest payload: 4 MiB less 64 bytes, under the default message limit with the
/// message's own framing.
const LARGEST: usize = 4 * 1024 * 1024 - 64;

const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Gzip, Compression::Zstd];

/// `size` bytes of text: words of a 16-word vocabulary drawn by a fixed-seed xorshift.
fn text(size: usize) -> Bytes {
    const WORDS: [&str; 16] = [
        "provider ",
        "consumer ",
        "registry ",
        "instance ",
        "drain ",
        "offline ",
        "online ",
        "weight ",
        "region ",
        "zone-a ",
        "zone-b ",
        "\"id\": ",
        "{\"name\": ",
        "}, ",
        "true, ",
        "false, ",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::with_capacity(size + 16);
    while out.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(WORDS[(state % 16) as usize].as_bytes());
        // A number now and then, as records have, so the text is not only the words.
        if state.is_multiple_of(5) {
            out.extend_from_slice((state % 100_000).to_string().as_bytes());
        }
    }
    out.truncate(size);
    Bytes::from(out)
}

/// tonic's encoding for `compression`.
fn tonic_encoding(compression: Compression) -> Option<CompressionEncoding> {
    match compression {
        Compression::None => None,
        Compression::Gzip => Some(CompressionEncoding::Gzip),
        _ => Some(CompressionEncoding::Zstd),
    }
}

/// The compression named `name` (`none`, `gzip`, `zstd`).
fn compression_named(name: &str) -> Compression {
    match name {
        "gzip" => Compression::Gzip,
        "zstd" => Compression::Zstd,
        _ => Compression::None,
    }
}

/// Exits 2 with `error` (an environment variable this bench cannot use).
fn usage(error: String) -> ! {
    eprintln!("message_size: {error}");
    std::process::exit(2)
}

/// Echo calls of each stack at one compression: (plain, rpc), and the applications that
/// must outlive them.
struct Stacks<P, R> {
    plain: P,
    rpc: R,
    /// Consumer first, then provider.
    apps: Vec<rpc::Application>,
}

async fn stacks(
    compression: Compression,
    echoed: &EchoRequest,
) -> Stacks<
    impl Fn() -> BoxedCall + Clone + Send + 'static,
    impl Fn() -> BoxedCall + Clone + Send + 'static,
> {
    let encoding = tonic_encoding(compression);
    let plain_client = plain_client_with(plain_server_with(encoding).await, encoding).await;
    let (our_client, apps) = ours_with(true, compression).await;
    Stacks {
        plain: echo_calls_of(plain_client, "plain", echoed.clone(), None),
        rpc: echo_calls_of(our_client, "rpc", echoed.clone(), None),
        apps,
    }
}

fn request_of(size: usize) -> EchoRequest {
    EchoRequest {
        payload: text(size),
        delay_ms: None,
    }
}

#[tokio::main]
async fn main() {
    trace_as_in_production();
    if std::env::var_os("MESSAGE_SIZE_PROFILE").is_some() {
        let stack = env_name(
            "MESSAGE_SIZE_PROFILE",
            &["rpc", "plain", "rpc-client", "rpc-server"],
        )
        .unwrap_or_else(|error| usage(error));
        let size = std::env::var("MESSAGE_SIZE_BYTES").map_or(Ok(1024 * 1024), |bytes| {
            bytes
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|bytes| (1..=LARGEST).contains(bytes))
                .ok_or_else(|| {
                    format!(
                        "MESSAGE_SIZE_BYTES is a number of bytes from 1 to {LARGEST}, not `{bytes}`"
                    )
                })
        });
        let size = size.unwrap_or_else(|error| usage(error));
        let compression = compression_named(
            &env_name("MESSAGE_SIZE_COMPRESSION", &["none", "gzip", "zstd"])
                .unwrap_or_else(|error| usage(error)),
        );
        let duration = Duration::from_millis(env_u64("MESSAGE_SIZE_PROFILE_MILLIS", 3_000));
        let calls = env_u64("MESSAGE_SIZE_PROFILE_CALLS", 8) as usize;
        let echoed = request_of(size);
        let stacks = stacks(compression, &echoed).await;
        match stack.as_str() {
            "plain" => profile(&stack, stacks.plain, calls, duration).await,
            "rpc-client" => {
                // Our consumer against tonic's server, uncompressed.
                let (client, _app) = our_consumer_of(&[plain_server_with(None).await]).await;
                let rpc_client = echo_calls_of(client, "rpc-client", echoed, None);
                profile(&stack, rpc_client, calls, duration).await
            }
            "rpc-server" => {
                // tonic's client against our provider, uncompressed.
                let provider = stacks.apps[1].local_addr().expect("the provider's address");
                let client = plain_client_with(provider, None).await;
                let rpc_server = echo_calls_of(client, "rpc-server", echoed, None);
                profile(&stack, rpc_server, calls, duration).await
            }
            _ => profile(&stack, stacks.rpc, calls, duration).await,
        }
        return;
    }
    let duration = Duration::from_millis(env_u64("MESSAGE_SIZE_MILLIS", 1_000));
    let rounds = env_u64("MESSAGE_SIZE_ROUNDS", 5) as usize;
    let calls = env_u64("MESSAGE_SIZE_CALLS", 8) as usize;
    let size_names: Vec<&str> = SIZES.iter().map(|(_, name)| *name).collect();
    let sizes = env_names("MESSAGE_SIZE_SIZES", &size_names).unwrap_or_else(|error| usage(error));
    let compression_names: Vec<&str> = COMPRESSIONS.iter().map(|c| c.name()).collect();
    let compressions = env_names("MESSAGE_SIZE_COMPRESSIONS", &compression_names)
        .unwrap_or_else(|error| usage(error));
    let mut lowest = f64::INFINITY;
    for (size, size_name) in SIZES
        .into_iter()
        .filter(|(_, name)| sizes.iter().any(|n| n == name))
    {
        let echoed = request_of(size);
        for compression in COMPRESSIONS
            .into_iter()
            .filter(|c| compressions.iter().any(|n| n == c.name()))
        {
            let stacks = stacks(compression, &echoed).await;
            // Warm both: connections, windows, the allocator's pools at this size.
            drive(stacks.plain.clone(), calls, duration / 2).await;
            drive(stacks.rpc.clone(), calls, duration / 2).await;
            let compared = compare(stacks.rpc, stacks.plain, calls, duration, rounds).await;
            let (qps_ratio, _, p99_ratio) = compared.ratios;
            lowest = lowest.min(qps_ratio);
            println!(
                "message_size: size={size_name} compression={} plain_qps={:.0} rpc_qps={:.0} rpc_mb_s={:.1} qps_ratio={qps_ratio:.3} p99_ratio={p99_ratio:.3}",
                compression.name(),
                compared.baseline.qps,
                compared.ours.qps,
                compared.ours.qps * size as f64 / 1e6,
            );
        }
    }
    println!("message_size: min_qps_ratio={lowest:.3}");
}
