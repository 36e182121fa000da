//! The SVG timeline of a hot-upgrade run (`--plot FILE`): succeeded requests per second
//! (left axis) and failed ones on an axis of their own (right, a dot on every second
//! that had any), p99 per second below, and each upgrade as a shaded band from its
//! trigger to the old generation's exit, labelled with its outcome.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use rpc_testkit::load::Second;

use super::summary::Summary;

/// Writes the SVG timeline of `summary` to `path`.
///
/// # Errors
/// The drawing or I/O error as text.
pub fn write_plot(summary: &Summary, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (upper, lower) = root.split_vertically(430);
    draw_rates(summary, &upper)?;
    draw_latency(summary, &lower)?;
    root.present().map_err(|e| e.to_string())
}

/// The largest per-second `value`, at least `floor`.
fn peak(summary: &Summary, value: fn(&Second) -> f64, floor: f64) -> f64 {
    summary.per_second.iter().map(value).fold(floor, f64::max)
}

fn seconds(summary: &Summary) -> f64 {
    (summary.per_second.len() as f64).max(1.0)
}

/// `(second, value)` for every second of the run.
fn series(summary: &Summary, value: fn(&Second) -> f64) -> Vec<(f64, f64)> {
    summary
        .per_second
        .iter()
        .enumerate()
        .map(|(i, s)| (i as f64, value(s)))
        .collect()
}

fn draw_rates<DB: DrawingBackend>(
    summary: &Summary,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let title = format!(
        "hot upgrade: {} failed of {} sent, {} of {} upgrades, streams {} moved {} cut, {} dials refused",
        summary.failed,
        summary.sent,
        summary.upgrades,
        summary.upgrades_planned,
        summary.streams_moved,
        summary.streams_cut,
        summary.connections_refused
    );
    let top = peak(summary, |s| s.sent as f64, 1.0) * 1.15;
    // Failures get their own axis: a few a second would vanish on a 0–2 000 axis. It
    // reaches at least 5, so one failure is a fifth of it.
    let top_failed = peak(summary, |s| s.failed as f64, 4.0) * 1.25;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds(summary), 0f64..top)
        .map_err(|e| e.to_string())?
        .set_secondary_coord(0f64..seconds(summary), 0f64..top_failed);
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("succeeded requests / s")
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .configure_secondary_axes()
        .y_desc("failed requests / s")
        .label_style(("sans-serif", 12).into_font().color(&RED))
        .draw()
        .map_err(|e| e.to_string())?;
    draw_upgrades(&mut chart, summary, top)?;
    chart
        .draw_series(LineSeries::new(
            series(summary, |s| s.succeeded as f64),
            &BLUE,
        ))
        .map_err(|e| e.to_string())?
        .label("succeeded / s (left axis)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    let failed = series(summary, |s| s.failed as f64);
    chart
        .draw_secondary_series(LineSeries::new(failed.clone(), RED.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(format!(
            "failed / s (right axis): {} in all",
            summary.failed
        ))
        .legend(|(x, y)| Circle::new((x + 10, y), 4, RED.filled()));
    chart
        .draw_secondary_series(
            failed
                .into_iter()
                .filter(|(_, n)| *n > 0.0)
                .map(|point| Circle::new(point, 4, RED.filled())),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())
}

fn draw_latency<DB: DrawingBackend>(
    summary: &Summary,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let top = peak(summary, |s| s.p99_ms, 1.0) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds(summary), 0f64..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("p99 ms")
        .draw()
        .map_err(|e| e.to_string())?;
    draw_upgrades(&mut chart, summary, top)?;
    chart
        .draw_series(LineSeries::new(series(summary, |s| s.p99_ms), &BLACK))
        .map_err(|e| e.to_string())?
        .label("p99 of the requests sent in each second")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())
}

/// A shaded band per upgrade, from its trigger to the end of its wait (the old
/// generation's exit, or the failure), with its outcome above it.
fn draw_upgrades<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    summary: &Summary,
    top: f64,
) -> Result<(), String> {
    for window in &summary.upgrade_windows {
        let colour = if window.succeeded { GREEN } else { RED };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (window.from_s, 0.0),
                    (window.to_s.max(window.from_s + 0.05), top),
                ],
                colour.mix(0.15).filled(),
            )))
            .map_err(|e| e.to_string())?;
        let label = if window.succeeded {
            "upgrade"
        } else {
            "failed"
        };
        chart
            .draw_series(std::iter::once(Text::new(
                label,
                (window.from_s, top * 0.97),
                ("sans-serif", 12).into_font(),
            )))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
