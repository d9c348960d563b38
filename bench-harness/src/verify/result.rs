//! The JSON result of a verify run: operations by kind, anomalies by
//! class with a few examples each, the faults injected, and availability
//! (the share of the workload's seconds with at least one acknowledged
//! send) with the longest gap between acknowledgements.

use super::checker::{settle, Anomaly, CLASSES};
use super::history::{FaultWindow, Op, SendOutcome};
use serde::Serialize;
use std::collections::BTreeMap;

/// How many examples of each anomaly class the result keeps.
const EXAMPLES_PER_CLASS: usize = 8;

/// One anomaly class: how many, and the first few.
#[derive(Debug, Clone, Serialize)]
pub struct AnomalyClass {
    pub count: usize,
    pub examples: Vec<Anomaly>,
}

/// The result file of `rill-bench verify`.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyResult {
    /// No anomaly of any class.
    pub valid: bool,
    pub topic: String,
    pub partitions: i32,
    /// Milliseconds of producing (the time line availability covers).
    pub workload_ms: u64,
    /// Operations by kind (`send-ok`, `send-info`, `poll`, ...).
    pub ops: BTreeMap<String, u64>,
    pub anomaly_count: usize,
    /// Every class of [`CLASSES`], empty ones included, so a reader sees
    /// what was checked.
    pub anomalies: BTreeMap<String, AnomalyClass>,
    pub faults_injected: usize,
    pub faults: Vec<FaultWindow>,
    /// Sends acknowledged (and, in a transaction, committed) after the
    /// first fault began (0 without faults).
    pub acknowledged_after_first_fault: u64,
    /// Share of the workload's whole seconds with an acknowledgement.
    pub availability: f64,
    /// The longest time without an acknowledgement, from the start of the
    /// workload to its end.
    pub longest_gap_ms: u64,
    /// Acknowledged sends in each whole second of the workload.
    pub acks_per_second: Vec<u64>,
    /// Consumer partition reads the local cluster's followers served
    /// (`--racks`, KIP-392), summed over the brokers at the end of the run
    /// (each counts since it last started); 0 without a local cluster.
    pub follower_consumer_reads: u64,
}

/// When each acknowledged send completed, sorted.
fn acknowledged_ms(history: &[Op]) -> Vec<u64> {
    let mut acks: Vec<u64> = history
        .iter()
        .filter_map(|op| match op {
            Op::Send {
                end_ms,
                outcome: SendOutcome::Ok { .. },
                ..
            } => Some(*end_ms),
            _ => None,
        })
        .collect();
    acks.sort_unstable();
    acks
}

/// Acks in each whole second of `[0, workload_ms)`.
pub fn acks_per_second(acks_ms: &[u64], workload_ms: u64) -> Vec<u64> {
    let mut counts = vec![0; (workload_ms / 1000) as usize];
    for &ack in acks_ms {
        if let Some(count) = counts.get_mut((ack / 1000) as usize) {
            *count += 1;
        }
    }
    counts
}

/// Share of the whole seconds of `[0, workload_ms)` holding an ack.
pub fn availability(acks_ms: &[u64], workload_ms: u64) -> f64 {
    let counts = acks_per_second(acks_ms, workload_ms);
    if counts.is_empty() {
        return 0.0;
    }
    counts.iter().filter(|c| **c > 0).count() as f64 / counts.len() as f64
}

/// The longest stretch of `[0, workload_ms]` without an ack in it.
pub fn longest_gap_ms(acks_ms: &[u64], workload_ms: u64) -> u64 {
    let mut previous = 0;
    let mut longest = 0;
    for &ack in acks_ms.iter().filter(|&&ack| ack <= workload_ms) {
        longest = longest.max(ack - previous);
        previous = ack;
    }
    longest.max(workload_ms.saturating_sub(previous))
}

/// Groups anomalies by class, every class present.
fn by_class(anomalies: &[Anomaly]) -> BTreeMap<String, AnomalyClass> {
    CLASSES
        .iter()
        .map(|class| {
            let of_class: Vec<&Anomaly> = anomalies.iter().filter(|a| a.class == *class).collect();
            let examples = of_class
                .iter()
                .take(EXAMPLES_PER_CLASS)
                .map(|a| (*a).clone())
                .collect();
            (
                class.to_string(),
                AnomalyClass {
                    count: of_class.len(),
                    examples,
                },
            )
        })
        .collect()
}

/// Topic facts of the run, for the result.
pub struct RunFacts {
    pub topic: String,
    pub partitions: i32,
    pub workload_ms: u64,
}

/// The result of a checked history.
pub fn summarize(
    facts: RunFacts,
    history: &[Op],
    anomalies: &[Anomaly],
    faults: Vec<FaultWindow>,
) -> VerifyResult {
    let mut ops = BTreeMap::new();
    for op in history {
        *ops.entry(op.kind().to_string()).or_insert(0) += 1;
    }
    // A send of an aborted transaction was acknowledged but wrote
    // nothing readable: only committed sends count as available.
    let acks = acknowledged_ms(&settle(history));
    let acknowledged_after_first_fault = faults.first().map_or(0, |fault| {
        acks.iter().filter(|&&ack| ack > fault.start_ms).count()
    }) as u64;
    VerifyResult {
        valid: anomalies.is_empty(),
        topic: facts.topic,
        partitions: facts.partitions,
        workload_ms: facts.workload_ms,
        ops,
        anomaly_count: anomalies.len(),
        anomalies: by_class(anomalies),
        faults_injected: faults.len(),
        faults,
        acknowledged_after_first_fault,
        availability: availability(&acks, facts.workload_ms),
        longest_gap_ms: longest_gap_ms(&acks, facts.workload_ms),
        acks_per_second: acks_per_second(&acks, facts.workload_ms),
        follower_consumer_reads: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn availability_counts_whole_seconds_with_an_ack() {
        // Seconds 0 and 2 of 4 hold an ack; one past the end is ignored.
        assert_eq!(availability(&[100, 900, 2500, 9000], 4000), 0.5);
        assert_eq!(availability(&[], 4000), 0.0);
        assert_eq!(availability(&[10], 500), 0.0);
        assert_eq!(
            acks_per_second(&[100, 900, 2500, 9000], 4000),
            vec![2, 0, 1, 0]
        );
    }

    #[test]
    fn longest_gap_includes_the_start_and_the_end() {
        assert_eq!(longest_gap_ms(&[100, 3100, 3200], 4000), 3000);
        assert_eq!(longest_gap_ms(&[2000], 2500), 2000);
        assert_eq!(longest_gap_ms(&[100, 200], 5000), 4800);
        assert_eq!(longest_gap_ms(&[], 1000), 1000);
    }

    #[test]
    fn only_committed_transactional_sends_count_as_available() {
        use crate::verify::history::TxnOutcome;
        let history = |outcome: TxnOutcome| {
            vec![
                Op::Send {
                    process: "p0".into(),
                    partition: 0,
                    value: "p0/0".into(),
                    start_ms: 0,
                    end_ms: 500,
                    outcome: SendOutcome::Ok { offset: 0 },
                    txn: Some("t0".into()),
                },
                Op::TxnEnd {
                    process: "p0".into(),
                    txn: "t0".into(),
                    start_ms: 600,
                    end_ms: 700,
                    outcome,
                },
            ]
        };
        let facts = || RunFacts {
            topic: String::new(),
            partitions: 1,
            workload_ms: 1000,
        };
        let aborted = summarize(facts(), &history(TxnOutcome::Aborted), &[], vec![]);
        assert_eq!(aborted.availability, 0.0);
        let committed = summarize(facts(), &history(TxnOutcome::Committed), &[], vec![]);
        assert_eq!(committed.availability, 1.0);
    }

    #[test]
    fn every_class_is_listed_and_counted() {
        let anomaly = Anomaly {
            class: super::super::checker::UNSEEN,
            partition: 0,
            detail: String::new(),
        };
        let classes = by_class(&[anomaly.clone(), anomaly]);
        assert_eq!(classes.len(), CLASSES.len());
        assert_eq!(classes["unseen"].count, 2);
        assert_eq!(classes["lost-write"].count, 0);
    }
}
