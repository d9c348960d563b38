//! Recycling (`engine/src/recycle.rs`) on a real disk: the files of
//! segments that retention deletes are kept as spares, and the next
//! segments take them over (the same inode, its old batches still in it
//! past the new data); a roll with no spare at hand runs retention by size
//! first.
//! The log reads the same all along and after a restart; a spare is not
//! taken while a read of its old segment is in flight;
//! `segment_recycle_max` bounds the spares (0: none, and no retention at
//! rolls), and a data dir low on space gives them up. A segment deleted
//! outright is unlinked off the shard's thread, and a `.deleted` file a
//! crash left goes at the next open.

mod common;
mod support;

use common::{batch, config, open_log, read_all, run};
use engine::log::ReadMode;
use engine::{EngineConfig, FlushPolicy, PartitionLog, ReadData, TopicConfig};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use support::tempdir;

const TOPIC: &str = "t";
const PER_BATCH: usize = 5;

/// Small segments, and a retention of `retention_bytes` (-1: none).
fn topic_config(retention_bytes: i64) -> TopicConfig {
    let retention_bytes = retention_bytes.to_string();
    TopicConfig::default()
        .with_overrides([
            ("segment.bytes", "4096"),
            ("index.interval.bytes", "512"),
            ("retention.ms", "-1"),
            ("retention.bytes", retention_bytes.as_str()),
        ])
        .expect("topic config")
}

fn engine_config(dir: &Path, recycle_max: usize) -> EngineConfig {
    let mut config = config(dir, FlushPolicy::Fsync);
    config.segment_recycle_max = recycle_max;
    config
}

/// The spare files of a partition dir, by bound.
fn spares(partition: &Path) -> Vec<PathBuf> {
    with_extension(partition, "recycled")
}

/// The files of a partition dir with `extension`, sorted.
fn with_extension(partition: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(partition)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).expect("metadata").ino()
}

/// The `.log` file of the segment based at `base`.
fn segment_file(partition: &Path, base: i64) -> PathBuf {
    partition.join(format!("{base:020}.log"))
}

/// Appends `batches` batches of [`PER_BATCH`] records from the log's end,
/// each durable.
async fn append(log: &PartitionLog, batches: usize) {
    for _ in 0..batches {
        let first = log.log_end_offset() as usize;
        let mut bytes = batch(first, PER_BATCH, first as i64);
        let r = log.append(&mut bytes, 0).expect("append");
        log.wait_durable(r.last_offset).await.expect("durable");
    }
}

/// Appends until a new segment starts; returns its `.log` path.
async fn append_until_roll(log: &PartitionLog, partition: &Path) -> PathBuf {
    let before = log.segment_count();
    while log.segment_count() == before {
        append(log, 1).await;
    }
    let base = *log
        .segment_base_offsets()
        .last()
        .expect("an active segment");
    partition.join(format!("{base:020}.log"))
}

/// Appends until a roll deletes the oldest segment (retention at the
/// roll); returns the new segment's `.log` path.
async fn roll_until_start_moves(log: &PartitionLog, partition: &Path) -> PathBuf {
    let start = log.log_start_offset();
    loop {
        let new_segment = append_until_roll(log, partition).await;
        if log.log_start_offset() > start {
            return new_segment;
        }
    }
}

/// Every offset from the log start to its end reads back as written.
async fn assert_reads_whole(log: &PartitionLog) {
    let start = log.log_start_offset();
    let records = read_all(log, start).await;
    let offsets: Vec<i64> = records.iter().map(|(o, _)| *o).collect();
    let expected: Vec<i64> = (start..log.log_end_offset()).collect();
    assert_eq!(offsets, expected, "the log reads whole");
    for (o, key) in records {
        assert_eq!(key, format!("key-{o}"));
    }
}

#[test]
fn each_roll_takes_over_the_file_retention_just_deleted() {
    let dir = tempdir();
    let data = dir.path().to_path_buf();
    let partition = dir.path().join(format!("{TOPIC}-0"));
    run(async {
        let (manager, log) = open_log(engine_config(&data, 2), TOPIC, topic_config(8192)).await;
        append(&log, 200).await;
        assert!(log.log_start_offset() > 0, "retention ran at the rolls");
        assert!(
            log.segments_recycled() >= 4,
            "rolls took deleted segments' files"
        );
        assert!(
            spares(&partition).is_empty(),
            "each spare was taken at once"
        );
        for _ in 0..3 {
            let before: Vec<(i64, u64)> = log
                .segment_base_offsets()
                .into_iter()
                .map(|base| (base, inode(&segment_file(&partition, base))))
                .collect();
            let recycled = log.segments_recycled();
            let new_segment = roll_until_start_moves(&log, &partition).await;
            assert!(log.segments_recycled() > recycled);
            let deleted: Vec<u64> = before
                .iter()
                .filter(|(base, _)| *base < log.log_start_offset())
                .map(|(_, ino)| *ino)
                .collect();
            assert!(
                deleted.contains(&inode(&new_segment)),
                "the new segment is the file of one that retention just deleted"
            );
        }
        append(&log, 5).await;
        assert_reads_whole(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
    // After a restart the active segment is scanned: it ends before the
    // stale batches its recycled file still holds.
    run(async {
        let (manager, log) = open_log(engine_config(&data, 2), TOPIC, topic_config(8192)).await;
        assert_reads_whole(&log).await;
        append(&log, 30).await;
        assert_reads_whole(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
}

#[test]
fn a_spare_waits_for_the_reads_of_its_old_segment() {
    let dir = tempdir();
    let data = dir.path().to_path_buf();
    let partition = dir.path().join(format!("{TOPIC}-0"));
    run(async {
        let (manager, log) = open_log(engine_config(&data, 1), TOPIC, topic_config(8192)).await;
        append(&log, 100).await;
        let start = log.log_start_offset();
        let held = log
            .read(start, 512, ReadMode::FileSlice)
            .await
            .expect("read");
        let ReadData::File(slice) = held.data else {
            panic!("a file slice of the oldest segment")
        };
        let oldest_inode = inode(&segment_file(&partition, start));
        let recycled = log.segments_recycled();
        let new_segment = roll_until_start_moves(&log, &partition).await;
        assert_eq!(
            log.segments_recycled(),
            recycled,
            "its file is held by a read"
        );
        assert_ne!(inode(&new_segment), oldest_inode);
        assert_eq!(spares(&partition).len(), 1, "kept as a spare");
        let mut bytes = vec![0u8; slice.length];
        std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut bytes, slice.position)
            .expect("the held slice reads");
        let header = engine::batch::validate_batch(&bytes, usize::MAX).expect("a whole batch");
        assert_eq!(
            header.base_offset, start,
            "the held slice still reads the old batches"
        );
        drop(slice);
        let new_segment = append_until_roll(&log, &partition).await;
        assert_eq!(
            log.segments_recycled(),
            recycled + 1,
            "taken once the read is done"
        );
        assert_eq!(inode(&new_segment), oldest_inode);
        assert_reads_whole(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
}

#[test]
fn spares_are_bounded_turned_off_and_given_up_on_a_full_disk() {
    let dir = tempdir();
    let data = dir.path().to_path_buf();
    let partition = dir.path().join(format!("{TOPIC}-0"));
    run(async {
        let (manager, log) = open_log(engine_config(&data, 3), TOPIC, topic_config(-1)).await;
        append(&log, 200).await;
        assert_eq!(log.log_start_offset(), 0, "no retention, nothing deleted");
        log.set_config(topic_config(8192));
        assert!(log.apply_retention().expect("retention") > 3);
        assert_eq!(
            spares(&partition).len(),
            3,
            "three spares kept, the rest deleted"
        );
        manager.shutdown().await.expect("shutdown");
    });
    // A lower limit at open deletes the spares past it.
    run(async {
        let (manager, log) = open_log(engine_config(&data, 1), TOPIC, topic_config(8192)).await;
        assert_eq!(spares(&partition).len(), 1);
        assert_reads_whole(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
    // A data dir below its reserve gives them up at the retention tick.
    run(async {
        let mut config = engine_config(&data, 1);
        config.min_free_bytes = Some(u64::MAX / 2);
        let (manager, log) = open_log(config, TOPIC, topic_config(8192)).await;
        manager.check_space_once().await;
        log.apply_retention().expect("retention");
        assert!(spares(&partition).is_empty(), "a low disk keeps no spares");
        manager.shutdown().await.expect("shutdown");
    });
    // Off: rolls run no retention, and new segments are new files.
    run(async {
        let (manager, log) = open_log(engine_config(&data, 0), TOPIC, topic_config(8192)).await;
        // The partition keeps the config it was created with.
        log.set_config(topic_config(8192));
        let start = log.log_start_offset();
        append(&log, 100).await;
        assert_eq!(
            log.log_start_offset(),
            start,
            "retention waits for its tick"
        );
        assert!(log.apply_retention().expect("retention") > 0);
        assert!(spares(&partition).is_empty());
        assert_eq!(log.segments_recycled(), 0);
        // Deleted, not kept: renamed `.log.deleted`, then unlinked off the
        // shard's thread.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !with_extension(&partition, "deleted").is_empty() {
            assert!(std::time::Instant::now() < deadline, "the unlinks ran");
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_reads_whole(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
    // A `.deleted` file a crash left behind goes at the next open.
    let leftover = partition.join("00000000000000000000.log.deleted");
    std::fs::write(&leftover, b"a deleted segment").expect("leftover");
    run(async {
        let (manager, log) = open_log(engine_config(&data, 0), TOPIC, topic_config(8192)).await;
        assert!(!leftover.exists(), "the leftover was removed at open");
        assert_reads_whole(&log).await;
        manager.shutdown().await.expect("shutdown");
    });
}
