//! The partition log end to end on a real disk: append, read, restart, roll,
//! delete-records, retention, truncation, lookups, compaction.

mod common;

use common::*;

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}
use engine::log::ReadMode;

/// Topic `t` with the default topic config, under the `fsync` policy.
async fn open_fsync_log(
    path: &std::path::Path,
) -> (
    std::rc::Rc<engine::LogManager>,
    std::rc::Rc<engine::PartitionLog>,
) {
    open_log(
        config(path, FlushPolicy::Fsync),
        "t",
        TopicConfig::default(),
    )
    .await
}
use engine::{FlushPolicy, ReadData, TopicConfig};

/// Reads from `offset` in both modes: the copy read (from the batch cache
/// when it holds the offset) returns the bytes the file slice points at.
async fn assert_copy_matches_file(log: &engine::PartitionLog, offset: i64) {
    let copy = log.read(offset, 1 << 20, ReadMode::Copy).await.unwrap();
    let slice = log
        .read(offset, 1 << 20, ReadMode::FileSlice)
        .await
        .unwrap();
    let (ReadData::Bytes(copy), ReadData::File(slice)) = (copy.data, slice.data) else {
        panic!("unexpected read kinds at offset {offset}")
    };
    let mut from_file = vec![0u8; slice.length];
    std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut from_file, slice.position)
        .unwrap();
    assert_eq!(copy.as_ref(), &from_file[..], "offset {offset}");
}

#[test]
fn append_then_read_back_in_both_modes() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_fsync_log(&path).await;
        let mut b = batch(0, 10, 1_000);
        let r = log.append(&mut b, 0).unwrap();
        assert_eq!((r.base_offset, r.last_offset, r.record_count), (0, 9, 10));
        log.wait_durable(r.last_offset).await.unwrap();
        let mut b2 = batch(10, 5, 2_000);
        let r2 = log.append(&mut b2, 0).unwrap();
        assert_eq!(r2.base_offset, 10);
        log.wait_durable(r2.last_offset).await.unwrap();
        assert_eq!(log.high_watermark(), 15);
        let keys = read_all(&log, 0).await;
        assert_eq!(keys.len(), 15);
        assert_eq!(keys[12], (12, "key-12".to_string()));
        // The file slice holds the same bytes as the copy read.
        assert_copy_matches_file(&log, 3).await;
        // Past the end is empty; before the start or past LEO is out of range.
        assert!(log
            .read(15, 100, ReadMode::Copy)
            .await
            .unwrap()
            .data
            .is_empty());
        assert_eq!(
            log.read(16, 100, ReadMode::Copy)
                .await
                .unwrap_err()
                .error_code()
                .code(),
            1
        );
    });
}

/// Many producers appending at once share group-commit rounds, whose small
/// appends the cache keeps joined: every offset reads the same bytes from the
/// cache (copy) as from the segment file (file slice), and every record is
/// there once, also after a restart. With `stream_min_bytes` set the rounds'
/// whole blocks go out as streamed writes while the appends still arrive.
fn concurrent_appends_round_trip(stream_min_bytes: usize) {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let mut engine_config = config(&path, FlushPolicy::Fsync);
    engine_config.stream_min_bytes = stream_min_bytes;
    let producers = 64usize;
    let batches_each = 8usize;
    let records = (producers * batches_each * 3) as i64;
    let mut expected: Vec<String> = (0..records).map(|i| format!("key-{i}")).collect();
    expected.sort();
    let sorted_keys = |read: Vec<(i64, String)>| {
        let mut keys: Vec<String> = read.into_iter().map(|(_, k)| k).collect();
        keys.sort();
        keys
    };
    let (first_config, expected_first) = (engine_config.clone(), expected.clone());
    run(async move {
        let (manager, log) = open_log(first_config, "t", TopicConfig::default()).await;
        let tasks: Vec<_> = (0..producers)
            .map(|p| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    for b in 0..batches_each {
                        let first = (p * batches_each + b) * 3;
                        let r = log.append_owned(batch(first, 3, 1_000), 0).unwrap();
                        log.wait_durable(r.last_offset).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
        assert_eq!(log.high_watermark(), records);
        let streamed_writes = log.context().fsync_stats.borrow().streamed_writes;
        if stream_min_bytes > 0 {
            assert!(streamed_writes > 0, "the rounds streamed their blocks");
        } else {
            assert_eq!(streamed_writes, 0);
        }
        // All of it is cached, so the copy reads below come from the cache.
        let appended_bytes: usize = (0..producers * batches_each)
            .map(|i| batch(i * 3, 3, 1_000).len())
            .sum();
        assert_eq!(log.context().cache.used_bytes(), appended_bytes);
        assert_eq!(sorted_keys(read_all(&log, 0).await), expected_first);
        for offset in 0..records {
            assert_copy_matches_file(&log, offset).await;
        }
        manager.shutdown().await.unwrap();
    });
    run(async move {
        let (_m, log) = open_log(engine_config, "t", TopicConfig::default()).await;
        assert_eq!(log.log_end_offset(), records);
        assert_eq!(sorted_keys(read_all(&log, 0).await), expected);
    });
}

#[test]
fn concurrent_appends_read_the_same_from_the_cache_and_the_file() {
    concurrent_appends_round_trip(0);
}

#[test]
fn concurrent_streamed_appends_read_the_same_from_the_cache_and_the_file() {
    concurrent_appends_round_trip(4096);
}

#[test]
fn survives_restart_and_keeps_appending() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", TopicConfig::default()).await;
        for i in 0..20 {
            append_durable(&log, batch(i * 3, 3, 1_000 + i as i64)).await;
        }
        m.shutdown().await.unwrap();
    });
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", TopicConfig::default()).await;
        assert_eq!(log.log_end_offset(), 60);
        assert_eq!(log.high_watermark(), 60);
        let r = append_durable(&log, batch(60, 3, 5_000)).await;
        assert_eq!(r.base_offset, 60);
        let keys = read_all(&log, 0).await;
        assert_eq!(keys.len(), 63);
        assert!(keys
            .iter()
            .enumerate()
            .all(|(i, (o, k))| *o == i as i64 && *k == format!("key-{i}")));
    });
}

/// The inode of each checkpoint file in the partition's dir (a rewrite
/// goes through a new file and a rename, so it changes the inode).
fn checkpoint_inodes(dir: &std::path::Path) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let keep = name == "recovery-point"
                || [".snapshot", ".index", ".timeindex"]
                    .iter()
                    .any(|ext| name.ends_with(ext));
            keep.then(|| (name, e.metadata().unwrap().ino()))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn closing_an_idle_partition_writes_nothing() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    let partition_dir = run(async move {
        let (m, log) = open_fsync_log(&p).await;
        for i in 0..5 {
            append_durable(&log, batch(i * 3, 3, 1_000 + i as i64)).await;
        }
        let partition_dir = log.dir().to_path_buf();
        m.shutdown().await.unwrap();
        partition_dir
    });
    let written = checkpoint_inodes(&partition_dir);
    assert!(
        written.iter().any(|(name, _)| name == "recovery-point"),
        "{written:?}"
    );
    assert!(
        written.iter().any(|(name, _)| name.ends_with(".snapshot")),
        "{written:?}"
    );
    // Opened and closed without a write: every checkpoint stays as it was.
    let p = path.clone();
    run(async move {
        let (m, log) = open_fsync_log(&p).await;
        assert_eq!(log.log_end_offset(), 15);
        m.shutdown().await.unwrap();
    });
    assert_eq!(checkpoint_inodes(&partition_dir), written);
    // One append, and the close writes them again.
    let p = path.clone();
    run(async move {
        let (m, log) = open_fsync_log(&p).await;
        append_durable(&log, batch(15, 3, 2_000)).await;
        m.shutdown().await.unwrap();
    });
    let rewritten = checkpoint_inodes(&partition_dir);
    let recovery = |files: &[(String, u64)]| {
        files
            .iter()
            .find(|(name, _)| name == "recovery-point")
            .map(|(_, ino)| *ino)
    };
    assert_ne!(recovery(&rewritten), recovery(&written));
    assert!(
        rewritten
            .iter()
            .any(|(name, _)| name == "00000000000000000018.snapshot"),
        "{rewritten:?}"
    );
    let p = path.clone();
    run(async move {
        let (_m, log) = open_fsync_log(&p).await;
        assert_eq!(log.log_end_offset(), 18);
        assert_eq!(read_all(&log, 0).await.len(), 18);
    });
}

#[test]
fn rolls_segments_and_applies_retention_and_delete_records() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let topic = TopicConfig::default()
            .with_overrides([("segment.bytes", "4096"), ("retention.bytes", "8192")])
            .unwrap();
        // Retention at its tick: without recycling no roll runs it
        // (`tests/recycling.rs` covers the rolls that do).
        let mut engine = config(&path, FlushPolicy::Os);
        engine.segment_recycle_max = 0;
        let (_m, log) = open_log(engine, "t", topic).await;
        for i in 0..100 {
            append_durable(&log, batch(i * 10, 10, 1_000)).await;
        }
        assert!(log.segment_count() > 5, "segments {}", log.segment_count());
        let bases = log.segment_base_offsets();
        assert!(bases.windows(2).all(|w| w[0] < w[1]));
        let files: Vec<_> = std::fs::read_dir(path.join("t-0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(files.contains(&format!("{:020}.log", bases[1])));
        assert!(files.contains(&format!("{:020}.index", bases[0])));
        assert!(files.contains(&format!("{:020}.timeindex", bases[0])));
        let deleted = log.apply_retention().unwrap();
        assert!(deleted > 0);
        assert!(log.size_bytes() <= 8192 + 4096);
        let start = log.log_start_offset();
        assert_eq!(start, log.segment_base_offsets()[0]);
        assert_eq!(
            log.read(start - 1, 100, ReadMode::Copy)
                .await
                .unwrap_err()
                .error_code()
                .code(),
            1
        );
        let low = log.delete_records(start + 5).await.unwrap();
        assert_eq!(low, start + 5);
        let keys = read_all(&log, low).await;
        assert_eq!(keys.first().map(|k| k.0), Some(low));
        assert_eq!(keys.last().map(|k| k.0), Some(999));
    });
}

#[test]
fn retention_drops_segments_left_below_the_start_by_delete_records() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        // No size or time limit: only the log start offset can doom a segment.
        let topic = TopicConfig::default()
            .with_overrides([("segment.bytes", "4096")])
            .unwrap();
        let (_m, log) = open_log(config(&path, FlushPolicy::Os), "t", topic).await;
        // Fresh timestamps, so that retention.ms (7 days) dooms nothing; 100
        // records make a batch of about 3 KiB, so each batch rolls a segment.
        let now_ms = log.clock().now_ms();
        for first in [0, 100, 200] {
            append_durable(&log, batch(first, 100, now_ms)).await;
        }
        assert_eq!(log.segment_base_offsets(), vec![0, 100, 200]);
        // Everything goes, but the active segment cannot be deleted yet.
        assert_eq!(log.delete_records(300).await.unwrap(), 300);
        assert_eq!(log.segment_base_offsets(), vec![200]);
        // The next batch rolls it: now a sealed segment lies wholly below the start.
        append_durable(&log, batch(300, 100, now_ms)).await;
        assert_eq!(log.segment_base_offsets(), vec![200, 300]);
        assert_eq!(log.apply_retention().unwrap(), 1);
        assert_eq!(log.segment_base_offsets(), vec![300]);
        assert_eq!(log.log_start_offset(), 300, "the start stays put");
        let keys = read_all(&log, 300).await;
        assert_eq!(keys.first().map(|k| k.0), Some(300));
        assert_eq!(keys.last().map(|k| k.0), Some(399));
    });
}

#[test]
fn lookups_by_timestamp_follow_list_offsets() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let topic = TopicConfig::default()
            .with_overrides([("segment.bytes", "2048")])
            .unwrap();
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", topic).await;
        for i in 0..50 {
            // Records i*4..i*4+4 with timestamps 10_000 + i*100 + j.
            append_durable(&log, batch(i * 4, 4, 10_000 + i as i64 * 100)).await;
        }
        assert_eq!(log.offset_for_timestamp(-2).await.unwrap(), Some((0, -1)));
        assert_eq!(log.offset_for_timestamp(-1).await.unwrap(), Some((200, -1)));
        assert_eq!(
            log.offset_for_timestamp(-3).await.unwrap(),
            Some((199, 10_000 + 49 * 100 + 3))
        );
        assert_eq!(
            log.offset_for_timestamp(0).await.unwrap(),
            Some((0, 10_000))
        );
        assert_eq!(
            log.offset_for_timestamp(12_502).await.unwrap(),
            Some((102, 12_502))
        );
        assert_eq!(
            log.offset_for_timestamp(12_504).await.unwrap(),
            Some((104, 12_600))
        );
        assert_eq!(log.offset_for_timestamp(99_999).await.unwrap(), None);
    });
}

#[test]
fn truncation_cuts_at_batch_boundaries_and_appends_continue() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let topic = TopicConfig::default()
            .with_overrides([("segment.bytes", "2048")])
            .unwrap();
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", topic).await;
        for i in 0..40 {
            let mut b = batch(i * 5, 5, 1_000);
            log.append(&mut b, 0).unwrap();
        }
        log.flush().await.unwrap();
        log.truncate_to(102).await.unwrap();
        assert_eq!(
            log.log_end_offset(),
            100,
            "offset 102 is inside batch 100..=104"
        );
        let r = append_durable(&log, batch(100, 5, 2_000)).await;
        assert_eq!(r.base_offset, 100);
        let keys = read_all(&log, 0).await;
        assert_eq!(keys.len(), 105);
        assert!(keys.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
    });
}

#[test]
fn compaction_keeps_the_newest_value_per_key_and_offsets() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let topic = TopicConfig::default()
            .with_overrides([("segment.bytes", "1024"), ("cleanup.policy", "compact")])
            .unwrap();
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", topic).await;
        // 200 records over 10 keys, one record per batch.
        for i in 0..200usize {
            let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None);
            let key = format!("k{}", i % 10);
            let value = format!("v{i}");
            builder.push(
                0,
                1_000 + i as i64,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
                &[],
            );
            append_durable(&log, builder.build().unwrap()).await;
        }
        let stats = engine::compaction::compact(&log).await.unwrap();
        assert!(stats.records_removed > 100, "{stats:?}");
        let after = read_all(&log, 0).await;
        // Each key appears at most once in the sealed part, and the newest value of every key survives.
        for k in 0..10 {
            let newest = (0..200).filter(|i| i % 10 == k).max().unwrap() as i64;
            assert!(
                after
                    .iter()
                    .any(|(o, key)| *o == newest && *key == format!("k{k}")),
                "key {k}"
            );
        }
        assert!(after.len() < 200);
        assert!(
            after.windows(2).all(|w| w[0].0 < w[1].0),
            "offsets keep their order"
        );
    });
}

/// A shard write budget of one block (every piece of every partition then
/// waits for the one before) and a read-ahead of one block (the scans after
/// a restart take many small reads): every record is written and read back.
#[test]
fn a_tight_write_budget_and_a_small_read_ahead_keep_every_record() {
    let dir = tempdir();
    let mut engine_config = config(dir.path(), FlushPolicy::Fsync);
    engine_config.stream_min_bytes = 0;
    engine_config.io.inflight_write_bytes = 4096;
    engine_config.io.read_ahead_bytes = 4096;
    let reopen_config = engine_config.clone();
    let (partitions, producers, batches_each) = (2i32, 32usize, 8usize);
    let records = (producers * batches_each * 3) as i64;
    let mut expected: Vec<String> = (0..records).map(|i| format!("key-{i}")).collect();
    expected.sort();
    let sorted_keys = |read: Vec<(i64, String)>| {
        let mut keys: Vec<String> = read.into_iter().map(|(_, k)| k).collect();
        keys.sort();
        keys
    };
    run(async move {
        let manager = engine::LogManager::open(engine_config, 0, 1).await.unwrap();
        let mut tasks = Vec::new();
        for p in 0..partitions {
            let tp = engine::TopicPartition::new("t", p);
            let log = manager
                .create_partition(tp, [1; 16], TopicConfig::default())
                .await
                .unwrap();
            for producer in 0..producers {
                let log = log.clone();
                tasks.push(glommio::spawn_local(async move {
                    for b in 0..batches_each {
                        let first = (producer * batches_each + b) * 3;
                        let r = log.append_owned(batch(first, 3, 1_000), 0).unwrap();
                        log.wait_durable(r.last_offset).await.unwrap();
                    }
                }));
            }
        }
        for task in tasks {
            task.await;
        }
        manager.shutdown().await.unwrap();
    });
    run(async move {
        let manager = engine::LogManager::open(reopen_config, 0, 1).await.unwrap();
        for p in 0..partitions {
            let log = manager.get(&engine::TopicPartition::new("t", p)).unwrap();
            assert_eq!(log.log_end_offset(), records);
            // Mid-log too: a lookup from an index entry scans forward.
            assert_eq!(sorted_keys(read_all(&log, 0).await), expected);
            let tail = read_all(&log, records / 2 + 1).await;
            assert_eq!(tail.first().map(|(o, _)| *o), Some(records / 2 + 1));
        }
    });
}

/// `bytes` in a buffer of their own whose first byte lies `offset` bytes
/// into a 4 KiB block of memory, as a connection places an append it
/// expects at a file position with that offset (`engine::placement`).
fn placed_at(bytes: &[u8], offset: usize) -> bytes::BytesMut {
    use bytes::Buf;
    const BLOCK_BYTES: usize = 4096;
    let mut buf = bytes::BytesMut::with_capacity(bytes.len() + BLOCK_BYTES);
    let pad =
        (offset % BLOCK_BYTES + BLOCK_BYTES - buf.as_ptr() as usize % BLOCK_BYTES) % BLOCK_BYTES;
    buf.resize(pad, 0);
    buf.advance(pad);
    buf.extend_from_slice(bytes);
    assert_eq!(buf.as_ptr() as usize % BLOCK_BYTES, offset % BLOCK_BYTES);
    buf
}

/// Appends whose bytes lie in memory in line with their place in the file
/// are written from that memory (no copy into DMA buffers), and the file
/// holds exactly what was appended: read back from the file, from the
/// cache, and after a restart. Appends out of line, in between, are
/// copied as before.
#[test]
fn appends_in_line_with_the_file_are_written_without_a_copy() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let mut engine_config = config(&path, FlushPolicy::Fsync);
    engine_config.stream_min_bytes = 0;
    let topic = "placed-appends";
    let (first_config, mut first) = (engine_config.clone(), 0usize);
    let records_total = run(async move {
        let (manager, log) = open_log(first_config, topic, TopicConfig::default()).await;
        let mut appended_bytes = 0u64;
        for round in 0..12 {
            // Every third append small and out of line, moving the end off
            // any block boundary; every fourth round two appends at once,
            // so that one write takes both (and the block where they meet).
            let appends = if round % 4 == 1 { 2 } else { 1 };
            let mut last_offset = 0;
            for _ in 0..appends {
                let count = if round % 3 == 2 { 7 } else { 3_000 };
                let records = batch(first, count, 1_000);
                let position = engine::placement::next_position(topic, 0).unwrap_or(0) as usize;
                let offset = if round % 3 == 2 {
                    position + 1
                } else {
                    position
                };
                let r = log
                    .append_owned_bytes(placed_at(&records, offset), 0)
                    .unwrap();
                last_offset = r.last_offset;
                appended_bytes += records.len() as u64;
                first += count;
            }
            log.wait_durable(last_offset).await.unwrap();
        }
        let stats = log.context().fsync_stats.borrow().clone();
        assert!(
            stats.uncopied_bytes * 10 > appended_bytes * 8,
            "{} of {appended_bytes} bytes written without a copy",
            stats.uncopied_bytes
        );
        for offset in [0, 2_999, 3_000, 6_004, 20_000, 24_020, 30_020] {
            assert_copy_matches_file(&log, offset).await;
        }
        assert_keys_in_order(&read_all(&log, 0).await, first);
        manager.shutdown().await.unwrap();
        first
    });
    run(async move {
        let (_m, log) = open_log(engine_config, topic, TopicConfig::default()).await;
        assert_keys_in_order(&read_all(&log, 0).await, records_total);
    });
}

/// `keys` are `key-0` to `key-{count - 1}`, each at its own offset.
fn assert_keys_in_order(keys: &[(i64, String)], count: usize) {
    assert_eq!(keys.len(), count);
    assert!(keys
        .iter()
        .enumerate()
        .all(|(i, (o, k))| *o == i as i64 && *k == format!("key-{i}")));
}
