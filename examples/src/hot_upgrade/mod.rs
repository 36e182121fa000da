//! `hot-upgrade`: replace a provider's binary in place, again and again, under load, and
//! count every request, connection and stream.
//!
//! One provider process (this program's `provider` mode, see `provider.rs`) serves a
//! greeter. A consumer application sends open-loop unary calls through the shared load
//! generator; beside it a new connection is dialled every 10 ms and long server streams
//! are kept open. Meanwhile the provider is upgraded N times by SIGUSR2 (or its admin
//! endpoint): each new generation inherits the listening socket, registers the same
//! instance, says ready, and the old one drains and exits. With `--registry` the
//! consumer finds the provider there, and a watcher notes any moment the instance was
//! missing. At the end the run reports what failed (nothing, it must be), each
//! upgrade's report, the socket inode of every generation, the processes left and the
//! provider's descriptors before and after.

mod generation;
mod options;
mod plot;
mod probes;
mod provider;
mod summary;
mod upgrade;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use generation::{Generations, fd_count, listening_inode, processes_of};
use lossless_rpc::{Application, Config, ServiceKey};
use probes::ProbeCounts;
use proto::feed::feed_client::FeedClient;
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use provider::STREAM_INTERVAL;
use rpc_testkit::feed::{self, FeedFollowers};
use rpc_testkit::load::{self, LoadOptions};
use tokio::time::Instant;
use upgrade::{upgrade_once, upgrade_reports};

pub use options::{ChildBehaviour, MAX_MESSAGE_SIZE, Options, StreamMode, Trigger};
pub use plot::write_plot;
pub use provider::run_provider;
pub use summary::{GenerationRecord, Latency, RegistryPresence, Summary, UpgradeWindow};

/// The service the provider exports.
const SERVICE: &str = "helloworld.Greeter";
/// The service of the resumable streams (`--streams resumable`).
const FEED: &str = feed::SERVICE;

/// Runs the whole demonstration.
///
/// # Errors
/// When `message_size` is over [`MAX_MESSAGE_SIZE`], the provider or the consumer cannot
/// start, or an upgrade never resolves.
pub async fn run(options: Options) -> Result<Summary, String> {
    if options.message_size > MAX_MESSAGE_SIZE {
        return Err(format!(
            "--message-size must be at most {MAX_MESSAGE_SIZE} bytes (gRPC's default 4 MiB message limit)"
        ));
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config_path = dir.path().join("provider.yaml");
    let behaviour = dir.path().join("behaviour");
    let pid_file = dir.path().join("provider.pid");
    std::fs::write(&config_path, provider_config(&options, &pid_file))
        .map_err(|e| e.to_string())?;
    std::fs::write(&behaviour, "good").map_err(|e| e.to_string())?;

    let generations =
        Generations::start(&options.executable, &config_path, &behaviour, pid_file).await?;
    let addr = generations.addr().to_owned();
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let first = generations.current().ok_or("no pid file")?;
    let fds_before = fd_count(first).unwrap_or(0);
    let mut records = vec![GenerationRecord {
        pid: first,
        listening_inode: listening_inode(first, port),
        exit_code: None,
    }];

    let (consumer, client, consumer_feed) = consumer(&options, &addr).await?;
    let absence = match &options.registry {
        Some(url) => Some(probes::watch_registry(url, ServiceKey::new(SERVICE)).await?),
        None => None,
    };
    let counts = Arc::new(ProbeCounts::default());
    probes::spawn_connector(addr.clone(), options.connect_every, counts.clone());
    let feeds = match options.stream_mode {
        StreamMode::Short => {
            probes::spawn_streams(
                client.clone(),
                options.streams,
                options.stream_length,
                counts.clone(),
            );
            None
        }
        StreamMode::Resumable => {
            let feed = FeedClient::new(consumer_feed.clone().ok_or("no feed reference")?);
            Some(FeedFollowers::start(feed, options.streams, STREAM_INTERVAL))
        }
    };

    let started = Instant::now();
    let warmup = (options.duration / 6).max(Duration::from_millis(500));
    let interval = options.duration.saturating_sub(warmup * 2) / options.upgrades.max(1) as u32;
    let mut driver = None;
    let windows = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let name = match options.message_size {
        0 => "load".to_owned(),
        size => "x".repeat(size),
    };
    let record = load::run(
        LoadOptions::new(options.rate, options.duration),
        |_| {
            let mut client = client.clone();
            let name = name.clone();
            async move {
                let request = HelloRequest { name, count: 1 };
                client
                    .say_hello(request)
                    .await
                    .map(|r| r.into_inner().provider)
            }
        },
        |load| {
            if options.progress {
                spawn_progress(load.clone(), counts.clone());
            }
            let options = options.clone();
            let generations = generations.clone();
            let behaviour = behaviour.clone();
            let windows = windows.clone();
            driver = Some(tokio::spawn(async move {
                let mut upgraded = Vec::new();
                for n in 0..options.upgrades {
                    tokio::time::sleep_until(started + warmup + interval * n as u32).await;
                    let bad = n == 0 && options.child != ChildBehaviour::Good;
                    let kind = if bad {
                        child_word(options.child)
                    } else {
                        "good"
                    };
                    let _ = std::fs::write(&behaviour, kind);
                    load.set_restarting(true);
                    let from_s = started.elapsed().as_secs_f64();
                    let outcome = upgrade_once(&options, &generations, port, bad).await;
                    load.set_restarting(false);
                    windows.lock().push(UpgradeWindow {
                        from_s,
                        to_s: started.elapsed().as_secs_f64(),
                        succeeded: matches!(outcome, Ok(Some(_))),
                    });
                    match outcome {
                        Ok(record) => upgraded.extend(record),
                        Err(error) => {
                            eprintln!("hot-upgrade: {error}");
                            break;
                        }
                    }
                }
                upgraded
            }));
        },
    )
    .await;
    let upgraded = match driver {
        Some(driver) => driver.await.unwrap_or_default(),
        None => Vec::new(),
    };
    records.extend(upgraded);

    // Let the streams in progress finish (the feeds are followed to the end of the run),
    // then stop every probe and the consumer.
    counts.stop.store(true, Ordering::Relaxed);
    let feeds = match feeds {
        Some(feeds) => Some(feeds.stop().await),
        None => {
            tokio::time::sleep(options.stream_length + Duration::from_millis(300)).await;
            None
        }
    };
    let streams_moved = consumer.resumed_streams().moved;
    consumer.before_shutdown().await;
    let last = generations.current().unwrap_or(first);
    let fds_after = settle_fds(last, fds_before).await;
    let marker = config_path.to_string_lossy().into_owned();
    // Wait (bounded) for the last old generation to be gone and reaped.
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_of(&marker).len() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at_end = processes_of(&marker);
    // Read before the last generation is stopped: its shutdown unregisters, as it must.
    let registry_presence = absence.map(|absence| {
        let absence = absence.lock();
        RegistryPresence {
            snapshots: absence.snapshots,
            seen: absence.seen,
            snapshots_without: absence.without,
            absent_ms: absence.total_now().as_secs_f64() * 1e3,
        }
    });
    let exits = generations.exits();
    for record in &mut records {
        record.exit_code = exits.get(&record.pid).copied();
    }
    let stopped = generations.stop().await;
    if let Some(record) = records.last_mut() {
        record.exit_code = stopped;
    }

    let details = upgrade_reports(&generations.lines());
    let mut samples = record.failure_samples.clone();
    samples.extend(counts.samples.lock().iter().cloned());
    let (streams_opened, streams_cut, stream_events) = match &feeds {
        Some(feeds) => {
            samples.extend(feeds.samples.lock().iter().cloned());
            (
                feeds.opened.load(Ordering::Relaxed),
                feeds.cut.load(Ordering::Relaxed),
                feeds.events.load(Ordering::Relaxed),
            )
        }
        None => (
            counts.streams_opened.load(Ordering::Relaxed),
            counts.streams_cut.load(Ordering::Relaxed),
            0,
        ),
    };
    Ok(Summary {
        sent: record.sent,
        succeeded: record.succeeded,
        failed: record.failed(),
        failed_by_code: record.failed_by_code.clone(),
        failure_samples: samples,
        connections_attempted: counts.connections_attempted.load(Ordering::Relaxed),
        connections_refused: counts.connections_refused.load(Ordering::Relaxed),
        connection_calls_failed: counts.connection_calls_failed.load(Ordering::Relaxed),
        stream_mode: options.stream_mode,
        streams_opened,
        streams_moved,
        stream_events,
        streams_cut,
        upgrades: details.iter().filter(|r| r.succeeded()).count(),
        upgrades_failed: details.iter().filter(|r| !r.succeeded()).count(),
        upgrades_planned: options.upgrades,
        upgrade_details: details,
        shutdown_reports: generations
            .lines()
            .iter()
            .filter_map(|line| line.strip_prefix("shutdown "))
            .map(str::to_owned)
            .collect(),
        registry_presence,
        registry: options.registry.clone(),
        trigger: options.trigger,
        child: options.child,
        fds_before,
        fds_after,
        generations: records,
        processes_at_end: at_end.len(),
        zombies: at_end.iter().filter(|(_, state)| *state == 'Z').count(),
        latency_steady_ms: Latency::of(&record.steady),
        latency_during_upgrades_ms: Latency::of(&record.during_restart),
        elapsed_s: started.elapsed().as_secs_f64(),
        per_second: record.seconds.clone(),
        upgrade_windows: std::mem::take(&mut *windows.lock()),
    })
}

/// The provider's configuration file.
fn provider_config(options: &Options, pid_file: &std::path::Path) -> String {
    let registry = options.registry.as_deref().unwrap_or("memory://");
    format!(
        "application: {{ name: hot-upgrade-provider, logging: false }}\n\
         registries: {{ main: {{ url: \"{registry}\" }} }}\n\
         protocol: {{ host: 127.0.0.1, port: 0 }}\n\
         admin: {{ port: 0 }}\n\
         provider: {{ services: {{ {SERVICE}: {{}}, {FEED}: {{}} }} }}\n\
         graceful_shutdown: {{ timeout: 20s, step_timeout: 3s, internal_signal: true }}\n\
         upgrade: {{ ready_timeout: {}ms, pid_file: \"{}\" }}\n",
        options.ready_timeout.as_millis(),
        pid_file.display()
    )
}

/// The consumer application and its client: through the registry, or straight to the
/// provider's address.
async fn consumer(
    options: &Options,
    addr: &str,
) -> Result<
    (
        Application,
        GreeterClient<lossless_rpc::ReferenceChannel>,
        Option<lossless_rpc::ReferenceChannel>,
    ),
    String,
> {
    let mut config = Config::default();
    config.application.name = "hot-upgrade-consumer".into();
    config.application.logging = false;
    config.graceful_shutdown.internal_signal = false;
    // Several runs share a test process: any free port, never the default 22222.
    config.admin.port = 0;
    let url = match &options.registry {
        Some(url) => url.clone(),
        None => format!("static://{addr}"),
    };
    config.registries = [(
        "main".to_owned(),
        lossless_rpc::config::RegistryConfig::new(url),
    )]
    .into();
    if options.stream_mode == StreamMode::Resumable {
        config
            .consumer
            .references
            .insert(FEED.to_owned(), feed::resumable_reference(""));
    }
    let mut builder = Application::builder(config);
    let client = GreeterClient::new(builder.reference(SERVICE));
    let feed = (options.stream_mode == StreamMode::Resumable).then(|| builder.reference(FEED));
    let app = builder
        .start()
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    Ok((app, client, feed))
}

fn child_word(child: ChildBehaviour) -> &'static str {
    match child {
        ChildBehaviour::Good => "good",
        ChildBehaviour::Fail => "fail",
        ChildBehaviour::Hang => "hang",
        ChildBehaviour::GateFails => "gate-fails",
        ChildBehaviour::GateHangs => "gate-hangs",
    }
}

/// Waits (bounded) until `pid` has `target` descriptors again (its clients' connections
/// closing); the count then.
async fn settle_fds(pid: i32, target: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let count = fd_count(pid).unwrap_or(0);
        if count <= target || Instant::now() > deadline {
            return count;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn spawn_progress(load: load::Load, counts: Arc<ProbeCounts>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            if load.finished() {
                return;
            }
            let (elapsed, sent, ok, failed, p99) = load.with_record(|r| {
                let second = r.seconds.len().saturating_sub(2);
                (
                    r.started.elapsed().as_secs(),
                    r.sent,
                    r.succeeded,
                    r.failed(),
                    r.p99_ms(second),
                )
            });
            eprintln!(
                "[{elapsed:>3}s] sent {sent:>7} ok {ok:>7} failed {failed:>4} | connections {} refused {} | streams {} cut {} | p99 {p99:.1} ms",
                counts.connections_attempted.load(Ordering::Relaxed),
                counts.connections_refused.load(Ordering::Relaxed),
                counts.streams_opened.load(Ordering::Relaxed),
                counts.streams_cut.load(Ordering::Relaxed),
            );
        }
    });
}
