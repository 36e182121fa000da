//! The SVG timeline of a run: rate, failures and p99 per second, a marker per restart,
//! and with `--admin` each instance's readiness (`readiness_plot.rs`).

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
    let graceful = if summary.graceful { "on" } else { "off" };
    let title = format!(
        "rolling-deploy: {} sent, {} failed, graceful {graceful} ({} proxies, {} providers)",
        summary.sent, summary.failed, summary.proxies, summary.providers
    );

    let peak_rate = summary
        .per_second
        .iter()
        .map(|s| s.sent)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut rate = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..peak_rate * 1.15)
        .map_err(|e| e.to_string())?;
    rate.configure_mesh()
        .x_desc("seconds")
        .y_desc("requests / s")
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
        .label("succeeded / s")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    rate.draw_series(LineSeries::new(
        per_second(|s| s.failed as f64),
        RED.stroke_width(2),
    ))
    .map_err(|e| e.to_string())?
    .label("failed / s")
    .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
    draw_restarts(&mut rate, summary, peak_rate * 1.15)?;
    rate.configure_series_labels()
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
