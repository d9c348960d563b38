//! Latency histograms of the disk calls a produce waits for (the writer's
//! O_DIRECT writes and the syncer's fdatasync), so that `/metrics` can tell
//! how much of a produce's tail latency the device itself takes: a mean and
//! a maximum hide a bimodal disk (fdatasync here is ≈0.2 ms or 4–13 ms).

use hdrhistogram::Histogram;

/// Longest latency kept apart; slower calls count at this bound.
const MAX_US: u64 = 60_000_000;
/// Two significant digits: buckets within 1 % are plenty for a p99, and the
/// histogram stays ≈20 KiB (it is copied on every `/metrics` scrape).
const SIGNIFICANT_DIGITS: u8 = 2;

/// Microsecond latencies of one kind of disk call on one shard.
#[derive(Debug, Clone)]
pub struct LatencyHistogram(Histogram<u64>);

impl Default for LatencyHistogram {
    fn default() -> Self {
        match Histogram::new_with_bounds(1, MAX_US, SIGNIFICANT_DIGITS) {
            Ok(histogram) => Self(histogram),
            Err(e) => unreachable!("constant histogram bounds are valid: {e}"),
        }
    }
}

impl LatencyHistogram {
    /// Counts one call that took `us` microseconds.
    pub fn record(&mut self, us: u64) {
        self.0.saturating_record(us.max(1));
    }

    /// The counts, to merge shards and read quantiles.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_follow_the_calls_and_slow_ones_saturate() {
        let mut latency = LatencyHistogram::default();
        for _ in 0..98 {
            latency.record(200);
        }
        latency.record(8_000);
        latency.record(u64::MAX);
        let h = latency.histogram();
        assert_eq!(h.len(), 100);
        assert!((199..=201).contains(&h.value_at_quantile(0.5)));
        assert!((7_900..=8_100).contains(&h.value_at_quantile(0.99)));
        assert!(h.max() >= MAX_US * 99 / 100);
    }
}
