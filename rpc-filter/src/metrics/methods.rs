//! Duration histograms by gRPC method, looked up without a lock and encoded at scrape
//! time.
//!
//! A call finds its method's series in a copy-on-write map (one atomic load and a hash
//! lookup, no lock, no allocation); a method seen for the first time is added under a
//! mutex, which allocates its labels once. Within a method, one histogram per value of
//! the last label (the status code of a call, the outcome of an attempt) is made on its
//! first observation, so only codes that happened are exported.
//!
//! Labels stay bounded whatever the callers send: at most [`MAX_METHODS`] methods get
//! their own series, later ones and malformed paths share `_OTHER`, as OpenTelemetry
//! names a method it does not know.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use rpc_core::RpcConventions;
use rpc_core::semconv::STATUS_NAMES;

use super::histogram::DurationHistogram;
use crate::grpc_path::split_path;

/// Most methods with series of their own in one [`MethodHistograms`].
pub const MAX_METHODS: usize = 256;

/// The service and method label of calls whose method is not given a series of its own.
pub const OTHER: &str = rpc_core::semconv::OTHER;

/// The `rpc_system` (`rpc_system_name`) label of every series.
const RPC_SYSTEM: &str = "grpc";

static SECONDS: Unit = Unit::Seconds;

/// The last label of a family of series: its name and every value it takes, under
/// the old RPC conventions and under the stable ones ([`RpcConventions`]).
#[derive(Clone, Copy, Debug)]
pub struct LastLabel {
    /// The label's name (old conventions).
    pub name: &'static str,
    /// Its values; an observation names one by index.
    pub values: &'static [&'static str],
    /// The label's name under the stable conventions (may equal `name`).
    pub stable_name: &'static str,
    /// Its values under the stable conventions, in the order of `values`.
    pub stable_values: &'static [&'static str],
}

/// The call's gRPC status, indexed by the code's number (`tonic::Code as usize`):
/// `rpc_grpc_status_code` (`"14"`), or under the stable conventions
/// `rpc_response_status_code` (`"UNAVAILABLE"`).
pub const STATUS_CODE: LastLabel = LastLabel {
    name: "rpc_grpc_status_code",
    values: &[
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    ],
    stable_name: "rpc_response_status_code",
    stable_values: &STATUS_NAMES,
};

/// The histograms of one method, one per value of the family's last label.
pub struct MethodSeries {
    service: Box<str>,
    method: Box<str>,
    pub(super) by_value: Box<[OnceLock<Box<DurationHistogram>>]>,
}

impl MethodSeries {
    fn new(service: &str, method: &str, label: LastLabel) -> Self {
        Self {
            service: service.into(),
            method: method.into(),
            by_value: label.values.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// Counts `duration` under the last label's value number `value` (ignored if the
    /// label has no such value).
    pub fn observe(&self, value: usize, duration: Duration) {
        self.observe_call(value, duration, None);
    }

    /// As [`MethodSeries::observe`], the call becoming its bucket's exemplar when
    /// `trace` (its trace and span ids) is given.
    pub fn observe_call(&self, value: usize, duration: Duration, trace: Option<(u128, u64)>) {
        if let Some(slot) = self.by_value.get(value) {
            slot.get_or_init(Box::default).observe_call(duration, trace);
        }
    }
}

impl MethodSeries {
    /// `package.Service/Method`, or `_OTHER` for the shared series.
    pub(super) fn full_method(&self) -> String {
        if &*self.service == OTHER {
            OTHER.to_owned()
        } else {
            format!("{}/{}", self.service, self.method)
        }
    }
}

impl fmt::Debug for MethodSeries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MethodSeries")
            .field("service", &self.service)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// Series by request path.
type PathMap = HashMap<Box<str>, Arc<MethodSeries>, foldhash::fast::RandomState>;

/// A family of duration histograms labelled `rpc_system`, `rpc_service`, `rpc_method`
/// and one more label (under the stable conventions `rpc_system_name`, `rpc_method`
/// fully qualified, and the last label's stable name), exported as `<name>_seconds`.
/// Register it with a prometheus-client `Registry` (`register_collector`).
pub struct MethodHistograms {
    pub(super) name: &'static str,
    pub(super) help: &'static str,
    label: LastLabel,
    /// Which label names the scrape writes (a call's lookup does not read it).
    conventions: RpcConventions,
    /// Looked up on every call by its path: hashed with foldhash rather than SipHash
    /// (a path a peer sends only finds or misses a series; the map never holds more
    /// than [`MAX_METHODS`]).
    by_path: ArcSwap<PathMap>,
    /// Serializes additions to `by_path` (readers never take it).
    adding: Mutex<()>,
    other: Arc<MethodSeries>,
}

impl MethodHistograms {
    /// An empty family named `name` (without the `_seconds` unit suffix), described by
    /// `help`, whose last label is `label`.
    pub fn new(name: &'static str, help: &'static str, label: LastLabel) -> Self {
        Self {
            name,
            help,
            label,
            conventions: RpcConventions::Old,
            by_path: ArcSwap::default(),
            adding: Mutex::new(()),
            other: Arc::new(MethodSeries::new(OTHER, OTHER, label)),
        }
    }

    /// The same family, its labels named as `conventions` chooses (default
    /// [`RpcConventions::Old`]).
    pub fn with_conventions(self, conventions: RpcConventions) -> Self {
        Self {
            conventions,
            ..self
        }
    }

    /// The series of `path` (`/package.Service/Method`) if it has one already: the
    /// request path's lookup, with no lock and no allocation.
    pub fn known(&self, path: &str) -> Option<Arc<MethodSeries>> {
        self.by_path.load().get(path).cloned()
    }

    /// The series of `path`, added if it has none yet; `_OTHER` for a malformed path or
    /// once [`MAX_METHODS`] methods have series.
    pub fn series(&self, path: &str) -> Arc<MethodSeries> {
        if let Some(series) = self.known(path) {
            return series;
        }
        let Some((service, method)) = split_path(path) else {
            return self.other.clone();
        };
        let _adding = self.adding.lock();
        let current = self.by_path.load();
        if let Some(series) = current.get(path) {
            return series.clone();
        }
        if current.len() >= MAX_METHODS {
            return self.other.clone();
        }
        let series = Arc::new(MethodSeries::new(service, method, self.label));
        let mut grown = HashMap::clone(&current);
        grown.insert(path.into(), series.clone());
        self.by_path.store(Arc::new(grown));
        series
    }

    /// The series shared by calls whose method gets none of its own.
    pub fn other(&self) -> &Arc<MethodSeries> {
        &self.other
    }

    /// Counts `duration` for `path` under the last label's value number `value`.
    pub fn observe(&self, path: &str, value: usize, duration: Duration) {
        match self.by_path.load().get(path) {
            Some(series) => series.observe(value, duration),
            None => self.series(path).observe(value, duration),
        }
    }

    /// Every series, `_OTHER` last, in a stable order for the scrape.
    pub(super) fn all(&self) -> Vec<Arc<MethodSeries>> {
        let mut all: Vec<_> = self.by_path.load().values().cloned().collect();
        all.sort_by(|a, b| (&a.service, &a.method).cmp(&(&b.service, &b.method)));
        all.push(self.other.clone());
        all
    }
}

impl MethodHistograms {
    /// The labels of `series`'s histogram for the last label's value number `index`.
    pub(super) fn labels<'a>(
        &'a self,
        series: &'a MethodSeries,
        full_method: &'a str,
        index: usize,
    ) -> Vec<(&'a str, &'a str)> {
        let mut labels = Vec::with_capacity(6);
        let (old, stable) = (
            self.conventions.emits_old(),
            self.conventions.emits_stable(),
        );
        if old {
            labels.push(("rpc_system", RPC_SYSTEM));
        }
        if stable {
            labels.push(("rpc_system_name", RPC_SYSTEM));
        }
        if old {
            labels.push(("rpc_service", &*series.service));
        }
        // Both sets name the method `rpc_method`; the stable one (fully qualified) wins.
        let method = if stable { full_method } else { &*series.method };
        labels.push(("rpc_method", method));
        let label = self.label;
        if old {
            labels.push((label.name, label.values[index]));
        }
        if stable && !(old && label.stable_name == label.name) {
            labels.push((label.stable_name, label.stable_values[index]));
        }
        labels
    }
}

impl fmt::Debug for MethodHistograms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MethodHistograms")
            .field("name", &self.name)
            .field("methods", &self.by_path.load().len())
            .finish_non_exhaustive()
    }
}

impl Collector for MethodHistograms {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut family = encoder.encode_descriptor(
            self.name,
            self.help,
            Some(&SECONDS),
            MetricType::Histogram,
        )?;
        for series in self.all() {
            let full_method = series.full_method();
            for (index, slot) in series.by_value.iter().enumerate() {
                let Some(histogram) = slot.get() else {
                    continue;
                };
                let labels = self.labels(&series, &full_method, index);
                let snapshot = histogram.snapshot();
                family
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(
                        snapshot.sum,
                        snapshot.count,
                        &snapshot.buckets,
                        None,
                    )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    fn encode(histograms: MethodHistograms) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(histograms));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn a_method_is_encoded_with_its_labels_and_only_the_codes_seen() {
        let histograms = MethodHistograms::new("rpc_test_call_duration", "Test.", STATUS_CODE);
        histograms.observe("/echo.Echo/Echo", 0, Duration::from_micros(300));
        histograms.observe("/echo.Echo/Echo", 14, Duration::from_millis(2));
        let text = encode(histograms);
        assert!(
            text.contains("# TYPE rpc_test_call_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"rpc_test_call_duration_seconds_count{rpc_system="grpc",rpc_service="echo.Echo",rpc_method="Echo",rpc_grpc_status_code="0"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"rpc_grpc_status_code="14"} 1"#), "{text}");
        assert!(!text.contains(r#"rpc_grpc_status_code="2""#), "{text}");
        assert!(!text.contains(OTHER), "nothing fell into _OTHER: {text}");
    }

    #[test]
    fn methods_beyond_the_bound_and_malformed_paths_share_other() {
        let histograms = MethodHistograms::new("rpc_test_call_duration", "Test.", STATUS_CODE);
        for n in 0..MAX_METHODS + 10 {
            histograms.observe(&format!("/s.S/M{n}"), 0, Duration::from_millis(1));
        }
        histograms.observe("not-a-path", 0, Duration::from_millis(1));
        assert_eq!(histograms.by_path.load().len(), MAX_METHODS);
        let other = histograms.other().by_value[0].get().unwrap().snapshot();
        assert_eq!(other.count, 11);
    }

    #[test]
    fn stable_and_dup_conventions_name_the_labels_anew() {
        let stable = MethodHistograms::new("rpc_test_call_duration", "Test.", STATUS_CODE)
            .with_conventions(RpcConventions::Stable);
        stable.observe("/echo.Echo/Echo", 14, Duration::from_millis(2));
        stable.observe("not-a-path", 0, Duration::from_millis(1));
        let text = encode(stable);
        assert!(
            text.contains(
                r#"rpc_test_call_duration_seconds_count{rpc_system_name="grpc",rpc_method="echo.Echo/Echo",rpc_response_status_code="UNAVAILABLE"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"{rpc_system_name="grpc",rpc_method="_OTHER",rpc_response_status_code="OK"} 1"#
            ),
            "{text}"
        );
        let dup = MethodHistograms::new("rpc_test_call_duration", "Test.", STATUS_CODE)
            .with_conventions(RpcConventions::Dup);
        dup.observe("/echo.Echo/Echo", 0, Duration::from_millis(2));
        let text = encode(dup);
        assert!(
            text.contains(
                r#"{rpc_system="grpc",rpc_system_name="grpc",rpc_service="echo.Echo",rpc_method="echo.Echo/Echo",rpc_grpc_status_code="0",rpc_response_status_code="OK"} 1"#
            ),
            "{text}"
        );
    }
}
