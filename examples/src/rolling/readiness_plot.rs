//! With `--admin`, the timeline's last panel: one lane per instance, green while its
//! admin endpoint said ready, orange while it said not ready (shutting down), empty
//! once it was gone — so a roll shows each replacement ready before, or after, the
//! instance it replaces stops being ready.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::readiness::{Readiness, ReadinessRecord};
use super::summary::Summary;

/// Pixels per instance lane.
const LANE: u32 = 22;
/// Pixels around the lanes (caption, axis).
const FRAME: u32 = 90;

/// The panel's height for `summary`: 0 without `--admin`.
pub(crate) fn height(summary: &Summary) -> u32 {
    match summary.readiness.len() {
        0 => 0,
        lanes => FRAME + LANE * lanes as u32,
    }
}

/// Draws the lanes on `area`, over the run's `seconds`.
pub(crate) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    summary: &Summary,
    seconds: f64,
) -> Result<(), String> {
    let records = &summary.readiness;
    if records.is_empty() {
        return Ok(());
    }
    let lanes = records.len();
    // The same left margin as the charts above, so the seconds line up.
    let mut chart = ChartBuilder::on(area)
        .caption(
            "readiness (admin GET /ready): green ready, orange not ready",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds, 0f64..lanes as f64)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .y_labels(0)
        .x_desc("seconds")
        .draw()
        .map_err(|e| e.to_string())?;
    for (index, record) in records.iter().enumerate() {
        // The first record on top.
        let bottom = (lanes - 1 - index) as f64 + 0.15;
        for (from, to, state) in spans(record, seconds) {
            let colour = match state {
                Readiness::Ready => GREEN.mix(0.6),
                Readiness::NotReady => RGBColor(255, 140, 0).mix(0.8),
                Readiness::Gone => continue,
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(from.max(0.0), bottom), (to.max(0.0), bottom + 0.7)],
                    colour.filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        // The lane's name inside its first bar.
        let start = record.changes.first().map_or(0.0, |c| c.at_s.max(0.0));
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{} {}", record.instance, port(&record.admin)),
                (start + seconds * 0.005, bottom + 0.6),
                ("sans-serif", 12).into_font(),
            )))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Each state of `record` with when it began and ended (the next change, or `end`).
fn spans(record: &ReadinessRecord, end: f64) -> Vec<(f64, f64, Readiness)> {
    record
        .changes
        .iter()
        .enumerate()
        .map(|(i, change)| {
            let to = record.changes.get(i + 1).map_or(end, |next| next.at_s);
            (change.at_s, to, change.state)
        })
        .collect()
}

/// `:41234` of `127.0.0.1:41234`.
fn port(admin: &str) -> &str {
    admin.rfind(':').map_or(admin, |colon| &admin[colon..])
}
