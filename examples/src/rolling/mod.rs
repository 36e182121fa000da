//! `rolling-deploy`: roll every instance of a service chain under load and count every
//! request.
//!
//! One load client sends a fixed rate of `echo.Echo` calls to `proxies` proxies, each of
//! which forwards every call to one of `providers` providers (found through the
//! registry, group `proxy` and group `backend`). While the load runs, every proxy and
//! every provider is restarted, one at a time: with graceful online/offline on, each is
//! stopped by the real shutdown sequence and replaced by a fresh instance on a new port;
//! with it off, each is killed the way a plain restart kills it. As in a Kubernetes
//! rolling update, `--max-surge` decides whether the replacement starts before the old
//! instance stops (the default) or after it (`--max-surge 0`; see `surge.rs`). At the end the run
//! reports how many requests failed: with `--graceful on` that must be 0. With
//! `--admin`, every instance's admin endpoint is polled (`GET /ready`) and the summary
//! shows when each one was ready and not ready (see `readiness.rs`).

mod child;
mod fleet;
mod memory;
mod options;
mod plan;
mod plot;
mod process;
mod readiness;
mod readiness_plot;
mod restart;
mod restart_record;
mod role;
mod summary;
mod surge;

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use proto::feed::feed_client::FeedClient;
use rpc_testkit::feed::FeedFollowers;
use rpc_testkit::load::{self, LoadOptions};
use tokio::time::Instant;

pub use child::run_child;
pub use fleet::{BACKEND_GROUP, Fleet, Instance, PROXY_GROUP};
pub use options::{Mode, Options, RollingError, Streams};
pub use plot::write_plot;
pub use readiness::{POLL_EVERY, Readiness, ReadinessChange, ReadinessRecord};
pub use restart_record::RestartRecord;
pub use role::Role;
pub use summary::{Latency, StreamTally, Summary};
pub use surge::{Bound, Order};

use options::validate;
/// Interval between the events of a followed feed (`--streams resumable`).
const FEED_INTERVAL: Duration = Duration::from_millis(100);

use plan::{check_restarts_fit, restart_plan, warmup};
use restart::{Replace, restart};

/// Runs the whole scenario and returns its summary.
///
/// # Errors
/// [`RollingError`] when the options are unusable or an instance cannot start.
pub async fn run(options: Options) -> Result<Summary, RollingError> {
    validate(&options)?;
    let fleet = Fleet::new(&options).await?;
    check_restarts_fit(&options, fleet.propagation())?;
    let mut proxies = Vec::with_capacity(options.proxies);
    let mut providers = Vec::with_capacity(options.providers);
    for n in 0..options.providers {
        providers.push(
            fleet
                .start(Role::Provider, &format!("provider-{n}"))
                .await?,
        );
    }
    for n in 0..options.proxies {
        proxies.push(fleet.start(Role::Proxy, &format!("proxy-{n}")).await?);
    }
    let (client_app, client, feed) = fleet.client(options.streams).await?;
    let feeds = feed.map(|feed| {
        FeedFollowers::start(FeedClient::new(feed), options.stream_count, FEED_INTERVAL)
    });
    let readiness = fleet.readiness().cloned();

    let plan = restart_plan(&options);
    let warmup = warmup(options.duration);
    let interval = options.duration.saturating_sub(warmup * 2) / plan.len().max(1) as u32;
    let restarts: Arc<Mutex<Vec<RestartRecord>>> = Arc::default();
    let restarting: Arc<Mutex<Option<String>>> = Arc::default();
    let started = Instant::now();
    let payload = bytes::Bytes::from(vec![b'x'; options.payload]);

    let (proxy_order, provider_order) =
        (options.order(Role::Proxy)?, options.order(Role::Provider)?);
    let orders = move |role| match role {
        Role::Proxy => proxy_order,
        Role::Provider => provider_order,
    };
    let driver = {
        let restarts = restarts.clone();
        let restarting = restarting.clone();
        let graceful = options.graceful;
        move |load: load::Load| {
            let fleet = fleet.clone();
            tokio::spawn(async move {
                for (index, (role, slot)) in plan.into_iter().enumerate() {
                    tokio::time::sleep_until(started + warmup + interval * index as u32).await;
                    if load.sending_done() {
                        // Restarts after the load would prove nothing: the summary shows
                        // fewer restarts than planned, and the run fails.
                        break;
                    }
                    let instances = match role {
                        Role::Proxy => &mut proxies,
                        Role::Provider => &mut providers,
                    };
                    let name = format!("{}-{slot}", role.name());
                    *restarting.lock() = Some(name.clone());
                    load.set_restarting(true);
                    let target = Replace {
                        instances,
                        slot,
                        role,
                        name: &name,
                        at: started.elapsed(),
                    };
                    let order = orders(role);
                    let result = restart(&fleet, target, order, graceful).await;
                    load.set_restarting(false);
                    *restarting.lock() = None;
                    match result {
                        Ok(record) => restarts.lock().push(record),
                        Err(record) => {
                            if let Some(error) = &record.error {
                                eprintln!("rolling-deploy: {error}");
                            }
                            restarts.lock().push(record);
                            return (proxies, providers);
                        }
                    }
                }
                (proxies, providers)
            })
        }
    };

    let mut handle = None;
    let record = load::run(
        LoadOptions {
            max_outstanding: options.max_outstanding,
            ..LoadOptions::new(options.rate, options.duration)
        },
        |_| {
            let mut client = client.clone();
            let request = proto::echo::EchoRequest {
                payload: payload.clone(),
                delay_ms: None,
            };
            async move {
                client
                    .echo(request)
                    .await
                    .map(|reply| reply.into_inner().provider)
            }
        },
        |load| {
            if options.progress {
                spawn_progress(load.clone(), restarting.clone(), options.rate);
            }
            handle = Some(driver(load));
        },
    )
    .await;
    let (proxies, providers) = match handle {
        Some(handle) => handle.await.unwrap_or_default(),
        None => Default::default(),
    };

    // What the admin endpoints said during the roll (the final stops below are not
    // part of it).
    let readiness = readiness
        .map(|watch| watch.stop(started))
        .unwrap_or_default();
    let streams = match feeds {
        Some(feeds) => {
            let counts = feeds.stop().await;
            Some(StreamTally {
                streams_opened: counts.opened.load(Ordering::Relaxed),
                streams_moved: client_app.resumed_streams().moved,
                streams_cut: counts.cut.load(Ordering::Relaxed),
                events: counts.events.load(Ordering::Relaxed),
                samples: counts.samples.lock().clone(),
            })
        }
        None => None,
    };
    client_app.before_shutdown().await;
    for instance in proxies.into_iter().chain(providers) {
        instance.stop(true).await;
    }
    let restarts = std::mem::take(&mut *restarts.lock());
    Ok(Summary {
        readiness,
        streams,
        ..Summary::new(&options, record, restarts, started.elapsed())
    })
}

fn spawn_progress(load: load::Load, restarting: Arc<Mutex<Option<String>>>, rate: u32) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let mut last_left = 0;
        loop {
            tick.tick().await;
            if load.finished() {
                return;
            }
            // `sent` counts requests due, as the final table does; the rate counts only
            // those that left (not those refused by the in-flight bound).
            let (elapsed, sent, not_sent, ok, failed, p99) = load.with_record(|r| {
                let second = r.seconds.len().saturating_sub(2);
                let p99 = r.p99_ms(second);
                (
                    r.started.elapsed().as_secs(),
                    r.sent,
                    r.not_sent,
                    r.succeeded,
                    r.failed(),
                    p99,
                )
            });
            let restarting = restarting
                .lock()
                .clone()
                .map_or_else(String::new, |n| format!(" | restarting {n}"));
            let left = sent - not_sent;
            let not_sent = if not_sent > 0 {
                format!(" (not sent {not_sent})")
            } else {
                String::new()
            };
            eprintln!(
                "[{elapsed:>3}s] sent {sent:>7} ok {ok:>7} failed {failed:>5}{not_sent} | {:>5} req/s (target {rate}) | p99 {p99:.1} ms{restarting}",
                left.saturating_sub(last_left)
            );
            last_left = left;
        }
    });
}
