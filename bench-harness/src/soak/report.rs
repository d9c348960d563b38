//! A soak's result: its settings, one [`SoakSample`] per interval, the
//! totals (churn topics and records among them), whether the broker
//! process survived, and a [`SoakSummary`] of the drift (first against
//! last RSS, the p99 range, disk use at the start and the end).

use super::SoakArgs;
use crate::broker_cpu::BrokerSample;
use crate::stats::{Counters, Percentiles};
use serde::{Deserialize, Serialize};

/// Reports written before a field existed read it as this.
fn yes() -> bool {
    true
}

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
    /// The same for the churn producer.
    #[serde(default)]
    pub churn_produce_p99_us: u64,
    /// Records acknowledged (normal topic), read back, and acknowledged on
    /// the compacted topic in the interval.
    pub produced: u64,
    pub consumed: u64,
    pub compact_produced: u64,
    /// Records acknowledged on churn topics in the interval.
    #[serde(default)]
    pub churn_produced: u64,
    /// Churn topics created so far.
    #[serde(default)]
    pub churn_topics: u64,
    /// A burst of unpaced produce was running at the end of the interval
    /// (its records count in `produced`, its latencies in the p99).
    #[serde(default)]
    pub burst: bool,
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
    /// Errors (failed produces, fetches, churn topic creations, broker
    /// readings) in the interval.
    pub errors: u64,
}

/// What one sample is made of, as the soak measured it.
#[derive(Debug, Clone, Default)]
pub struct SampleParts {
    pub elapsed_s: f64,
    pub interval_s: f64,
    /// The interval's counters of the stream, compacted and churn topics.
    pub stream: Counters,
    pub compact: Counters,
    pub churn: Counters,
    pub consumer_lag: i64,
    /// The interval's produce latencies of the same three.
    pub publish: Percentiles,
    pub compact_publish: Percentiles,
    pub churn_publish: Percentiles,
    pub broker: Option<BrokerSample>,
    pub cpu_cores: Option<f64>,
    pub disk_bytes: Option<u64>,
    pub churn_topics: u64,
    pub burst: bool,
}

impl SoakSample {
    pub fn new(parts: SampleParts) -> Self {
        let SampleParts {
            stream,
            compact,
            churn,
            broker,
            ..
        } = parts;
        SoakSample {
            elapsed_s: parts.elapsed_s,
            interval_s: parts.interval_s,
            rss_bytes: broker.and_then(|b| b.rss_bytes),
            cpu_s: broker.map(|b| b.cpu_s),
            cpu_cores: parts.cpu_cores,
            produce_p50_us: parts.publish.p50_us,
            produce_p99_us: parts.publish.p99_us,
            compact_produce_p99_us: parts.compact_publish.p99_us,
            churn_produce_p99_us: parts.churn_publish.p99_us,
            produced: stream.produced_messages,
            consumed: stream.consumed_messages,
            compact_produced: compact.produced_messages,
            churn_produced: churn.produced_messages,
            churn_topics: parts.churn_topics,
            burst: parts.burst,
            consumer_lag: parts.consumer_lag,
            disk_bytes: parts.disk_bytes,
            disk_free_bytes: broker.and_then(|b| b.disk_free_bytes),
            cleaner_passes: broker.and_then(|b| b.cleaner_passes),
            cleaner_removed_bytes: broker.and_then(|b| b.cleaner_removed_bytes),
            errors: stream.errors + compact.errors + churn.errors,
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
    #[serde(default)]
    pub churn_every_s: u64,
    #[serde(default)]
    pub churn_rate: u64,
    #[serde(default)]
    pub churn_partitions: u32,
    #[serde(default)]
    pub burst_every_s: u64,
    #[serde(default)]
    pub burst_s: u64,
    /// Where the samples read the broker (`metrics ADDR` or `pid N`).
    pub broker: Option<String>,
    /// The process whose liveness each sample checked.
    #[serde(default)]
    pub broker_pid: Option<u32>,
    pub data_dir: Option<String>,
}

/// What a soak ended with, for [`SoakReport::new`].
#[derive(Debug, Clone, Default)]
pub struct SoakOutcome {
    /// The stream topic and the compacted one.
    pub topics: Vec<String>,
    pub samples: Vec<SoakSample>,
    /// Totals of the stream (burst records included), compacted and churn
    /// topics.
    pub stream: Counters,
    pub compact: Counters,
    pub churn: Counters,
    pub churn_topics: u64,
    pub drain_s: f64,
    pub broker_alive: bool,
    pub error_samples: Vec<String>,
}

/// The whole soak, as written to `--out`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    pub tool_version: String,
    pub settings: SoakSettings,
    /// The normal topic and the compacted one (churn topics are only
    /// counted: an hour makes hundreds).
    pub topics: Vec<String>,
    pub samples: Vec<SoakSample>,
    pub summary: SoakSummary,
    pub total_produced: u64,
    pub total_consumed: u64,
    pub total_compact_produced: u64,
    /// Churn topics created, and records acknowledged on them.
    #[serde(default)]
    pub churn_topics: u64,
    #[serde(default)]
    pub churn_acked: u64,
    /// False when `--broker-pid` was given and that process exited (or
    /// became a zombie) during the soak, which then stopped early; true
    /// otherwise, also when no pid was given to check.
    #[serde(default = "yes")]
    pub broker_alive: bool,
    /// Acknowledged records of the normal topic not read after the drain.
    pub final_lag: i64,
    /// How long the consumers took to catch up after producers stopped.
    pub drain_s: f64,
    pub errors: u64,
    pub error_samples: Vec<String>,
}

impl SoakReport {
    pub fn new(args: &SoakArgs, outcome: SoakOutcome) -> Self {
        let broker = args.broker_source().map(|source| source.describe());
        let SoakOutcome {
            stream,
            compact,
            churn,
            samples,
            ..
        } = outcome;
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
                churn_every_s: args.churn_every_s,
                churn_rate: args.churn_rate,
                churn_partitions: args.churn_partitions,
                burst_every_s: args.burst_every_s,
                burst_s: args.burst_s,
                broker,
                broker_pid: args.broker_pid,
                data_dir: args.data_dir.as_ref().map(|d| d.display().to_string()),
            },
            topics: outcome.topics,
            summary: SoakSummary::of(&samples),
            samples,
            total_produced: stream.produced_messages,
            total_consumed: stream.consumed_messages,
            total_compact_produced: compact.produced_messages,
            churn_topics: outcome.churn_topics,
            churn_acked: churn.produced_messages,
            broker_alive: outcome.broker_alive,
            final_lag: stream.produced_messages as i64 - stream.consumed_messages as i64,
            drain_s: outcome.drain_s,
            errors: stream.errors + compact.errors + churn.errors,
            error_samples: outcome.error_samples,
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
            format!(
                "churn: {} topics created, {} records acknowledged",
                self.churn_topics, self.churn_acked
            ),
            self.liveness_line(),
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

impl SoakReport {
    /// `broker_alive: ...`, with the pid and, after a crash, when the
    /// soak stopped.
    fn liveness_line(&self) -> String {
        match (self.broker_alive, self.settings.broker_pid) {
            (true, Some(pid)) => format!("broker_alive: true (pid {pid} ran to the end)"),
            (true, None) => "broker_alive: true (not checked: no --broker-pid)".to_string(),
            (false, pid) => format!(
                "broker_alive: false (pid {} EXITED; the soak stopped at {:.0} s)",
                pid.map_or("?".to_string(), |p| p.to_string()),
                self.samples.last().map_or(0.0, |s| s.elapsed_s)
            ),
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// One stderr line per sample.
pub fn progress_line(sample: &SoakSample) -> String {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |b| format!("{:.1}", mib(b)));
    format!(
        "[soak {:>7.0}s] rss {} MiB | cpu {} | produce p50/p99 {:.2}/{:.2} ms{} | compact p99 {:.2} ms | churn p99 {:.2} ms | produced {} consumed {} keyed {} churned {} ({} topics) | lag {} | disk {} MiB | errors {}",
        sample.elapsed_s,
        opt(sample.rss_bytes),
        sample.cpu_cores.map_or("-".to_string(), |c| format!("{c:.2}")),
        sample.produce_p50_us as f64 / 1000.0,
        sample.produce_p99_us as f64 / 1000.0,
        if sample.burst { " (burst)" } else { "" },
        sample.compact_produce_p99_us as f64 / 1000.0,
        sample.churn_produce_p99_us as f64 / 1000.0,
        sample.produced,
        sample.consumed,
        sample.compact_produced,
        sample.churn_produced,
        sample.churn_topics,
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

    #[test]
    fn report_carries_churn_and_broker_liveness() {
        let mut report = SoakReport {
            samples: vec![sample(30.0, 40 << 20, 900, None)],
            churn_topics: 6,
            churn_acked: 150_000,
            broker_alive: false,
            ..SoakReport::default()
        };
        report.settings.broker_pid = Some(4242);
        let text = report.summary_text();
        assert!(
            text.contains("churn: 6 topics created, 150000 records acknowledged"),
            "{text}"
        );
        assert!(
            text.contains("broker_alive: false (pid 4242 EXITED"),
            "{text}"
        );
        assert!(text.contains("stopped at 30 s"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["broker_alive"], false);
        assert_eq!(json["churn_topics"], 6);
        assert_eq!(json["churn_acked"], 150_000);
        // A report from before these fields reads as a live broker.
        let mut old = json.clone();
        for field in ["broker_alive", "churn_topics", "churn_acked"] {
            old.as_object_mut().unwrap().remove(field);
        }
        let old: SoakReport = serde_json::from_value(old).unwrap();
        assert!(old.broker_alive);
        assert_eq!((old.churn_topics, old.churn_acked), (0, 0));
        report.broker_alive = true;
        assert!(report
            .summary_text()
            .contains("broker_alive: true (pid 4242"));
    }

    #[test]
    fn sample_adds_churn_errors_and_marks_bursts() {
        let counters = |produced, errors| Counters {
            produced_messages: produced,
            errors,
            ..Counters::default()
        };
        let sample = SoakSample::new(SampleParts {
            stream: counters(10, 1),
            compact: counters(20, 0),
            churn: counters(30, 2),
            churn_topics: 4,
            burst: true,
            ..SampleParts::default()
        });
        assert_eq!(
            (
                sample.produced,
                sample.compact_produced,
                sample.churn_produced
            ),
            (10, 20, 30)
        );
        assert_eq!((sample.errors, sample.churn_topics), (3, 4));
        let line = progress_line(&sample);
        assert!(
            line.contains("(burst)") && line.contains("churned 30 (4 topics)"),
            "{line}"
        );
    }
}
