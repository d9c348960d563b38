//! Plain-text comparison table of runs, with ratios to the first run.

use crate::results::RunResult;
use crate::runner::progress::format_us;
use std::fmt::Write;

/// `value / base`, or `-` when the base is zero.
pub fn ratio(value: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}x", value / base)
    } else {
        "-".to_string()
    }
}

/// `broker CPU: 12.3 s in 20.0 s (0.62 cores), 1.85 s/GB produced, 1.85
/// s/GB consumed`, when the run measured it.
pub fn broker_cpu_line(run: &RunResult) -> Option<String> {
    let cpu = run.broker_cpu.as_ref()?;
    let per_gb = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.2}"));
    let mut line = format!(
        "broker CPU ({}): {:.2} s in {:.1} s ({:.2} cores), {} s/GB produced, {} s/GB consumed",
        cpu.source,
        cpu.cpu_s,
        cpu.wall_s,
        cpu.cores_busy,
        per_gb(cpu.cpu_s_per_gb_produced),
        per_gb(cpu.cpu_s_per_gb_consumed)
    );
    if let Some(switches) = cpu.context_switches_per_gb_produced {
        let _ = write!(line, ", {switches:.0} context switches/GB produced");
    }
    if let Some(fsyncs) = cpu.fsyncs_per_gb_produced {
        let _ = write!(line, ", {fsyncs:.0} fdatasyncs/GB");
    }
    Some(line)
}

/// One row per run; the `vs first` columns divide by the first run.
pub fn table(runs: &[RunResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>12} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9}",
        "run",
        "prod msg/s",
        "prod MB/s",
        "cons msg/s",
        "cons MB/s",
        "pub p50",
        "pub p99",
        "pub p99.9",
        "e2e p50",
        "e2e p99",
        "e2e max",
        "errors",
        "thr/first",
        "p99/first"
    );
    let first = runs.first();
    for run in runs {
        let base = first.map_or(0.0, |f| f.produce.msgs_per_s);
        let base_p99 = first.map_or(0.0, |f| f.publish_latency_us.p99_us as f64);
        let _ = writeln!(
            out,
            "{:<24} {:>12.0} {:>9.2} {:>12.0} {:>9.2} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9}",
            truncate(&run.label, 24),
            run.produce.msgs_per_s,
            run.produce.mb_per_s,
            run.consume.msgs_per_s,
            run.consume.mb_per_s,
            format_us(run.publish_latency_us.p50_us),
            format_us(run.publish_latency_us.p99_us),
            format_us(run.publish_latency_us.p99_9_us),
            format_us(run.end_to_end_latency_us.p50_us),
            format_us(run.end_to_end_latency_us.p99_us),
            format_us(run.end_to_end_latency_us.max_us),
            run.errors,
            ratio(run.produce.msgs_per_s, base),
            ratio(run.publish_latency_us.p99_us as f64, base_p99),
        );
    }
    out
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Throughput;

    #[test]
    fn table_has_rows_and_ratios() {
        let mut a = RunResult {
            label: "a".into(),
            produce: Throughput::new(1000, 1_000_000, 1.0),
            ..RunResult::default()
        };
        a.publish_latency_us.p99_us = 2000;
        let mut b = a.clone();
        b.label = "b".into();
        b.produce = Throughput::new(2000, 2_000_000, 1.0);
        b.publish_latency_us.p99_us = 1000;
        let text = table(&[a, b]);
        assert_eq!(text.lines().count(), 3);
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with('b') && last.contains("2.00x") && last.contains("0.50x"),
            "{last}"
        );
        assert_eq!(ratio(1.0, 0.0), "-");
    }
}
