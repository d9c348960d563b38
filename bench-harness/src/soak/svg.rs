//! The soak's charts: broker RSS, produce p99 and disk use over time, one
//! small line chart each, stacked in one SVG file. Hand-written polylines,
//! no plotting dependency, no script, so the file opens anywhere. A broker
//! that exited during the soak (`broker_alive: false`) is noted on top.

use super::report::{SoakReport, SoakSample};
use crate::report::svg::escape;
use std::fmt::Write;

const WIDTH: f64 = 640.0;
const CHART_HEIGHT: f64 = 170.0;
/// Room for the y labels on the left and the title on top.
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 30.0;

/// One chart: a title, the unit of its y axis and `(x, y)` points.
struct Chart {
    title: String,
    unit: &'static str,
    points: Vec<(f64, f64)>,
}

/// The three charts of a soak report as one SVG document.
pub fn render(report: &SoakReport) -> String {
    let samples = &report.samples;
    let series = |f: &dyn Fn(&SoakSample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| Some((s.elapsed_s, f(s)?)))
            .collect()
    };
    const MIB: f64 = 1024.0 * 1024.0;
    let has_dir = samples.iter().any(|s| s.disk_bytes.is_some());
    let disk = if has_dir {
        Chart {
            title: "disk use (bytes under the data dir)".into(),
            unit: "MiB",
            points: series(&|s| s.disk_bytes.map(|b| b as f64 / MIB)),
        }
    } else {
        // Without a data dir, the fall in the broker's free space since the
        // first sample (other writers on the disk count too).
        let first_free = samples.iter().find_map(|s| s.disk_free_bytes);
        Chart {
            title: "disk use (fall in rill_disk_free_bytes)".into(),
            unit: "MiB",
            points: series(&|s| {
                let (first, now) = (first_free?, s.disk_free_bytes?);
                Some((first as f64 - now as f64) / MIB)
            }),
        }
    };
    let charts = [
        Chart {
            title: "broker RSS".into(),
            unit: "MiB",
            points: series(&|s| s.rss_bytes.map(|b| b as f64 / MIB)),
        },
        Chart {
            title: "produce p99 per sample".into(),
            unit: "ms",
            points: series(&|s| Some(s.produce_p99_us as f64 / 1000.0)),
        },
        disk,
    ];
    let height = CHART_HEIGHT * charts.len() as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    let x_max = samples.iter().map(|s| s.elapsed_s).fold(0.0, f64::max);
    if let Some(pid) = report.settings.broker_pid.filter(|_| !report.broker_alive) {
        // The charts end where the broker died: say so where it shows.
        let _ = writeln!(
            out,
            r##"<text x="{}" y="18" text-anchor="end" fill="#c00" font-weight="bold">broker pid {pid} exited at {} s</text>"##,
            WIDTH - RIGHT,
            label(x_max)
        );
    }
    for (index, chart) in charts.iter().enumerate() {
        chart_svg(&mut out, chart, index as f64 * CHART_HEIGHT, x_max);
    }
    out.push_str("</svg>\n");
    out
}

/// One chart at vertical offset `top`: frame, min/max labels, polyline.
fn chart_svg(out: &mut String, chart: &Chart, top: f64, x_max: f64) {
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let (y0, y1) = (top + CHART_HEIGHT - BOTTOM, top + TOP);
    let y_max = chart.points.iter().map(|p| p.1).fold(0.0, f64::max);
    // Start at zero so that a drift is seen against the whole value; a
    // flat line at zero still gets a scale.
    let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let x_span = if x_max > 0.0 { x_max } else { 1.0 };
    let _ = writeln!(
        out,
        r#"<text x="{x0}" y="{}" font-size="13" font-weight="bold">{} ({})</text>"#,
        top + 18.0,
        escape(&chart.title),
        chart.unit
    );
    let _ = writeln!(
        out,
        r##"<path d="M{x0} {y1} V{y0} H{x1}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end">{}</text><text x="{}" y="{}" text-anchor="end">0</text>"#,
        x0 - 4.0,
        y1 + 4.0,
        label(y_top),
        x0 - 4.0,
        y0 + 4.0
    );
    let _ = writeln!(
        out,
        r#"<text x="{x0}" y="{}">0 s</text><text x="{x1}" y="{}" text-anchor="end">{} s</text>"#,
        y0 + 14.0,
        y0 + 14.0,
        label(x_max)
    );
    let points: Vec<String> = chart
        .points
        .iter()
        .map(|&(x, y)| {
            format!(
                "{:.1},{:.1}",
                x0 + (x / x_span) * (x1 - x0),
                y0 - (y / y_top) * (y0 - y1)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        r##"<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{}"/>"##,
        points.join(" ")
    );
    if chart.points.is_empty() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no data</text>"#,
            (x0 + x1) / 2.0,
            (y0 + y1) / 2.0
        );
    }
}

/// A short axis label: `1234`, `12.3`, `0.12`.
fn label(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_charts_with_one_polyline_each() {
        let samples: Vec<SoakSample> = (1..=4)
            .map(|i| SoakSample {
                elapsed_s: f64::from(i) * 3.0,
                rss_bytes: Some((40 + i as u64) << 20),
                produce_p99_us: 1_000 * i as u64,
                disk_bytes: Some(i as u64 * 1_000_000),
                ..SoakSample::default()
            })
            .collect();
        let report = SoakReport {
            samples,
            ..SoakReport::default()
        };
        let svg = render(&report);
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("broker RSS") && svg.contains("bytes under the data dir"));
        // The largest p99 (4 ms) is drawn 1/1.1 of the way up: not clipped.
        assert!(!svg.contains("no data"));
        assert!(!svg.contains("exited"));
        let empty = render(&SoakReport::default());
        assert_eq!(empty.matches("<polyline").count(), 3);
        assert_eq!(empty.matches("no data").count(), 3);
        let mut crashed = report.clone();
        crashed.settings.broker_pid = Some(42);
        crashed.broker_alive = false;
        let svg = render(&crashed);
        assert!(svg.contains("broker pid 42 exited at 12.0 s"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 3);
    }
}
