//! Several data dirs on one broker (Kafka's `log.dirs=/a,/b`, JBOD).
//!
//! A partition lives in exactly one dir: the one that held the fewest
//! partitions when it was created ([`pick_dir`], Kafka's rule; ties go to
//! the earlier dir). Nothing records the choice: at start every dir is
//! scanned ([`find_partitions`]), and a partition found in two dirs refuses
//! the start, as Kafka refuses it (which copy is right cannot be known).
//! The first dir keeps the broker-wide files (quorum log, producer-id
//! blocks), so a one-dir broker is laid out as before.
//!
//! The shards share one count of partitions per dir ([`DirLoad`]): each
//! counts the partitions it opens, creates and deletes, so placement
//! follows the broker's whole load, not one shard's.
//!
//! A dir may be *cordoned* (KIP-1066, `cordoned.log.dirs`): it keeps its
//! partitions but gets no new one while another dir is open. With every
//! dir cordoned the broker itself is cordoned and the controller places no
//! new replica on it; one it is still given (an explicit assignment) goes
//! to the least loaded dir as before.

use crate::error::EngineError;
use crate::types::TopicPartition;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The dir a new partition goes to: the one with the fewest partitions,
/// the earliest of those on a tie. `counts` holds one entry per dir (an
/// empty slice gives 0).
pub fn pick_dir(counts: &[usize]) -> usize {
    counts
        .iter()
        .enumerate()
        .min_by_key(|&(i, &count)| (count, i))
        .map_or(0, |(i, _)| i)
}

/// The dir a new partition goes to, as [`pick_dir`], among the dirs not
/// `cordoned` (an index past its end is open); among all of them when
/// every one is cordoned.
pub fn pick_open_dir(counts: &[usize], cordoned: &[bool]) -> usize {
    let open = |i: usize| !cordoned.get(i).copied().unwrap_or(false);
    counts
        .iter()
        .enumerate()
        .filter(|&(i, _)| open(i))
        .min_by_key(|&(i, &count)| (count, i))
        .map_or_else(|| pick_dir(counts), |(i, _)| i)
}

/// Partitions per data dir, and which dirs are cordoned, broker-wide
/// (every shard's copy of the engine config shares it).
#[derive(Debug, Clone, Default)]
pub struct DirLoad(Arc<Mutex<DirState>>);

#[derive(Debug, Default)]
struct DirState {
    counts: Vec<usize>,
    cordoned: Vec<bool>,
}

impl DirLoad {
    fn state<R>(&self, f: impl FnOnce(&mut DirState) -> R) -> R {
        // A poisoned lock only means another shard panicked mid-update of
        // plain counters and flags: they are still usable for placement.
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    fn with<R>(&self, dirs: usize, f: impl FnOnce(&mut Vec<usize>) -> R) -> R {
        self.state(|state| {
            if state.counts.len() < dirs {
                state.counts.resize(dirs, 0);
            }
            f(&mut state.counts)
        })
    }

    /// Chooses the dir of a new partition among `dirs` and counts it there.
    pub fn place(&self, dirs: usize) -> usize {
        self.state(|state| {
            if state.counts.len() < dirs {
                state.counts.resize(dirs, 0);
            }
            let dir = pick_open_dir(&state.counts[..dirs], &state.cordoned);
            state.counts[dir] += 1;
            dir
        })
    }

    /// Which dirs are cordoned, by index; whether that changed.
    pub fn set_cordoned(&self, cordoned: Vec<bool>) -> bool {
        self.state(|state| {
            let changed = state.cordoned != cordoned;
            state.cordoned = cordoned;
            changed
        })
    }

    /// Whether every one of `dirs` dirs is cordoned (and there is one).
    pub fn all_cordoned(&self, dirs: usize) -> bool {
        self.state(|state| dirs > 0 && (0..dirs).all(|i| state.cordoned.get(i) == Some(&true)))
    }

    /// Counts a partition found in (or created in) `dir`.
    pub fn add(&self, dir: usize) {
        self.with(dir + 1, |counts| counts[dir] += 1);
    }

    /// Uncounts a deleted partition of `dir`.
    pub fn remove(&self, dir: usize) {
        self.with(dir + 1, |counts| {
            counts[dir] = counts[dir].saturating_sub(1)
        });
    }

    /// Partitions counted per dir (for logs and tests).
    pub fn counts(&self) -> Vec<usize> {
        self.with(0, |counts| counts.clone())
    }
}

/// A partition directory found at start.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FoundPartition {
    /// The partition.
    pub tp: TopicPartition,
    /// Its directory.
    pub dir: PathBuf,
    /// The index of its data dir in the configured list.
    pub dir_index: usize,
}

/// The partition directories of one data dir (a dir not there yet has none).
fn partitions_in(data_dir: &Path) -> Result<Vec<(TopicPartition, PathBuf)>, EngineError> {
    if !data_dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(data_dir).map_err(|e| EngineError::io(data_dir, e))? {
        let entry = entry.map_err(|e| EngineError::io(data_dir, e))?;
        if !entry.path().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        // The metadata quorum's log lives beside the partitions, under
        // Kafka's name for it, but it is not a partition of the engine.
        if name == crate::types::CLUSTER_METADATA_DIR {
            continue;
        }
        if let Some(tp) = TopicPartition::parse_dir_name(&name) {
            out.push((tp, entry.path()));
        }
    }
    Ok(out)
}

/// Every partition directory of `dirs`, sorted by partition; a partition
/// in two dirs is an error naming both.
pub fn find_partitions(dirs: &[PathBuf]) -> Result<Vec<FoundPartition>, EngineError> {
    let mut found = Vec::new();
    for (dir_index, data_dir) in dirs.iter().enumerate() {
        for (tp, dir) in partitions_in(data_dir)? {
            found.push(FoundPartition { tp, dir, dir_index });
        }
    }
    found.sort();
    if let Some(pair) = found.windows(2).find(|w| w[0].tp == w[1].tp) {
        return Err(EngineError::DuplicatePartition {
            partition: pair[0].tp.to_string(),
            first: pair[0].dir.display().to_string(),
            second: pair[1].dir.display().to_string(),
        });
    }
    Ok(found)
}

/// The index in `dirs` of the data dir holding the partition directory
/// `partition_dir` (its parent); 0 when none matches (a log opened
/// outside the configured dirs, in a test say).
pub fn dir_index_of(dirs: &[PathBuf], partition_dir: &Path) -> usize {
    let Some(parent) = partition_dir.parent() else {
        return 0;
    };
    dirs.iter().position(|d| d == parent).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dir_with_fewest_partitions_wins_and_ties_go_to_the_earlier() {
        assert_eq!(pick_dir(&[]), 0);
        assert_eq!(pick_dir(&[5]), 0);
        assert_eq!(pick_dir(&[0, 0, 0]), 0);
        assert_eq!(pick_dir(&[3, 1, 2]), 1);
        assert_eq!(pick_dir(&[2, 1, 1]), 1);
        assert_eq!(pick_dir(&[1, 2, 1]), 0);
    }

    #[test]
    fn a_cordoned_dir_gets_no_new_partition_while_another_is_open() {
        assert_eq!(pick_open_dir(&[0, 5, 9], &[true]), 1);
        assert_eq!(pick_open_dir(&[0, 5, 9], &[true, true]), 2);
        assert_eq!(pick_open_dir(&[4, 5, 1], &[true, true, true]), 2);
        assert_eq!(pick_open_dir(&[4, 5], &[]), 0);
        let load = DirLoad::default();
        assert!(!load.all_cordoned(2));
        assert!(load.set_cordoned(vec![true, false]));
        assert!(!load.set_cordoned(vec![true, false]));
        let placed: Vec<usize> = (0..3).map(|_| load.place(2)).collect();
        assert_eq!(placed, vec![1, 1, 1]);
        assert!(!load.all_cordoned(2));
        load.set_cordoned(vec![true, true]);
        assert!(load.all_cordoned(2));
        // Every dir cordoned: the least loaded still takes what comes.
        assert_eq!(load.place(2), 0);
    }

    #[test]
    fn placement_alternates_and_fills_the_emptied_dir_first() {
        let load = DirLoad::default();
        let placed: Vec<usize> = (0..6).map(|_| load.place(2)).collect();
        assert_eq!(placed, vec![0, 1, 0, 1, 0, 1]);
        assert_eq!(load.counts(), vec![3, 3]);
        load.remove(1);
        load.remove(1);
        assert_eq!(load.place(2), 1);
        // Partitions found at start count as well.
        let load = DirLoad::default();
        load.add(0);
        load.add(0);
        assert_eq!(load.place(3), 1);
        assert_eq!(load.place(3), 2);
        assert_eq!(load.place(3), 1);
    }

    #[test]
    fn a_partition_in_two_dirs_is_refused_naming_both() {
        let root = tempfile::tempdir().expect("temp dir");
        let a = root.path().join("a");
        let b = root.path().join("b");
        for dir in [a.join("t-0"), a.join("t-1"), b.join("t-2")] {
            std::fs::create_dir_all(dir).expect("dir");
        }
        let found = find_partitions(&[a.clone(), b.clone()]).expect("no duplicate");
        let placed: Vec<(i32, usize)> = found
            .iter()
            .map(|f| (f.tp.partition, f.dir_index))
            .collect();
        assert_eq!(placed, vec![(0, 0), (1, 0), (2, 1)]);
        assert_eq!(dir_index_of(&[a.clone(), b.clone()], &b.join("t-2")), 1);
        std::fs::create_dir_all(b.join("t-1")).expect("dir");
        let e = find_partitions(&[a.clone(), b.clone()]).expect_err("duplicate");
        let text = e.to_string();
        assert!(text.contains("t-1"), "{text}");
        assert!(
            text.contains(&a.join("t-1").display().to_string()),
            "{text}"
        );
        assert!(
            text.contains(&b.join("t-1").display().to_string()),
            "{text}"
        );
    }
}
