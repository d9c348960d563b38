//! Minimal inline SVG charts (line and grouped bar), no JavaScript, no
//! external CSS, so a report is one self-contained file.

use crate::runner::progress::format_us;
use std::fmt::Write;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 70.0;
/// Room for the legend: names of up to [`LEGEND_NAME_CHARS_MAX`] characters.
const MARGIN_RIGHT: f64 = 300.0;
const LEGEND_NAME_CHARS_MAX: usize = 44;
/// Most intervals on a linear axis.
const TICKS_MAX: u32 = 5;
const MARGIN_TOP: f64 = 30.0;
const MARGIN_BOTTOM: f64 = 40.0;
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One named line of `(x, y)` points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11"><text x="{}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        MARGIN_LEFT,
        escape(title)
    );
}

/// `name`, shortened with an ellipsis to what the legend has room for.
fn legend_name(name: &str) -> String {
    if name.chars().count() <= LEGEND_NAME_CHARS_MAX {
        return name.to_string();
    }
    let mut short: String = name.chars().take(LEGEND_NAME_CHARS_MAX - 1).collect();
    short.push('\u{2026}');
    short
}

fn legend(out: &mut String, names: &[&str]) {
    for (index, name) in names.iter().enumerate() {
        let y = MARGIN_TOP + 14.0 * index as f64;
        let x = WIDTH - MARGIN_RIGHT + 10.0;
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}"><title>{}</title>{}</text>"#,
            y,
            color(index),
            x + 14.0,
            y + 9.0,
            escape(name),
            escape(&legend_name(name))
        );
    }
}

/// A linear axis from 0: the smallest round step (1, 2, 2.5 or 5 times a
/// power of ten) that covers `value` in at most [`TICKS_MAX`] intervals, and
/// how many intervals it takes.
pub fn nice_scale(value: f64) -> (f64, u32) {
    if value <= 0.0 || !value.is_finite() {
        return (0.25, 4);
    }
    let rough = value / f64::from(TICKS_MAX);
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| step * f64::from(TICKS_MAX) >= value)
        .unwrap_or(10.0 * magnitude);
    let ticks = ((value / step).ceil() as u32).clamp(1, TICKS_MAX);
    (step, ticks)
}

/// The vertical scale of a chart.
enum YScale {
    /// `ticks` intervals of `step` from 0.
    Linear { step: f64, ticks: u32 },
    /// Decades `10^low ..= 10^high`.
    Log { low: i32, high: i32 },
}

impl YScale {
    fn linear(max_value: f64) -> YScale {
        let (step, ticks) = nice_scale(max_value);
        YScale::Linear { step, ticks }
    }

    /// Decades around the positive values (at least one decade).
    fn log(values: impl Iterator<Item = f64>) -> YScale {
        let (min, max) = values
            .filter(|v| *v > 0.0 && v.is_finite())
            .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if max <= 0.0 {
            return YScale::Log { low: 0, high: 1 };
        }
        let low = min.log10().floor() as i32;
        let high = (max.log10().ceil() as i32).max(low + 1);
        YScale::Log { low, high }
    }

    /// Height above the x axis, as a fraction of the plot height.
    fn fraction(&self, value: f64) -> f64 {
        match *self {
            YScale::Linear { step, ticks } => value / (step * f64::from(ticks)),
            YScale::Log { low, high } => {
                if value <= 0.0 {
                    return 0.0;
                }
                ((value.log10() - f64::from(low)) / f64::from(high - low)).clamp(0.0, 1.0)
            }
        }
    }

    /// `(fraction, value)` of every tick.
    fn ticks(&self) -> Vec<(f64, f64)> {
        match *self {
            YScale::Linear { step, ticks } => (0..=ticks)
                .map(|t| (f64::from(t) / f64::from(ticks), step * f64::from(t)))
                .collect(),
            YScale::Log { low, high } => (low..=high)
                .map(|e| (self.fraction(10f64.powi(e)), 10f64.powi(e)))
                .collect(),
        }
    }
}

fn axes(out: &mut String, scale: &YScale, y_label: &str, tick_label: &dyn Fn(f64) -> String) {
    let plot_bottom = HEIGHT - MARGIN_BOTTOM;
    let plot_right = WIDTH - MARGIN_RIGHT;
    let _ = write!(
        out,
        r##"<line x1="{MARGIN_LEFT}" y1="{plot_bottom}" x2="{plot_right}" y2="{plot_bottom}" stroke="#444"/><line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{plot_bottom}" stroke="#444"/>"##
    );
    for (fraction, value) in scale.ticks() {
        let y = plot_bottom - (plot_bottom - MARGIN_TOP) * fraction;
        let _ = write!(
            out,
            r##"<line x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{plot_right}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            MARGIN_LEFT - 4.0,
            y + 4.0,
            escape(&tick_label(value))
        );
    }
    let _ = write!(
        out,
        r#"<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
        (MARGIN_TOP + plot_bottom) / 2.0,
        (MARGIN_TOP + plot_bottom) / 2.0,
        escape(y_label)
    );
}

/// `1.5k`, `2.3M`, `12`.
pub fn short_number(value: f64) -> String {
    let magnitude = value.abs();
    let scaled = |divisor: f64, suffix: &str| {
        let text = format!("{:.1}", value / divisor);
        format!("{}{suffix}", text.strip_suffix(".0").unwrap_or(&text))
    };
    if magnitude >= 1e9 {
        scaled(1e9, "G")
    } else if magnitude >= 1e6 {
        scaled(1e6, "M")
    } else if magnitude >= 1e3 {
        scaled(1e3, "k")
    } else if magnitude >= 10.0 || magnitude == 0.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Stroke width and dash attribute of the `index`th series of a line chart:
/// wide and solid first, then narrower and dashed.
fn stroke_of(index: usize) -> (f64, &'static str) {
    match index {
        0 => (3.5, ""),
        1 => (2.0, r#" stroke-dasharray="8 4""#),
        _ => (1.5, r#" stroke-dasharray="3 3""#),
    }
}

/// A line chart of several series sharing axes.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let mut out = String::new();
    header(&mut out, title);
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let (x_step, x_ticks) = nice_scale(x_max);
    let x_max = x_step * f64::from(x_ticks);
    let scale = YScale::linear(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    axes(&mut out, &scale, y_label, &short_number);
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    for (index, line) in series.iter().enumerate() {
        let points: Vec<String> = line
            .points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    MARGIN_LEFT + plot_width * (x / x_max),
                    HEIGHT - MARGIN_BOTTOM - plot_height * scale.fraction(*y)
                )
            })
            .collect();
        // Later series are drawn thinner and dashed over wider earlier
        // ones, so two that coincide (produce and consume at one rate)
        // both stay visible.
        let (width, dash) = stroke_of(index);
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="{width:.1}"{dash} points="{}"/>"#,
            color(index),
            points.join(" ")
        );
    }
    for tick in 0..=x_ticks {
        let x = MARGIN_LEFT + plot_width * f64::from(tick) / f64::from(x_ticks);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#444"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            HEIGHT - MARGIN_BOTTOM,
            HEIGHT - MARGIN_BOTTOM + 4.0,
            HEIGHT - MARGIN_BOTTOM + 16.0,
            short_number(x_step * f64::from(tick))
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        MARGIN_LEFT + plot_width / 2.0,
        HEIGHT - 6.0,
        escape(x_label)
    );
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// Grouped bars: one group per category, one bar per series in each group.
/// `values[series][category]`.
pub fn bar_chart(
    title: &str,
    y_label: &str,
    categories: &[String],
    series_names: &[String],
    values: &[Vec<f64>],
) -> String {
    let scale = YScale::linear(values.iter().flatten().copied().fold(0.0, f64::max));
    bars(
        title,
        y_label,
        categories,
        series_names,
        values,
        &scale,
        &short_number,
    )
}

/// Grouped bars of latencies in microseconds on a log scale (decades), so
/// that runs microseconds and seconds apart stay readable side by side;
/// ticks read `100us`, `1.0ms`, `1.00s`.
pub fn latency_bar_chart(
    title: &str,
    categories: &[String],
    series_names: &[String],
    values_us: &[Vec<f64>],
) -> String {
    let scale = YScale::log(values_us.iter().flatten().copied());
    bars(
        title,
        "latency (log scale)",
        categories,
        series_names,
        values_us,
        &scale,
        &|us| format_us(us.round() as u64),
    )
}

fn bars(
    title: &str,
    y_label: &str,
    categories: &[String],
    series_names: &[String],
    values: &[Vec<f64>],
    scale: &YScale,
    value_label: &dyn Fn(f64) -> String,
) -> String {
    let mut out = String::new();
    header(&mut out, title);
    axes(&mut out, scale, y_label, value_label);
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let group_width = plot_width / categories.len().max(1) as f64;
    let bar_width = group_width * 0.8 / series_names.len().max(1) as f64;
    for (category_index, category) in categories.iter().enumerate() {
        let group_x = MARGIN_LEFT + group_width * category_index as f64 + group_width * 0.1;
        for (series_index, row) in values.iter().enumerate() {
            let value = row.get(category_index).copied().unwrap_or(0.0);
            let height = plot_height * scale.fraction(value);
            let x = group_x + bar_width * series_index as f64;
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{height:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                HEIGHT - MARGIN_BOTTOM - height,
                bar_width.max(1.0),
                color(series_index),
                escape(series_names.get(series_index).map_or("", String::as_str)),
                escape(&value_label(value))
            );
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            group_x + group_width * 0.4,
            HEIGHT - MARGIN_BOTTOM + 14.0,
            escape(category)
        );
    }
    let names: Vec<&str> = series_names.iter().map(String::as_str).collect();
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_chart_has_one_polyline_per_series() {
        let series = vec![
            Series {
                name: "a<b".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            },
            Series {
                name: "c".into(),
                points: vec![(0.0, 3.0)],
            },
        ];
        let svg = line_chart("t", "s", "MB/s", &series);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&lt;b"));
    }

    #[test]
    fn coinciding_series_stay_visible() {
        let same = |name: &str| Series {
            name: name.into(),
            points: vec![(0.0, 5.0), (1.0, 5.0)],
        };
        let svg = line_chart("t", "s", "MB/s", &[same("produce"), same("consume")]);
        let lines: Vec<&str> = svg.split("<polyline").skip(1).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains(r#"stroke-width="3.5""#) && !lines[0].contains("dasharray"));
        assert!(lines[1].contains(r#"stroke-width="2.0""#) && lines[1].contains("dasharray"));
    }

    #[test]
    fn bar_chart_has_a_bar_per_value() {
        let svg = bar_chart(
            "t",
            "us",
            &["p50".into(), "p99".into()],
            &["x".into(), "y".into()],
            &[vec![1.0, 2.0], vec![3.0, 4.0]],
        );
        assert_eq!(svg.matches("<rect x=").count() - 2, 4); // minus 2 legend swatches
        assert!(svg.contains("<title>y: 4</title>"));
    }

    #[test]
    fn numbers_and_scales() {
        assert_eq!(short_number(1500.0), "1.5k");
        assert_eq!(short_number(2_300_000.0), "2.3M");
        assert_eq!(short_number(500_000.0), "500k");
        assert_eq!(short_number(2.5), "2.5");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(5.0), "5");
        // 0, 500k, .., 2.5M rather than quarters of 2.5M (625k, 1.9M).
        assert_eq!(nice_scale(2_280_725.0), (500_000.0, 5));
        assert_eq!(nice_scale(7.3), (2.0, 4));
        assert_eq!(nice_scale(180.0), (50.0, 4));
        assert_eq!(nice_scale(11.0), (2.5, 5));
        assert_eq!(nice_scale(0.0), (0.25, 4));
    }

    #[test]
    fn latency_bars_use_decades_and_durations() {
        let svg = latency_bar_chart(
            "t",
            &["p50".into(), "max".into()],
            &["fast".into(), "slow".into()],
            &[vec![875.0, 7_859.0], vec![2_240_511.0, 11_223_039.0]],
        );
        // Decades 100us ..= 100s, labelled as durations.
        for tick in [">100us<", ">1.0ms<", ">1.00s<", ">100.00s<"] {
            assert!(svg.contains(tick), "{tick} missing");
        }
        assert!(svg.contains("<title>slow: 11.22s</title>"));
    }

    #[test]
    fn long_legend_names_are_shortened() {
        let name = "x".repeat(60);
        let svg = line_chart(
            "t",
            "s",
            "ms",
            &[Series {
                name: name.clone(),
                points: vec![(1.0, 1.0)],
            }],
        );
        assert!(svg.contains(&format!("<title>{name}</title>")));
        assert!(svg.contains('\u{2026}'));
    }
}
