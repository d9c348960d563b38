//! Free space on the data dir's file system, and the low-space guard.
//!
//! Why a guard: a write that meets a full disk (ENOSPC) fails the
//! partition's group commit, and a failed partition can take no more
//! appends (what it had taken but not written is lost, and only the
//! acknowledged part is known to be safe). Refusing appends *before* the
//! disk is full keeps partitions healthy: producers get
//! `KAFKA_STORAGE_ERROR` (retriable) at once, readers go on, and appends
//! resume by themselves once retention, a topic deletion or the operator
//! frees space — Redpanda's `storage_min_free_bytes` rule.
//!
//! Each shard's log manager checks the file system every
//! [`SPACE_CHECK_INTERVAL`] ([`LowSpace::refresh`]). Between two checks the
//! shard keeps an estimate: every append is counted against it *before* it
//! is taken ([`LowSpace::admits`]), and every preallocation step before it
//! is issued ([`LowSpace::room_bytes`], [`LowSpace::charge`]) — a step
//! takes at most a quarter of the room above the reserve (and always what
//! the admitted writes need), so a preallocation step no longer fails its
//! partition. (A 250 ms
//! poll alone came too late: 16 producers write a 32 MiB step's worth in
//! well under that.) The estimate only ever errs low — an append counts
//! once when taken and its preallocation once more — and the next check
//! sets it right. Each shard counts only its own writes; the reserve
//! absorbs what the others write between two checks.
//!
//! A compaction pass is counted the same way before it starts: its
//! rewrites (at most what it reads) are charged against the estimate, and
//! a pass that does not fit above its topic's floor waits for a later tick
//! (`compaction::clean`).
//!
//! Internal topics (`__consumer_offsets`, `__transaction_state`) may write
//! down to half the reserve ([`Allowance::Internal`]): consumers keep
//! committing offsets, and transactions keep ending, on a disk that refuses
//! produce. A write that still meets ENOSPC (a burst larger than the
//! reserve) takes its partition offline as before; the manager reopens an
//! unreplicated one once space is back.

use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

/// How often each shard looks at the free space.
pub const SPACE_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// The reserve when none is configured: 1 GiB, but at most 5% of the file
/// system (a small test or edge file system would otherwise never write).
pub const DEFAULT_MIN_FREE_BYTES: u64 = 1 << 30;

/// The default reserve's cap, in percent of the file system's size.
const DEFAULT_MIN_FREE_PERCENT: u64 = 5;

/// (total, available to unprivileged users) bytes of the file system
/// holding `path`.
pub fn file_system_bytes(path: &Path) -> std::io::Result<(u64, u64)> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: all-zero bytes are a valid `statvfs` (plain integers).
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and stat a valid out pointer.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let block_bytes = stat.f_frsize;
    Ok((
        stat.f_blocks.saturating_mul(block_bytes),
        stat.f_bavail.saturating_mul(block_bytes),
    ))
}

/// The reserve for a file system of `total_bytes`: the configured one, or
/// the default (1 GiB capped at 5% of the file system).
pub fn min_free_bytes(configured: Option<u64>, total_bytes: u64) -> u64 {
    configured
        .unwrap_or_else(|| DEFAULT_MIN_FREE_BYTES.min(total_bytes / 100 * DEFAULT_MIN_FREE_PERCENT))
}

/// How far below the free-space reserve a partition may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// A data topic: down to the reserve.
    Data,
    /// An internal topic (offsets, transaction state): down to half the
    /// reserve, so offsets commit on a disk that refuses produce.
    Internal,
}

impl Allowance {
    /// The allowance of the topic named `topic`.
    pub fn of_topic(topic: &str) -> Allowance {
        match topic {
            "__consumer_offsets" | "__transaction_state" => Allowance::Internal,
            _ => Allowance::Data,
        }
    }
}

/// One shard's view of the data dir's free space.
#[derive(Debug, Default)]
pub struct LowSpace {
    low: Cell<bool>,
    /// A data write was refused by the estimate since the last check: the
    /// disk counts as low although statvfs never sees it below the reserve
    /// (the estimate refuses first), so the metric and warning still fire.
    refused: Cell<bool>,
    free_bytes: Cell<u64>,
    min_free_bytes: Cell<u64>,
}

/// What a refresh saw change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceChange {
    /// Free space fell below the reserve: appends are refused from now on.
    BecameLow,
    /// Free space is back above the reserve: appends are taken again.
    Recovered,
    /// No change.
    Same,
}

impl LowSpace {
    /// Whether free space is below the reserve (appends are refused).
    pub fn is_low(&self) -> bool {
        self.low.get()
    }

    /// Free bytes at the last check.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes.get()
    }

    /// The reserve in force at the last check.
    pub fn reserve_bytes(&self) -> u64 {
        self.min_free_bytes.get()
    }

    /// The free bytes a writer of `allowance` must leave.
    fn floor_bytes(&self, allowance: Allowance) -> u64 {
        match allowance {
            Allowance::Data => self.min_free_bytes.get(),
            Allowance::Internal => self.min_free_bytes.get() / 2,
        }
    }

    /// Bytes a writer of `allowance` may still take by the estimate
    /// (unbounded with a reserve of 0: the guard is off, and a write meets
    /// ENOSPC itself).
    pub fn room_bytes(&self, allowance: Allowance) -> u64 {
        if self.min_free_bytes.get() == 0 {
            return u64::MAX;
        }
        self.free_bytes
            .get()
            .saturating_sub(self.floor_bytes(allowance))
    }

    /// Whether an append of `bytes` fits above the floor of `allowance`;
    /// if so it is counted against the estimate at once. A data append is
    /// refused while the last check saw the disk low, whatever the estimate.
    pub fn admits(&self, bytes: u64, allowance: Allowance) -> bool {
        if self.low.get() && allowance == Allowance::Data {
            return false;
        }
        if self.room_bytes(allowance) < bytes {
            if allowance == Allowance::Data {
                self.refused.set(true);
            }
            return false;
        }
        self.charge(bytes);
        true
    }

    /// Counts `bytes` about to be written or allocated against the estimate.
    pub fn charge(&self, bytes: u64) {
        self.free_bytes
            .set(self.free_bytes.get().saturating_sub(bytes));
    }

    /// Records a check's result: `free_bytes` of `total_bytes` available.
    pub fn update(
        &self,
        free_bytes: u64,
        total_bytes: u64,
        configured: Option<u64>,
    ) -> SpaceChange {
        let reserve = min_free_bytes(configured, total_bytes);
        self.free_bytes.set(free_bytes);
        self.min_free_bytes.set(reserve);
        // Low below the reserve, or within an eighth above it once writes
        // were refused (or it was low already): the hysteresis keeps the
        // flag from flapping at the edge the estimate stops writes at.
        let near = free_bytes < reserve.saturating_add(reserve / 8);
        let refused = self.refused.replace(false);
        let low = free_bytes < reserve || (near && (refused || self.low.get()));
        let was_low = self.low.replace(low);
        match (was_low, low) {
            (false, true) => SpaceChange::BecameLow,
            (true, false) => SpaceChange::Recovered,
            _ => SpaceChange::Same,
        }
    }

    /// Looks at the file system holding `data_dir`. A failed `statvfs`
    /// changes nothing (the disk-error path still guards the data).
    pub fn refresh(&self, data_dir: &Path, configured: Option<u64>) -> SpaceChange {
        match file_system_bytes(data_dir) {
            Ok((total, free)) => self.update(free, total, configured),
            Err(e) => {
                tracing::debug!(dir = %data_dir.display(), error = %e, "statvfs failed");
                SpaceChange::Same
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_reserve_is_a_gibibyte_capped_at_five_percent() {
        assert_eq!(min_free_bytes(None, 1 << 40), 1 << 30);
        assert_eq!(min_free_bytes(None, 100 << 20), 5 << 20);
        assert_eq!(min_free_bytes(Some(7), 1 << 40), 7);
        assert_eq!(min_free_bytes(Some(0), 1 << 40), 0);
    }

    #[test]
    fn a_refused_write_near_the_reserve_counts_as_low_until_space_is_back() {
        let space = LowSpace::default();
        let (reserve, total) = (800u64, 1 << 40);
        assert_eq!(space.update(850, total, Some(reserve)), SpaceChange::Same);
        assert!(!space.admits(100, Allowance::Data), "50 bytes of room");
        assert_eq!(
            space.update(850, total, Some(reserve)),
            SpaceChange::BecameLow
        );
        assert_eq!(space.update(880, total, Some(reserve)), SpaceChange::Same);
        assert_eq!(
            space.update(900, total, Some(reserve)),
            SpaceChange::Recovered
        );
    }

    #[test]
    fn crossing_the_reserve_is_reported_once_each_way() {
        let space = LowSpace::default();
        assert_eq!(space.update(100, 1000, Some(50)), SpaceChange::Same);
        assert!(!space.is_low());
        assert_eq!(space.update(40, 1000, Some(50)), SpaceChange::BecameLow);
        assert_eq!(space.update(30, 1000, Some(50)), SpaceChange::Same);
        assert!(space.is_low());
        assert_eq!(space.free_bytes(), 30);
        // Back only an eighth above the reserve (hysteresis).
        assert_eq!(space.update(50, 1000, Some(50)), SpaceChange::Same);
        assert_eq!(space.update(57, 1000, Some(50)), SpaceChange::Recovered);
        assert!(!space.is_low());
        // A reserve of 0 never refuses.
        assert_eq!(space.update(0, 1000, Some(0)), SpaceChange::Same);
    }

    #[test]
    fn appends_are_counted_before_they_are_taken() {
        let space = LowSpace::default();
        space.update(100, 1000, Some(50));
        assert_eq!(space.room_bytes(Allowance::Data), 50);
        assert_eq!(space.room_bytes(Allowance::Internal), 75);
        assert!(space.admits(30, Allowance::Data));
        assert_eq!(space.free_bytes(), 70);
        // 20 left above the reserve: 21 is refused and not counted.
        assert!(!space.admits(21, Allowance::Data));
        assert_eq!(space.free_bytes(), 70);
        assert!(space.admits(20, Allowance::Data));
        assert!(!space.admits(1, Allowance::Data));
        // An internal topic goes on down to half the reserve.
        assert!(space.admits(25, Allowance::Internal));
        assert!(!space.admits(1, Allowance::Internal));
        // A preallocation step is charged as well.
        space.update(100, 1000, Some(50));
        space.charge(60);
        assert_eq!(space.room_bytes(Allowance::Data), 0);
        // The next check sets the estimate right.
        assert_eq!(space.update(90, 1000, Some(50)), SpaceChange::Same);
        assert_eq!(space.room_bytes(Allowance::Data), 40);
        // Below the reserve by the check, data is refused, internal not.
        assert_eq!(space.update(40, 1000, Some(50)), SpaceChange::BecameLow);
        assert!(!space.admits(0, Allowance::Data));
        assert!(space.admits(10, Allowance::Internal));
        // A reserve of 0 turns the guard off.
        space.update(10, 1000, Some(0));
        assert!(space.admits(1 << 40, Allowance::Data));
    }

    #[test]
    fn internal_topics_have_their_own_allowance() {
        assert_eq!(
            Allowance::of_topic("__consumer_offsets"),
            Allowance::Internal
        );
        assert_eq!(
            Allowance::of_topic("__transaction_state"),
            Allowance::Internal
        );
        assert_eq!(Allowance::of_topic("orders"), Allowance::Data);
        assert_eq!(Allowance::of_topic("__other"), Allowance::Data);
    }

    #[test]
    fn the_file_system_of_a_real_dir_is_seen() {
        let dir = std::env::temp_dir();
        let (total, free) = file_system_bytes(&dir).expect("statvfs");
        assert!(total > 0 && free <= total);
        assert!(file_system_bytes(Path::new("/no/such/dir/here")).is_err());
    }
}
