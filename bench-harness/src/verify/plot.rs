//! The HTML page of a verify run: acknowledged sends per second as bars,
//! each fault window shaded over them (red for a kill, amber for a pause,
//! blue for a network cut, purple for a full disk, brown for a slow disk, green for a clock jump),
//! so a dip in availability can be read against the fault that caused it.
//! One self-contained file: inline SVG, no script.

use super::result::VerifyResult;
use crate::report::svg::{escape, nice_scale, short_number};
use std::fmt::Write;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 320.0;
const MARGIN_LEFT: f64 = 60.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 20.0;
const MARGIN_BOTTOM: f64 = 40.0;

/// Horizontal position of `second` on a plot `seconds` wide.
fn x_of(second: f64, seconds: f64) -> f64 {
    MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) * second / seconds
}

/// The fault windows as shaded, titled rectangles.
fn fault_rects(out: &mut String, result: &VerifyResult, seconds: f64) {
    for fault in &result.faults {
        let start = x_of(fault.start_ms as f64 / 1000.0, seconds);
        let end = x_of(fault.end_ms as f64 / 1000.0, seconds).min(WIDTH - MARGIN_RIGHT);
        let fill = match fault.kind.as_str() {
            "kill" => "#d62728",
            "pause" => "#ff7f0e",
            "disk" => "#9467bd",
            "slowdisk" => "#8c564b",
            "clock" => "#2ca02c",
            // The network's: partition and bridge.
            _ => "#1f77b4",
        };
        let _ = write!(
            out,
            r#"<rect x="{start:.1}" y="{MARGIN_TOP}" width="{:.1}" height="{:.1}" fill="{fill}" fill-opacity="0.2"><title>{}</title></rect>"#,
            (end - start).max(1.0),
            HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
            escape(&format!(
                "{} {} node {} ({} ms to {} ms)",
                fault.kind, fault.target, fault.node_id, fault.start_ms, fault.end_ms
            ))
        );
    }
}

/// Bars of acknowledged sends per second, with both axes.
fn ack_bars(out: &mut String, result: &VerifyResult, seconds: f64) {
    let max = result.acks_per_second.iter().copied().max().unwrap_or(0) as f64;
    let (step, ticks) = nice_scale(max);
    let top = step * f64::from(ticks);
    let plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let bar_width = (x_of(1.0, seconds) - x_of(0.0, seconds) - 1.0).max(1.0);
    for (second, &acks) in result.acks_per_second.iter().enumerate() {
        let height = plot_height * acks as f64 / top;
        let _ = write!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{bar_width:.1}" height="{height:.1}" fill="#1f77b4"><title>second {second}: {acks} acks</title></rect>"##,
            x_of(second as f64, seconds),
            HEIGHT - MARGIN_BOTTOM - height
        );
    }
    for tick in 0..=ticks {
        let y = HEIGHT - MARGIN_BOTTOM - plot_height * f64::from(tick) / f64::from(ticks);
        let _ = write!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            MARGIN_LEFT - 6.0,
            y + 4.0,
            short_number(step * f64::from(tick))
        );
    }
    let (x_step, x_ticks) = nice_scale(seconds);
    for tick in 0..=x_ticks {
        let second = x_step * f64::from(tick);
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x_of(second.min(seconds), seconds),
            HEIGHT - MARGIN_BOTTOM + 16.0,
            short_number(second)
        );
    }
}

/// The whole page.
pub fn render(result: &VerifyResult) -> String {
    let seconds = (result.acks_per_second.len() as f64).max(1.0);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    fault_rects(&mut svg, result, seconds);
    ack_bars(&mut svg, result, seconds);
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">seconds (red: kill, amber: pause, blue: network cut, purple: full disk, brown: slow disk, green: clock jump)</text></svg>"#,
        MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / 2.0,
        HEIGHT - 6.0
    );
    let verdict = if result.valid { "valid" } else { "INVALID" };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>rill-bench verify</title></head><body style=\"font-family:sans-serif\"><h1>rill-bench verify: {verdict}</h1><p>topic {} &middot; {} anomalies &middot; {} faults &middot; availability {:.3} &middot; longest gap {} ms</p><h2>Acknowledged sends per second</h2>{svg}</body></html>\n",
        escape(&result.topic),
        result.anomaly_count,
        result.faults_injected,
        result.availability,
        result.longest_gap_ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::history::FaultWindow;
    use crate::verify::result::{summarize, RunFacts};

    fn fault(kind: &str, start_ms: u64) -> FaultWindow {
        FaultWindow {
            kind: kind.into(),
            target: "random".into(),
            node_id: 2,
            partition: None,
            start_ms,
            end_ms: start_ms + 1500,
        }
    }

    #[test]
    fn each_fault_is_shaded_and_each_second_is_a_bar() {
        let facts = RunFacts {
            topic: "t<&>".into(),
            partitions: 1,
            workload_ms: 5000,
        };
        let faults = vec![
            fault("kill", 1000),
            fault("pause", 3000),
            fault("disk", 4000),
        ];
        let page = render(&summarize(facts, &[], &[], faults));
        assert_eq!(page.matches("fill-opacity").count(), 3);
        assert!(page.contains("kill random node 2 (1000 ms to 2500 ms)"));
        // Each kind its own colour, and the legend names them all.
        assert!(page.contains(r##"fill="#9467bd" fill-opacity"##));
        assert!(page.contains(r##"fill="#ff7f0e" fill-opacity"##));
        assert!(page.contains("purple: full disk"));
        assert_eq!(page.matches("acks</title>").count(), 5);
        assert!(page.contains("t&lt;&amp;&gt;"));
        assert!(page.contains("rill-bench verify: valid"));
    }
}
