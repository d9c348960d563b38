//! Replica agreement, read off the brokers' data dirs after a fault test:
//! every partition's live replicas hold the same batches (base offset,
//! last offset, leader epoch, producer id and epoch, base sequence, control
//! or not) over the offsets they all have, and no replica's leader epochs
//! go backwards. This is how a stale coordinator's writes to
//! `__transaction_state` and `__consumer_offsets` were found (issue #30).
//!
//! Give it the data dirs of brokers that are up and caught up: a killed
//! broker may hold an unreplicated tail that it truncates only when it
//! comes back. The metadata log (`__cluster_metadata-0`, Raft's format) is
//! not a partition log and is skipped.

use engine::batch::{batches, BatchHeader};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// What a batch is, as replicas must agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    pub base_offset: i64,
    pub last_offset: i64,
    pub leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub control: bool,
}

impl BatchSummary {
    fn of(header: &BatchHeader) -> BatchSummary {
        BatchSummary {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            leader_epoch: header.partition_leader_epoch,
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            control: header.is_control(),
        }
    }
}

/// Every partition log under `data_dir` (`topic-partition` → its batches
/// in offset order). A segment is read up to its first torn or zeroed
/// batch (the preallocated tail), as recovery reads it.
pub fn partition_logs(data_dir: &Path) -> BTreeMap<String, Vec<BatchSummary>> {
    let mut logs = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return logs;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.path().is_dir() || name.starts_with("__cluster_metadata") {
            continue;
        }
        let mut segments: Vec<_> = std::fs::read_dir(entry.path())
            .map(|files| {
                files
                    .flatten()
                    .map(|f| f.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "log"))
                    .collect()
            })
            .unwrap_or_default();
        // 20-digit base offsets: the names sort in offset order.
        segments.sort();
        let mut summaries = Vec::new();
        for segment in segments {
            let Ok(bytes) = std::fs::read(&segment) else {
                continue;
            };
            for item in batches(&bytes) {
                let Ok((header, _)) = item else { break };
                summaries.push(BatchSummary::of(&header));
            }
        }
        logs.insert(name, summaries);
    }
    logs
}

/// What disagrees across the replicas in `data_dirs` (empty: they agree).
pub fn disagreements(data_dirs: &[&Path]) -> Vec<String> {
    let replicas: Vec<BTreeMap<String, Vec<BatchSummary>>> =
        data_dirs.iter().map(|dir| partition_logs(dir)).collect();
    let mut problems = Vec::new();
    for (index, logs) in replicas.iter().enumerate() {
        for (partition, batches) in logs {
            for pair in batches.windows(2) {
                if pair[1].leader_epoch < pair[0].leader_epoch {
                    problems.push(format!(
                        "{partition} on replica {index}: leader epoch goes back from {} to {} at offset {}",
                        pair[0].leader_epoch, pair[1].leader_epoch, pair[1].base_offset
                    ));
                }
            }
        }
    }
    let mut partitions: Vec<&String> = replicas.iter().flat_map(|l| l.keys()).collect();
    partitions.sort();
    partitions.dedup();
    for partition in partitions {
        let held: Vec<(usize, &Vec<BatchSummary>)> = replicas
            .iter()
            .enumerate()
            .filter_map(|(i, logs)| logs.get(partition).map(|b| (i, b)))
            .collect();
        problems.extend(compare_replicas(partition, &held));
    }
    problems
}

/// The batches of one partition's replicas, compared over the offsets all
/// of them hold.
fn compare_replicas(partition: &str, held: &[(usize, &Vec<BatchSummary>)]) -> Vec<String> {
    let Some(common_end) = held
        .iter()
        .map(|(_, b)| b.last().map_or(-1, |last| last.last_offset))
        .min()
    else {
        return Vec::new();
    };
    let within = |b: &&BatchSummary| b.base_offset <= common_end;
    let Some((first, reference)) = held.first() else {
        return Vec::new();
    };
    let reference: Vec<&BatchSummary> = reference.iter().filter(within).collect();
    let mut problems = Vec::new();
    for (index, batches) in &held[1..] {
        let other: Vec<&BatchSummary> = batches.iter().filter(within).collect();
        if other != reference {
            let at = reference
                .iter()
                .zip(&other)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("{a:?} vs {b:?}"))
                .unwrap_or_else(|| format!("{} vs {} batches", reference.len(), other.len()));
            problems.push(format!(
                "{partition}: replicas {first} and {index} differ below offset {common_end}: {at}"
            ));
        }
    }
    problems
}

/// Waits (up to `timeout`, for followers still catching up or truncating)
/// until the replicas in `data_dirs` agree; panics with what disagrees.
/// Returns how many partitions were compared on two replicas or more (a
/// check that compared nothing fails: a wrong dir is not agreement).
pub fn assert_replicas_agree(data_dirs: &[&Path], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        let problems = disagreements(data_dirs);
        if problems.is_empty() {
            let compared = replicated_partitions(data_dirs);
            assert!(compared > 0, "no partition held by two of {data_dirs:?}");
            return compared;
        }
        if Instant::now() > deadline {
            panic!("replicas disagree:\n{}", problems.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// How many partitions two or more of `data_dirs` hold.
fn replicated_partitions(data_dirs: &[&Path]) -> usize {
    let mut holders: BTreeMap<String, usize> = BTreeMap::new();
    for dir in data_dirs {
        for partition in partition_logs(dir).into_keys() {
            *holders.entry(partition).or_default() += 1;
        }
    }
    holders.values().filter(|&&n| n >= 2).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base_offset: i64, leader_epoch: i32) -> BatchSummary {
        BatchSummary {
            base_offset,
            last_offset: base_offset + 1,
            leader_epoch,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            control: false,
        }
    }

    #[test]
    fn replicas_are_compared_over_the_offsets_all_of_them_hold() {
        let leader = vec![batch(0, 1), batch(2, 1), batch(4, 2)];
        let behind = vec![batch(0, 1), batch(2, 1)];
        assert!(compare_replicas("t-0", &[(0, &leader), (1, &behind)]).is_empty());
        let diverged = vec![batch(0, 1), batch(2, 0)];
        let problems = compare_replicas("t-0", &[(0, &leader), (1, &diverged)]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("t-0: replicas 0 and 1 differ"));
    }
}
