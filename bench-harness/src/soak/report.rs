//! A soak's result: its settings, one [`SoakSample`] per interval, the
//! totals, and a [`SoakSummary`] of the drift (first against last RSS,
//! the p99 range, disk use at the start and the end).

use super::SoakArgs;
use crate::broker_cpu::BrokerSample;
use crate::stats::{Counters, Percentiles};
use serde::{Deserialize, Serialize};

/// One interval of the soak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakSample {
    /// Seconds since producers started, at the end of the interval.
    pub elapsed_s: f64,
    pub interval_s: f64,
    /// Broker resident memory (`process_resident_memory_bytes` or /proc).
    pub rss_bytes: Option<u64>,
    /// Broker CPU seconds so far, and cores it kept busy in the interval.
    pub cpu_s: Option<f64>,
    pub cpu_cores: Option<f64>,
    /// Produce latency (send to acknowledgement) on the normal topic over
    /// the interval.
    pub produce_p50_us: u64,
    pub produce_p99_us: u64,
    /// The same on the compacted topic.
    pub compact_produce_p99_us: u64,
    /// Records acknowledged (normal topic), read back, and acknowledged on
    /// the compacted topic in the interval.
    pub produced: u64,
    pub consumed: u64,
    pub compact_produced: u64,
    /// Records acknowledged on the normal topic and not yet read, at the
    /// end of the interval.
    pub consumer_lag: i64,
    /// Bytes under `--data-dir` (file lengths: space a broker preallocates
    /// for its segments counts, so the figure moves in steps).
    pub disk_bytes: Option<u64>,
    /// rill's `rill_disk_free_bytes`.
    pub disk_free_bytes: Option<u64>,
    /// rill's cleaner so far: passes and bytes removed.
    pub cleaner_passes: Option<u64>,
    pub cleaner_removed_bytes: Option<u64>,
    /// Errors (failed produces, fetches, broker readings) in the interval.
    pub errors: u64,
}

impl SoakSample {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        elapsed_s: f64,
        interval_s: f64,
        stream: &Counters,
        compact: &Counters,
        consumer_lag: i64,
        publish: &Percentiles,
        compact_publish: &Percentiles,
        broker: Option<BrokerSample>,
        cpu_cores: Option<f64>,
        disk_bytes: Option<u64>,
    ) -> Self {
        SoakSample {
            elapsed_s,
            interval_s,
            rss_bytes: broker.and_then(|b| b.rss_bytes),
            cpu_s: broker.map(|b| b.cpu_s),
            cpu_cores,
            produce_p50_us: publish.p50_us,
            produce_p99_us: publish.p99_us,
            compact_produce_p99_us: compact_publish.p99_us,
            produced: stream.produced_messages,
            consumed: stream.consumed_messages,
            compact_produced: compact.produced_messages,
            consumer_lag,
            disk_bytes,
            disk_free_bytes: broker.and_then(|b| b.disk_free_bytes),
            cleaner_passes: broker.and_then(|b| b.cleaner_passes),
            cleaner_removed_bytes: broker.and_then(|b| b.cleaner_removed_bytes),
            errors: stream.errors + compact.errors,
        }
    }
}

/// The drift over the soak, from its samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakSummary {
    pub samples: usize,
    pub rss_first_bytes: Option<u64>,
    pub rss_last_bytes: Option<u64>,
    pub rss_max_bytes: Option<u64>,
    pub produce_p99_min_us: u64,
    pub produce_p99_max_us: u64,
    pub disk_first_bytes: Option<u64>,
    pub disk_last_bytes: Option<u64>,
    pub cleaner_passes: Option<u64>,
}

impl SoakSummary {
    pub fn of(samples: &[SoakSample]) -> Self {
        let rss = || samples.iter().filter_map(|s| s.rss_bytes);
        let disk = || samples.iter().filter_map(|s| s.disk_bytes);
        let p99 = || samples.iter().map(|s| s.produce_p99_us);
        SoakSummary {
            samples: samples.len(),
            rss_first_bytes: rss().next(),
            rss_last_bytes: rss().next_back(),
            rss_max_bytes: rss().max(),
            produce_p99_min_us: p99().min().unwrap_or(0),
            produce_p99_max_us: p99().max().unwrap_or(0),
            disk_first_bytes: disk().next(),
            disk_last_bytes: disk().next_back(),
            cleaner_passes: samples.iter().filter_map(|s| s.cleaner_passes).next_back(),
        }
    }
}

/// The settings a soak ran with, as recorded in its JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakSettings {
    pub bootstrap: String,
    pub duration_s: u64,
    pub sample_s: u64,
    pub partitions: u32,
    pub producers: u32,
    pub consumers: u32,
    pub rate: u64,
    pub message_size: String,
    pub compact_partitions: u32,
    pub compact_rate: u64,
    pub key_space: u64,
    pub compact_segment_bytes: String,
    pub broker: Option<String>,
    pub data_dir: Option<String>,
}

/// The whole soak, as written to `--out`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    pub tool_version: String,
    pub settings: SoakSettings,
    /// The normal topic and the compacted one.
    pub topics: Vec<String>,
    pub samples: Vec<SoakSample>,
    pub summary: SoakSummary,
    pub total_produced: u64,
    pub total_consumed: u64,
    pub total_compact_produced: u64,
    /// Acknowledged records of the normal topic not read after the drain.
    pub final_lag: i64,
    /// How long the consumers took to catch up after producers stopped.
    pub drain_s: f64,
    pub errors: u64,
    pub error_samples: Vec<String>,
}

impl SoakReport {
    pub fn new(
        args: &SoakArgs,
        topics: [String; 2],
        samples: Vec<SoakSample>,
        stream: Counters,
        compact: Counters,
        drain_s: f64,
        error_samples: Vec<String>,
    ) -> Self {
        let broker = args.broker_source().map(|source| source.describe());
        SoakReport {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            settings: SoakSettings {
                bootstrap: args.bootstrap.clone(),
                duration_s: args.duration().as_secs(),
                sample_s: args.sample_s,
                partitions: args.partitions,
                producers: args.producers,
                consumers: args.consumers,
                rate: args.rate,
                message_size: args.message_size.clone(),
                compact_partitions: args.compact_partitions,
                compact_rate: args.compact_rate,
                key_space: args.key_space,
                compact_segment_bytes: args.compact_segment_bytes.clone(),
                broker,
                data_dir: args.data_dir.as_ref().map(|d| d.display().to_string()),
            },
            topics: topics.to_vec(),
            summary: SoakSummary::of(&samples),
            samples,
            total_produced: stream.produced_messages,
            total_consumed: stream.consumed_messages,
            total_compact_produced: compact.produced_messages,
            final_lag: stream.produced_messages as i64 - stream.consumed_messages as i64,
            drain_s,
            errors: stream.errors + compact.errors,
            error_samples,
        }
    }

    /// The lines printed at the end of a soak.
    pub fn summary_text(&self) -> String {
        let s = &self.summary;
        let opt_mib = |v: Option<u64>| v.map_or("-".to_string(), |b| format!("{:.1} MiB", mib(b)));
        let mut lines = vec![
            format!(
                "soak: {} samples over {} s, {} records produced, {} consumed, {} keyed updates, final lag {}, errors {}",
                s.samples,
                self.settings.duration_s,
                self.total_produced,
                self.total_consumed,
                self.total_compact_produced,
                self.final_lag,
                self.errors
            ),
            format!(
                "broker RSS: first {}, last {}, max {}",
                opt_mib(s.rss_first_bytes),
                opt_mib(s.rss_last_bytes),
                opt_mib(s.rss_max_bytes)
            ),
            format!(
                "produce p99 per sample: {:.2} .. {:.2} ms",
                s.produce_p99_min_us as f64 / 1000.0,
                s.produce_p99_max_us as f64 / 1000.0
            ),
            format!(
                "disk: start {}, end {}",
                opt_mib(s.disk_first_bytes),
                opt_mib(s.disk_last_bytes)
            ),
        ];
        if let Some(passes) = s.cleaner_passes {
            lines.push(format!("cleaner passes: {passes}"));
        }
        for sample in self.error_samples.iter().take(5) {
            lines.push(format!("error: {sample}"));
        }
        lines.join("\n")
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// One stderr line per sample.
pub fn progress_line(sample: &SoakSample) -> String {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |b| format!("{:.1}", mib(b)));
    format!(
        "[soak {:>7.0}s] rss {} MiB | cpu {} | produce p50/p99 {:.2}/{:.2} ms | compact p99 {:.2} ms | produced {} consumed {} keyed {} | lag {} | disk {} MiB | errors {}",
        sample.elapsed_s,
        opt(sample.rss_bytes),
        sample.cpu_cores.map_or("-".to_string(), |c| format!("{c:.2}")),
        sample.produce_p50_us as f64 / 1000.0,
        sample.produce_p99_us as f64 / 1000.0,
        sample.compact_produce_p99_us as f64 / 1000.0,
        sample.produced,
        sample.consumed,
        sample.compact_produced,
        sample.consumer_lag,
        opt(sample.disk_bytes),
        sample.errors
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(elapsed_s: f64, rss: u64, p99: u64, disk: Option<u64>) -> SoakSample {
        SoakSample {
            elapsed_s,
            rss_bytes: Some(rss),
            produce_p99_us: p99,
            disk_bytes: disk,
            ..SoakSample::default()
        }
    }

    #[test]
    fn summary_takes_first_last_and_range() {
        let samples = [
            sample(3.0, 40 << 20, 900, None),
            sample(6.0, 48 << 20, 4_000, Some(100)),
            sample(9.0, 44 << 20, 1_200, Some(300)),
        ];
        let s = SoakSummary::of(&samples);
        assert_eq!(s.samples, 3);
        assert_eq!(s.rss_first_bytes, Some(40 << 20));
        assert_eq!(s.rss_last_bytes, Some(44 << 20));
        assert_eq!(s.rss_max_bytes, Some(48 << 20));
        assert_eq!((s.produce_p99_min_us, s.produce_p99_max_us), (900, 4_000));
        assert_eq!(
            (s.disk_first_bytes, s.disk_last_bytes),
            (Some(100), Some(300))
        );
        assert_eq!(SoakSummary::of(&[]).rss_first_bytes, None);
    }
}
