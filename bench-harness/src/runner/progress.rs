//! The live progress line (stderr, once a second) and the per-second sample
//! it is computed from.

use crate::stats::{Counters, Percentiles, SecondSample};

/// A sample from the counter difference over `interval_s` seconds.
pub fn sample(
    elapsed_s: f64,
    delta: &Counters,
    interval_s: f64,
    backlog_messages: i64,
    publish: &Percentiles,
    end_to_end: &Percentiles,
) -> SecondSample {
    let interval_s = interval_s.max(1e-9);
    SecondSample {
        elapsed_s,
        produce_msgs_per_s: delta.produced_messages as f64 / interval_s,
        produce_mb_per_s: delta.produced_bytes as f64 / interval_s / 1e6,
        consume_msgs_per_s: delta.consumed_messages as f64 / interval_s,
        consume_mb_per_s: delta.consumed_bytes as f64 / interval_s / 1e6,
        backlog_messages,
        publish_latency_us_p50: publish.p50_us,
        publish_latency_us_p99: publish.p99_us,
        end_to_end_latency_us_p50: end_to_end.p50_us,
        end_to_end_latency_us_p99: end_to_end.p99_us,
        errors: delta.errors,
        interval: None,
    }
}

/// One human line: `[  12s measure] produce ... | consume ... | ...`.
pub fn format_line(phase: &str, sample: &SecondSample) -> String {
    format!(
        "[{:>6.0}s {phase:<7}] produce {:>10.0} msg/s {:>8.2} MB/s | consume {:>10.0} msg/s {:>8.2} MB/s | backlog {:>9} | pub p50/p99 {}/{} | e2e p50/p99 {}/{} | errors {}",
        sample.elapsed_s,
        sample.produce_msgs_per_s,
        sample.produce_mb_per_s,
        sample.consume_msgs_per_s,
        sample.consume_mb_per_s,
        sample.backlog_messages,
        format_us(sample.publish_latency_us_p50),
        format_us(sample.publish_latency_us_p99),
        format_us(sample.end_to_end_latency_us_p50),
        format_us(sample.end_to_end_latency_us_p99),
        sample.errors,
    )
}

/// `850us`, `12.3ms`, `2.50s`.
pub fn format_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_and_line() {
        let delta = Counters {
            produced_messages: 2000,
            produced_bytes: 2_000_000,
            consumed_messages: 1000,
            consumed_bytes: 1_000_000,
            errors: 1,
        };
        let publish = Percentiles {
            p50_us: 800,
            p99_us: 12_300,
            ..Percentiles::default()
        };
        let s = sample(3.0, &delta, 2.0, 5, &publish, &Percentiles::default());
        assert_eq!(s.produce_msgs_per_s, 1000.0);
        assert_eq!(s.consume_mb_per_s, 0.5);
        let line = format_line("measure", &s);
        assert!(line.contains("800us/12.3ms"), "{line}");
        assert!(line.contains("backlog         5"), "{line}");
        assert_eq!(format_us(2_500_000), "2.50s");
    }
}
