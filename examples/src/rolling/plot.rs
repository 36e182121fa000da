//! The SVG timeline of a run: succeeded per second (left axis), failed per second on an
//! axis of their own (right, with a dot per second that had any), p99 per second, a
//! marker per restart, and graceful on/off in the title; with `--admin`, each
//! instance's readiness below (`readiness_plot.rs`).

use std::path::Path;

use plotters::prelude::*;

use super::readiness_plot;
use super::summary::Summary;

/// Writes the SVG timeline of `summary` to `path`.
///
/// # Errors
/// The drawing or I/O error as text.
pub fn write_plot(summary: &Summary, path: &Path) -> Result<(), String> {
    let readiness_height = readiness_plot::height(summary);
    let root = SVGBackend::new(path, (1200, 700 + readiness_height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (charts, readiness) = root.split_vertically(700);
    let (upper, lower) = charts.split_vertically(430);
    let seconds = summary.per_second.len().max(1) as f64;
    let graceful = if summary.graceful { "ON" } else { "OFF" };
    let order = summary.provider_order.map_or("", |order| order.name());
    let streams = summary
        .streams
        .as_ref()
        .map_or_else(String::new, |streams| {
            format!(
                "; streams {} moved {} cut",
                streams.streams_moved, streams.streams_cut
            )
        });
    let title = format!(
        "graceful {graceful}: {} failed of {} sent ({} proxies, {} providers, {order}){streams}",
        summary.failed, summary.sent, summary.proxies, summary.providers
    );

    // The largest per-second `value`, at least `floor`.
    let peak = |value: fn(&rpc_testkit::load::Second) -> u64, floor: u64| {
        summary
            .per_second
            .iter()
            .map(value)
            .max()
            .unwrap_or(0)
            .max(floor) as f64
    };
    let peak_rate = peak(|s| s.sent, 1);
    // Failures get their own axis (right): a few a second would sit on the zero line of
    // a 0–5 000 axis and look like none, and showing that difference is why the plot
    // exists. The axis reaches at least 5 (4 × 1.25), so 1 failure is a fifth of it.
    let peak_failed = peak(|s| s.failed, 4);
    let mut rate = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..peak_rate * 1.15)
        .map_err(|e| e.to_string())?
        .set_secondary_coord(0f64..seconds, 0f64..peak_failed * 1.25);
    rate.configure_mesh()
        .x_desc("seconds")
        .y_desc("succeeded requests / s")
        .draw()
        .map_err(|e| e.to_string())?;
    rate.configure_secondary_axes()
        .y_desc("failed requests / s")
        .label_style(("sans-serif", 12).into_font().color(&RED))
        .draw()
        .map_err(|e| e.to_string())?;
    let per_second = |value: fn(&rpc_testkit::load::Second) -> f64| {
        summary
            .per_second
            .iter()
            .enumerate()
            .map(move |(i, s)| (i as f64, value(s)))
    };
    rate.draw_series(LineSeries::new(per_second(|s| s.succeeded as f64), &BLUE))
        .map_err(|e| e.to_string())?
        .label("succeeded / s (left axis)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    rate.draw_secondary_series(LineSeries::new(
        per_second(|s| s.failed as f64),
        RED.stroke_width(2),
    ))
    .map_err(|e| e.to_string())?
    .label(format!(
        "failed / s (right axis; a dot per second with failures): {} in all",
        summary.failed
    ))
    .legend(|(x, y)| Circle::new((x + 10, y), 4, RED.filled()));
    // A dot on every second that had a failure, so even one stands out.
    rate.draw_secondary_series(
        per_second(|s| s.failed as f64)
            .filter(|(_, failed)| *failed > 0.0)
            .map(|point| Circle::new(point, 4, RED.filled())),
    )
    .map_err(|e| e.to_string())?;
    draw_restarts(&mut rate, summary, peak_rate * 1.15)?;
    rate.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())?;

    let peak_p99 = summary
        .per_second
        .iter()
        .map(|s| s.p99_ms)
        .fold(1.0, f64::max);
    let mut latency = ChartBuilder::on(&lower)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..peak_p99 * 1.15)
        .map_err(|e| e.to_string())?;
    latency
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("p99 latency (ms)")
        .draw()
        .map_err(|e| e.to_string())?;
    latency
        .draw_series(LineSeries::new(per_second(|s| s.p99_ms), &MAGENTA))
        .map_err(|e| e.to_string())?
        .label("p99 ms")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], MAGENTA));
    draw_restarts(&mut latency, summary, peak_p99 * 1.15)?;
    latency
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())?;
    readiness_plot::draw(&readiness, summary, seconds)?;
    root.present().map_err(|e| e.to_string())
}

fn draw_restarts<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    summary: &Summary,
    top: f64,
) -> Result<(), String> {
    for restart in &summary.restart_details {
        let x = restart.at_s;
        chart
            .draw_series(std::iter::once(PathElement::new(
                [(x, 0.0), (x, top)],
                BLACK.mix(0.3).stroke_width(1),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Text::new(
                restart.instance.clone(),
                (x, top * 0.97),
                ("sans-serif", 11).into_font(),
            )))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rpc_testkit::load::Second;

    use super::*;
    use crate::rolling::options::Mode;
    use crate::rolling::summary::Latency;

    /// A run of 10 s at 5 000/s with graceful off: one failure in second 3, three in 6.
    fn graceful_off_run() -> Summary {
        let per_second = (0..10)
            .map(|second| {
                let failed = match second {
                    3 => 1,
                    6 => 3,
                    _ => 0,
                };
                Second {
                    sent: 5_000,
                    succeeded: 5_000 - failed,
                    failed,
                    p99_ms: 4.0,
                }
            })
            .collect();
        Summary {
            requested_rate: 5_000,
            achieved_rate: 5_000.0,
            sent: 50_000,
            succeeded: 49_996,
            failed: 4,
            not_sent: 0,
            failed_by_code: Default::default(),
            failure_samples: Vec::new(),
            success_rate: 99.992,
            restarts: 0,
            restarts_planned: 0,
            restart_details: Vec::new(),
            graceful: false,
            registry: "memory://".into(),
            mode: Mode::InProcess,
            max_surge: "25%".into(),
            max_unavailable: "25%".into(),
            proxy_order: Some(crate::rolling::Order::StartThenStop),
            provider_order: Some(crate::rolling::Order::StartThenStop),
            proxies: 1,
            providers: 1,
            payload_bytes: 64,
            work_ms: 1,
            duration_s: 10.0,
            latency_ms: Latency::default(),
            latency_steady_ms: Latency::default(),
            latency_during_restarts_ms: Latency::default(),
            latency_succeeded_ms: Latency::default(),
            peak_rss_bytes: None,
            per_second,
            readiness: Vec::new(),
            streams: None,
        }
    }

    /// Issue 15: 1 failure a second on a 5 000/s chart is visible (a dot per second with
    /// failures, on an axis of their own), and the title says graceful is off.
    #[test]
    fn failures_are_dots_on_their_own_axis_and_the_title_says_graceful_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.svg");
        write_plot(&graceful_off_run(), &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(
            svg.contains("graceful OFF: 4 failed of 50000 sent"),
            "title"
        );
        assert!(
            svg.contains("failed requests / s"),
            "the right axis is labelled"
        );
        // Two seconds with failures, plus the legend's dot.
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        // The dot of the single failure stands clear of the zero line: the right axis
        // spans 0..5, so 1 is a fifth of the way up, not 1/5 000.
        let ys: Vec<f64> = svg
            .split("<circle")
            .skip(1)
            .filter_map(|circle| {
                let cy = circle.split("cy=\"").nth(1)?.split('"').next()?;
                cy.parse().ok()
            })
            .collect();
        // The series' dots come first (seconds 3 and 6), the legend's last. SVG y grows
        // downwards.
        assert!(
            ys[0] - ys[1] > 100.0,
            "1 and 3 failures are far apart: {ys:?}"
        );
    }

    /// `--admin`: a lane per instance under the charts, named by instance and admin port,
    /// green while ready and orange while not ready.
    #[test]
    fn with_admin_each_instance_gets_a_readiness_lane() {
        use crate::rolling::{Readiness, ReadinessChange, ReadinessRecord};
        let change = |at_s, state| ReadinessChange {
            at_s,
            state,
            reason: String::new(),
        };
        let mut run = graceful_off_run();
        run.readiness = vec![
            ReadinessRecord {
                instance: "proxy-0".into(),
                admin: "127.0.0.1:40001".into(),
                changes: vec![
                    change(-0.2, Readiness::Ready),
                    change(3.0, Readiness::NotReady),
                    change(3.6, Readiness::Gone),
                ],
            },
            ReadinessRecord {
                instance: "proxy-0".into(),
                admin: "127.0.0.1:40002".into(),
                changes: vec![change(2.5, Readiness::Ready)],
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.svg");
        write_plot(&run, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(
            svg.contains("readiness (admin GET /ready)"),
            "the panel's caption"
        );
        assert!(
            svg.contains("proxy-0 :40001") && svg.contains("proxy-0 :40002"),
            "lanes named"
        );
        // 700 for the charts, 90 for the panel's frame, 22 per lane.
        assert!(svg.contains(r#"height="834""#), "taller by the lanes");
    }
}
