//! A [`MethodHistograms`] family in the OpenMetrics text format, with exemplars.
//!
//! prometheus-client writes OpenMetrics, but a collector of its own (as
//! `MethodHistograms` is, to record without a lock) cannot give it exemplars: its
//! `Exemplar` has no public constructor. So the call histograms are written here, in
//! the format prometheus-client writes the rest of the scrape in (OpenMetrics 1.0: the
//! family's `# TYPE`, `# UNIT`, `# HELP`, then each series' buckets, count and sum),
//! each bucket followed by its latest traced call:
//! `… _bucket{…,le="0.005"} 12 # {trace_id="4bf9…",span_id="00f0…"} 0.0031`.

use std::fmt::{self, Write};

use super::exemplar::CallExemplar;
use super::methods::MethodHistograms;

impl MethodHistograms {
    /// Writes this family into `out` in the OpenMetrics text format (without the final
    /// `# EOF`, which ends the whole scrape).
    pub fn write_openmetrics(&self, out: &mut String) -> fmt::Result {
        let family = format!("{}_seconds", self.name);
        writeln!(out, "# TYPE {family} histogram")?;
        writeln!(out, "# UNIT {family} seconds")?;
        writeln!(out, "# HELP {family} {}", escape_help(self.help))?;
        for series in self.all() {
            let full_method = series.full_method();
            for (index, slot) in series.by_value.iter().enumerate() {
                let Some(histogram) = slot.get() else {
                    continue;
                };
                let labels = label_text(&self.labels(&series, &full_method, index));
                let snapshot = histogram.snapshot();
                let mut cumulative = 0;
                for ((bound, count), exemplar) in snapshot.buckets.iter().zip(&snapshot.exemplars) {
                    cumulative += count;
                    let le = if bound.is_infinite() {
                        "+Inf".to_owned()
                    } else {
                        format!("{bound:?}")
                    };
                    write!(out, "{family}_bucket{{{labels},le=\"{le}\"}} {cumulative}")?;
                    if let Some(exemplar) = exemplar {
                        write_exemplar(out, exemplar)?;
                    }
                    out.push('\n');
                }
                writeln!(out, "{family}_count{{{labels}}} {}", snapshot.count)?;
                writeln!(out, "{family}_sum{{{labels}}} {:?}", snapshot.sum)?;
            }
        }
        Ok(())
    }
}

/// ` # {trace_id="…",span_id="…"} <seconds>`: the exemplar after a bucket's value.
fn write_exemplar(out: &mut String, exemplar: &CallExemplar) -> fmt::Result {
    write!(
        out,
        " # {{trace_id=\"{:032x}\",span_id=\"{:016x}\"}} {:?}",
        exemplar.trace_id, exemplar.span_id, exemplar.seconds
    )
}

/// `name="value",…` with the values escaped as OpenMetrics asks.
fn label_text(labels: &[(&str, &str)]) -> String {
    let mut text = String::new();
    for (n, (name, value)) in labels.iter().enumerate() {
        if n > 0 {
            text.push(',');
        }
        text.push_str(name);
        text.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => text.push_str("\\\\"),
                '"' => text.push_str("\\\""),
                '\n' => text.push_str("\\n"),
                c => text.push(c),
            }
        }
        text.push('"');
    }
    text
}

/// A help text on one line, its backslashes escaped.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::STATUS_CODE;

    #[test]
    fn buckets_carry_their_latest_traced_call() {
        let histograms = MethodHistograms::new("rpc_test_call_duration", "Test.", STATUS_CODE);
        let series = histograms.series("/echo.Echo/Echo");
        series.observe_call(0, Duration::from_micros(300), Some((0x4bf9, 0xf0)));
        series.observe_call(0, Duration::from_millis(2), None);
        let mut text = String::new();
        histograms.write_openmetrics(&mut text).unwrap();
        let labels = r#"rpc_system="grpc",rpc_service="echo.Echo",rpc_method="Echo",rpc_grpc_status_code="0""#;
        assert!(text.starts_with("# TYPE rpc_test_call_duration_seconds histogram\n# UNIT rpc_test_call_duration_seconds seconds\n"), "{text}");
        assert!(
            text.contains(&format!(
                "rpc_test_call_duration_seconds_bucket{{{labels},le=\"0.0005\"}} 1 # {{trace_id=\"00000000000000000000000000004bf9\",span_id=\"00000000000000f0\"}} 0.0003\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "rpc_test_call_duration_seconds_bucket{{{labels},le=\"0.0025\"}} 2\n"
            )),
            "an untraced call is counted, with no exemplar: {text}"
        );
        assert!(
            text.contains(&format!(
                "rpc_test_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 2\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "rpc_test_call_duration_seconds_count{{{labels}}} 2\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_text(&[("a", "x\"y\\z\n")]), r#"a="x\"y\\z\n""#);
    }
}
