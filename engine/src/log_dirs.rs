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
//! A partition moves to another dir (AlterReplicaLogDirs) by a copy made
//! beside its new place and swapped in ([`move_partition_dir`]); a move a
//! crash cut short is finished or undone before the next start scans the
//! dirs ([`recover_moves`]), so a partition is never in two dirs, nor in
//! none.
//!
//! A dir may be *cordoned* (KIP-1066, `cordoned.log.dirs`): it keeps its
//! partitions but gets no new one while another dir is open. With every
//! dir cordoned the broker itself is cordoned and the controller places no
//! new replica on it; one it is still given (an explicit assignment) goes
//! to the least loaded dir as before.

use crate::disk;
use crate::error::EngineError;
use crate::segment::sync_dir;
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
    if !disk::is_dir(data_dir) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for name in disk::read_dir(data_dir).map_err(|e| EngineError::io(data_dir, e))? {
        let path = data_dir.join(&name);
        if !disk::is_dir(&path) {
            continue;
        }
        // The metadata quorum's log lives beside the partitions, under
        // Kafka's name for it, but it is not a partition of the engine.
        if name == crate::types::CLUSTER_METADATA_DIR {
            continue;
        }
        if let Some(tp) = TopicPartition::parse_dir_name(&name) {
            out.push((tp, path));
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

/// Suffix of a moving partition's copy in its new data dir (Kafka's own
/// moves name theirs `-future` too; no topic-partition name ends so).
const MOVE_COPY_SUFFIX: &str = ".move-future";
/// Suffix of a moved partition's old directory until it is deleted.
const MOVE_OLD_SUFFIX: &str = ".move-old";

/// `dir` with `suffix` appended to its last component.
fn with_suffix(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    dir.with_file_name(name)
}

/// Moves the (closed) partition directory `from` to `to`, in another data
/// dir, so that a crash at any point leaves it whole in one of the two:
/// 1. copy it to `to` + [`MOVE_COPY_SUFFIX`], every file synced;
/// 2. rename `from` aside (+ [`MOVE_OLD_SUFFIX`]): it is no longer found;
/// 3. rename the copy to `to`: it is found there;
/// 4. delete the old one.
///
/// [`recover_moves`] undoes a move cut before step 3 and finishes one cut
/// after it. An error before step 3 leaves the partition at `from` (step
/// 2 is put back when step 3 fails); after step 3 the move is done, and a
/// failure to sync or tidy up is only logged: the caller opens the
/// partition wherever its directory is.
pub fn move_partition_dir(from: &Path, to: &Path) -> Result<(), EngineError> {
    let copy = with_suffix(to, MOVE_COPY_SUFFIX);
    let old = with_suffix(from, MOVE_OLD_SUFFIX);
    let (from_parent, to_parent) = (parent_of(from), parent_of(to));
    if copy.exists() {
        std::fs::remove_dir_all(&copy).map_err(|e| EngineError::io(&copy, e))?;
    }
    if let Err(e) = copy_dir_synced(from, &copy).and_then(|()| sync_dir(&to_parent)) {
        // Left behind, the copy would go at the next start anyway.
        let _ = std::fs::remove_dir_all(&copy);
        return Err(e);
    }
    std::fs::rename(from, &old).map_err(|e| EngineError::io(from, e))?;
    if let Err(e) = std::fs::rename(&copy, to) {
        std::fs::rename(&old, from).map_err(|e| EngineError::io(&old, e))?;
        return Err(EngineError::io(&copy, e));
    }
    let tidied = sync_dir(&to_parent)
        .and_then(|()| std::fs::remove_dir_all(&old).map_err(|e| EngineError::io(&old, e)))
        .and_then(|()| sync_dir(&from_parent));
    if let Err(e) = tidied {
        tracing::warn!(error = %e, "a log dir move is done; its old copy goes at the next start");
    }
    Ok(())
}

fn parent_of(dir: &Path) -> PathBuf {
    dir.parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Copies directory `from` to `to` (made), each file synced, then `to`.
fn copy_dir_synced(from: &Path, to: &Path) -> Result<(), EngineError> {
    std::fs::create_dir_all(to).map_err(|e| EngineError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| EngineError::io(from, e))? {
        let entry = entry.map_err(|e| EngineError::io(from, e))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if crate::segment::is_being_deleted(&source)
            || source
                .extension()
                .is_some_and(|e| e == crate::recycle::EXTENSION)
        {
            // A spare is only worth its bytes where it already lies, and a
            // deleted segment's file (being unlinked) none at all.
            continue;
        }
        if source.is_dir() {
            copy_dir_synced(&source, &target)?;
            continue;
        }
        std::fs::copy(&source, &target).map_err(|e| EngineError::io(&source, e))?;
        let file = std::fs::File::open(&target).map_err(|e| EngineError::io(&target, e))?;
        file.sync_all().map_err(|e| EngineError::io(&target, e))?;
    }
    sync_dir(to)
}

/// Finishes or undoes the moves ([`move_partition_dir`]) a crash cut
/// short, before the dirs are scanned: an unfinished copy is deleted; an
/// old directory set aside is deleted when its partition is in place in
/// some dir, and put back when it is not.
pub fn recover_moves(dirs: &[PathBuf]) -> Result<(), EngineError> {
    for (suffix, data_dir) in [MOVE_COPY_SUFFIX, MOVE_OLD_SUFFIX]
        .into_iter()
        .flat_map(|suffix| dirs.iter().map(move |dir| (suffix, dir)))
    {
        if !disk::is_dir(data_dir) {
            continue;
        }
        for name in disk::read_dir(data_dir).map_err(|e| EngineError::io(data_dir, e))? {
            let path = data_dir.join(&name);
            let Some(base) = name.strip_suffix(suffix).map(str::to_string) else {
                continue;
            };
            let placed = dirs.iter().any(|d| disk::is_dir(&d.join(&base)));
            if suffix == MOVE_OLD_SUFFIX && !placed {
                tracing::warn!(dir = %path.display(), "a log dir move was cut short: putting it back");
                disk::rename(&path, &data_dir.join(&base))
                    .map_err(|e| EngineError::io(&path, e))?;
            } else {
                tracing::warn!(dir = %path.display(), "a log dir move was cut short: deleting its leftover");
                disk::remove_dir_all(&path).map_err(|e| EngineError::io(&path, e))?;
            }
            sync_dir(data_dir)?;
        }
    }
    Ok(())
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

    /// A partition directory with one file, `name` in `data_dir`.
    fn partition_dir(data_dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let dir = data_dir.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("00000000000000000000.log"), content).expect("write");
        dir
    }

    #[test]
    fn a_move_lands_in_one_dir_and_a_move_cut_short_is_undone_or_finished() {
        let root = tempfile::tempdir().expect("tempdir");
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&b).expect("mkdir");
        let dirs = [a.clone(), b.clone()];
        let from = partition_dir(&a, "t-0", b"records");
        move_partition_dir(&from, &b.join("t-0")).expect("move");
        let found = find_partitions(&dirs).expect("found once");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].dir_index, 1);
        let moved = std::fs::read(b.join("t-0/00000000000000000000.log")).expect("read");
        assert_eq!(moved, b"records");

        // Cut after the old dir was set aside, before the copy was renamed:
        // undone, the partition back where it was.
        let old = partition_dir(&a, "u-0.move-old", b"u");
        partition_dir(&b, "u-0.move-future", b"u");
        // Cut after the rename: finished, the old one deleted.
        partition_dir(&b, "v-0", b"v");
        partition_dir(&a, "v-0.move-old", b"v");
        // Cut during the copy: the copy deleted.
        partition_dir(&a, "w-0", b"w");
        partition_dir(&b, "w-0.move-future", b"partial");
        recover_moves(&dirs).expect("recover");
        assert!(!old.exists());
        let found: Vec<(String, usize)> = find_partitions(&dirs)
            .expect("no duplicate")
            .into_iter()
            .map(|f| (f.tp.to_string(), f.dir_index))
            .collect();
        let expected = [("t-0", 1), ("u-0", 0), ("v-0", 1), ("w-0", 0)];
        let expected: Vec<(String, usize)> =
            expected.iter().map(|(n, i)| (n.to_string(), *i)).collect();
        assert_eq!(found, expected);
        for data_dir in &dirs {
            let leftovers = std::fs::read_dir(data_dir)
                .expect("read dir")
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains(".move-"))
                .count();
            assert_eq!(leftovers, 0, "{}", data_dir.display());
        }
    }
}
