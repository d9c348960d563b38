//! The in-memory view of a quorum member's durable state: the last
//! snapshot, the log entries after it, the hard state and the conf state.
//! raft-rs's `Storage` reads take `&self` and must not fail for I/O, so both
//! stores ([`super::FileStorage`], [`super::SimStorage`]) keep this copy and
//! serve every read from it; their writes go to the medium first, then here.
//!
//! Memory: the metadata log since the last snapshot. The node snapshots every
//! `snapshot_interval_entries` applied entries, which bounds it.

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};

/// A log since its last snapshot, with the hard and conf states.
#[derive(Debug, Clone, Default)]
pub struct LogCache {
    hard_state: HardState,
    conf_state: ConfState,
    /// The last snapshot; its metadata index is 0 when there is none.
    snapshot: Snapshot,
    /// Entries `snapshot index + 1 ..= last_index`, contiguous.
    entries: Vec<Entry>,
}

impl LogCache {
    /// A fresh member's state: no log, the given voters. No voters: a
    /// controller that joins an existing quorum (KIP-853); it learns the
    /// voters from the leader's snapshot once it is added.
    pub fn new(voters: &[u64]) -> Self {
        LogCache {
            conf_state: ConfState {
                voters: voters.to_vec(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Rebuilds the view from what a store read back; `entries` may still
    /// hold entries at or below the snapshot (a crash between writing a
    /// snapshot and compacting the log), which are dropped here.
    pub fn from_parts(
        mut hard_state: HardState,
        conf_state: ConfState,
        snapshot: Snapshot,
        entries: Vec<Entry>,
    ) -> Result<Self, String> {
        let snapshot_index = snapshot.get_metadata().index;
        let snapshot_term = snapshot.get_metadata().term;
        // Entries up to the snapshot are covered by it. If the log holds the
        // snapshot's own index with another term, the log is from a history
        // the snapshot replaced (a crash while installing a leader's
        // snapshot): none of it can be kept.
        let diverged = entries
            .iter()
            .any(|entry| entry.index == snapshot_index && entry.term != snapshot_term);
        let kept: Vec<Entry> = if diverged {
            Vec::new()
        } else {
            entries
                .into_iter()
                .filter(|entry| entry.index > snapshot_index)
                .collect()
        };
        if let Some(first) = kept.first() {
            if first.index != snapshot_index + 1 {
                return Err(format!(
                    "log starts at {} but the snapshot ends at {snapshot_index}",
                    first.index
                ));
            }
        }
        for pair in kept.windows(2) {
            if pair[1].index != pair[0].index + 1 {
                return Err(format!(
                    "log jumps from {} to {}",
                    pair[0].index, pair[1].index
                ));
            }
        }
        // A snapshot's entries are committed; a crash between installing a
        // snapshot and writing the hard state leaves commit behind it.
        hard_state.commit = hard_state.commit.max(snapshot_index);
        hard_state.term = hard_state.term.max(snapshot_term);
        let cache = LogCache {
            hard_state,
            conf_state,
            snapshot,
            entries: kept,
        };
        if cache.hard_state.commit > cache.last_index() {
            return Err(format!(
                "commit {} is past the last entry {}",
                cache.hard_state.commit,
                cache.last_index()
            ));
        }
        cache.check();
        Ok(cache)
    }

    /// The invariants every operation keeps; a failure is a bug.
    pub fn check(&self) {
        let snapshot_index = self.snapshot_index();
        if let Some(first) = self.entries.first() {
            assert_eq!(
                first.index,
                snapshot_index + 1,
                "log starts right after the snapshot"
            );
        }
        if let Some(last) = self.entries.last() {
            let first = self.first_index();
            assert_eq!(
                last.index,
                first + self.entries.len() as u64 - 1,
                "log is contiguous"
            );
        }
        assert!(
            self.hard_state.commit >= snapshot_index,
            "a snapshot is committed"
        );
        assert!(
            self.hard_state.commit <= self.last_index(),
            "commit within the log"
        );
    }

    /// The hard state.
    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// The conf state.
    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// The last snapshot (metadata index 0 when none).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The entries after the snapshot.
    pub fn entries_slice(&self) -> &[Entry] {
        &self.entries
    }

    /// The index the last snapshot covers.
    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    /// The first index of the log (the snapshot's + 1).
    pub fn first_index(&self) -> u64 {
        self.snapshot_index() + 1
    }

    /// The last index of the log (the snapshot's when the log is empty).
    pub fn last_index(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot_index(), |entry| entry.index)
    }

    /// The entry at `index`, if the log (not the snapshot) holds it.
    pub fn entry(&self, index: u64) -> Option<&Entry> {
        let first = self.first_index();
        if index < first {
            return None;
        }
        self.entries.get((index - first) as usize)
    }

    /// Replaces the conf state: a membership change was applied.
    pub fn set_conf_state(&mut self, conf_state: ConfState) {
        self.conf_state = conf_state;
    }

    /// Replaces the hard state.
    pub fn set_hard_state(&mut self, hard_state: HardState) {
        assert!(
            hard_state.term >= self.hard_state.term,
            "term never goes back"
        );
        self.hard_state = hard_state;
        self.check();
    }

    /// Appends `entries`, first dropping the log's suffix from
    /// `entries[0].index` on (entries a new leader overwrote). Returns how
    /// many of the entries already held were kept.
    pub fn append(&mut self, entries: &[Entry]) -> usize {
        let Some(first_new) = entries.first() else {
            return self.entries.len();
        };
        for pair in entries.windows(2) {
            assert_eq!(
                pair[1].index,
                pair[0].index + 1,
                "appended entries are contiguous"
            );
        }
        assert!(
            first_new.index > self.snapshot_index(),
            "append {} overwrites the snapshot at {}",
            first_new.index,
            self.snapshot_index()
        );
        assert!(
            first_new.index <= self.last_index() + 1,
            "append {} leaves a gap after {}",
            first_new.index,
            self.last_index()
        );
        assert!(
            first_new.index > self.hard_state.commit,
            "append {} overwrites committed {}",
            first_new.index,
            self.hard_state.commit
        );
        let kept = (first_new.index - self.first_index()) as usize;
        self.entries.truncate(kept);
        self.entries.extend_from_slice(entries);
        assert_eq!(self.last_index(), entries[entries.len() - 1].index);
        self.check();
        kept
    }

    /// Installs a leader's snapshot: the log is replaced whole.
    pub fn apply_snapshot(&mut self, snapshot: &Snapshot) {
        let metadata = snapshot.get_metadata();
        assert!(
            metadata.index >= self.hard_state.commit,
            "snapshot {} is behind commit {}",
            metadata.index,
            self.hard_state.commit
        );
        self.entries.clear();
        self.snapshot = snapshot.clone();
        self.conf_state = metadata.get_conf_state().clone();
        self.hard_state.commit = metadata.index;
        self.hard_state.term = self.hard_state.term.max(metadata.term);
        self.check();
    }

    /// Records a snapshot of the local state machine at `index` (which must
    /// be applied, hence committed) and drops the entries it covers.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) {
        assert!(index > self.snapshot_index(), "compaction moves forward");
        assert!(
            index <= self.hard_state.commit,
            "only committed entries are compacted"
        );
        let term = self.entry(index).map_or(0, |entry| entry.term);
        assert!(term > 0, "entry {index} is in the log");
        let mut metadata = SnapshotMetadata {
            index,
            term,
            ..Default::default()
        };
        metadata.set_conf_state(self.conf_state.clone());
        let mut snapshot = Snapshot {
            data: data.into(),
            ..Default::default()
        };
        snapshot.set_metadata(metadata);
        let drop_count = (index - self.snapshot_index()) as usize;
        self.entries.drain(..drop_count);
        self.snapshot = snapshot;
        self.check();
        assert_eq!(self.first_index(), index + 1);
    }
}

impl raft::Storage for LogCache {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        // raft-rs's contract: asking past the log is its bug, and it panics.
        assert!(
            high <= self.last_index() + 1,
            "entries [{low}, {high}) past the last index {}",
            self.last_index()
        );
        if low >= high {
            return Ok(Vec::new());
        }
        let first = self.first_index();
        let mut entries = self.entries[(low - first) as usize..(high - first) as usize].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if index == self.snapshot_index() {
            return Ok(self.snapshot.get_metadata().term);
        }
        if index < self.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        match self.entry(index) {
            Some(entry) => Ok(entry.term),
            None => Err(raft::Error::Store(StorageError::Unavailable)),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(LogCache::first_index(self))
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(LogCache::last_index(self))
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use raft::Storage;

    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: format!("e{index}t{term}").into_bytes().into(),
            ..Default::default()
        }
    }

    #[test]
    fn append_truncates_a_conflicting_suffix() {
        let mut log = LogCache::new(&[1]);
        assert_eq!(log.append(&[entry(1, 1), entry(2, 1), entry(3, 1)]), 0);
        assert_eq!(log.append(&[entry(2, 2)]), 1);
        assert_eq!(log.last_index(), 2);
        assert_eq!(log.term(2), Ok(2));
        assert_eq!(
            log.term(3),
            Err(raft::Error::Store(StorageError::Unavailable))
        );
    }

    #[test]
    fn compaction_keeps_the_term_of_the_snapshot_index() {
        let mut log = LogCache::new(&[1]);
        log.append(&[entry(1, 1), entry(2, 1), entry(3, 2)]);
        log.set_hard_state(HardState {
            term: 2,
            commit: 2,
            ..Default::default()
        });
        log.compact(2, b"state".to_vec());
        assert_eq!(Storage::first_index(&log), Ok(3));
        assert_eq!(log.term(2), Ok(1));
        assert_eq!(
            log.term(1),
            Err(raft::Error::Store(StorageError::Compacted))
        );
        let context = GetEntriesContext::empty(false);
        assert_eq!(
            log.entries(2, 4, None, context),
            Err(raft::Error::Store(StorageError::Compacted))
        );
        assert_eq!(
            Storage::snapshot(&log, 0, 2).map(|s| s.get_metadata().index),
            Ok(2)
        );
    }

    #[test]
    fn from_parts_drops_a_log_the_snapshot_replaced() {
        let mut snapshot = Snapshot::default();
        snapshot.mut_metadata().index = 2;
        snapshot.mut_metadata().term = 3;
        let stale = vec![entry(1, 1), entry(2, 1), entry(3, 1)];
        let log = LogCache::from_parts(
            HardState::default(),
            ConfState::default(),
            snapshot.clone(),
            stale,
        );
        assert_eq!(log.as_ref().map(|l| l.last_index()), Ok(2));
        assert_eq!(log.map(|l| l.hard_state().commit), Ok(2));

        let kept = vec![entry(2, 3), entry(3, 3)];
        let log = LogCache::from_parts(HardState::default(), ConfState::default(), snapshot, kept);
        assert_eq!(log.map(|l| l.last_index()), Ok(3));
    }
}
