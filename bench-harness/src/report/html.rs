//! The self-contained HTML report: facts, a figures table and inline SVG
//! plots (throughput over time, latency percentiles, side-by-side bars).

use crate::report::svg::{bar_chart, escape, latency_bar_chart, line_chart, Series};
use crate::report::text::ratio;
use crate::results::RunResult;
use crate::runner::progress::format_us;
use crate::stats::Percentiles;
use crate::workload::{MessageSize, Workload};
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}svg{display:block;margin:16px 0}";

fn percentile_values(p: &Percentiles) -> Vec<f64> {
    [
        p.p50_us,
        p.p90_us,
        p.p99_us,
        p.p99_9_us,
        p.p99_99_us,
        p.max_us,
    ]
    .iter()
    .map(|&v| v as f64)
    .collect()
}

/// Renders one or more runs into one HTML page.
pub fn render(title: &str, runs: &[RunResult]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1>",
        escape(title),
        escape(title)
    );
    facts(&mut out, runs);
    figures(&mut out, runs);
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    over_time_charts(&mut out, runs);
    latency_charts(&mut out, runs, &labels);
    let categories = vec!["produce".to_string(), "consume".to_string()];
    let rates: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| vec![r.produce.msgs_per_s, r.consume.msgs_per_s])
        .collect();
    out.push_str(&bar_chart(
        "Throughput, side by side",
        "msg/s",
        &categories,
        &labels,
        &rates,
    ));
    out.push_str("</body></html>\n");
    out
}

/// The line charts: produce and consume throughput, and publish p99, over
/// each run's seconds.
fn over_time_charts(out: &mut String, runs: &[RunResult]) {
    let mut throughput = Vec::new();
    for run in runs {
        throughput.push(Series {
            name: format!("{} produce", run.label),
            points: run
                .series
                .iter()
                .map(|s| (s.elapsed_s, s.produce_mb_per_s))
                .collect(),
        });
        throughput.push(Series {
            name: format!("{} consume", run.label),
            points: run
                .series
                .iter()
                .map(|s| (s.elapsed_s, s.consume_mb_per_s))
                .collect(),
        });
    }
    out.push_str(&line_chart(
        "Throughput over time",
        "seconds",
        "MB/s",
        &throughput,
    ));
    let p99_over_time: Vec<Series> = runs
        .iter()
        .map(|run| Series {
            name: format!("{} publish p99", run.label),
            points: run
                .series
                .iter()
                .map(|s| (s.elapsed_s, s.publish_latency_us_p99 as f64 / 1000.0))
                .collect(),
        })
        .collect();
    out.push_str(&line_chart(
        "Publish latency p99 over time",
        "seconds",
        "ms",
        &p99_over_time,
    ));
}

/// The bar charts of publish and end-to-end latency percentiles, the runs
/// side by side.
fn latency_charts(out: &mut String, runs: &[RunResult], labels: &[String]) {
    let percentiles: Vec<String> = ["p50", "p90", "p99", "p99.9", "p99.99", "max"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let publish: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| percentile_values(&r.publish_latency_us))
        .collect();
    out.push_str(&latency_bar_chart(
        "Publish latency (send to ack)",
        &percentiles,
        labels,
        &publish,
    ));
    let end_to_end: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| percentile_values(&r.end_to_end_latency_us))
        .collect();
    out.push_str(&latency_bar_chart(
        "End-to-end latency (send to receive)",
        &percentiles,
        labels,
        &end_to_end,
    ));
}

/// A workload as its users write it: `acks=all`, `compression=none`, sizes
/// in bytes, "max rate" for an unthrottled producer.
fn in_users_words(workload: &Workload) -> String {
    let size = match workload.message_size {
        MessageSize::Fixed(bytes) => format!("{bytes} B"),
        MessageSize::Uniform {
            min_bytes,
            max_bytes,
        } => format!("{min_bytes}-{max_bytes} B"),
    };
    let rate = match workload.producer_rate_msgs_per_s {
        0 => String::from("max rate"),
        rate => format!("{rate} msg/s"),
    };
    let acks = match workload.acks {
        -1 => String::from("all"),
        other => other.to_string(),
    };
    let compression = format!("{:?}", workload.compression).to_ascii_lowercase();
    format!(
        "{}: {} topic(s) x {} partitions, {size} messages, {rate}, {} producer(s) and {} consumer(s) per topic, acks={acks}, compression={compression}",
        workload.name,
        workload.topics,
        workload.partitions_per_topic,
        workload.producers_per_topic,
        workload.consumers_per_topic,
    )
}

fn facts(out: &mut String, runs: &[RunResult]) {
    out.push_str("<h2>Runs</h2><table><tr><th>run</th><th>bootstrap</th><th>workload</th><th>tool</th><th>host</th><th>CPU</th><th>cores</th><th>kernel</th><th>measured s</th></tr>");
    for run in runs {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td></tr>",
            escape(&run.label),
            escape(&run.bootstrap),
            escape(&in_users_words(&run.workload)),
            escape(&run.tool_version),
            escape(&run.host.hostname),
            escape(&run.host.cpu_model),
            run.host.cores,
            escape(&run.host.kernel),
            run.measured_duration_s
        );
    }
    out.push_str("</table>");
}

fn figures(out: &mut String, runs: &[RunResult]) {
    out.push_str("<h2>Figures</h2><table><tr><th>run</th><th>produce msg/s</th><th>produce MB/s</th><th>consume msg/s</th><th>consume MB/s</th><th>publish p50</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>e2e p50</th><th>p99</th><th>p99.9</th><th>max</th><th>backlog max</th><th>errors</th><th>throughput vs first</th></tr>");
    let base = runs.first().map_or(0.0, |r| r.produce.msgs_per_s);
    for run in runs {
        let publish = &run.publish_latency_us;
        let end_to_end = &run.end_to_end_latency_us;
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.0}</td><td>{:.2}</td><td>{:.0}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&run.label),
            run.produce.msgs_per_s,
            run.produce.mb_per_s,
            run.consume.msgs_per_s,
            run.consume.mb_per_s,
            format_us(publish.p50_us),
            format_us(publish.p99_us),
            format_us(publish.p99_9_us),
            format_us(publish.p99_99_us),
            format_us(publish.max_us),
            format_us(end_to_end.p50_us),
            format_us(end_to_end.p99_us),
            format_us(end_to_end.p99_9_us),
            format_us(end_to_end.max_us),
            run.backlog_messages_max,
            run.errors,
            ratio(run.produce.msgs_per_s, base)
        );
    }
    out.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Throughput;
    use crate::stats::SecondSample;

    #[test]
    fn report_is_self_contained_and_shows_figures() {
        let run = |label: &str, rate: u64| RunResult {
            label: label.into(),
            produce: Throughput::new(rate, rate * 1000, 1.0),
            consume: Throughput::new(rate, rate * 1000, 1.0),
            publish_latency_us: Percentiles {
                p50_us: 1234,
                p99_us: 5678,
                ..Percentiles::default()
            },
            series: (0..5)
                .map(|s| SecondSample {
                    elapsed_s: f64::from(s),
                    produce_mb_per_s: 10.0,
                    ..SecondSample::default()
                })
                .collect(),
            ..RunResult::default()
        };
        let html = render(
            "rill <vs> kafka",
            &[run("rill", 40_000), run("kafka", 20_000)],
        );
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("rill &lt;vs&gt; kafka"));
        assert_eq!(html.matches("<svg").count(), 5);
        assert!(html.contains("40000") && html.contains("20000"));
        assert!(html.contains("1.2ms") && html.contains("5.7ms"));
        assert!(html.contains("0.50x"));
        assert!(!html.contains("<script") && !html.contains("<link"));
    }

    #[test]
    fn workloads_read_as_users_write_them() {
        let workload = Workload {
            name: "w".into(),
            acks: -1,
            producer_rate_msgs_per_s: 0,
            message_size: MessageSize::Fixed(1024),
            ..Workload::default()
        };
        let text = in_users_words(&workload);
        assert!(text.contains("acks=all"), "{text}");
        assert!(text.contains("compression=none"), "{text}");
        assert!(
            text.contains("1024 B messages") && text.contains("max rate"),
            "{text}"
        );
        assert!(!text.contains("-1") && !text.contains("None"), "{text}");
    }
}
