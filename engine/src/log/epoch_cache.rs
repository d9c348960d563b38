//! [`LeaderEpochCache`]: the content of Kafka's `leader-epoch-checkpoint`,
//! one partition's list of (leader epoch, first offset written in it).
//!
//! Why it exists (KIP-101): truncating a returning replica to its high
//! watermark loses acknowledged data or lets logs diverge, because the HW a
//! follower knows lags the leader's. With each epoch's start offset kept on
//! every replica, a follower asks the leader "where does my last epoch end in
//! your log?" (OffsetForLeaderEpoch, or Fetch v12+'s `diverging_epoch`) and
//! truncates exactly the records the leader never had.
//!
//! The semantics follow Kafka's `LeaderEpochFileCache` operation by
//! operation (`assign`, `endOffsetFor`, `truncateFromEnd`,
//! `truncateFromStart`), including the undefined answers. The file format is
//! Kafka's `CheckpointFile`: a version line (`0`), a count line, then one
//! `epoch start_offset` line per entry. Encoding and parsing are pure
//! functions over text; the partition log (`log/epochs.rs`) writes the file
//! (and fsyncs it) whenever a mutating call returns `true`.
//!
//! Why it lives in the engine: the cache must be durable beside the log it
//! describes and cut with it (truncation, recovery), so the partition log
//! owns it; the replication core in `rill-cluster` re-exports it.

use crate::types::{LeaderEpoch, Offset};

/// Kafka's `UNDEFINED_EPOCH`.
pub const UNDEFINED_EPOCH: LeaderEpoch = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH_OFFSET: Offset = -1;

/// The checkpoint format version Kafka writes and reads.
const CHECKPOINT_VERSION: i32 = 0;

/// One line of the checkpoint: the first offset written under `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// The offset of the first record written in that epoch.
    pub start_offset: Offset,
}

/// The answer to OffsetForLeaderEpoch (and the content of Fetch v12+'s
/// `diverging_epoch`): the largest epoch ≤ the requested one that this log
/// knows, and where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The epoch found (`-1`: undefined).
    pub epoch: LeaderEpoch,
    /// The end offset of that epoch, exclusive (`-1`: undefined).
    pub end_offset: Offset,
}

impl EpochEndOffset {
    /// Kafka's `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`.
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };
}

/// A malformed `leader-epoch-checkpoint`: the runtime treats the partition
/// as needing recovery (Kafka fails the log directory), never guesses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// A line is missing where the header or the count says one must be.
    #[error("leader-epoch-checkpoint: missing line {line}")]
    MissingLine {
        /// 1-based line number.
        line: usize,
    },
    /// A line that does not parse.
    #[error("leader-epoch-checkpoint: malformed line {line}: {text:?}")]
    MalformedLine {
        /// 1-based line number.
        line: usize,
        /// The line as read.
        text: String,
    },
    /// A version other than 0.
    #[error("leader-epoch-checkpoint: unsupported version {version}")]
    UnsupportedVersion {
        /// The version read.
        version: i32,
    },
    /// More entry lines than the count line announced.
    #[error("leader-epoch-checkpoint: expected {expected} entries, found more")]
    TooManyEntries {
        /// The count line's value.
        expected: usize,
    },
    /// An entry Kafka would refuse to assign (negative epoch or offset).
    #[error("leader-epoch-checkpoint: {0}")]
    InvalidEntry(EpochCacheError),
}

/// What the cache refuses: an operating error (a bad entry from a peer, the
/// controller or a file), never a broken invariant (those are assertions).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EpochCacheError {
    /// A leader-epoch entry with a negative epoch or start offset (Kafka
    /// throws `IllegalArgumentException`).
    #[error("invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")]
    InvalidEntry {
        /// The epoch.
        epoch: LeaderEpoch,
        /// The start offset.
        start_offset: Offset,
    },
}

/// One partition's leader epochs, sorted; both the epochs and the start
/// offsets strictly increase (Kafka keeps this by removing non-monotonic
/// entries when a new one is assigned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache (a new partition, or one whose checkpoint is missing).
    pub fn new() -> Self {
        LeaderEpochCache::default()
    }

    /// A cache from checkpoint text, replaying each entry through
    /// [`assign`](Self::assign) as Kafka does when it loads the file.
    pub fn from_checkpoint(text: &str) -> Result<Self, CheckpointError> {
        let mut cache = LeaderEpochCache::new();
        for entry in parse_checkpoint(text)? {
            cache
                .assign(entry.epoch, entry.start_offset)
                .map_err(CheckpointError::InvalidEntry)?;
        }
        Ok(cache)
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The newest epoch that has records.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The oldest entry.
    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Records that `epoch` starts at `start_offset` (a leader calls it when
    /// it appends the first batch of its epoch, a follower when it appends a
    /// batch whose epoch is newer than its latest). Returns whether the cache
    /// changed (then the runtime rewrites the checkpoint).
    ///
    /// As in Kafka: nothing changes when the epoch is already the latest with
    /// a start offset at or below this one; otherwise every entry from the
    /// end whose epoch is ≥ `epoch` or whose start offset is ≥
    /// `start_offset` is removed first, so the list stays monotonic.
    pub fn assign(
        &mut self,
        epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<bool, EpochCacheError> {
        if epoch < 0 || start_offset < 0 {
            return Err(EpochCacheError::InvalidEntry {
                epoch,
                start_offset,
            });
        }
        let update_needed = match self.entries.last() {
            Some(last) => epoch != last.epoch || start_offset < last.start_offset,
            None => true,
        };
        if !update_needed {
            return Ok(false);
        }
        self.assert_monotonic();
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.assert_monotonic();
        Ok(true)
    }

    /// Kafka's `endOffsetFor`: the OffsetForLeaderEpoch answer for
    /// `requested_epoch` given this log's end offset.
    ///
    /// - undefined requested epoch → undefined;
    /// - the latest epoch → (it, `log_end_offset`);
    /// - an epoch above every known one → undefined;
    /// - an epoch below every known one → (the requested epoch, the first
    ///   entry's start offset): the data before is gone, the follower
    ///   replicates from the leader's start;
    /// - otherwise → (the largest known epoch ≤ requested, the start offset of
    ///   the first epoch above the requested one).
    pub fn end_offset_for(
        &self,
        requested_epoch: LeaderEpoch,
        log_end_offset: Offset,
    ) -> EpochEndOffset {
        if requested_epoch == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return EpochEndOffset {
                epoch: requested_epoch,
                end_offset: log_end_offset,
            };
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested_epoch) else {
            return EpochEndOffset::UNDEFINED;
        };
        match self
            .entries
            .iter()
            .rev()
            .find(|e| e.epoch <= requested_epoch)
        {
            None => EpochEndOffset {
                epoch: requested_epoch,
                end_offset: higher.start_offset,
            },
            Some(floor) => EpochEndOffset {
                epoch: floor.epoch,
                end_offset: higher.start_offset,
            },
        }
    }

    /// The epoch of the record at `offset`, if the cache covers it (the
    /// largest epoch whose start offset is ≤ `offset`).
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Kafka's `truncateFromEnd`: after the log is truncated to `end_offset`
    /// (exclusive), removes the entries that start at or after it. Returns
    /// whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        let applies = end_offset >= 0
            && self
                .entries
                .last()
                .is_some_and(|e| e.start_offset >= end_offset);
        if !applies {
            return false;
        }
        self.assert_monotonic();
        while self
            .entries
            .last()
            .is_some_and(|e| e.start_offset >= end_offset)
        {
            self.entries.pop();
        }
        self.assert_monotonic();
        assert!(self
            .entries
            .last()
            .is_none_or(|e| e.start_offset < end_offset));
        true
    }

    /// Kafka's `truncateFromStart`: after the log start moves to
    /// `start_offset` (retention, DeleteRecords), drops the entries wholly
    /// before it and moves the newest of them up to `start_offset`. Returns
    /// whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        let removed = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if removed == 0 {
            return false;
        }
        self.assert_monotonic();
        let kept_epoch = self.entries[removed - 1].epoch;
        self.entries.drain(..removed);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: kept_epoch,
                start_offset,
            },
        );
        self.assert_monotonic();
        true
    }

    /// The checkpoint file's text (Kafka's format).
    pub fn encode_checkpoint(&self) -> String {
        encode_checkpoint(&self.entries)
    }

    fn assert_monotonic(&self) {
        for pair in self.entries.windows(2) {
            assert!(pair[0].epoch < pair[1].epoch, "epochs must increase");
            assert!(
                pair[0].start_offset < pair[1].start_offset,
                "epoch start offsets must increase"
            );
        }
        assert!(self
            .entries
            .iter()
            .all(|e| e.epoch >= 0 && e.start_offset >= 0));
    }
}

/// Kafka's `leader-epoch-checkpoint` text for `entries`: `0`, the count,
/// then `epoch start_offset` per line, each line ending in `\n`.
pub fn encode_checkpoint(entries: &[EpochEntry]) -> String {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(&format!("{} {}\n", entry.epoch, entry.start_offset));
    }
    text
}

/// Parses Kafka's `leader-epoch-checkpoint` text. Like Kafka's
/// `CheckpointReadBuffer`: the version must be 0, exactly `count` entry
/// lines must follow, and each is two whitespace-separated integers.
pub fn parse_checkpoint(text: &str) -> Result<Vec<EpochEntry>, CheckpointError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let mut next_line = |line: usize| lines.next().ok_or(CheckpointError::MissingLine { line });
    let (n, version_line) = next_line(1)?;
    let version: i32 = parse_field(n, version_line)?;
    if version != CHECKPOINT_VERSION {
        return Err(CheckpointError::UnsupportedVersion { version });
    }
    let (n, count_line) = next_line(2)?;
    let count: usize = parse_field(n, count_line)?;
    // Bound the allocation by the text itself, not by a count a corrupt
    // file could make huge.
    let mut entries = Vec::with_capacity(count.min(text.len()));
    for i in 0..count {
        let (n, line) = next_line(3 + i)?;
        let mut fields = line.split_whitespace();
        let (Some(epoch), Some(offset), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(malformed(n, line));
        };
        entries.push(EpochEntry {
            epoch: parse_field(n, epoch)?,
            start_offset: parse_field(n, offset)?,
        });
    }
    if lines.next().is_some() {
        return Err(CheckpointError::TooManyEntries { expected: count });
    }
    Ok(entries)
}

fn parse_field<T: std::str::FromStr>(line: usize, text: &str) -> Result<T, CheckpointError> {
    text.trim().parse().map_err(|_| malformed(line, text))
}

fn malformed(line: usize, text: &str) -> CheckpointError {
    CheckpointError::MalformedLine {
        line,
        text: text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(LeaderEpoch, Offset)]) -> LeaderEpochCache {
        let mut cache = LeaderEpochCache::new();
        for &(epoch, offset) in entries {
            cache.assign(epoch, offset).unwrap();
        }
        cache
    }

    fn pairs(cache: &LeaderEpochCache) -> Vec<(LeaderEpoch, Offset)> {
        cache
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    fn answer(epoch: LeaderEpoch, end_offset: Offset) -> EpochEndOffset {
        EpochEndOffset { epoch, end_offset }
    }

    #[test]
    fn assign_keeps_the_first_start_offset_of_an_epoch() {
        let mut c = cache(&[(2, 6)]);
        assert!(!c.assign(2, 10).unwrap(), "same epoch, later offset: no-op");
        assert_eq!(pairs(&c), vec![(2, 6)]);
        assert!(
            c.assign(2, 4).unwrap(),
            "same epoch, earlier offset: replaces"
        );
        assert_eq!(pairs(&c), vec![(2, 4)]);
    }

    #[test]
    fn assign_removes_non_monotonic_entries_from_the_end() {
        let mut c = cache(&[(1, 0), (2, 5), (4, 10)]);
        // A lower epoch at a later offset drops the higher epoch.
        assert!(c.assign(3, 12).unwrap());
        assert_eq!(pairs(&c), vec![(1, 0), (2, 5), (3, 12)]);
        // A higher epoch at an earlier offset drops the entries at or after it.
        assert!(c.assign(5, 5).unwrap());
        assert_eq!(pairs(&c), vec![(1, 0), (5, 5)]);
    }

    #[test]
    fn assign_refuses_negative_values() {
        let mut c = LeaderEpochCache::new();
        assert!(c.assign(-1, 0).is_err());
        assert!(c.assign(0, -1).is_err());
        assert!(c.entries().is_empty());
    }

    #[test]
    fn end_offset_for_matches_kafka() {
        let c = cache(&[(1, 0), (3, 10), (6, 20)]);
        let leo = 27;
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, leo),
            EpochEndOffset::UNDEFINED
        );
        // The latest epoch ends at the log end.
        assert_eq!(c.end_offset_for(6, leo), answer(6, 27));
        // Known epochs end where the next starts.
        assert_eq!(c.end_offset_for(1, leo), answer(1, 10));
        assert_eq!(c.end_offset_for(3, leo), answer(3, 20));
        // Unknown epochs in between answer the largest known epoch below.
        assert_eq!(c.end_offset_for(2, leo), answer(1, 10));
        assert_eq!(c.end_offset_for(5, leo), answer(3, 20));
        // Below every epoch: the requested epoch and the first start offset.
        assert_eq!(c.end_offset_for(0, leo), answer(0, 0));
        // Above every epoch: undefined.
        assert_eq!(c.end_offset_for(7, leo), EpochEndOffset::UNDEFINED);
        // An empty cache knows nothing.
        assert_eq!(
            LeaderEpochCache::new().end_offset_for(0, 0),
            EpochEndOffset::UNDEFINED
        );
    }

    #[test]
    fn truncate_from_end_removes_entries_at_or_after_the_offset() {
        let mut c = cache(&[(1, 0), (3, 10), (6, 20)]);
        assert!(!c.truncate_from_end(25), "nothing starts at or after 25");
        assert!(!c.truncate_from_end(-1), "undefined offset: no-op");
        assert!(c.truncate_from_end(20));
        assert_eq!(pairs(&c), vec![(1, 0), (3, 10)]);
        assert!(c.truncate_from_end(5));
        assert_eq!(pairs(&c), vec![(1, 0)]);
        assert!(c.truncate_from_end(0));
        assert!(c.entries().is_empty());
    }

    #[test]
    fn truncate_from_start_moves_the_surviving_epoch_up() {
        let mut c = cache(&[(1, 0), (3, 10), (6, 20)]);
        assert!(c.truncate_from_start(15));
        assert_eq!(pairs(&c), vec![(3, 15), (6, 20)]);
        // Exclusive: an entry starting exactly there is kept as is.
        assert!(c.truncate_from_start(20));
        assert_eq!(pairs(&c), vec![(6, 20)]);
        assert!(!c.truncate_from_start(3), "before every entry: no-op");
        assert!(c.truncate_from_start(40));
        assert_eq!(pairs(&c), vec![(6, 40)]);
    }

    #[test]
    fn checkpoint_round_trips_in_kafkas_format() {
        let c = cache(&[(0, 0), (2, 100), (5, 2048)]);
        let text = c.encode_checkpoint();
        assert_eq!(text, "0\n3\n0 0\n2 100\n5 2048\n");
        assert_eq!(LeaderEpochCache::from_checkpoint(&text).unwrap(), c);
        assert_eq!(
            LeaderEpochCache::from_checkpoint("0\n0\n").unwrap(),
            LeaderEpochCache::new()
        );
    }

    #[test]
    fn checkpoint_parse_refuses_bad_files() {
        assert_eq!(
            parse_checkpoint(""),
            Err(CheckpointError::MissingLine { line: 1 })
        );
        assert_eq!(
            parse_checkpoint("1\n0\n"),
            Err(CheckpointError::UnsupportedVersion { version: 1 })
        );
        assert_eq!(
            parse_checkpoint("0\n2\n1 0\n"),
            Err(CheckpointError::MissingLine { line: 4 })
        );
        assert_eq!(
            parse_checkpoint("0\n1\n1 0\n2 5\n"),
            Err(CheckpointError::TooManyEntries { expected: 1 })
        );
        assert!(matches!(
            parse_checkpoint("0\n1\n1 0 7\n"),
            Err(CheckpointError::MalformedLine { line: 3, .. })
        ));
        assert!(matches!(
            parse_checkpoint("0\n1\nx 0\n"),
            Err(CheckpointError::MalformedLine { line: 3, .. })
        ));
        assert!(matches!(
            LeaderEpochCache::from_checkpoint("0\n1\n-3 0\n"),
            Err(CheckpointError::InvalidEntry(_))
        ));
    }

    /// Model check: `end_offset_for` against a brute-force reading of the
    /// log the cache describes (each offset's epoch).
    #[test]
    fn end_offset_for_agrees_with_a_per_offset_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        for _ in 0..500 {
            let mut c = LeaderEpochCache::new();
            let mut offset = 0;
            let mut epoch = rng.gen_range(0..3);
            let mut log = Vec::new();
            for _ in 0..rng.gen_range(1..6) {
                let len = rng.gen_range(1..5);
                c.assign(epoch, offset).unwrap();
                log.extend(std::iter::repeat_n(epoch, len));
                offset += len as Offset;
                epoch += rng.gen_range(1..3);
            }
            let leo = log.len() as Offset;
            let latest = c.latest_epoch().unwrap();
            let first = c.earliest_entry().unwrap().epoch;
            for requested in first..=latest {
                // The model: the largest epoch ≤ requested in the log, and
                // the first offset whose epoch is above the requested one.
                let floor = log
                    .iter()
                    .copied()
                    .filter(|&e| e <= requested)
                    .max()
                    .unwrap();
                let end = log
                    .iter()
                    .position(|&e| e > requested)
                    .map_or(leo, |p| p as Offset);
                assert_eq!(c.end_offset_for(requested, leo), answer(floor, end));
                assert_eq!(c.epoch_for_offset(end - 1), Some(floor));
            }
        }
    }
}
