//! Producer-id blocks: a persisted, monotonically increasing allocator.
//!
//! Kafka (KIP-730) has the controller hand out producer ids in blocks of
//! [`PRODUCER_ID_BLOCK_SIZE`]; a broker serves ids from its block and asks for
//! the next block when it runs out. A producer id must never repeat, even
//! across restarts, or a new producer would be taken for an old one's retry
//! and its batches dropped as duplicates.
//!
//! Two parts:
//! - [`ProducerIdBlocks`], pure: the start of the next block, and
//!   [`ProducerIdBlocks::take_block`] that moves it on.
//! - [`ProducerIdStore`], durable: the same, with the next block start written
//!   to `producer-id-block` in the data dir **before** a block is handed out,
//!   so after any crash the next block starts after every id ever handed out
//!   (ids handed out but unused are skipped, never reused).
//!
//! On one node the store lives on shard 0 and shards fetch blocks from it; in
//! a cluster it moves to the metadata quorum, behind the same block interface.
//!
//! The file is 14 bytes: a format version (u16), the next block start (i64)
//! and a CRC32C of both (u32), all big-endian. A torn or corrupt file is an
//! error: the broker must refuse to start rather than risk reusing ids.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Ids per block, as in Kafka (`ProducerIdManager`'s block size).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Name of the file, in the data dir, holding the next block start.
pub const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";

/// Format version written in the file.
const FILE_VERSION: u16 = 1;
/// version (2) + next block start (8) + CRC32C (4).
const FILE_BYTES: usize = 14;

/// Errors of the producer-id allocator.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    /// Every id up to `i64::MAX` has been handed out.
    #[error("producer ids exhausted: next block start {next_block_start}, block size {size}")]
    Exhausted {
        /// Start of the block that could not be taken.
        next_block_start: i64,
        /// Size asked for.
        size: i64,
    },
    /// The file does not hold a valid record (torn write, bit rot, foreign file).
    #[error("corrupt producer-id block file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// Reading or writing the file failed.
    #[error("producer-id block file I/O error on {path}: {source}")]
    Io {
        /// File or directory concerned.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ProducerIdError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        ProducerIdError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    fn corrupt(path: &Path, reason: impl Into<String>) -> Self {
        ProducerIdError::Corrupt {
            path: path.display().to_string(),
            reason: reason.into(),
        }
    }
}

/// A block of producer ids, `first..=last`, never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    /// First id of the block.
    pub first: i64,
    /// Last id of the block (inclusive).
    pub last: i64,
}

impl ProducerIdBlock {
    /// Number of ids in the block.
    pub fn len(&self) -> i64 {
        self.last - self.first + 1
    }

    /// Never true: a block holds at least one id. (For clippy's `len` rule.)
    pub fn is_empty(&self) -> bool {
        self.last < self.first
    }

    /// Whether `id` is in the block.
    pub fn contains(&self, id: i64) -> bool {
        (self.first..=self.last).contains(&id)
    }
}

/// The pure allocator: where the next block starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProducerIdBlocks {
    next_block_start: i64,
}

impl ProducerIdBlocks {
    /// An allocator whose next block starts at `next_block_start` (≥ 0).
    pub fn new(next_block_start: i64) -> Self {
        assert!(
            next_block_start >= 0,
            "producer ids are non-negative: {next_block_start}"
        );
        ProducerIdBlocks { next_block_start }
    }

    /// Where the next block starts; every id below it may have been handed out.
    pub fn next_block_start(&self) -> i64 {
        self.next_block_start
    }

    /// Takes the next `size` ids. Blocks never overlap and always increase.
    pub fn take_block(&mut self, size: i64) -> Result<ProducerIdBlock, ProducerIdError> {
        assert!(
            size > 0,
            "a producer-id block holds at least one id: {size}"
        );
        let first = self.next_block_start;
        let exhausted = ProducerIdError::Exhausted {
            next_block_start: first,
            size,
        };
        // `last` is at most i64::MAX - 1 so that the next start stays an i64.
        let next = first.checked_add(size).ok_or(exhausted)?;
        let block = ProducerIdBlock {
            first,
            last: next - 1,
        };
        self.next_block_start = next;
        assert!(block.first <= block.last && block.last < self.next_block_start);
        Ok(block)
    }
}

/// The durable allocator over `producer-id-block` in a data dir.
///
/// Blocking `std::fs` is used on purpose: it runs once per
/// [`PRODUCER_ID_BLOCK_SIZE`] ids (a write, two fsyncs and a rename, about a
/// millisecond on an SSD), not on any per-request path, so a stall of the
/// owning shard for that long is cheaper than the machinery of async file I/O.
#[derive(Debug)]
pub struct ProducerIdStore {
    dir: PathBuf,
    blocks: ProducerIdBlocks,
}

impl ProducerIdStore {
    /// Opens the allocator of `dir` (which must exist). No file means no id
    /// was ever handed out: blocks start at 0, as in Kafka. A file that
    /// cannot be read or does not check out is an error.
    pub fn open(dir: &Path) -> Result<Self, ProducerIdError> {
        let path = dir.join(PRODUCER_ID_BLOCK_FILE);
        let next_block_start = match std::fs::read(&path) {
            Ok(bytes) => decode(&path, &bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(ProducerIdError::io(&path, e)),
        };
        Ok(ProducerIdStore {
            dir: dir.to_path_buf(),
            blocks: ProducerIdBlocks::new(next_block_start),
        })
    }

    /// Where the next block starts.
    pub fn next_block_start(&self) -> i64 {
        self.blocks.next_block_start()
    }

    /// Takes the next block of `size` ids, durably: the new next block start
    /// is on disk before the block is returned. On an error nothing changes
    /// in memory, and a later call may hand out the same (never seen) block.
    pub fn allocate_block(&mut self, size: i64) -> Result<ProducerIdBlock, ProducerIdError> {
        let mut blocks = self.blocks;
        let block = blocks.take_block(size)?;
        self.persist(blocks.next_block_start())?;
        self.blocks = blocks;
        Ok(block)
    }

    /// Writes `next_block_start` through a temp file, fsync, rename and a
    /// dir fsync, so a crash leaves the old value or the new one, whole.
    fn persist(&self, next_block_start: i64) -> Result<(), ProducerIdError> {
        let path = self.dir.join(PRODUCER_ID_BLOCK_FILE);
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::File::create(&tmp).map_err(|e| ProducerIdError::io(&tmp, e))?;
        file.write_all(&encode(next_block_start))
            .and_then(|()| file.sync_all())
            .map_err(|e| ProducerIdError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| ProducerIdError::io(&path, e))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| ProducerIdError::io(&self.dir, e))
    }
}

/// The file's bytes for `next_block_start`.
fn encode(next_block_start: i64) -> [u8; FILE_BYTES] {
    let mut bytes = [0u8; FILE_BYTES];
    bytes[0..2].copy_from_slice(&FILE_VERSION.to_be_bytes());
    bytes[2..10].copy_from_slice(&next_block_start.to_be_bytes());
    let crc = crc_fast::crc32_iscsi(&bytes[0..10]);
    bytes[10..14].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// The next block start stored in `bytes`, read from `path`.
fn decode(path: &Path, bytes: &[u8]) -> Result<i64, ProducerIdError> {
    let bytes: &[u8; FILE_BYTES] = bytes.try_into().map_err(|_| {
        ProducerIdError::corrupt(path, format!("{} bytes, not {FILE_BYTES}", bytes.len()))
    })?;
    let [v0, v1, n0, n1, n2, n3, n4, n5, n6, n7, c0, c1, c2, c3] = *bytes;
    let stored_crc = u32::from_be_bytes([c0, c1, c2, c3]);
    let crc = crc_fast::crc32_iscsi(&bytes[0..10]);
    if crc != stored_crc {
        return Err(ProducerIdError::corrupt(
            path,
            format!("CRC32C {crc:#010x}, stored {stored_crc:#010x}"),
        ));
    }
    let version = u16::from_be_bytes([v0, v1]);
    if version != FILE_VERSION {
        return Err(ProducerIdError::corrupt(
            path,
            format!("unknown version {version}"),
        ));
    }
    let next_block_start = i64::from_be_bytes([n0, n1, n2, n3, n4, n5, n6, n7]);
    if next_block_start < 0 {
        return Err(ProducerIdError::corrupt(
            path,
            format!("negative next block start {next_block_start}"),
        ));
    }
    Ok(next_block_start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path) -> PathBuf {
        dir.join(PRODUCER_ID_BLOCK_FILE)
    }

    #[test]
    fn blocks_are_contiguous_increasing_and_never_overlap() {
        let mut blocks = ProducerIdBlocks::default();
        let mut previous: Option<ProducerIdBlock> = None;
        for size in [1, 1000, 7, 1000, 3] {
            let block = blocks.take_block(size).unwrap();
            assert_eq!(block.len(), size);
            assert!(!block.is_empty());
            match previous {
                None => assert_eq!(block.first, 0, "Kafka starts at 0"),
                Some(p) => assert_eq!(block.first, p.last + 1),
            }
            assert_eq!(blocks.next_block_start(), block.last + 1);
            previous = Some(block);
        }
    }

    #[test]
    fn the_last_ids_are_refused_rather_than_wrapped() {
        let mut blocks = ProducerIdBlocks::new(i64::MAX - 10);
        let block = blocks.take_block(10).unwrap();
        assert_eq!(block.last, i64::MAX - 1);
        assert!(matches!(
            blocks.take_block(1),
            Err(ProducerIdError::Exhausted { .. })
        ));
        // A refused take changes nothing.
        assert_eq!(blocks.next_block_start(), i64::MAX);
    }

    #[test]
    #[should_panic(expected = "at least one id")]
    fn an_empty_block_is_a_bug() {
        let _ = ProducerIdBlocks::default().take_block(0);
    }

    #[test]
    fn a_new_data_dir_starts_at_zero_and_writes_nothing_until_asked() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProducerIdStore::open(dir.path()).unwrap();
        assert_eq!(store.next_block_start(), 0);
        assert!(!file(dir.path()).exists());
    }

    #[test]
    fn a_reopened_store_starts_after_every_id_handed_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ProducerIdStore::open(dir.path()).unwrap();
        let a = store.allocate_block(PRODUCER_ID_BLOCK_SIZE).unwrap();
        let b = store.allocate_block(PRODUCER_ID_BLOCK_SIZE).unwrap();
        assert_eq!((a.first, a.last, b.first, b.last), (0, 999, 1000, 1999));
        drop(store);

        let mut store = ProducerIdStore::open(dir.path()).unwrap();
        assert_eq!(store.next_block_start(), 2000);
        let c = store.allocate_block(PRODUCER_ID_BLOCK_SIZE).unwrap();
        assert!(c.first > b.last);
        assert!(!dir.path().join("producer-id-block.tmp").exists());
    }

    #[test]
    fn many_restarts_never_repeat_an_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut last_handed_out = -1;
        for round in 0..20 {
            let mut store = ProducerIdStore::open(dir.path()).unwrap();
            for _ in 0..(round % 4) + 1 {
                let block = store.allocate_block(1 + round).unwrap();
                assert!(block.first > last_handed_out, "round {round}: {block:?}");
                last_handed_out = block.last;
            }
        }
    }

    #[test]
    fn a_corrupt_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ProducerIdStore::open(dir.path()).unwrap();
        store.allocate_block(PRODUCER_ID_BLOCK_SIZE).unwrap();
        drop(store);
        let good = std::fs::read(file(dir.path())).unwrap();
        assert_eq!(good.len(), FILE_BYTES);

        // Every single flipped bit is caught.
        for bit in 0..FILE_BYTES * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            std::fs::write(file(dir.path()), &bad).unwrap();
            assert!(
                matches!(
                    ProducerIdStore::open(dir.path()),
                    Err(ProducerIdError::Corrupt { .. })
                ),
                "bit {bit}"
            );
        }
        // A torn (short) or empty file, and a long one.
        for bad in [&good[..7], &[][..], &[good.as_slice(), &[0]].concat()[..]] {
            std::fs::write(file(dir.path()), bad).unwrap();
            assert!(matches!(
                ProducerIdStore::open(dir.path()),
                Err(ProducerIdError::Corrupt { .. })
            ));
        }
        // A valid CRC over an unknown version or a negative start.
        for (version, start) in [(2u16, 5i64), (FILE_VERSION, -1)] {
            let mut bytes = [0u8; FILE_BYTES];
            bytes[0..2].copy_from_slice(&version.to_be_bytes());
            bytes[2..10].copy_from_slice(&start.to_be_bytes());
            let crc = crc_fast::crc32_iscsi(&bytes[0..10]);
            bytes[10..14].copy_from_slice(&crc.to_be_bytes());
            std::fs::write(file(dir.path()), bytes).unwrap();
            assert!(matches!(
                ProducerIdStore::open(dir.path()),
                Err(ProducerIdError::Corrupt { .. })
            ));
        }
        // The good bytes open again.
        std::fs::write(file(dir.path()), &good).unwrap();
        assert_eq!(
            ProducerIdStore::open(dir.path())
                .unwrap()
                .next_block_start(),
            PRODUCER_ID_BLOCK_SIZE
        );
    }

    #[test]
    fn a_failed_write_hands_out_nothing_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let mut store = ProducerIdStore::open(&gone).unwrap();
        std::fs::remove_dir(&gone).unwrap();
        assert!(matches!(
            store.allocate_block(10),
            Err(ProducerIdError::Io { .. })
        ));
        assert_eq!(store.next_block_start(), 0);
    }

    #[test]
    fn encode_decode_round_trip() {
        for value in [0, 1, 999, 1000, i64::MAX] {
            assert_eq!(decode(Path::new("x"), &encode(value)).unwrap(), value);
        }
    }
}
