//! The engine's I/O sizes, derived from the disk's measured figures (the
//! `io-properties.yaml` `rill iotune` writes; the `rill` binary reads it and
//! hands the plain numbers here, so the engine does not depend on the tuning
//! crate).
//!
//! Three sizes, each from one figure of the disk:
//! - per-shard in-flight write bytes: how many bytes of O_DIRECT writes one
//!   shard keeps queued at the device (the appender's pieces wait for room);
//! - the stream writer's chunk: how many bytes of small appends wait before
//!   their whole blocks are streamed (`EngineConfig::stream_min_bytes`);
//! - the read-ahead: the most bytes one DMA read of a segment takes when a
//!   fetch scans forward from an index entry.
//!
//! Without figures every size is the constant rill used before it read the
//! file, so a broker without one behaves as it always did.

/// Today's constants, used when no io-properties file is found.
pub mod defaults {
    /// High enough that no group-commit round reaches it (a round of 256
    /// producers of 1 KiB is 256 KiB; one of 64 producers of 1 MiB is
    /// 64 MiB): without figures the writes are not held back, as before.
    pub const INFLIGHT_WRITE_BYTES: usize = 64 << 20;
    /// `stream_min_bytes` before the file was read.
    pub const STREAM_CHUNK_BYTES: usize = 64 << 10;
    /// The forward-scan read of a fetch before the file was read.
    pub const READ_AHEAD_BYTES: usize = 64 << 10;
}

/// One disk's measured figures, as in Seastar's `io-properties.yaml`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskFigures {
    /// Sequential read bandwidth, bytes per second.
    pub read_bandwidth: u64,
    /// Random 4 KiB reads per second.
    pub read_iops: u64,
    /// Sequential write bandwidth, bytes per second.
    pub write_bandwidth: u64,
    /// Random 4 KiB writes per second.
    pub write_iops: u64,
}

/// The sizes the engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoSizing {
    /// Bytes of O_DIRECT writes one shard keeps in flight at most.
    pub inflight_write_bytes: usize,
    /// Bytes of small appends that start a streamed write.
    pub stream_chunk_bytes: usize,
    /// Most bytes per DMA read of a fetch's forward scan.
    pub read_ahead_bytes: usize,
    /// Whether the sizes came from measured figures (false: the defaults).
    pub measured: bool,
}

impl Default for IoSizing {
    fn default() -> Self {
        IoSizing {
            inflight_write_bytes: defaults::INFLIGHT_WRITE_BYTES,
            stream_chunk_bytes: defaults::STREAM_CHUNK_BYTES,
            read_ahead_bytes: defaults::READ_AHEAD_BYTES,
            measured: false,
        }
    }
}

/// How long a write may wait behind the writes already queued at the
/// device. An fdatasync here takes 0.1 to 8 ms; 2 ms of queued writes keeps
/// the device busy across a sync without making the next round's write
/// (which the producers wait for) queue behind much more than a sync.
const TARGET_QUEUE_SECONDS: f64 = 0.002;
/// One appender piece (`WRITE_PIECE_BYTES`): a smaller budget would split
/// nothing further and only serialize the pieces.
const MIN_INFLIGHT_WRITE_BYTES: usize = 256 << 10;
/// Beyond this a shard's queue only adds latency on any disk measured here.
const MAX_INFLIGHT_WRITE_BYTES: usize = 64 << 20;
/// The stream chunk is what the disk writes in this time. Streaming exists
/// so the disk works beside a round's appends (256 producers' appends are
/// ~300 µs of CPU here): the first streamed write of a round then starts
/// after about 40 µs of appends whatever the disk's speed, and a faster
/// disk takes bigger chunks, so fewer writes (syscalls on the writer
/// thread) per round. On this machine's disk (1.6 GB/s) that is 61 KiB,
/// next to the 64 KiB constant that was tuned on it.
const STREAM_TARGET_SECONDS: f64 = 0.000_040;
/// The floor of a streamed chunk and of a read: 16 KiB (four blocks); less
/// and the per-op cost of the writer thread or the DMA read dominates.
const MIN_CHUNK_BYTES: usize = 16 << 10;
/// The ceiling of a streamed chunk: a chunk of more than 1 MiB would wait
/// for most of a round.
const MAX_STREAM_CHUNK_BYTES: usize = 1 << 20;
/// The ceiling of a read: a fetch answers at most `max.partition.fetch.bytes`
/// (1 MiB by default); reading more than that per scan step is wasted.
const MAX_READ_AHEAD_BYTES: usize = 1 << 20;
/// Sizes are whole 4 KiB blocks (O_DIRECT reads and writes are aligned).
const BLOCK: usize = 4 << 10;

/// The sizes for a broker of `shards` shards on a disk with `figures`
/// (`None`, or a figure of 0: the default for that size).
pub fn derive(figures: Option<&DiskFigures>, shards: usize) -> IoSizing {
    let Some(figures) = figures else {
        return IoSizing::default();
    };
    let defaults = IoSizing::default();
    let shards = shards.max(1) as f64;
    // Little's law: to keep the device busy for TARGET_QUEUE_SECONDS, the
    // broker keeps bandwidth × that time in flight; the shards share it.
    let inflight_write_bytes = if figures.write_bandwidth == 0 {
        defaults.inflight_write_bytes
    } else {
        let bytes = figures.write_bandwidth as f64 * TARGET_QUEUE_SECONDS / shards;
        clamp_blocks(bytes, MIN_INFLIGHT_WRITE_BYTES, MAX_INFLIGHT_WRITE_BYTES)
    };
    let stream_chunk_bytes = if figures.write_bandwidth == 0 {
        defaults.stream_chunk_bytes
    } else {
        let bytes = figures.write_bandwidth as f64 * STREAM_TARGET_SECONDS;
        clamp_blocks(bytes, MIN_CHUNK_BYTES, MAX_STREAM_CHUNK_BYTES)
    };
    // The scan after an index entry usually needs a few KiB (an entry every
    // `index.interval.bytes`), so every byte read past that is waste, and
    // reads go around the page cache (O_DIRECT). One read of the device's
    // "knee" (bandwidth ÷ IOPS: the size whose transfer takes as long as
    // one operation's own cost) costs at most twice a tiny read and saves a
    // second operation when the batch runs on: 16 KiB floor on NVMe,
    // about 1 MiB on a spinning disk, where a second seek is what hurts.
    let read_ahead_bytes = if figures.read_bandwidth == 0 || figures.read_iops == 0 {
        defaults.read_ahead_bytes
    } else {
        let bytes = figures.read_bandwidth as f64 / figures.read_iops as f64;
        clamp_blocks(bytes, MIN_CHUNK_BYTES, MAX_READ_AHEAD_BYTES)
    };
    IoSizing {
        inflight_write_bytes,
        stream_chunk_bytes,
        read_ahead_bytes,
        measured: true,
    }
}

/// `bytes` rounded down to whole blocks, within `[min, max]`.
fn clamp_blocks(bytes: f64, min: usize, max: usize) -> usize {
    let bytes = if bytes.is_finite() && bytes > 0.0 {
        bytes.min(max as f64) as usize
    } else {
        min
    };
    (bytes / BLOCK * BLOCK).clamp(min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(write_bandwidth: u64, write_iops: u64) -> DiskFigures {
        DiskFigures {
            read_bandwidth: write_bandwidth * 2,
            read_iops: write_iops * 2,
            write_bandwidth,
            write_iops,
        }
    }

    #[test]
    fn no_figures_are_todays_constants() {
        let sizing = derive(None, 4);
        assert_eq!(sizing, IoSizing::default());
        assert!(!sizing.measured);
        assert_eq!(sizing.stream_chunk_bytes, 64 << 10);
        assert_eq!(sizing.read_ahead_bytes, 64 << 10);
        // A file with zeros (a measurement that failed) changes nothing either.
        let zero = derive(Some(&DiskFigures::default()), 4);
        assert_eq!(zero.inflight_write_bytes, defaults::INFLIGHT_WRITE_BYTES);
        assert_eq!(zero.stream_chunk_bytes, defaults::STREAM_CHUNK_BYTES);
        assert_eq!(zero.read_ahead_bytes, defaults::READ_AHEAD_BYTES);
        assert!(zero.measured);
    }

    #[test]
    fn a_typical_nvme_disk() {
        // 2 GB/s, 400 k IOPS on 2 shards: 2 GB/s × 2 ms ÷ 2 in flight,
        // 2 GB/s × 40 µs = 80 KB → 76 KiB streamed, and a read knee of
        // 4 GB/s ÷ 800 k = 5 KB, below the 16 KiB floor.
        let sizing = derive(Some(&disk(2_000_000_000, 400_000)), 2);
        assert_eq!(sizing.inflight_write_bytes, 2_000_000 / BLOCK * BLOCK);
        assert_eq!(sizing.stream_chunk_bytes, 80_000 / BLOCK * BLOCK);
        assert_eq!(sizing.read_ahead_bytes, MIN_CHUNK_BYTES);
        // A spinning disk: 200 MB/s, 200 IOPS reads 1 MB at a time.
        let spinning = derive(Some(&disk(100_000_000, 100)), 1);
        assert_eq!(spinning.read_ahead_bytes, 1_000_000 / BLOCK * BLOCK);
    }

    #[test]
    fn monotone_in_bandwidth() {
        let mut previous = derive(Some(&disk(1_000_000, 10_000)), 4);
        let mut bandwidth = 1_000_000u64;
        while bandwidth < 100_000_000_000 {
            bandwidth = bandwidth * 3 / 2;
            let sizing = derive(Some(&disk(bandwidth, 10_000)), 4);
            assert!(sizing.inflight_write_bytes >= previous.inflight_write_bytes);
            assert!(sizing.stream_chunk_bytes >= previous.stream_chunk_bytes);
            assert!(sizing.read_ahead_bytes >= previous.read_ahead_bytes);
            previous = sizing;
        }
        // ... and the shards share the in-flight bytes.
        let one = derive(Some(&disk(4_000_000_000, 10_000)), 1);
        let four = derive(Some(&disk(4_000_000_000, 10_000)), 4);
        assert!(four.inflight_write_bytes < one.inflight_write_bytes);
    }

    #[test]
    fn clamped_at_both_ends() {
        let slow = derive(Some(&disk(1, 1_000_000)), 64);
        assert!(slow.measured);
        assert_eq!(slow.inflight_write_bytes, MIN_INFLIGHT_WRITE_BYTES);
        assert_eq!(slow.stream_chunk_bytes, MIN_CHUNK_BYTES);
        assert_eq!(slow.read_ahead_bytes, MIN_CHUNK_BYTES);
        let fast = derive(Some(&disk(u64::MAX / 4, 1)), 1);
        assert_eq!(fast.inflight_write_bytes, MAX_INFLIGHT_WRITE_BYTES);
        assert_eq!(fast.stream_chunk_bytes, MAX_STREAM_CHUNK_BYTES);
        assert_eq!(fast.read_ahead_bytes, MAX_READ_AHEAD_BYTES);
        for sizing in [slow, fast] {
            assert_eq!(sizing.stream_chunk_bytes % BLOCK, 0);
            assert_eq!(sizing.read_ahead_bytes % BLOCK, 0);
            assert_eq!(sizing.inflight_write_bytes % BLOCK, 0);
        }
    }
}
