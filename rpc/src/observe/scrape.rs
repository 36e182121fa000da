//! Writing values read at scrape time as Prometheus gauges and counters: what every
//! collector here does, in one place.

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

/// The label set of a metric without labels.
pub(super) const NO_LABELS: [(&str, &str); 0] = [];

/// Seconds, the unit of every duration (appended to the name as `_seconds`).
pub(super) static SECONDS: Unit = Unit::Seconds;

/// Writes the gauge `name` with one sample per `(labels, value)`.
pub(super) fn gauges<L, V>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Result<(), fmt::Error>
where
    L: EncodeLabelSet,
    V: EncodeGaugeValue,
{
    let mut metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, value) in samples {
        metric.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// Writes the counter `name` (the encoder appends `_total`) with one sample per
/// `(labels, value)`; a value is a whole count (`u64`) or fractional (`f64`, CPU
/// seconds).
pub(super) fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in samples {
        metric
            .encode_family(&labels)?
            .encode_counter::<NoLabelSet, V, u64>(&value, None)?;
    }
    Ok(())
}

/// Writes the unlabelled gauge `name`.
pub(super) fn gauge<V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: V,
) -> Result<(), fmt::Error> {
    gauges(encoder, name, help, None, [(NO_LABELS, value)])
}

/// Writes the unlabelled counter `name`.
pub(super) fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), fmt::Error> {
    counters(encoder, name, help, [(NO_LABELS, value)])
}

/// The text a registry holding only `collector` encodes, for the collectors' tests.
#[cfg(test)]
pub(super) fn encode_one(collector: impl prometheus_client::collector::Collector) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(collector));
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        .expect("encoding into a String cannot fail");
    text
}
