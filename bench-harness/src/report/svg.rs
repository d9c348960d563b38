//! Minimal inline SVG charts (line and grouped bar), no JavaScript, no
//! external CSS, so a report is one self-contained file.

use std::fmt::Write;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 160.0;
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

fn legend(out: &mut String, names: &[&str]) {
    for (index, name) in names.iter().enumerate() {
        let y = MARGIN_TOP + 14.0 * index as f64;
        let x = WIDTH - MARGIN_RIGHT + 10.0;
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            y,
            color(index),
            x + 14.0,
            y + 9.0,
            escape(name)
        );
    }
}

fn nice_max(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= value {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

fn axes(out: &mut String, y_max: f64, y_label: &str) {
    let plot_bottom = HEIGHT - MARGIN_BOTTOM;
    let plot_right = WIDTH - MARGIN_RIGHT;
    let _ = write!(
        out,
        r##"<line x1="{MARGIN_LEFT}" y1="{plot_bottom}" x2="{plot_right}" y2="{plot_bottom}" stroke="#444"/><line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{plot_bottom}" stroke="#444"/>"##
    );
    for tick in 0..=4 {
        let value = y_max * f64::from(tick) / 4.0;
        let y = plot_bottom - (plot_bottom - MARGIN_TOP) * f64::from(tick) / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{MARGIN_LEFT}" y1="{y}" x2="{plot_right}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            MARGIN_LEFT - 4.0,
            y + 4.0,
            short_number(value)
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
    if magnitude >= 1e9 {
        format!("{:.1}G", value / 1e9)
    } else if magnitude >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if magnitude >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if magnitude >= 10.0 || magnitude == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
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
    let y_max = nice_max(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    axes(&mut out, y_max, y_label);
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
                    HEIGHT - MARGIN_BOTTOM - plot_height * (y / y_max)
                )
            })
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
            color(index),
            points.join(" ")
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text x="{}" y="{}" text-anchor="end">{}</text>"#,
        MARGIN_LEFT + plot_width / 2.0,
        HEIGHT - 8.0,
        escape(x_label),
        WIDTH - MARGIN_RIGHT,
        HEIGHT - MARGIN_BOTTOM + 14.0,
        short_number(x_max)
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
    let mut out = String::new();
    header(&mut out, title);
    let y_max = nice_max(values.iter().flatten().copied().fold(0.0, f64::max));
    axes(&mut out, y_max, y_label);
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let group_width = plot_width / categories.len().max(1) as f64;
    let bar_width = group_width * 0.8 / series_names.len().max(1) as f64;
    for (category_index, category) in categories.iter().enumerate() {
        let group_x = MARGIN_LEFT + group_width * category_index as f64 + group_width * 0.1;
        for (series_index, row) in values.iter().enumerate() {
            let value = row.get(category_index).copied().unwrap_or(0.0);
            let height = plot_height * (value / y_max);
            let x = group_x + bar_width * series_index as f64;
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{height:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                HEIGHT - MARGIN_BOTTOM - height,
                bar_width.max(1.0),
                color(series_index),
                escape(series_names.get(series_index).map_or("", String::as_str)),
                short_number(value)
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
    fn bar_chart_has_a_bar_per_value() {
        let svg = bar_chart(
            "t",
            "us",
            &["p50".into(), "p99".into()],
            &["x".into(), "y".into()],
            &[vec![1.0, 2.0], vec![3.0, 4.0]],
        );
        assert_eq!(svg.matches("<rect x=").count() - 2, 4); // minus 2 legend swatches
        assert!(svg.contains("<title>y: 4.00</title>"));
    }

    #[test]
    fn numbers_and_scales() {
        assert_eq!(short_number(1500.0), "1.5k");
        assert_eq!(short_number(2_300_000.0), "2.3M");
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(180.0), 200.0);
        assert_eq!(nice_max(0.0), 1.0);
    }
}
