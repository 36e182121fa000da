//! Metrics of the consumer side, read at scrape time from each reference's cluster
//! (its counters, its directory's instances) and from the outbound counter.
//!
//! Instance labels are bounded by the directory: an instance that leaves it leaves the
//! scrape with it.

use std::fmt;

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use rpc_cluster::{ClusterChannel, ClusterCounts, FailureKind};
use rpc_core::InflightCounter;
use tokio::time::Instant;

use super::scrape::{counters, gauge, gauges};

/// Writes, on each scrape:
/// - `rpc_client_requests_in_flight`: outbound calls whose response has not ended;
///
/// and per reference (label `service`, as `group/interface:version`):
/// - `rpc_client_picks_total{service,instance}`: attempts sent to each instance the
///   directory knows now (`instance` is its `host:port`);
/// - `rpc_client_instances{service,state}`: instances `healthy`, `ejected` (by the
///   blacklist) and `closing` (they said they are going offline);
/// - `rpc_client_ejections_total{service}`: ejections by the blacklist;
/// - `rpc_client_unresponsive_ejections_total{service}`: ejections because a connection
///   did not answer a PING;
/// - `rpc_client_retries_total{service,reason}`: retries, by the failure that led to
///   them (`not_sent`, `unavailable`, `transport`, `timeout`);
/// - `rpc_client_retry_budget_exhausted_total{service}`: retries not made because the
///   retry budget was empty;
/// - `rpc_client_failovers_total{service}`: requests a closing provider refused (not
///   executed) and that were sent to another instance, without counting as retries;
/// - `rpc_client_no_provider_total{service}`: calls that found no provider at all.
#[derive(Debug)]
pub(super) struct ReferencesCollector {
    outbound: InflightCounter,
    references: RwLock<Vec<ClusterChannel>>,
}

/// What one reference looks like at the scrape.
struct ReferenceView {
    service: String,
    counts: ClusterCounts,
    /// `(host:port, attempts sent)` per instance.
    picks: Vec<(String, u64)>,
    healthy: usize,
    ejected: usize,
    closing: usize,
}

impl ReferenceView {
    fn of(channel: &ClusterChannel, now: Instant) -> Self {
        let list = channel.directory().list();
        let mut view = Self {
            service: channel.directory().service().to_string(),
            counts: channel.stats(),
            picks: Vec::with_capacity(list.invokers().len()),
            healthy: 0,
            ejected: 0,
            closing: 0,
        };
        for invoker in list.invokers() {
            view.picks
                .push((invoker.authority().to_owned(), invoker.stats().dispatched));
            if invoker.is_closing(now) {
                view.closing += 1;
            } else if invoker.is_ejected(now) {
                view.ejected += 1;
            } else {
                view.healthy += 1;
            }
        }
        view
    }

    /// Adds `other`, a second reference to the same service, into this view: one series
    /// per service and label set, or Prometheus would refuse the scrape for its
    /// duplicate samples. Counters are summed (picks per instance too); the instance
    /// states are those of the reference that sees the most in each.
    fn merge(&mut self, other: Self) {
        self.counts += other.counts;
        for (instance, picks) in other.picks {
            match self.picks.iter_mut().find(|(known, _)| *known == instance) {
                Some((_, mine)) => *mine += picks,
                None => self.picks.push((instance, picks)),
            }
        }
        self.healthy = self.healthy.max(other.healthy);
        self.ejected = self.ejected.max(other.ejected);
        self.closing = self.closing.max(other.closing);
    }
}

/// `views` with those of one service merged into its first ([`ReferenceView::merge`]).
fn one_per_service(views: impl IntoIterator<Item = ReferenceView>) -> Vec<ReferenceView> {
    let mut merged: Vec<ReferenceView> = Vec::new();
    for view in views {
        match merged
            .iter_mut()
            .find(|known| known.service == view.service)
        {
            Some(known) => known.merge(view),
            None => merged.push(view),
        }
    }
    merged
}

/// The reasons a retry is counted under: every failure kind but a closing provider's
/// refusal, which is re-sent without being a retry (a failover), and an overload
/// refusal, re-routed once and never retried.
const RETRY_REASONS: [FailureKind; 4] = [
    FailureKind::NotSent,
    FailureKind::Unavailable,
    FailureKind::Transport,
    FailureKind::Timeout,
];

impl ReferencesCollector {
    /// A collector of the references added later, and of `outbound`.
    pub(super) fn new(outbound: InflightCounter) -> Self {
        Self {
            outbound,
            references: RwLock::new(Vec::new()),
        }
    }

    /// Adds a reference's channel to the scrape.
    pub(super) fn add(&self, channel: ClusterChannel) {
        self.references.write().push(channel);
    }

    /// Writes the per-reference counter `name` with the value `count` picks.
    fn per_service(
        encoder: &mut DescriptorEncoder<'_>,
        views: &[ReferenceView],
        name: &str,
        help: &str,
        count: impl Fn(&ClusterCounts) -> u64,
    ) -> Result<(), fmt::Error> {
        let samples = views.iter().map(|view| {
            (
                [("rpc_service", view.service.as_str())],
                count(&view.counts),
            )
        });
        counters(encoder, name, help, samples)
    }
}

impl Collector for ReferencesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        gauge(
            &mut encoder,
            "rpc_client_requests_in_flight",
            "Outbound calls whose response has not ended.",
            self.outbound.current(),
        )?;
        let now = Instant::now();
        let views = one_per_service(
            self.references
                .read()
                .iter()
                .map(|channel| ReferenceView::of(channel, now)),
        );
        let encoder = &mut encoder;

        let picks = views.iter().flat_map(|view| {
            view.picks.iter().map(|(instance, picks)| {
                (
                    [
                        ("rpc_service", view.service.as_str()),
                        ("server_address", instance.as_str()),
                    ],
                    *picks,
                )
            })
        });
        counters(
            encoder,
            "rpc_client_picks",
            "Attempts sent to each instance the directory knows now.",
            picks,
        )?;
        let states = views.iter().flat_map(|view| {
            [
                ("healthy", view.healthy),
                ("ejected", view.ejected),
                ("closing", view.closing),
            ]
            .map(|(state, count)| {
                (
                    [("rpc_service", view.service.as_str()), ("state", state)],
                    count,
                )
            })
        });
        gauges(
            encoder,
            "rpc_client_instances",
            "Instances in the directory by state: healthy, ejected, closing.",
            None,
            states,
        )?;
        Self::per_service(
            encoder,
            &views,
            "rpc_client_ejections",
            "Instances ejected by the blacklist.",
            |counts| counts.blacklist.ejections,
        )?;
        Self::per_service(
            encoder,
            &views,
            "rpc_client_unresponsive_ejections",
            "Ejections because a connection did not answer a PING (a host that vanished, a paused process); also in rpc_client_ejections.",
            |counts| counts.blacklist.unresponsive,
        )?;
        let retries = views.iter().flat_map(|view| {
            RETRY_REASONS.map(|reason| {
                (
                    [
                        ("rpc_service", view.service.as_str()),
                        ("reason", reason.as_str()),
                    ],
                    view.counts.retries_after(reason),
                )
            })
        });
        counters(
            encoder,
            "rpc_client_retries",
            "Retries, by the failure that led to them.",
            retries,
        )?;
        Self::per_service(
            encoder,
            &views,
            "rpc_client_retry_budget_exhausted",
            "Retries not made because the retry budget was empty.",
            |counts| counts.budget_exhausted,
        )?;
        Self::per_service(
            encoder,
            &views,
            "rpc_client_failovers",
            "Requests a closing provider refused (not executed), sent to another instance.",
            |counts| counts.reroutes,
        )?;
        Self::per_service(
            encoder,
            &views,
            "rpc_client_no_provider",
            "Calls that found no provider at all.",
            |counts| counts.no_provider,
        )
    }
}

#[cfg(test)]
mod tests;
