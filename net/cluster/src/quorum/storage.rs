//! The quorum's durable state: the [`LogStore`] contract the node writes
//! through, and [`FileStorage`], which keeps it in files of one directory.
//!
//! Layout of the directory:
//! - `log`: append-only frames (`[length u32][CRC32C u32][entry]`), one per
//!   entry, fsynced once per appended batch. A conflicting suffix is cut
//!   with `set_len`; compaction rewrites the file without the entries a
//!   snapshot covers. At open, a last frame that is cut short or fails its
//!   checksum, or a tail of zeros, is a write torn by a crash and is cut
//!   off; a bad frame with whole frames after it is corruption and an
//!   error. (A torn batch whose middle page was lost while a later one
//!   reached the disk reads as corruption: the store refuses to start
//!   rather than guess.)
//! - `raft_state`: the hard state (term, vote, commit) and the conf state.
//!   Written when the term or the vote changes and with every snapshot
//!   (installed or taken); a commit that alone moved is not written.
//!   The commit index is volatile state in Raft (only the term, the vote
//!   and the log must survive a crash): a member that restarts behind it
//!   replays less of its log until the leader tells it the commit again,
//!   as any member that was away does. Writing it with each commit cost
//!   two fsyncs per metadata record on the quorum's shard, which under a
//!   loaded disk (thousands of partitions created at once) held the shard
//!   for hundreds of milliseconds at a time: heartbeats were answered
//!   late and live brokers fenced.
//! - `snapshot`: the last snapshot's metadata and the state machine's bytes.
//!
//! - `.reserve`: a ballast file of [`RESERVE_BYTES`] (at most 1/16 of the
//!   file system) that holds disk blocks for the metadata log alone.
//!
//! The two small files are replaced whole: write `NAME.tmp`, fsync it,
//! rename over `NAME`, fsync the directory, so a crash leaves the old or
//! the new file and never half of one.
//!
//! Why a ballast file: the metadata log shares its file system with the
//! data dir, and a write of it that meets ENOSPC stops the node (raft-rs
//! cannot go on with a log it is unsure of). The data path refuses appends
//! below its free-space reserve, but a burst can still take the last block.
//! Any write here that meets ENOSPC shrinks the ballast by
//! [`RESERVE_RELEASE_BYTES`] and is retried, so the metadata log (topic
//! creation and deletion, leader changes) outlives a full data disk by
//! megabytes — thousands of records of a few kilobytes. The ballast is made
//! whole again at the next open when there is room. A preallocated log file
//! would do the same for appends, but not for the hard state, the snapshot
//! or the compaction rewrite, which are written as new files.
//!
//! Blocking `std::fs` on purpose: this is the metadata log (a few records a
//! second, kilobytes each), not the data path; the quorum's shard can afford
//! an fsync per `Ready`, and raft-rs needs the write durable before the
//! messages that depend on it go out anyway.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

use super::codec::{self, FrameRead};
use super::log_cache::LogCache;
use super::QuorumError;

const LOG_FILE: &str = "log";
const RAFT_STATE_FILE: &str = "raft_state";
const SNAPSHOT_FILE: &str = "snapshot";
const RESERVE_FILE: &str = ".reserve";

/// The ballast's size (see the module doc): 8 MiB, at most 1/16 of the
/// file system.
pub const RESERVE_BYTES: u64 = 8 << 20;

/// What one ENOSPC releases from the ballast before the write is retried.
pub const RESERVE_RELEASE_BYTES: u64 = 1 << 20;

/// What the node persists through. Every mutating call returns only once its
/// change is durable (fsynced): raft-rs sends the messages that depend on a
/// write (votes, append acknowledgements) right after it, and a crash must
/// not take back what a peer was told.
///
/// Reads come from raft-rs's [`raft::Storage`], served from memory. After a
/// write returns an error the in-memory view may be ahead of the disk: the
/// node stops on it (raft-rs cannot go on with a log it is unsure of), and
/// the runtime drops the store and reopens it, which reads back what is
/// durable.
pub trait LogStore: raft::Storage {
    /// Appends entries, dropping the suffix from `entries[0].index` on.
    fn append(&mut self, entries: &[Entry]) -> Result<(), QuorumError>;
    /// Replaces the hard state.
    fn set_hard_state(&mut self, hard_state: &HardState) -> Result<(), QuorumError>;
    /// Replaces the conf state once a membership change applied.
    fn set_conf_state(&mut self, conf_state: &ConfState) -> Result<(), QuorumError>;
    /// Installs a snapshot received from the leader, replacing the log.
    fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), QuorumError>;
    /// Stores a snapshot of the applied state at `index` and drops the log
    /// entries it covers.
    fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), QuorumError>;
    /// The in-memory view of what is durable.
    fn cache(&self) -> &LogCache;
}

/// A [`LogStore`] in files of one directory (see the module doc).
#[derive(Debug)]
pub struct FileStorage {
    directory: PathBuf,
    log_file: File,
    /// Where each entry of `cache.entries_slice()` starts in the log file.
    entry_offsets_bytes: Vec<u64>,
    log_length_bytes: u64,
    cache: LogCache,
}

impl FileStorage {
    /// Opens the store in `directory`, creating it for a new member whose
    /// quorum starts with `initial_voters` when the directory holds nothing.
    pub fn open(directory: &Path, initial_voters: &[u64]) -> Result<Self, QuorumError> {
        fs::create_dir_all(directory).map_err(io_error("create directory", directory))?;
        fill_reserve(directory);
        let raft_state_path = directory.join(RAFT_STATE_FILE);
        let (hard_state, conf_state) = match read_small_file(&raft_state_path)? {
            Some(payload) => codec::decode_raft_state(&payload)
                .map_err(|reason| corrupt(&raft_state_path, 0, reason))?,
            None => {
                let fresh = LogCache::new(initial_voters);
                let payload = codec::encode_raft_state(fresh.hard_state(), fresh.conf_state());
                with_reserve(directory, || {
                    write_small_file(directory, RAFT_STATE_FILE, &payload)
                })?;
                (fresh.hard_state().clone(), fresh.conf_state().clone())
            }
        };
        let snapshot_path = directory.join(SNAPSHOT_FILE);
        let snapshot = match read_small_file(&snapshot_path)? {
            Some(payload) => codec::decode_snapshot(&payload)
                .map_err(|reason| corrupt(&snapshot_path, 0, reason))?,
            None => Snapshot::default(),
        };
        let log_path = directory.join(LOG_FILE);
        let (entries, offsets, valid_length_bytes) = read_log(&log_path)?;
        let read_count = entries.len();
        let cache = LogCache::from_parts(hard_state, conf_state, snapshot, entries)
            .map_err(|reason| corrupt(&log_path, 0, reason))?;
        let log_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .map_err(io_error("open", &log_path))?;
        // The log file may have just been created: make its entry durable.
        sync_directory(directory)?;
        let mut store = FileStorage {
            directory: directory.to_path_buf(),
            log_file,
            entry_offsets_bytes: offsets,
            log_length_bytes: valid_length_bytes,
            cache,
        };
        let on_disk_length_bytes = store
            .log_file
            .metadata()
            .map_err(io_error("stat", &log_path))?
            .len();
        if store.cache.entries_slice().len() != read_count {
            // Entries the snapshot covers (or a log it replaced) are still in
            // the file: rewrite it with what is kept.
            store.rewrite_log()?;
        } else if on_disk_length_bytes != valid_length_bytes {
            tracing::warn!(
                path = ?log_path,
                valid_length_bytes,
                on_disk_length_bytes,
                "quorum log: cutting a torn tail"
            );
            store.truncate_log(valid_length_bytes)?;
        }
        store.check();
        Ok(store)
    }

    /// The directory this store lives in.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    fn check(&self) {
        self.cache.check();
        assert_eq!(
            self.entry_offsets_bytes.len(),
            self.cache.entries_slice().len()
        );
        if let Some(&last) = self.entry_offsets_bytes.last() {
            assert!(
                last < self.log_length_bytes,
                "the last frame is inside the file"
            );
        }
    }

    fn log_path(&self) -> PathBuf {
        self.directory.join(LOG_FILE)
    }

    fn truncate_log(&mut self, length_bytes: u64) -> Result<(), QuorumError> {
        let path = self.log_path();
        self.log_file
            .set_len(length_bytes)
            .map_err(io_error("truncate", &path))?;
        self.log_file.sync_all().map_err(io_error("fsync", &path))?;
        self.log_length_bytes = length_bytes;
        Ok(())
    }

    /// Replaces the log file with the cache's entries (after a compaction or
    /// a snapshot install), through a temporary file and a rename.
    fn rewrite_log(&mut self) -> Result<(), QuorumError> {
        let mut buffer = Vec::new();
        let mut offsets = Vec::with_capacity(self.cache.entries_slice().len());
        let mut payload = Vec::new();
        for entry in self.cache.entries_slice() {
            offsets.push(buffer.len() as u64);
            payload.clear();
            codec::encode_entry(entry, &mut payload);
            codec::write_frame(&payload, &mut buffer);
        }
        with_reserve(&self.directory, || {
            replace_file(&self.directory, LOG_FILE, &buffer)
        })?;
        let path = self.log_path();
        self.log_file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_error("open", &path))?;
        self.entry_offsets_bytes = offsets;
        self.log_length_bytes = buffer.len() as u64;
        self.check();
        Ok(())
    }

    fn write_raft_state(&self) -> Result<(), QuorumError> {
        let payload = codec::encode_raft_state(self.cache.hard_state(), self.cache.conf_state());
        with_reserve(&self.directory, || {
            write_small_file(&self.directory, RAFT_STATE_FILE, &payload)
        })
    }
}

impl LogStore for FileStorage {
    fn append(&mut self, entries: &[Entry]) -> Result<(), QuorumError> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.log_path();
        let kept = self.cache.append(entries);
        if kept < self.entry_offsets_bytes.len() {
            // A new leader overwrote our suffix: cut the file where it starts.
            let cut_bytes = self.entry_offsets_bytes[kept];
            self.entry_offsets_bytes.truncate(kept);
            self.log_file
                .set_len(cut_bytes)
                .map_err(io_error("truncate", &path))?;
            self.log_length_bytes = cut_bytes;
        }
        let mut buffer = Vec::new();
        let mut payload = Vec::new();
        for entry in entries {
            self.entry_offsets_bytes
                .push(self.log_length_bytes + buffer.len() as u64);
            payload.clear();
            codec::encode_entry(entry, &mut payload);
            codec::write_frame(&payload, &mut buffer);
        }
        // A positional write and its fsync are idempotent: one that met
        // ENOSPC is retried whole once the ballast gave up some blocks.
        with_reserve(&self.directory, || {
            write_all_at(&self.log_file, &buffer, self.log_length_bytes)
                .map_err(io_error("write", &path))?;
            // One fsync per batch; `sync_data` covers the new length as well.
            self.log_file.sync_data().map_err(io_error("fsync", &path))
        })?;
        self.log_length_bytes += buffer.len() as u64;
        self.check();
        Ok(())
    }

    fn set_hard_state(&mut self, hard_state: &HardState) -> Result<(), QuorumError> {
        let current = self.cache.hard_state();
        if current == hard_state {
            return Ok(());
        }
        // The commit alone is not persisted (see the module doc).
        let durable_change = current.term != hard_state.term || current.vote != hard_state.vote;
        assert!(
            hard_state.term >= current.term,
            "the term never goes back: {} after {}",
            hard_state.term,
            current.term
        );
        self.cache.set_hard_state(hard_state.clone());
        if durable_change {
            self.write_raft_state()
        } else {
            Ok(())
        }
    }

    fn set_conf_state(&mut self, conf_state: &ConfState) -> Result<(), QuorumError> {
        if self.cache.conf_state() == conf_state {
            return Ok(());
        }
        self.cache.set_conf_state(conf_state.clone());
        self.write_raft_state()
    }

    fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), QuorumError> {
        // Order: the snapshot first, then the log, then the hard state. A
        // crash after the first leaves a log the snapshot replaced and a
        // commit behind it; `open` repairs both (see `LogCache::from_parts`).
        let payload = codec::encode_snapshot(snapshot);
        with_reserve(&self.directory, || {
            write_small_file(&self.directory, SNAPSHOT_FILE, &payload)
        })?;
        self.cache.apply_snapshot(snapshot);
        self.rewrite_log()?;
        self.write_raft_state()
    }

    fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), QuorumError> {
        self.cache.compact(index, data);
        // The snapshot first: a crash before the log rewrite leaves covered
        // entries in the log, which `open` drops.
        let payload = codec::encode_snapshot(self.cache.snapshot());
        with_reserve(&self.directory, || {
            write_small_file(&self.directory, SNAPSHOT_FILE, &payload)
        })?;
        self.rewrite_log()?;
        // Brings the commit on disk up to date, now and then.
        self.write_raft_state()
    }

    fn cache(&self) -> &LogCache {
        &self.cache
    }
}

// raft-rs reads the log through `raft::Storage`; every store serves those
// reads from its in-memory `LogCache`.
storage_served_by_cache!(FileStorage);

/// The entries of a log file, where each starts, and the length of the
/// valid prefix (shorter than the file when its tail is torn).
type LogRead = (Vec<Entry>, Vec<u64>, u64);

fn read_log(path: &Path) -> Result<LogRead, QuorumError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(io_error("read", path)(error)),
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut offsets = Vec::new();
    let mut position = 0usize;
    while position < bytes.len() {
        // A crash mid-append leaves the last batch cut short, with a last
        // frame that fails its checksum, or as zeros (the file grew, its
        // blocks were never written). None of it was acknowledged (the
        // fsync did not return), so it is dropped. Anything else that
        // fails is corruption.
        let zeros_to_end = bytes[position..].iter().all(|&byte| byte == 0);
        let entry = match codec::read_frame(&bytes, position) {
            FrameRead::Frame { payload, next } => match codec::decode_entry(payload) {
                Ok(entry) => (entry, next),
                Err(_) if zeros_to_end => break,
                Err(reason) => return Err(corrupt(path, position as u64, reason)),
            },
            FrameRead::Incomplete => break,
            FrameRead::BadChecksum { end } if end == bytes.len() || zeros_to_end => break,
            FrameRead::BadChecksum { .. } => {
                let reason = "checksum mismatch with whole frames after it".to_string();
                return Err(corrupt(path, position as u64, reason));
            }
        };
        let (entry, next) = entry;
        if let Some(previous) = entries.last() {
            if entry.index != previous.index + 1 {
                let reason = format!("entry {} follows entry {}", entry.index, previous.index);
                return Err(corrupt(path, position as u64, reason));
            }
        }
        offsets.push(position as u64);
        entries.push(entry);
        position = next;
    }
    Ok((entries, offsets, position as u64))
}

/// Reads a small file written by [`write_small_file`]: exactly one frame.
fn read_small_file(path: &Path) -> Result<Option<Vec<u8>>, QuorumError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error("open", path)(error)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    match codec::read_frame(&bytes, 0) {
        FrameRead::Frame { payload, next } if next == bytes.len() => Ok(Some(payload.to_vec())),
        // Renamed into place only after its fsync: any damage is corruption.
        other => Err(corrupt(path, 0, format!("not one whole frame: {other:?}"))),
    }
}

/// Replaces `directory/name` with one frame of `payload` (see
/// [`replace_file`]).
fn write_small_file(directory: &Path, name: &str, payload: &[u8]) -> Result<(), QuorumError> {
    let mut framed = Vec::with_capacity(payload.len() + codec::FRAME_HEADER_BYTES);
    codec::write_frame(payload, &mut framed);
    replace_file(directory, name, &framed)
}

/// Replaces `directory/name` with `bytes`, atomically and durably: temp
/// file, fsync, rename, fsync of the directory (the rename is a directory
/// entry change, durable only once the directory is synced).
fn replace_file(directory: &Path, name: &str, bytes: &[u8]) -> Result<(), QuorumError> {
    let path = directory.join(name);
    let temporary = directory.join(format!("{name}.tmp"));
    let mut file = File::create(&temporary).map_err(io_error("create", &temporary))?;
    file.write_all(bytes)
        .map_err(io_error("write", &temporary))?;
    file.sync_all().map_err(io_error("fsync", &temporary))?;
    drop(file);
    fs::rename(&temporary, &path).map_err(io_error("rename", &path))?;
    sync_directory(directory)
}

/// Makes the ballast file whole (see the module doc): [`RESERVE_BYTES`],
/// at most 1/16 of the file system. Best effort: on a disk already full it
/// stays as it is (what it still holds is kept), and a failure is logged.
fn fill_reserve(directory: &Path) {
    let path = directory.join(RESERVE_FILE);
    let target_bytes = match engine::disk_space::file_system_bytes(directory) {
        Ok((total_bytes, _)) => RESERVE_BYTES.min(total_bytes / 16),
        Err(error) => {
            tracing::warn!(?path, %error, "quorum reserve: statvfs failed");
            return;
        }
    };
    let result = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .and_then(|file| {
            if file.metadata()?.len() >= target_bytes {
                return Ok(());
            }
            allocate(&file, target_bytes)?;
            file.sync_all()
        });
    if let Err(error) = result {
        tracing::warn!(?path, %error, target_bytes, "quorum reserve: not made whole");
    }
}

/// Runs `write`; when it meets ENOSPC, gives up [`RESERVE_RELEASE_BYTES`]
/// of the ballast and runs it again, until the ballast is gone.
fn with_reserve<T>(
    directory: &Path,
    mut write: impl FnMut() -> Result<T, QuorumError>,
) -> Result<T, QuorumError> {
    loop {
        match write() {
            Err(error) if is_out_of_space(&error) && release_reserve(directory) => continue,
            result => return result,
        }
    }
}

fn is_out_of_space(error: &QuorumError) -> bool {
    matches!(error, QuorumError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
}

/// Shrinks the ballast by [`RESERVE_RELEASE_BYTES`]; false when there was
/// nothing left to give.
fn release_reserve(directory: &Path) -> bool {
    let path = directory.join(RESERVE_FILE);
    let result = OpenOptions::new().write(true).open(&path).and_then(|file| {
        let length_bytes = file.metadata()?.len();
        if length_bytes == 0 {
            return Ok(0);
        }
        let kept_bytes = length_bytes.saturating_sub(RESERVE_RELEASE_BYTES);
        file.set_len(kept_bytes)?;
        file.sync_all()?;
        Ok(length_bytes - kept_bytes)
    });
    match result {
        Ok(0) => false,
        Ok(released_bytes) => {
            tracing::warn!(
                ?path,
                released_bytes,
                "quorum log: disk full, giving up part of its reserve"
            );
            true
        }
        Err(error) => {
            tracing::warn!(?path, %error, "quorum reserve: could not release");
            false
        }
    }
}

fn allocate(file: &File, length_bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; fallocate takes plain integers.
    let result = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, length_bytes as libc::off_t) };
    if result != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn sync_directory(directory: &Path) -> Result<(), QuorumError> {
    File::open(directory)
        .and_then(|handle| handle.sync_all())
        .map_err(io_error("fsync directory", directory))
}

fn write_all_at(file: &File, bytes: &[u8], offset_bytes: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, offset_bytes)
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> QuorumError {
    let path = path.to_path_buf();
    move |source| QuorumError::Io { op, path, source }
}

fn corrupt(path: &Path, offset_bytes: u64, reason: String) -> QuorumError {
    QuorumError::Corrupt {
        path: path.to_path_buf(),
        offset_bytes,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use raft::Storage;

    use super::*;
    use raft::GetEntriesContext;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: format!("record-{index}-{term}").into_bytes().into(),
            ..Default::default()
        }
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..Default::default()
        }
    }

    fn all_entries(store: &FileStorage) -> Vec<Entry> {
        let first = store.cache.first_index();
        let high = store.cache.last_index() + 1;
        store
            .entries(first, high, None, GetEntriesContext::empty(false))
            .unwrap_or_default()
    }

    #[test]
    fn the_reserve_is_made_at_open_and_given_up_in_steps() {
        let dir = tempfile::tempdir().unwrap();
        let _store = FileStorage::open(dir.path(), &[1]).unwrap();
        let reserve = dir.path().join(RESERVE_FILE);
        let (total_bytes, _) = engine::disk_space::file_system_bytes(dir.path()).unwrap();
        let full_bytes = RESERVE_BYTES.min(total_bytes / 16);
        assert_eq!(fs::metadata(&reserve).unwrap().len(), full_bytes);
        // A write that meets ENOSPC twice gets two steps of the ballast.
        let mut failures = 2;
        let result = with_reserve(dir.path(), || {
            if failures == 0 {
                return Ok(7);
            }
            failures -= 1;
            let source = std::io::Error::from_raw_os_error(libc::ENOSPC);
            Err(io_error("write", dir.path())(source))
        });
        assert_eq!(result.unwrap(), 7);
        let left_bytes = full_bytes.saturating_sub(2 * RESERVE_RELEASE_BYTES);
        assert_eq!(fs::metadata(&reserve).unwrap().len(), left_bytes);
        // Once the ballast is gone the error comes through.
        let result: Result<(), _> = with_reserve(dir.path(), || {
            let source = std::io::Error::from_raw_os_error(libc::ENOSPC);
            Err(io_error("write", dir.path())(source))
        });
        assert!(is_out_of_space(&result.unwrap_err()));
        assert_eq!(fs::metadata(&reserve).unwrap().len(), 0);
        // Any other error is not retried.
        let mut calls = 0;
        let result: Result<(), _> = with_reserve(dir.path(), || {
            calls += 1;
            Err(io_error("write", dir.path())(
                std::io::Error::from_raw_os_error(libc::EIO),
            ))
        });
        assert!(result.is_err());
        assert_eq!(calls, 1);
        // The next open makes it whole again.
        drop(_store);
        let _store = FileStorage::open(dir.path(), &[1]).unwrap();
        assert_eq!(fs::metadata(&reserve).unwrap().len(), full_bytes);
    }

    #[test]
    fn reopen_gives_back_entries_hard_state_and_conf_state() {
        let directory = tempfile::tempdir().expect("tempdir");
        let written = vec![entry(1, 1), entry(2, 1), entry(3, 2)];
        {
            let mut store = FileStorage::open(directory.path(), &[1, 2, 3]).expect("open");
            store.append(&written).expect("append");
            store
                .set_hard_state(&hard_state(2, 3, 2))
                .expect("hard state");
        }
        let store = FileStorage::open(directory.path(), &[9]).expect("reopen");
        assert_eq!(all_entries(&store), written);
        let state = store.initial_state().expect("state");
        assert_eq!(state.hard_state, hard_state(2, 3, 2));
        // The stored conf state wins over the bootstrap voters.
        assert_eq!(state.conf_state.voters, vec![1, 2, 3]);
    }

    #[test]
    fn a_conflicting_suffix_is_cut_on_disk_too() {
        let directory = tempfile::tempdir().expect("tempdir");
        {
            let mut store = FileStorage::open(directory.path(), &[1]).expect("open");
            store
                .append(&[entry(1, 1), entry(2, 1), entry(3, 1)])
                .expect("append");
            store
                .append(&[entry(2, 2), entry(3, 2)])
                .expect("overwrite");
        }
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        assert_eq!(
            all_entries(&store),
            vec![entry(1, 1), entry(2, 2), entry(3, 2)]
        );
    }

    #[test]
    fn a_torn_tail_is_cut_at_open() {
        let directory = tempfile::tempdir().expect("tempdir");
        {
            let mut store = FileStorage::open(directory.path(), &[1]).expect("open");
            store.append(&[entry(1, 1), entry(2, 1)]).expect("append");
        }
        let log_path = directory.path().join(LOG_FILE);
        let whole = fs::read(&log_path).expect("read");
        // A third frame cut short, as a crash mid-write leaves it.
        let mut payload = Vec::new();
        codec::encode_entry(&entry(3, 1), &mut payload);
        let mut frame = Vec::new();
        codec::write_frame(&payload, &mut frame);
        let mut torn = whole.clone();
        torn.extend_from_slice(&frame[..frame.len() / 2]);
        fs::write(&log_path, &torn).expect("write");
        {
            let mut store = FileStorage::open(directory.path(), &[1]).expect("reopen");
            assert_eq!(all_entries(&store), vec![entry(1, 1), entry(2, 1)]);
            assert_eq!(
                fs::read(&log_path).expect("read"),
                whole,
                "tail cut on disk"
            );
            // Appending after the cut lands where the torn frame was.
            store.append(&[entry(3, 1)]).expect("append");
        }
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        assert_eq!(all_entries(&store).len(), 3);

        // A last frame whose bytes are whole but wrong is torn as well.
        let mut garbled = fs::read(&log_path).expect("read");
        let last = garbled.len() - 1;
        garbled[last] ^= 0xff;
        fs::write(&log_path, &garbled).expect("write");
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        assert_eq!(all_entries(&store).len(), 2);
    }

    #[test]
    fn a_corrupt_middle_is_an_error() {
        let directory = tempfile::tempdir().expect("tempdir");
        {
            let mut store = FileStorage::open(directory.path(), &[1]).expect("open");
            store
                .append(&[entry(1, 1), entry(2, 1), entry(3, 1)])
                .expect("append");
        }
        let log_path = directory.path().join(LOG_FILE);
        let mut bytes = fs::read(&log_path).expect("read");
        bytes[codec::FRAME_HEADER_BYTES + 2] ^= 0x01;
        fs::write(&log_path, &bytes).expect("write");
        match FileStorage::open(directory.path(), &[1]) {
            Err(QuorumError::Corrupt { offset_bytes, .. }) => assert_eq!(offset_bytes, 0),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn a_damaged_hard_state_file_is_an_error() {
        let directory = tempfile::tempdir().expect("tempdir");
        drop(FileStorage::open(directory.path(), &[1]).expect("open"));
        let path = directory.path().join(RAFT_STATE_FILE);
        let mut bytes = fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        fs::write(&path, &bytes).expect("write");
        assert!(matches!(
            FileStorage::open(directory.path(), &[1]),
            Err(QuorumError::Corrupt { .. })
        ));
    }

    #[test]
    fn compaction_after_a_snapshot_survives_reopen() {
        let directory = tempfile::tempdir().expect("tempdir");
        {
            let mut store = FileStorage::open(directory.path(), &[1]).expect("open");
            let written: Vec<Entry> = (1..=5).map(|index| entry(index, 1)).collect();
            store.append(&written).expect("append");
            store
                .set_hard_state(&hard_state(1, 1, 4))
                .expect("hard state");
            store
                .compact(3, b"applied-through-3".to_vec())
                .expect("compact");
            assert_eq!(store.first_index(), Ok(4));
        }
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        assert_eq!(store.first_index(), Ok(4));
        assert_eq!(store.term(3), Ok(1));
        assert_eq!(all_entries(&store), vec![entry(4, 1), entry(5, 1)]);
        let snapshot = store.snapshot(0, 2).expect("snapshot");
        assert_eq!(snapshot.get_metadata().index, 3);
        assert_eq!(&snapshot.data[..], b"applied-through-3");
        assert_eq!(snapshot.get_metadata().get_conf_state().voters, vec![1]);
    }

    #[test]
    fn a_crash_between_snapshot_and_log_rewrite_is_repaired() {
        let directory = tempfile::tempdir().expect("tempdir");
        let log_before;
        {
            let mut store = FileStorage::open(directory.path(), &[1]).expect("open");
            let written: Vec<Entry> = (1..=4).map(|index| entry(index, 1)).collect();
            store.append(&written).expect("append");
            store
                .set_hard_state(&hard_state(1, 1, 3))
                .expect("hard state");
            log_before = fs::read(directory.path().join(LOG_FILE)).expect("read");
            store.compact(2, b"s".to_vec()).expect("compact");
        }
        // Put the uncompacted log back, as if the rewrite never happened.
        fs::write(directory.path().join(LOG_FILE), &log_before).expect("write");
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        assert_eq!(all_entries(&store), vec![entry(3, 1), entry(4, 1)]);
        drop(store);
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen twice");
        assert_eq!(store.first_index(), Ok(3));
    }

    #[test]
    fn an_installed_snapshot_replaces_the_log() {
        let directory = tempfile::tempdir().expect("tempdir");
        {
            let mut store = FileStorage::open(directory.path(), &[1, 2, 3]).expect("open");
            store.append(&[entry(1, 1), entry(2, 1)]).expect("append");
            let mut snapshot = Snapshot {
                data: b"leader-state".to_vec().into(),
                ..Default::default()
            };
            snapshot.mut_metadata().index = 10;
            snapshot.mut_metadata().term = 4;
            snapshot.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
            store.apply_snapshot(&snapshot).expect("install");
        }
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        assert_eq!(store.first_index(), Ok(11));
        assert_eq!(store.last_index(), Ok(10));
        assert_eq!(store.term(10), Ok(4));
        let state = store.initial_state().expect("state");
        assert_eq!(state.hard_state.commit, 10);
        assert_eq!(state.hard_state.term, 4);
    }

    mod model {
        //! Random operation sequences against `FileStorage`, with
        //! `LogCache` (the same operations in memory) as the model, and
        //! reopens and torn tails in between: after every operation the
        //! store must equal the model.

        use proptest::prelude::*;

        use super::*;

        #[derive(Debug, Clone)]
        enum Operation {
            /// Append `count` entries, starting `back` entries before the
            /// end (cutting a suffix) where commit allows.
            Append { back: u8, count: u8 },
            /// Move commit forward.
            Commit { forward: u8 },
            /// Snapshot `back` entries behind commit.
            Compact { back: u8 },
            /// Close and open again.
            Reopen,
            /// Crash mid-append: a tail of zeros or a cut frame, then open.
            TornTail { zeros: bool, length_bytes: u8 },
        }

        fn operation() -> impl Strategy<Value = Operation> {
            prop_oneof![
                (0u8..4, 1u8..5).prop_map(|(back, count)| Operation::Append { back, count }),
                (0u8..5).prop_map(|forward| Operation::Commit { forward }),
                (0u8..4).prop_map(|back| Operation::Compact { back }),
                Just(Operation::Reopen),
                (any::<bool>(), 1u8..60).prop_map(|(zeros, length_bytes)| Operation::TornTail {
                    zeros,
                    length_bytes
                }),
            ]
        }

        /// The model after a restart: the commit is the one last written
        /// (never below the snapshot, whose entries are committed).
        fn restarted(model: &mut LogCache, durable_commit: u64) {
            let mut hard_state = model.hard_state().clone();
            hard_state.commit = durable_commit.max(model.snapshot_index());
            model.set_hard_state(hard_state);
        }

        fn assert_same(store: &FileStorage, model: &LogCache) {
            let cache = store.cache();
            assert_eq!(cache.entries_slice(), model.entries_slice());
            assert_eq!(cache.hard_state(), model.hard_state());
            assert_eq!(cache.conf_state(), model.conf_state());
            assert_eq!(cache.snapshot(), model.snapshot());
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(24))]
            #[test]
            fn file_storage_matches_the_in_memory_model(
                operations in proptest::collection::vec(operation(), 1..40)
            ) {
                let directory = tempfile::tempdir().expect("tempdir");
                let mut store = FileStorage::open(directory.path(), &[1]).expect("open");
                let mut model = LogCache::new(&[1]);
                let mut term = 1;
                // The commit on disk: written with a new term or vote and
                // with a snapshot, not on its own (see the module doc).
                let mut durable_commit = 0;
                for operation in operations {
                    match operation {
                        Operation::Append { back, count } => {
                            let floor = model.hard_state().commit.max(model.snapshot_index()) + 1;
                            let start = (model.last_index() + 1)
                                .saturating_sub(u64::from(back))
                                .max(floor);
                            term += 1;
                            let entries: Vec<Entry> = (start..start + u64::from(count))
                                .map(|index| entry(index, term))
                                .collect();
                            model.append(&entries);
                            store.append(&entries).expect("append");
                        }
                        Operation::Commit { forward } => {
                            let commit = model.last_index().min(
                                model.hard_state().commit + u64::from(forward),
                            );
                            let next = hard_state(term, 1, commit);
                            if next.term != model.hard_state().term
                                || next.vote != model.hard_state().vote
                            {
                                durable_commit = commit;
                            }
                            model.set_hard_state(next.clone());
                            store.set_hard_state(&next).expect("hard state");
                        }
                        Operation::Compact { back } => {
                            let index = model.hard_state().commit.saturating_sub(u64::from(back));
                            if index > model.snapshot_index() {
                                let data = format!("state-{index}").into_bytes();
                                model.compact(index, data.clone());
                                store.compact(index, data).expect("compact");
                                durable_commit = model.hard_state().commit;
                            }
                        }
                        Operation::Reopen => {
                            drop(store);
                            store = FileStorage::open(directory.path(), &[1]).expect("reopen");
                            restarted(&mut model, durable_commit);
                        }
                        Operation::TornTail { zeros, length_bytes } => {
                            drop(store);
                            let mut tail = Vec::new();
                            if zeros {
                                tail.resize(usize::from(length_bytes), 0);
                            } else {
                                let mut payload = Vec::new();
                                codec::encode_entry(&entry(model.last_index() + 1, term), &mut payload);
                                codec::write_frame(&payload, &mut tail);
                                tail.truncate(usize::from(length_bytes) % tail.len());
                            }
                            let path = directory.path().join(LOG_FILE);
                            let mut bytes = fs::read(&path).expect("read");
                            bytes.extend_from_slice(&tail);
                            fs::write(&path, &bytes).expect("write");
                            store = FileStorage::open(directory.path(), &[1]).expect("reopen torn");
                            restarted(&mut model, durable_commit);
                        }
                    }
                    assert_same(&store, &model);
                }
                drop(store);
                let reopened = FileStorage::open(directory.path(), &[1]).expect("final reopen");
                restarted(&mut model, durable_commit);
                assert_same(&reopened, &model);
            }
        }
    }
}
