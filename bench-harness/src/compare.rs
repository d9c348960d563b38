//! `compare`: one workload against several bootstrap addresses in one
//! session, interleaved (A, B, A, B, ...) so that slow drift of the host
//! (page cache, thermal, noisy neighbours) falls on every target alike.
//! Rounds of one target are combined: counts and durations add, latency
//! histograms merge.

use crate::broker_cpu::BrokerCpu;
use crate::error::{BenchError, Result};
use crate::results::{RunResult, Throughput};
use crate::runner::{run_workload, RunOptions};
use crate::stats::{merge_histograms, HistogramData, Percentiles};
use crate::workload::Workload;
use serde::{Deserialize, Serialize};

/// A broker to compare: a label for tables and its bootstrap address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub label: String,
    pub bootstrap: String,
}

/// Parses `label=host:port` or plain `host:port` (labelled by address).
pub fn parse_target(text: &str) -> Target {
    match text.split_once('=') {
        Some((label, bootstrap)) => Target {
            label: label.to_string(),
            bootstrap: bootstrap.to_string(),
        },
        None => Target {
            label: text.to_string(),
            bootstrap: text.to_string(),
        },
    }
}

/// The order of runs: round by round, every target once per round.
pub fn interleaved_order(targets: usize, rounds: usize) -> Vec<usize> {
    (0..rounds).flat_map(|_| 0..targets).collect()
}

/// Runs the interleaved schedule and returns one combined result per target.
pub async fn compare(
    targets: &[Target],
    workload: &Workload,
    rounds: usize,
    quiet: bool,
) -> Result<Vec<RunResult>> {
    if targets.len() < 2 {
        return Err(BenchError::Workload(
            "compare needs at least two targets".into(),
        ));
    }
    let mut per_target: Vec<Vec<RunResult>> = vec![Vec::new(); targets.len()];
    for (step, index) in interleaved_order(targets.len(), rounds.max(1))
        .into_iter()
        .enumerate()
    {
        let target = &targets[index];
        eprintln!(
            "[compare] run {} of {}: {} ({})",
            step + 1,
            targets.len() * rounds.max(1),
            target.label,
            target.bootstrap
        );
        let options = RunOptions {
            label: Some(target.label.clone()),
            topics: None,
            quiet,
            broker_cpu: None,
            ..RunOptions::default()
        };
        per_target[index].push(run_workload(&target.bootstrap, workload, &options).await?);
    }
    Ok(per_target
        .into_iter()
        .filter_map(|runs| combine(&runs))
        .collect())
}

/// One target's figures divided by the first target's (the baseline).
/// `None` where the baseline figure is zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRatio {
    pub label: String,
    pub baseline: String,
    pub produce_throughput_ratio: Option<f64>,
    pub consume_throughput_ratio: Option<f64>,
    pub publish_p50_ratio: Option<f64>,
    pub publish_p99_ratio: Option<f64>,
    pub end_to_end_p99_ratio: Option<f64>,
}

/// What `compare` writes: the combined run of every target and the ratios
/// of each to the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    pub workload: String,
    pub rounds: usize,
    pub runs: Vec<RunResult>,
    pub ratios: Vec<CompareRatio>,
}

impl CompareReport {
    pub fn new(workload: &Workload, rounds: usize, runs: Vec<RunResult>) -> Self {
        let ratios = ratios(&runs);
        CompareReport {
            workload: workload.name.clone(),
            rounds,
            runs,
            ratios,
        }
    }
}

/// Ratios of every run to the first one.
pub fn ratios(runs: &[RunResult]) -> Vec<CompareRatio> {
    let Some(base) = runs.first() else {
        return Vec::new();
    };
    let divide = |value: f64, base: f64| (base > 0.0).then(|| value / base);
    runs.iter()
        .map(|run| CompareRatio {
            label: run.label.clone(),
            baseline: base.label.clone(),
            produce_throughput_ratio: divide(run.produce.msgs_per_s, base.produce.msgs_per_s),
            consume_throughput_ratio: divide(run.consume.msgs_per_s, base.consume.msgs_per_s),
            publish_p50_ratio: divide(
                run.publish_latency_us.p50_us as f64,
                base.publish_latency_us.p50_us as f64,
            ),
            publish_p99_ratio: divide(
                run.publish_latency_us.p99_us as f64,
                base.publish_latency_us.p99_us as f64,
            ),
            end_to_end_p99_ratio: divide(
                run.end_to_end_latency_us.p99_us as f64,
                base.end_to_end_latency_us.p99_us as f64,
            ),
        })
        .collect()
}

/// Combines several runs of one target into one result.
pub fn combine(runs: &[RunResult]) -> Option<RunResult> {
    let first = runs.first()?;
    let duration_s: f64 = runs.iter().map(|r| r.measured_duration_s).sum();
    let sum = |f: &dyn Fn(&RunResult) -> u64| runs.iter().map(f).sum::<u64>();
    let publish_histograms: Vec<_> = runs
        .iter()
        .map(|r| r.publish_latency_histogram.to_histogram())
        .collect();
    let end_to_end_histograms: Vec<_> = runs
        .iter()
        .map(|r| r.end_to_end_latency_histogram.to_histogram())
        .collect();
    let publish = merge_histograms(&publish_histograms);
    let end_to_end = merge_histograms(&end_to_end_histograms);
    // Series of later rounds continue on the time axis after earlier ones.
    let mut series = Vec::new();
    let mut offset_s = 0.0;
    for run in runs {
        series.extend(run.series.iter().cloned().map(|mut s| {
            s.elapsed_s += offset_s;
            s
        }));
        offset_s += run.measured_duration_s;
    }
    // CPU adds up like the counts, where every round measured it.
    let cpus: Option<Vec<&BrokerCpu>> = runs.iter().map(|r| r.broker_cpu.as_ref()).collect();
    let broker_cpu = cpus.and_then(|cpus| {
        Some(BrokerCpu::new(
            cpus.first()?.source.clone(),
            cpus.iter().map(|c| c.cpu_s).sum(),
            cpus.iter().map(|c| c.wall_s).sum(),
            sum(&|r| r.produce.bytes),
            sum(&|r| r.consume.bytes),
        ))
    });
    Some(RunResult {
        measured_duration_s: duration_s,
        broker_cpu,
        produce: Throughput::new(
            sum(&|r| r.produce.messages),
            sum(&|r| r.produce.bytes),
            duration_s,
        ),
        consume: Throughput::new(
            sum(&|r| r.consume.messages),
            sum(&|r| r.consume.bytes),
            duration_s,
        ),
        publish_latency_us: Percentiles::of(&publish),
        end_to_end_latency_us: Percentiles::of(&end_to_end),
        publish_latency_histogram: HistogramData::of(&publish),
        end_to_end_latency_histogram: HistogramData::of(&end_to_end),
        backlog_messages_max: runs
            .iter()
            .map(|r| r.backlog_messages_max)
            .max()
            .unwrap_or(0),
        total_produced_messages: sum(&|r| r.total_produced_messages),
        total_consumed_messages: sum(&|r| r.total_consumed_messages),
        errors: sum(&|r| r.errors),
        error_samples: runs
            .iter()
            .flat_map(|r| r.error_samples.iter().cloned())
            .take(20)
            .collect(),
        series,
        ..first.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn targets_and_order() {
        assert_eq!(
            parse_target("rill=127.0.0.1:9092"),
            Target {
                label: "rill".into(),
                bootstrap: "127.0.0.1:9092".into()
            }
        );
        assert_eq!(parse_target("h:1").label, "h:1");
        assert_eq!(interleaved_order(2, 3), vec![0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn combine_adds_counts_and_merges_latency() {
        let run = |messages: u64, latency_us: u64| {
            let mut histogram = new_histogram();
            histogram.record_n(latency_us, messages).unwrap();
            RunResult {
                label: "x".into(),
                measured_duration_s: 2.0,
                produce: Throughput::new(messages, messages * 100, 2.0),
                publish_latency_histogram: HistogramData::of(&histogram),
                ..RunResult::default()
            }
        };
        let combined = combine(&[run(100, 1000), run(300, 3000)]).unwrap();
        assert_eq!(combined.produce.messages, 400);
        assert_eq!(combined.produce.msgs_per_s, 100.0);
        assert_eq!(combined.publish_latency_us.count, 400);
        assert!((2990..=3010).contains(&combined.publish_latency_us.p50_us));
        let merged = combined.publish_latency_histogram.to_histogram();
        assert!((995..=1005).contains(&merged.value_at_quantile(0.2)));
        assert!(combine(&[]).is_none());
    }

    #[test]
    fn ratios_divide_by_the_first_run() {
        let run = |label: &str, messages: u64, p99_us: u64| {
            let mut run = RunResult {
                label: label.into(),
                produce: Throughput::new(messages, messages, 1.0),
                ..RunResult::default()
            };
            run.publish_latency_us.p99_us = p99_us;
            run
        };
        let ratios = ratios(&[run("a", 100, 10), run("b", 250, 5)]);
        assert_eq!(ratios.len(), 2);
        assert_eq!(ratios[0].produce_throughput_ratio, Some(1.0));
        assert_eq!(ratios[1].produce_throughput_ratio, Some(2.5));
        assert_eq!(ratios[1].publish_p99_ratio, Some(0.5));
        assert_eq!(ratios[1].baseline, "a");
        // A zero baseline gives no ratio rather than infinity.
        assert_eq!(ratios[1].consume_throughput_ratio, None);
    }
}
