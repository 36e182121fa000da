//! A [`MethodHistograms`] family as data points for an exporter other than the
//! Prometheus scrape (OTLP): each series' attributes under OpenTelemetry's dotted names
//! and its histogram as it stands.

use super::histogram::HistogramSnapshot;
use super::methods::MethodHistograms;

/// One series of a family, now.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodPoint {
    /// Its attributes, by OpenTelemetry's names (`rpc.method`, `rpc.response.status_code`,
    /// ... as the family's conventions choose).
    pub attributes: Vec<(String, String)>,
    /// Its counts, sum and exemplars.
    pub histogram: HistogramSnapshot,
}

impl MethodHistograms {
    /// The family's name as OpenTelemetry writes it (`rpc.server.call.duration`), in
    /// seconds.
    pub fn otel_name(&self) -> String {
        self.name.replace('_', ".")
    }

    /// What the family measures (its Prometheus help text).
    pub fn description(&self) -> &'static str {
        self.help
    }

    /// Every series that has counted a call, now.
    pub fn points(&self) -> Vec<MethodPoint> {
        let mut points = Vec::new();
        for series in self.all() {
            let full_method = series.full_method();
            for (index, slot) in series.by_value.iter().enumerate() {
                let Some(histogram) = slot.get() else {
                    continue;
                };
                let attributes = self
                    .labels(&series, &full_method, index)
                    .into_iter()
                    .map(|(label, value)| (attribute_key(label), value.to_owned()))
                    .collect();
                points.push(MethodPoint {
                    attributes,
                    histogram: histogram.snapshot(),
                });
            }
        }
        points
    }
}

/// The attribute a Prometheus label stands for (`rpc_response_status_code` is
/// `rpc.response.status_code`); a label of our own (`outcome`) keeps its name.
fn attribute_key(label: &str) -> String {
    let key = match label {
        "rpc_system" => "rpc.system",
        "rpc_system_name" => "rpc.system.name",
        "rpc_service" => "rpc.service",
        "rpc_method" => "rpc.method",
        "rpc_grpc_status_code" => "rpc.grpc.status_code",
        "rpc_response_status_code" => "rpc.response.status_code",
        own => own,
    };
    key.to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rpc_core::RpcConventions;

    use super::*;
    use crate::metrics::STATUS_CODE;

    #[test]
    fn a_series_is_a_point_with_dotted_attributes() {
        let histograms = MethodHistograms::new("rpc_server_call_duration", "Calls.", STATUS_CODE)
            .with_conventions(RpcConventions::Stable);
        assert_eq!(histograms.otel_name(), "rpc.server.call.duration");
        histograms.observe("/echo.Echo/Echo", 5, Duration::from_millis(2));
        let points = histograms.points();
        assert_eq!(points.len(), 1);
        assert_eq!(
            points[0].attributes,
            [
                ("rpc.system.name".to_owned(), "grpc".to_owned()),
                ("rpc.method".to_owned(), "echo.Echo/Echo".to_owned()),
                (
                    "rpc.response.status_code".to_owned(),
                    "NOT_FOUND".to_owned()
                ),
            ]
        );
        assert_eq!(points[0].histogram.count, 1);
    }
}
