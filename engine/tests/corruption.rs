//! Recovery from damaged segment files, on a real disk.
//!
//! Each test writes a log, shuts the engine down cleanly, damages the files
//! the way a disk or an operator can — a flipped byte in the active or in the
//! first segment, a `.log` cut mid-batch, garbage or missing index files,
//! zeros after the data — and reopens it. The log must end exactly before the
//! first damaged batch (later segments removed), serve only valid batches
//! whose records are the ones written, keep its timestamp lookups right, and
//! take appends at the new end, also across a further restart. No path may
//! panic.

mod common;
mod support;

use common::{batch, config, open_log, run};
use engine::{FlushPolicy, PartitionLog, TopicConfig};
use std::path::{Path, PathBuf};
use support::{file_batches, read_both, tempdir};

const TOPIC: &str = "t";
/// Records per batch written by [`write_log`].
const PER_BATCH: usize = 5;

fn topic_config() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([
            ("segment.bytes", "2048"),
            ("index.interval.bytes", "512"),
            ("retention.ms", "-1"),
        ])
        .expect("topic config")
}

/// Timestamp of record `offset` as written by [`write_log`]: batch `i` starts
/// at `10_000 + i * 100`, its records one ms apart.
fn timestamp_of(offset: i64) -> i64 {
    let i = offset / PER_BATCH as i64;
    10_000 + i * 100 + offset % PER_BATCH as i64
}

/// Writes `batches` batches of [`PER_BATCH`] records and shuts down; returns the partition dir.
fn write_log(data_dir: &Path, batches: usize) -> PathBuf {
    let data = data_dir.to_path_buf();
    run(async move {
        let (manager, log) =
            open_log(config(&data, FlushPolicy::Fsync), TOPIC, topic_config()).await;
        for i in 0..batches {
            let mut bytes = batch(
                i * PER_BATCH,
                PER_BATCH,
                timestamp_of((i * PER_BATCH) as i64),
            );
            let r = log.append(&mut bytes, 0).expect("append");
            log.wait_durable(r.last_offset).await.expect("durable");
        }
        assert_eq!(log.log_end_offset(), (batches * PER_BATCH) as i64);
        manager.shutdown().await.expect("shutdown");
    });
    data_dir.join(format!("{TOPIC}-0"))
}

/// The `.log` files of a partition dir, oldest first.
fn log_files(partition_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// Flips a byte under the CRC of the batch that holds byte `near` of `path`;
/// returns that batch's base offset and file position.
fn flip_byte_in_batch(path: &Path, near: u64) -> (i64, u64) {
    let batches = file_batches(path);
    let &(position, header) = batches
        .iter()
        .find(|(p, h)| *p <= near && near < p + h.total_bytes() as u64)
        .expect("a batch holds the byte");
    // Records start after the 61-byte header; the CRC covers everything from byte 21.
    let target = near.clamp(position + 61, position + header.total_bytes() as u64 - 1);
    let mut bytes = std::fs::read(path).expect("read segment");
    bytes[target as usize] ^= 0x5a;
    std::fs::write(path, bytes).expect("write segment");
    (header.base_offset, position)
}

/// Checks that the log holds exactly offsets `0..end` as written, readable in both modes.
async fn assert_holds_written_prefix(log: &PartitionLog, end: i64) {
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.high_watermark(), end);
    let records = read_both(log, 0).await;
    assert_eq!(
        records.len() as i64,
        end,
        "every offset below the end is readable"
    );
    for (i, (o, k, v)) in records.iter().enumerate() {
        assert_eq!(*o, i as i64);
        assert_eq!(k.as_deref(), Some(format!("key-{o}").as_bytes()));
        assert_eq!(v.as_deref(), Some(format!("value-{o}").as_bytes()));
    }
    // A read at every offset starts with the batch that holds it (index lookups).
    for o in 0..end {
        let result = log
            .read(o, 1, engine::log::ReadMode::FileSlice)
            .await
            .expect("read");
        let engine::ReadData::File(slice) = result.data else {
            panic!("no data at {o}")
        };
        let file_bytes = slice.file.metadata().expect("metadata").len();
        assert!(
            slice.position + slice.length as u64 <= file_bytes,
            "read at {o} served bytes {}..{} of a {file_bytes}-byte segment",
            slice.position,
            slice.position + slice.length as u64
        );
        let mut buf = vec![0u8; slice.length];
        std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut buf, slice.position)
            .expect("slice");
        let header = engine::batch::validate_batch(&buf, usize::MAX).unwrap_or_else(|e| {
            panic!(
                "read at {o} served bytes {} + {} that are no batch: {e}",
                slice.position, slice.length
            )
        });
        assert!(
            header.base_offset <= o && o <= header.last_offset(),
            "read at {o} served {header:?}"
        );
    }
}

/// Reopens, checks the prefix `0..end`, appends one batch at `end`, restarts and checks again.
fn assert_recovers_to(data_dir: &Path, end: i64) {
    let data = data_dir.to_path_buf();
    run(async move {
        let (manager, log) =
            open_log(config(&data, FlushPolicy::Fsync), TOPIC, topic_config()).await;
        assert_holds_written_prefix(&log, end).await;
        let mut bytes = batch(end as usize, PER_BATCH, timestamp_of(end));
        let r = log.append(&mut bytes, 0).expect("append after recovery");
        assert_eq!(r.base_offset, end, "appends continue at the recovered end");
        log.wait_durable(r.last_offset).await.expect("durable");
        assert_holds_written_prefix(&log, end + PER_BATCH as i64).await;
        manager.shutdown().await.expect("shutdown");
    });
    let data = data_dir.to_path_buf();
    run(async move {
        let (manager, log) =
            open_log(config(&data, FlushPolicy::Fsync), TOPIC, topic_config()).await;
        assert_holds_written_prefix(&log, end + PER_BATCH as i64).await;
        manager.shutdown().await.expect("shutdown");
    });
}

#[test]
fn flipped_byte_in_the_active_segment_ends_the_log_before_that_batch() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    assert!(files.len() > 2, "segments rolled: {files:?}");
    let last = files.last().expect("a segment");
    let size = std::fs::metadata(last).expect("metadata").len();
    let (base, position) = flip_byte_in_batch(last, size / 2);
    assert!(position > 0, "the flipped batch is not the segment's first");
    assert_recovers_to(dir.path(), base);
}

#[test]
fn log_cut_mid_batch_ends_the_log_before_that_batch() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    let last = files.last().expect("a segment");
    let batches = file_batches(last);
    assert!(
        batches.len() >= 3,
        "the active segment holds several batches"
    );
    let (position, header) = batches[batches.len() - 2];
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .expect("open");
    file.set_len(position + header.total_bytes() as u64 / 2)
        .expect("cut");
    drop(file);
    assert_recovers_to(dir.path(), header.base_offset);
}

#[test]
fn log_cut_inside_a_batch_header_ends_the_log_before_that_batch() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    let last = files.last().expect("a segment");
    let batches = file_batches(last);
    let (position, header) = batches[batches.len() - 1];
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .expect("open");
    file.set_len(position + 30).expect("cut");
    drop(file);
    assert_recovers_to(dir.path(), header.base_offset);
}

/// Timestamp lookups against what `write_log` wrote: the first record whose
/// timestamp reaches the target.
async fn assert_lookups(log: &PartitionLog) {
    let end = log.log_end_offset();
    assert_eq!(
        log.offset_for_timestamp(-2).await.expect("earliest"),
        Some((0, -1))
    );
    assert_eq!(
        log.offset_for_timestamp(-1).await.expect("latest"),
        Some((end, -1))
    );
    assert_eq!(
        log.offset_for_timestamp(-3).await.expect("max timestamp"),
        Some((end - 1, timestamp_of(end - 1)))
    );
    let last_ts = timestamp_of(end - 1);
    for target in (9_990..=last_ts + 50).step_by(37) {
        let want = (0..end)
            .find(|&o| timestamp_of(o) >= target)
            .map(|o| (o, timestamp_of(o)));
        let got = log.offset_for_timestamp(target).await.expect("lookup");
        assert_eq!(got, want, "offset for timestamp {target}");
    }
}

fn damage_indexes_and_check(write_garbage: impl Fn(&Path, usize)) {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    assert!(files.len() >= 4, "several sealed segments: {files:?}");
    // Garbage in the indexes of two sealed segments, the time index of a third gone.
    write_garbage(&files[0].with_extension("index"), 0);
    write_garbage(&files[1].with_extension("index"), 1);
    std::fs::remove_file(files[2].with_extension("timeindex")).expect("remove timeindex");
    let data = dir.path().to_path_buf();
    run(async move {
        let (manager, log) =
            open_log(config(&data, FlushPolicy::Fsync), TOPIC, topic_config()).await;
        assert_holds_written_prefix(&log, 300).await;
        assert_lookups(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
    assert_recovers_to(dir.path(), 300);
}

#[test]
fn random_garbage_indexes_and_a_missing_time_index_are_rebuilt() {
    damage_indexes_and_check(|path, seed| {
        // A fixed xorshift stream: reproducible garbage, a whole number of entries.
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed as u64;
        let garbage: Vec<u8> = (0..96)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(path, garbage).expect("write garbage");
    });
}

#[test]
fn well_formed_but_wrong_indexes_are_not_trusted() {
    // Entries that grow in offset and position and stay inside the file, so
    // they parse, but whose positions are not batch starts (a flipped bit in
    // a position, or an index from another segment).
    damage_indexes_and_check(|path, seed| {
        let mut bytes = Vec::new();
        for i in 1..=2u32 {
            bytes.extend_from_slice(&(i * 3 + seed as u32).to_be_bytes());
            bytes.extend_from_slice(&(i * 700 + 13).to_be_bytes());
        }
        std::fs::write(path, bytes).expect("write index");
    });
}

#[test]
fn zeros_after_the_data_are_ignored() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    assert!(files.len() >= 2);
    for path in [&files[0], files.last().expect("a segment")] {
        let mut bytes = std::fs::read(path).expect("read");
        bytes.extend(std::iter::repeat_n(0u8, 10_000));
        std::fs::write(path, bytes).expect("write");
    }
    assert_recovers_to(dir.path(), 300);
    let (position, header) = *file_batches(&files[0]).last().expect("batches");
    assert_eq!(
        std::fs::metadata(&files[0]).expect("metadata").len(),
        position + header.total_bytes() as u64,
        "the zeros were trimmed from the sealed segment"
    );
}

/// A clean reopen reads only the active segment and the tails of the sealed
/// ones (from their last index entry); without a recovery point every
/// segment is read whole. Both serve the same log.
#[test]
fn sealed_segments_below_the_recovery_point_are_opened_from_their_indexes() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    assert!(files.len() >= 4, "several sealed segments: {files:?}");
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).expect("metadata").len())
        .sum();
    let last = std::fs::metadata(files.last().expect("a segment"))
        .expect("metadata")
        .len();
    let open_and_check = |expect_shortcut: bool| {
        let data = dir.path().to_path_buf();
        run(async move {
            let (manager, log) =
                open_log(config(&data, FlushPolicy::Fsync), TOPIC, topic_config()).await;
            let scanned = log.scanned_at_open_bytes();
            if expect_shortcut {
                assert!(
                    scanned >= last && scanned < total / 2,
                    "scanned {scanned} of {total} bytes (active segment {last})"
                );
            } else {
                assert_eq!(scanned, total, "every segment read whole");
            }
            assert_holds_written_prefix(&log, 300).await;
            assert_lookups(&log).await;
            manager.shutdown().await.expect("shutdown");
        });
    };
    open_and_check(true);
    std::fs::remove_file(partition.join("recovery-point")).expect("remove checkpoint");
    open_and_check(false);
}

// The damaged segment is below the recovery point, but writing it makes its
// `.log` newer than its indexes, so recovery does not trust them and reads it
// whole (as it would after a crash before the checkpoint).
#[test]
fn corrupt_first_segment_ends_the_log_and_drops_later_segments() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    assert!(files.len() >= 3, "several segments: {files:?}");
    let size = std::fs::metadata(&files[0]).expect("metadata").len();
    let (base, _) = flip_byte_in_batch(&files[0], size / 2);
    let data = dir.path().to_path_buf();
    run(async move {
        let (manager, log) =
            open_log(config(&data, FlushPolicy::Fsync), TOPIC, topic_config()).await;
        assert_eq!(log.segment_count(), 1, "later segments are dropped");
        assert_holds_written_prefix(&log, base).await;
        manager.shutdown().await.expect("shutdown");
    });
    let left: Vec<String> = std::fs::read_dir(&partition)
        .expect("partition dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log") || n.ends_with(".index") || n.ends_with(".timeindex"))
        .collect();
    let first_name = files[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let first_stem = first_name.trim_end_matches(".log");
    assert!(
        left.iter().all(|n| n.starts_with(first_stem)),
        "only the first segment's files remain: {left:?}"
    );
    assert_recovers_to(dir.path(), base);
}

/// A recycled segment file (`engine/src/recycle.rs`) holds an older
/// segment's batches, whole and valid, past its own: recovery ends each
/// segment's log before them, as at zeros, reports nothing and drops no
/// later segment.
#[test]
fn an_older_segments_batches_after_the_data_are_ignored() {
    let dir = tempdir();
    let partition = write_log(dir.path(), 60);
    let files = log_files(&partition);
    assert!(files.len() >= 3);
    let stale = std::fs::read(&files[0]).expect("read the first segment");
    for path in [&files[1], files.last().expect("a segment")] {
        let mut bytes = std::fs::read(path).expect("read");
        bytes.extend_from_slice(&stale);
        std::fs::write(path, bytes).expect("write");
    }
    assert_recovers_to(dir.path(), 300);
    assert_eq!(
        log_files(&partition).len(),
        files.len(),
        "no segment dropped"
    );
    let (position, header) = *file_batches(&files[1]).last().expect("batches");
    assert_eq!(
        std::fs::metadata(&files[1]).expect("metadata").len(),
        position + header.total_bytes() as u64,
        "the stale batches were trimmed from the sealed segment"
    );
}
