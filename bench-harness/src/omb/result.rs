//! A run's result as OMB's `TestResult` JSON: its field names, rates and
//! latency percentiles per 10-second window (OMB's stats period), and the
//! aggregated percentiles and quantile maps over the whole measurement, so
//! OMB's `bin/create_charts.py` plots rill-bench results beside published
//! ones. Latencies are milliseconds, publish delay microseconds, as OMB's.

use crate::results::RunResult;
use crate::stats::{merge_histograms, new_histogram, HistogramData, SecondSample};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// OMB's stats period: one point of every series per window.
pub const WINDOW_S: f64 = 10.0;

/// The percentile columns OMB writes, by their field-name suffix.
const PERCENTILES: [(&str, f64); 6] = [
    ("50pct", 50.0),
    ("75pct", 75.0),
    ("95pct", 95.0),
    ("99pct", 99.0),
    ("999pct", 99.9),
    ("9999pct", 99.99),
];

/// What a latency is reported in.
#[derive(Clone, Copy)]
enum Unit {
    /// Milliseconds with decimals (publish and end-to-end latency).
    Millis,
    /// Whole microseconds (publish delay).
    Micros,
}

impl Unit {
    fn value(self, microseconds: f64) -> Value {
        match self {
            Unit::Millis => json!(microseconds / 1000.0),
            Unit::Micros => json!(microseconds.round() as u64),
        }
    }
}

/// The OMB result of `run`, its driver named `driver`.
pub fn omb_result(run: &RunResult, driver: &str) -> Value {
    let workload = &run.workload;
    let mut out = Map::new();
    out.insert("workload".into(), json!(workload.name));
    out.insert("driver".into(), json!(driver));
    out.insert(
        "messageSize".into(),
        json!(workload.message_size.max_bytes()),
    );
    out.insert("topics".into(), json!(workload.topics));
    out.insert("partitions".into(), json!(workload.partitions_per_topic));
    out.insert(
        "producersPerTopic".into(),
        json!(workload.producers_per_topic),
    );
    out.insert(
        "consumersPerTopic".into(),
        json!(workload.consumers_per_topic),
    );
    let windows = windows(&run.series);
    put_rates(&mut out, &windows);
    let histograms = |pick: fn(&SecondSample) -> Option<&HistogramData>| {
        windows
            .iter()
            .map(|window| merged(window.iter().filter_map(|s| pick(s))))
            .collect::<Vec<_>>()
    };
    let publish = histograms(|s| s.interval.as_ref().map(|i| &i.publish));
    let delay = histograms(|s| s.interval.as_ref().map(|i| &i.publish_delay));
    let end_to_end = histograms(|s| s.interval.as_ref().map(|i| &i.end_to_end));
    put_series(&mut out, "publishLatency", &publish, Unit::Millis);
    put_series(&mut out, "publishDelayLatency", &delay, Unit::Micros);
    put_series(&mut out, "endToEndLatency", &end_to_end, Unit::Millis);
    let publish_total = run.publish_latency_histogram.to_histogram();
    let delay_total = merge_histograms(&delay);
    let end_to_end_total = run.end_to_end_latency_histogram.to_histogram();
    put_aggregate(
        &mut out,
        "aggregatedPublishLatency",
        &publish_total,
        Unit::Millis,
    );
    put_aggregate(
        &mut out,
        "aggregatedPublishDelayLatency",
        &delay_total,
        Unit::Micros,
    );
    put_aggregate(
        &mut out,
        "aggregatedEndToEndLatency",
        &end_to_end_total,
        Unit::Millis,
    );
    Value::Object(out)
}

/// The measured seconds grouped into [`WINDOW_S`] windows.
fn windows(series: &[SecondSample]) -> Vec<Vec<&SecondSample>> {
    let mut windows: Vec<Vec<&SecondSample>> = Vec::new();
    for sample in series.iter().filter(|s| s.elapsed_s > 0.0) {
        let index = ((sample.elapsed_s - 1e-9) / WINDOW_S).floor().max(0.0) as usize;
        if windows.len() <= index {
            windows.resize_with(index + 1, Vec::new);
        }
        windows[index].push(sample);
    }
    windows.retain(|window| !window.is_empty());
    windows
}

fn merged<'a>(parts: impl Iterator<Item = &'a HistogramData>) -> Histogram<u64> {
    let histograms: Vec<Histogram<u64>> = parts.map(HistogramData::to_histogram).collect();
    merge_histograms(&histograms)
}

/// Messages per second over each window, and the backlog at its end.
fn put_rates(out: &mut Map<String, Value>, windows: &[Vec<&SecondSample>]) {
    let mean = |window: &Vec<&SecondSample>, pick: fn(&SecondSample) -> f64| {
        window.iter().map(|s| pick(s)).sum::<f64>() / window.len().max(1) as f64
    };
    let series = |pick: fn(&SecondSample) -> f64| -> Vec<f64> {
        windows.iter().map(|w| mean(w, pick)).collect()
    };
    out.insert(
        "publishRate".into(),
        json!(series(|s| s.produce_msgs_per_s)),
    );
    out.insert(
        "publishErrorRate".into(),
        json!(series(|s| s.errors as f64)),
    );
    out.insert(
        "consumeRate".into(),
        json!(series(|s| s.consume_msgs_per_s)),
    );
    let backlog: Vec<i64> = windows
        .iter()
        .map(|w| w.last().map_or(0, |s| s.backlog_messages))
        .collect();
    out.insert("backlog".into(), json!(backlog));
}

/// `{prefix}Avg`, `{prefix}50pct` … `{prefix}Max`: one value per window.
fn put_series(out: &mut Map<String, Value>, prefix: &str, windows: &[Histogram<u64>], unit: Unit) {
    let column = |value: &dyn Fn(&Histogram<u64>) -> f64| -> Value {
        Value::Array(windows.iter().map(|h| unit.value(value(h))).collect())
    };
    out.insert(format!("{prefix}Avg"), column(&|h| h.mean()));
    for (suffix, percentile) in PERCENTILES {
        let at = move |h: &Histogram<u64>| h.value_at_percentile(percentile) as f64;
        out.insert(format!("{prefix}{suffix}"), column(&at));
    }
    out.insert(format!("{prefix}Max"), column(&|h| h.max() as f64));
}

/// The whole measurement's `{prefix}Avg` … `{prefix}Max` and
/// `{prefix}Quantiles` (percentile → latency, as HdrHistogram's percentile
/// iteration with 100 ticks per half distance, which OMB uses).
fn put_aggregate(
    out: &mut Map<String, Value>,
    prefix: &str,
    histogram: &Histogram<u64>,
    unit: Unit,
) {
    let empty = new_histogram();
    let histogram = if histogram.is_empty() {
        &empty
    } else {
        histogram
    };
    out.insert(format!("{prefix}Avg"), unit.value(histogram.mean()));
    for (suffix, percentile) in PERCENTILES {
        let value = histogram.value_at_percentile(percentile) as f64;
        out.insert(format!("{prefix}{suffix}"), unit.value(value));
    }
    out.insert(format!("{prefix}Max"), unit.value(histogram.max() as f64));
    let mut quantiles = Map::new();
    for step in histogram.iter_quantiles(100) {
        let key = format!("{:?}", step.quantile() * 100.0);
        quantiles.insert(key, unit.value(step.value_iterated_to() as f64));
    }
    out.insert(format!("{prefix}Quantiles"), Value::Object(quantiles));
}
