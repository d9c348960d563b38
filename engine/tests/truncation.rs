//! Truncation for replication and the leader-epoch checkpoint, on a real
//! disk: `truncate_to` mid-segment, at a segment boundary and past the end,
//! `truncate_fully_and_start_at`, appends and reads after each, reopening
//! (including after a truncation a crash interrupted), and the epoch cache
//! and its `leader-epoch-checkpoint` file kept in step with the log.

mod common;

use common::*;
use engine::{EpochEndOffset, FlushPolicy, TopicConfig};
use std::path::{Path, PathBuf};

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Topic `t` with 2 KiB segments (the 5-record batches below are ~150 bytes,
/// so a segment holds about a dozen of them).
fn small_segments() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([("segment.bytes", "2048")])
        .unwrap()
}

/// Appends `batches` batches of 5 records, keys continuing from `first`,
/// under `epoch`, and waits until they are durable.
async fn append_batches(log: &engine::PartitionLog, first: usize, batches: usize, epoch: i32) {
    log.set_leader_epoch(epoch);
    let mut last = 0;
    for i in 0..batches {
        let mut b = batch(first + i * 5, 5, 1_000 + (first + i * 5) as i64);
        last = log.append(&mut b, epoch).unwrap().last_offset;
    }
    log.wait_durable(last).await.unwrap();
}

/// Asserts the log reads back as offsets `0..end` (from `start`) with keys
/// `key-<offset>`.
async fn assert_reads_back(log: &engine::PartitionLog, start: i64, end: i64) {
    let keys = read_all(log, start).await;
    assert_eq!(keys.len() as i64, end - start, "records from {start}");
    for (i, (offset, key)) in keys.iter().enumerate() {
        assert_eq!(*offset, start + i as i64);
        assert_eq!(*key, format!("key-{offset}"));
    }
}

fn epoch_pairs(log: &engine::PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

fn checkpoint_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(engine::log::LEADER_EPOCH_CHECKPOINT_FILE_NAME))
        .expect("checkpoint file")
}

fn answer(epoch: i32, end_offset: i64) -> EpochEndOffset {
    EpochEndOffset { epoch, end_offset }
}

/// 40 batches of 5 records: epoch 0 for offsets 0..50, epoch 3 for
/// 50..150, epoch 5 for 150..200.
async fn three_epochs(
    path: &Path,
) -> (
    std::rc::Rc<engine::LogManager>,
    std::rc::Rc<engine::PartitionLog>,
) {
    let (m, log) = open_log(config(path, FlushPolicy::Fsync), "t", small_segments()).await;
    append_batches(&log, 0, 10, 0).await;
    append_batches(&log, 50, 20, 3).await;
    append_batches(&log, 150, 10, 5).await;
    (m, log)
}

#[test]
fn the_checkpoint_follows_appends_in_kafkas_format_and_survives_restart() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    let partition_dir: PathBuf = run(async move {
        let (m, log) = three_epochs(&p).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50), (5, 150)]);
        assert_eq!(checkpoint_text(log.dir()), "0\n3\n0 0\n3 50\n5 150\n");
        assert_eq!(log.end_offset_for_epoch(0), answer(0, 50));
        assert_eq!(log.end_offset_for_epoch(2), answer(0, 50));
        assert_eq!(log.end_offset_for_epoch(3), answer(3, 150));
        assert_eq!(log.end_offset_for_epoch(5), answer(5, 200));
        assert_eq!(log.end_offset_for_epoch(6), EpochEndOffset::UNDEFINED);
        // A new leader epoch without a batch yet ends at the log end, as
        // Kafka's leader (which assigns its epoch on election) answers.
        log.set_leader_epoch(7);
        assert_eq!(log.end_offset_for_epoch(5), answer(5, 200));
        assert_eq!(log.end_offset_for_epoch(6), answer(5, 200));
        assert_eq!(log.end_offset_for_epoch(7), answer(7, 200));
        assert_eq!(log.end_offset_for_epoch(8), EpochEndOffset::UNDEFINED);
        assert_eq!(epoch_pairs(&log).len(), 3, "no batch of epoch 7 yet");
        let dir = log.dir().to_path_buf();
        m.shutdown().await.unwrap();
        dir
    });
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50), (5, 150)]);
        assert_eq!(log.leader_epoch(), 5, "appends go on in the newest epoch");
        assert_eq!(log.end_offset_for_epoch(3), answer(3, 150));
    });
    // Missing or corrupt, the file is rebuilt from the batch headers.
    for damage in [None, Some("0\n7\n1 2\n")] {
        let file = partition_dir.join(engine::log::LEADER_EPOCH_CHECKPOINT_FILE_NAME);
        match damage {
            None => std::fs::remove_file(&file).unwrap(),
            Some(text) => std::fs::write(&file, text).unwrap(),
        }
        let p = path.clone();
        run(async move {
            let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
            assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50), (5, 150)]);
            assert_eq!(checkpoint_text(log.dir()), "0\n3\n0 0\n3 50\n5 150\n");
            m.shutdown().await.unwrap();
        });
    }
    // An entry past the recovered log end (its batch lost in a crash) is cut.
    std::fs::write(
        partition_dir.join(engine::log::LEADER_EPOCH_CHECKPOINT_FILE_NAME),
        "0\n4\n0 0\n3 50\n5 150\n9 200\n",
    )
    .unwrap();
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50), (5, 150)]);
        assert_eq!(checkpoint_text(log.dir()), "0\n3\n0 0\n3 50\n5 150\n");
    });
}

#[test]
fn truncate_mid_segment_cuts_the_batch_then_appends_and_reopens() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(async move {
        let (m, log) = three_epochs(&p).await;
        let segments_before = log.segment_count();
        assert!(segments_before >= 4, "{segments_before} segments");
        // 102 lies inside batch 100..=104, in epoch 3.
        assert!(log.truncate_to(102).await.unwrap());
        assert_eq!(log.log_end_offset(), 100);
        assert_eq!(log.high_watermark(), 100);
        assert!(log.segment_count() < segments_before);
        assert_reads_back(&log, 0, 100).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50)]);
        assert_eq!(checkpoint_text(log.dir()), "0\n2\n0 0\n3 50\n");
        assert_eq!(log.end_offset_for_epoch(3), answer(3, 100));
        // The log's leader epoch is still 5 (no batch of it left): it counts
        // as starting at the new log end.
        assert_eq!(log.end_offset_for_epoch(5), answer(5, 100));
        assert_eq!(log.end_offset_for_epoch(4), answer(3, 100));
        // Appends continue at the cut, in a newer epoch.
        append_batches(&log, 100, 6, 6).await;
        assert_eq!(log.log_end_offset(), 130);
        assert_reads_back(&log, 0, 130).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50), (6, 100)]);
        m.shutdown().await.unwrap();
    });
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(log.log_end_offset(), 130);
        assert_reads_back(&log, 0, 130).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50), (6, 100)]);
        assert!(!log.dir().join("pending-truncation").exists());
    });
}

#[test]
fn truncate_at_a_segment_boundary_and_past_the_end() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(async move {
        let (m, log) = three_epochs(&p).await;
        let bases = log.segment_base_offsets();
        let boundary = bases[2];
        assert!(boundary > 0 && boundary < 200);
        // Past the end, or at it: nothing to do.
        assert!(!log.truncate_to(200).await.unwrap());
        assert!(!log.truncate_to(10_000).await.unwrap());
        assert_eq!(log.log_end_offset(), 200);
        assert_eq!(log.segment_base_offsets(), bases);
        assert!(
            log.truncate_to(-1).await.is_err(),
            "a negative offset is refused"
        );
        // At a segment's base offset: the log ends just before it.
        assert!(log.truncate_to(boundary).await.unwrap());
        assert_eq!(log.log_end_offset(), boundary);
        assert_eq!(log.segment_base_offsets().last(), Some(&boundary));
        assert_reads_back(&log, 0, boundary).await;
        let expected_epochs: Vec<(i32, i64)> = [(0, 0), (3, 50), (5, 150)]
            .into_iter()
            .filter(|&(_, start)| start < boundary)
            .collect();
        assert_eq!(epoch_pairs(&log), expected_epochs);
        let first = boundary as usize;
        append_batches(&log, first, 3, 5).await;
        assert_reads_back(&log, 0, boundary + 15).await;
        m.shutdown().await.unwrap();
    });
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        let end = log.log_end_offset();
        assert_reads_back(&log, 0, end).await;
        assert!(log.segment_base_offsets().len() >= 3);
    });
}

#[test]
fn truncate_fully_restarts_the_log_empty_at_the_offset() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(async move {
        let (m, log) = three_epochs(&p).await;
        log.truncate_fully_and_start_at(500).await.unwrap();
        assert_eq!(log.log_start_offset(), 500);
        assert_eq!(log.log_end_offset(), 500);
        assert_eq!(log.high_watermark(), 500);
        assert_eq!(log.segment_base_offsets(), vec![500]);
        assert!(epoch_pairs(&log).is_empty());
        assert_eq!(checkpoint_text(log.dir()), "0\n0\n");
        let mut b = batch(500, 5, 9_000);
        let r = log.append(&mut b, 8).unwrap();
        assert_eq!(r.base_offset, 500);
        log.wait_durable(r.last_offset).await.unwrap();
        assert_reads_back(&log, 500, 505).await;
        assert_eq!(epoch_pairs(&log), vec![(8, 500)]);
        m.shutdown().await.unwrap();
    });
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(log.log_start_offset(), 500);
        assert_eq!(log.log_end_offset(), 505);
        assert_reads_back(&log, 500, 505).await;
        assert_eq!(epoch_pairs(&log), vec![(8, 500)]);
        // Below the first segment, truncate_to restarts the log too.
        assert!(log.truncate_to(20).await.unwrap());
        assert_eq!(log.log_start_offset(), 20);
        assert_eq!(log.log_end_offset(), 20);
    });
}

#[test]
fn a_truncation_interrupted_by_a_crash_is_finished_at_open() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    let partition_dir = run(async move {
        let (m, log) = three_epochs(&p).await;
        let dir = log.dir().to_path_buf();
        m.shutdown().await.unwrap();
        dir
    });
    // The state a crash leaves right after the record of `truncate_to(102)`
    // was written and the newest segment deleted: later segments remain.
    std::fs::write(partition_dir.join("pending-truncation"), "to 102\n").unwrap();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    std::fs::remove_file(logs.last().unwrap()).unwrap();
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(log.log_end_offset(), 100, "the cut batch 100..=104 is gone");
        assert_reads_back(&log, 0, 100).await;
        assert_eq!(epoch_pairs(&log), vec![(0, 0), (3, 50)]);
        assert!(!log.dir().join("pending-truncation").exists());
        append_batches(&log, 100, 2, 4).await;
        assert_reads_back(&log, 0, 110).await;
        m.shutdown().await.unwrap();
    });
    // The same for a full truncation.
    std::fs::write(partition_dir.join("pending-truncation"), "fully 1000\n").unwrap();
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(log.log_start_offset(), 1000);
        assert_eq!(log.log_end_offset(), 1000);
        assert!(epoch_pairs(&log).is_empty());
        let mut b = batch(1000, 5, 9_000);
        assert_eq!(log.append(&mut b, 9).unwrap().base_offset, 1000);
    });
    // An unreadable record is refused, not guessed at: the partition stays
    // offline with the record in place (the other partitions open: see
    // `an_unreadable_pending_truncation_takes_only_its_partition_offline`).
    std::fs::write(partition_dir.join("pending-truncation"), "cut here\n").unwrap();
    let p = path.clone();
    run(async move {
        let manager = engine::LogManager::open(config(&p, FlushPolicy::Fsync), 0, 1)
            .await
            .expect("the manager opens without the partition");
        assert!(manager.get(&engine::TopicPartition::new("t", 0)).is_none());
        let offline = manager.offline_partitions();
        assert_eq!(offline.len(), 1);
        assert!(
            offline[0].reason.contains("unreadable pending truncation"),
            "refused for its pending truncation: {}",
            offline[0].reason
        );
    });
    assert!(partition_dir.join("pending-truncation").exists());
}

/// The `.log` files of a partition directory with their lengths, sorted.
fn segment_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            let len = std::fs::metadata(&p).unwrap().len();
            (p, len)
        })
        .collect();
    files.sort();
    files
}

/// A partition whose pending-truncation record cannot be read (damaged
/// text; a read that fails) is taken offline alone at open: the shard's
/// other partition opens and serves, the open succeeds, and the offline
/// partitions' files are left as they are, not re-created over.
#[test]
fn an_unreadable_pending_truncation_takes_only_its_partition_offline() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let tp = |partition| engine::TopicPartition::new("t", partition);
    let p = path.clone();
    run(async move {
        let manager = engine::LogManager::open(config(&p, FlushPolicy::Fsync), 0, 1)
            .await
            .unwrap();
        for partition in 0..3 {
            let log = manager
                .create_partition(tp(partition), [1; 16], small_segments())
                .await
                .unwrap();
            append_batches(&log, 0, 4, 0).await;
        }
        manager.shutdown().await.unwrap();
    });
    let dir_of = |partition| path.join(tp(partition).dir_name());
    // t-1: damaged text; t-2: a record no read gets (a directory, EISDIR).
    std::fs::write(dir_of(1).join("pending-truncation"), "cut here\n").unwrap();
    std::fs::create_dir(dir_of(2).join("pending-truncation")).unwrap();
    let damaged_before = (segment_files(&dir_of(1)), segment_files(&dir_of(2)));
    assert!(!damaged_before.0.is_empty() && !damaged_before.1.is_empty());
    let p = path.clone();
    run(async move {
        let manager = engine::LogManager::open(config(&p, FlushPolicy::Fsync), 0, 1)
            .await
            .expect("the other partitions open");
        let good = manager.get(&tp(0)).expect("t-0 opens");
        assert_reads_back(&good, 0, 20).await;
        append_batches(&good, 20, 2, 0).await;
        assert_reads_back(&good, 0, 30).await;
        assert_eq!(manager.partitions(), vec![tp(0)]);
        assert!(manager.get(&tp(1)).is_none() && manager.get(&tp(2)).is_none());
        let offline = manager.offline_partitions();
        let offline_tps: Vec<_> = offline.iter().map(|o| o.tp.clone()).collect();
        assert_eq!(offline_tps, vec![tp(1), tp(2)]);
        assert!(
            offline[0].reason.contains("unreadable pending truncation"),
            "{}",
            offline[0].reason
        );
        assert!(
            offline[1].reason.contains("pending-truncation"),
            "{}",
            offline[1].reason
        );
        assert!(offline.iter().all(|o| o.dir.ends_with(o.tp.dir_name())));
        // Not created afresh over its damaged files.
        let refused = manager
            .create_partition(tp(1), [1; 16], small_segments())
            .await;
        assert!(refused.is_err_and(|e| e.to_string().contains("partition offline")));
        // Deleting its topic is how an offline partition's files go.
        manager.delete_partition(&tp(2)).await.unwrap();
        assert_eq!(manager.offline_partitions().len(), 1);
        manager.shutdown().await.unwrap();
    });
    assert!(!dir_of(2).exists());
    assert_eq!(
        segment_files(&dir_of(1)),
        damaged_before.0,
        "the offline partition's segments are as they were"
    );
    assert!(dir_of(1).join("pending-truncation").is_file());
}

/// A truncation shows as running until it returns, and the log end moves
/// only at its end: what a broker taking leadership meanwhile must wait for.
#[test]
fn a_running_truncation_is_visible_until_the_log_end_moves() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = three_epochs(&path).await;
        assert!(!log.is_truncating());
        let end = log.log_end_offset();
        let cutting = {
            let log = log.clone();
            glommio::spawn_local(async move { log.truncate_to(55).await })
        };
        glommio::executor().yield_now().await;
        assert!(log.is_truncating(), "running");
        assert_eq!(log.log_end_offset(), end, "the old end until it returns");
        assert!(cutting.await.unwrap());
        assert!(!log.is_truncating());
        assert_eq!(log.log_end_offset(), 55);
    });
}

#[test]
fn truncation_keeps_producer_state_and_retention_moves_the_epoch_start() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (m, log) = three_epochs(&path).await;
        // DeleteRecords moves the log start: the first entry moves with it.
        assert_eq!(log.delete_records(60).await.unwrap(), 60);
        assert_eq!(epoch_pairs(&log), vec![(3, 60), (5, 150)]);
        // In memory: the file keeps the entries below the start, which a
        // reopen cuts again.
        assert_eq!(checkpoint_text(log.dir()), "0\n3\n0 0\n3 50\n5 150\n");
        m.shutdown().await.unwrap();
        drop((m, log));
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(log.log_start_offset(), 60);
        assert_eq!(epoch_pairs(&log), vec![(3, 60), (5, 150)]);
        assert_eq!(checkpoint_text(log.dir()), "0\n2\n3 60\n5 150\n");
        // A cut below the start moves the start back with it (Kafka's rule).
        assert!(log.truncate_to(55).await.unwrap());
        assert_eq!(log.log_end_offset(), 55);
        assert_eq!(log.log_start_offset(), 55);
        // Every entry started at or past the cut (Kafka's truncateFromEnd):
        // none is left.
        assert_eq!(epoch_pairs(&log), vec![]);
    });
}

#[test]
fn the_current_leader_epoch_is_checked_as_kafka_does() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = three_epochs(&path).await;
        assert_eq!(log.leader_epoch(), 5);
        let fenced = log.end_offset_for_epoch_checked(4, 3).unwrap_err();
        assert_eq!(fenced.error_code(), engine::ErrorCode::FencedLeaderEpoch);
        let unknown = log.end_offset_for_epoch_checked(6, 3).unwrap_err();
        assert_eq!(unknown.error_code(), engine::ErrorCode::UnknownLeaderEpoch);
        assert_eq!(
            log.end_offset_for_epoch_checked(5, 3).unwrap(),
            answer(3, 150)
        );
        assert_eq!(
            log.end_offset_for_epoch_checked(-1, 0).unwrap(),
            answer(0, 50)
        );
    });
}
