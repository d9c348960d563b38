//! Shared counters and latency histograms of one run. Producers and
//! consumers record into a [`Recorder`]; the progress task takes a
//! [`SecondSample`] from it once a second. Latencies are microseconds in
//! hdrhistogram (3 significant digits, up to 10 minutes).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Highest latency a histogram holds; larger values are clamped to it.
pub const LATENCY_US_MAX: u64 = 600_000_000;
const MAX_ERROR_SAMPLES: usize = 20;

/// A new latency histogram with the harness's bounds.
pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants known to be valid: 1 <= low, 2*low <= high, sigfig 3.
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3)
        .unwrap_or_else(|_| unreachable!("constant bounds"))
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub p99_99_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    pub fn of(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: histogram.len(),
            mean_us: histogram.mean(),
            p50_us: histogram.value_at_quantile(0.5),
            p90_us: histogram.value_at_quantile(0.9),
            p99_us: histogram.value_at_quantile(0.99),
            p99_9_us: histogram.value_at_quantile(0.999),
            p99_99_us: histogram.value_at_quantile(0.9999),
            max_us: histogram.max(),
        }
    }
}

/// A histogram in JSON: `(value, count)` pairs of its non-empty buckets.
/// Mergeable across runs and readable without hdrhistogram.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramData {
    pub buckets: Vec<(u64, u64)>,
}

impl HistogramData {
    pub fn of(histogram: &Histogram<u64>) -> Self {
        HistogramData {
            buckets: histogram
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    pub fn to_histogram(&self) -> Histogram<u64> {
        let mut histogram = new_histogram();
        for &(value, count) in &self.buckets {
            let _ = histogram.record_n(value.clamp(1, LATENCY_US_MAX), count);
        }
        histogram
    }
}

/// Merges several histograms into one (e.g. all rounds of one target).
pub fn merge_histograms<'a>(
    histograms: impl IntoIterator<Item = &'a Histogram<u64>>,
) -> Histogram<u64> {
    let mut merged = new_histogram();
    for histogram in histograms {
        // Same bounds everywhere, so add cannot fail; clamp anyway.
        if merged.add(histogram).is_err() {
            for value in histogram.iter_recorded() {
                let _ = merged.record_n(
                    value.value_iterated_to().min(LATENCY_US_MAX),
                    value.count_at_value(),
                );
            }
        }
    }
    merged
}

/// An interval histogram (reset every second) and the run's total.
struct LatencyPair {
    interval: Histogram<u64>,
    total: Histogram<u64>,
}

impl LatencyPair {
    fn new() -> Self {
        LatencyPair {
            interval: new_histogram(),
            total: new_histogram(),
        }
    }
}

/// Counters at one instant; differences of two give rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub produced_messages: u64,
    pub produced_bytes: u64,
    pub consumed_messages: u64,
    pub consumed_bytes: u64,
    pub errors: u64,
}

impl Counters {
    pub fn minus(&self, earlier: &Counters) -> Counters {
        Counters {
            produced_messages: self
                .produced_messages
                .saturating_sub(earlier.produced_messages),
            produced_bytes: self.produced_bytes.saturating_sub(earlier.produced_bytes),
            consumed_messages: self
                .consumed_messages
                .saturating_sub(earlier.consumed_messages),
            consumed_bytes: self.consumed_bytes.saturating_sub(earlier.consumed_bytes),
            errors: self.errors.saturating_sub(earlier.errors),
        }
    }
}

/// One second of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SecondSample {
    /// Seconds since the start of the measured phase (negative in warm-up).
    pub elapsed_s: f64,
    pub produce_msgs_per_s: f64,
    pub produce_mb_per_s: f64,
    pub consume_msgs_per_s: f64,
    pub consume_mb_per_s: f64,
    pub backlog_messages: i64,
    pub publish_latency_us_p50: u64,
    pub publish_latency_us_p99: u64,
    pub end_to_end_latency_us_p50: u64,
    pub end_to_end_latency_us_p99: u64,
    pub errors: u64,
    /// The second's latency histograms, kept in memory when a run asks
    /// for them (`RunOptions::keep_interval_histograms`, for OMB's
    /// percentile series); never written to the result file.
    #[serde(skip)]
    pub interval: Option<IntervalHistograms>,
}

/// One interval's latency histograms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalHistograms {
    pub publish: HistogramData,
    pub end_to_end: HistogramData,
    /// How late each message was sent against the producer's schedule.
    pub publish_delay: HistogramData,
}

/// Interval histograms taken from a [`Recorder`].
pub struct IntervalTaken {
    pub publish: Histogram<u64>,
    pub end_to_end: Histogram<u64>,
    pub publish_delay: Histogram<u64>,
}

/// Shared by every producer and consumer of one run.
pub struct Recorder {
    produced_messages: AtomicU64,
    produced_bytes: AtomicU64,
    consumed_messages: AtomicU64,
    consumed_bytes: AtomicU64,
    errors: AtomicU64,
    publish: Mutex<LatencyPair>,
    end_to_end: Mutex<LatencyPair>,
    publish_delay: Mutex<LatencyPair>,
    error_samples: Mutex<Vec<String>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            produced_messages: AtomicU64::new(0),
            produced_bytes: AtomicU64::new(0),
            consumed_messages: AtomicU64::new(0),
            consumed_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            publish: Mutex::new(LatencyPair::new()),
            end_to_end: Mutex::new(LatencyPair::new()),
            publish_delay: Mutex::new(LatencyPair::new()),
            error_samples: Mutex::new(Vec::new()),
        }
    }
}

fn record_into(pair: &Mutex<LatencyPair>, latencies_us: impl Iterator<Item = u64>) {
    if let Ok(mut pair) = pair.lock() {
        for latency_us in latencies_us {
            let value = latency_us.clamp(1, LATENCY_US_MAX);
            let _ = pair.interval.record(value);
            let _ = pair.total.record(value);
        }
    }
}

impl Recorder {
    /// A produce request acknowledged: its messages and their latencies.
    pub fn record_produced(
        &self,
        messages: u64,
        bytes: u64,
        publish_latencies_us: impl Iterator<Item = u64>,
    ) {
        self.produced_messages
            .fetch_add(messages, Ordering::Relaxed);
        self.produced_bytes.fetch_add(bytes, Ordering::Relaxed);
        record_into(&self.publish, publish_latencies_us);
    }

    /// A fetch response walked: its messages and end-to-end latencies.
    pub fn record_consumed(
        &self,
        messages: u64,
        bytes: u64,
        end_to_end_latencies_us: impl Iterator<Item = u64>,
    ) {
        self.consumed_messages
            .fetch_add(messages, Ordering::Relaxed);
        self.consumed_bytes.fetch_add(bytes, Ordering::Relaxed);
        record_into(&self.end_to_end, end_to_end_latencies_us);
    }

    pub fn record_error(&self, message: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut samples) = self.error_samples.lock() {
            if samples.len() < MAX_ERROR_SAMPLES {
                samples.push(message);
            }
        }
    }

    pub fn counters(&self) -> Counters {
        Counters {
            produced_messages: self.produced_messages.load(Ordering::Relaxed),
            produced_bytes: self.produced_bytes.load(Ordering::Relaxed),
            consumed_messages: self.consumed_messages.load(Ordering::Relaxed),
            consumed_bytes: self.consumed_bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// How late messages were generated against the producer's rate
    /// schedule (OMB's "publish delay"; 0 without a rate limit).
    pub fn record_publish_delay(&self, delays_us: impl Iterator<Item = u64>) {
        record_into(&self.publish_delay, delays_us);
    }

    /// Takes and resets the interval histograms: (publish, end-to-end).
    pub fn take_interval(&self) -> (Percentiles, Percentiles) {
        let taken = self.take_interval_histograms();
        (
            Percentiles::of(&taken.publish),
            Percentiles::of(&taken.end_to_end),
        )
    }

    /// Takes and resets every interval histogram.
    pub fn take_interval_histograms(&self) -> IntervalTaken {
        let take = |pair: &Mutex<LatencyPair>| {
            pair.lock().map_or_else(
                |_| new_histogram(),
                |mut pair| {
                    let taken = pair.interval.clone();
                    pair.interval.reset();
                    taken
                },
            )
        };
        IntervalTaken {
            publish: take(&self.publish),
            end_to_end: take(&self.end_to_end),
            publish_delay: take(&self.publish_delay),
        }
    }

    /// Clears the total histograms at the end of warm-up.
    pub fn reset_totals(&self) {
        for pair in [&self.publish, &self.end_to_end, &self.publish_delay] {
            if let Ok(mut pair) = pair.lock() {
                pair.total.reset();
            }
        }
    }

    /// Copies of the totals: (publish, end-to-end).
    pub fn totals(&self) -> (Histogram<u64>, Histogram<u64>) {
        let copy = |pair: &Mutex<LatencyPair>| {
            pair.lock()
                .map_or_else(|_| new_histogram(), |pair| pair.total.clone())
        };
        (copy(&self.publish), copy(&self.end_to_end))
    }

    /// A copy of the publish-delay total.
    pub fn publish_delay_total(&self) -> Histogram<u64> {
        self.publish_delay
            .lock()
            .map_or_else(|_| new_histogram(), |pair| pair.total.clone())
    }

    pub fn error_samples(&self) -> Vec<String> {
        self.error_samples
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_counts_and_keeps_extremes() {
        let mut fast = new_histogram();
        let mut slow = new_histogram();
        for value in 1..=1000u64 {
            fast.record(value).unwrap();
        }
        slow.record_n(50_000, 10).unwrap();
        let merged = merge_histograms([&fast, &slow]);
        assert_eq!(merged.len(), 1010);
        assert_eq!(merged.min(), 1);
        let p = Percentiles::of(&merged);
        assert!(p.max_us >= 50_000 && p.max_us < 50_100, "{p:?}");
        // 1000 of 1010 values are <= 1000, so p50 and p90 stay low, p99.9 is slow.
        assert!((495..=505).contains(&p.p50_us), "{p:?}");
        assert!(p.p99_9_us >= 49_900, "{p:?}");
    }

    #[test]
    fn histogram_data_round_trips_through_json() {
        let mut histogram = new_histogram();
        for value in [3u64, 3, 70, 1_000, 123_456] {
            histogram.record(value).unwrap();
        }
        let data = HistogramData::of(&histogram);
        let json = serde_json::to_string(&data).unwrap();
        let back: HistogramData = serde_json::from_str(&json).unwrap();
        let restored = back.to_histogram();
        assert_eq!(restored.len(), 5);
        assert_eq!(Percentiles::of(&restored), Percentiles::of(&histogram));
    }

    #[test]
    fn recorder_counts_and_resets_intervals() {
        let recorder = Recorder::default();
        recorder.record_produced(3, 300, [10u64, 20, 30].into_iter());
        recorder.record_consumed(2, 200, [100u64, 0].into_iter()); // 0 clamps to 1
        recorder.record_error("boom".into());
        let counters = recorder.counters();
        assert_eq!(
            (
                counters.produced_messages,
                counters.consumed_bytes,
                counters.errors
            ),
            (3, 200, 1)
        );
        let (publish, end_to_end) = recorder.take_interval();
        assert_eq!(publish.count, 3);
        assert_eq!(end_to_end.count, 2);
        assert_eq!(recorder.take_interval().0.count, 0);
        assert_eq!(recorder.totals().0.len(), 3);
        recorder.reset_totals();
        assert_eq!(recorder.totals().0.len(), 0);
        assert_eq!(recorder.error_samples(), vec!["boom".to_string()]);
        let later = recorder.counters();
        assert_eq!(later.minus(&counters), Counters::default());
    }
}
