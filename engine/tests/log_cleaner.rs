//! The log cleaner (`engine::compaction`) on a real log: the dirty ratio and
//! compaction lags, the cleaner checkpoint, a key map smaller than the dirty
//! section, tombstones, aborted transactions, keyless records, and the
//! crash-safe swap of cleaned segments.

mod common;

use common::*;
use engine::batch::{BatchBuilder, Compression};
use engine::compaction::{self, swap};
use engine::{EngineConfig, FlushPolicy, PartitionLog, TopicConfig};
use std::collections::BTreeMap;
use std::path::Path;

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn compacted(extra: &[(&str, &str)]) -> TopicConfig {
    let mut overrides = vec![("segment.bytes", "1024"), ("cleanup.policy", "compact")];
    overrides.extend_from_slice(extra);
    TopicConfig::default().with_overrides(overrides).unwrap()
}

/// One record `key` → `value` (`None`: a tombstone) at `timestamp_ms`.
fn record(key: &str, value: Option<&str>, timestamp_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.push(
        0,
        timestamp_ms,
        Some(key.as_bytes()),
        value.map(str::as_bytes),
        &[],
    );
    builder.build().unwrap()
}

/// Every record from offset 0: (offset, key, value).
async fn read_records(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let result = log
            .read(offset, 1 << 20, engine::log::ReadMode::Copy)
            .await
            .expect("read");
        let engine::ReadData::Bytes(bytes) = result.data else {
            break;
        };
        if bytes.is_empty() {
            break;
        }
        for item in engine::batch::batches(&bytes) {
            let (header, range) = item.expect("whole batches");
            if !header.is_control() {
                for r in engine::batch::records(&bytes[range]).expect("records") {
                    let o = header.base_offset + i64::from(r.offset_delta);
                    if o >= offset {
                        let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                        out.push((
                            o,
                            s(r.key.as_deref().unwrap_or(b"")),
                            r.value.as_deref().map(s),
                        ));
                    }
                }
            }
            offset = header.last_offset() + 1;
        }
    }
    out
}

/// The newest value per key of what `log` holds, and whether each key
/// appears once only below `below`.
fn newest_per_key(records: &[(i64, String, Option<String>)]) -> BTreeMap<String, Option<String>> {
    records
        .iter()
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

fn keys_unique_below(records: &[(i64, String, Option<String>)], below: i64) -> bool {
    let mut seen = std::collections::HashSet::new();
    records
        .iter()
        .filter(|(o, _, _)| *o < below)
        .all(|(_, k, _)| seen.insert(k.clone()))
}

/// `rounds` updates of `keys` keys, one record per batch, old timestamps.
async fn write_updates(log: &PartitionLog, keys: usize, rounds: usize) {
    write_keys(log, "k", keys, rounds).await
}

/// The same with keys `<prefix><i>`.
async fn write_keys(log: &PartitionLog, prefix: &str, keys: usize, rounds: usize) {
    for round in 0..rounds {
        for k in 0..keys {
            let value = format!("v{round}");
            let key = format!("{prefix}{k}");
            append_durable(log, record(&key, Some(&value), 1_000 + round as i64)).await;
        }
    }
}

#[test]
fn the_newest_value_per_key_survives_and_the_checkpoint_advances() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", compacted(&[])).await;
        write_updates(&log, 40, 20).await;
        let before = newest_per_key(&read_records(&log).await);
        let due = compaction::candidate(&log, false).expect("all dirty: ratio 1");
        assert!(due.dirty_ratio > 0.99, "{}", due.dirty_ratio);
        let stats = compaction::clean(&log, due).await.unwrap();
        assert!(stats.records_removed > 100, "{stats:?}");
        assert_eq!(
            compaction::read_checkpoint(log.dir()),
            Some(stats.end_offset)
        );
        let after = read_records(&log).await;
        assert_eq!(
            newest_per_key(&after),
            before,
            "the newest value of every key stays"
        );
        assert!(keys_unique_below(&after, stats.end_offset));
        assert!(after.windows(2).all(|w| w[0].0 < w[1].0));
        // Nothing dirty: no pass, even forced.
        assert!(compaction::candidate(&log, true).is_none());
        // A little new data: below the 0.5 ratio, so not due unless forced.
        // Cleanable only once sealed: write until the active segment rolls
        // (the first forced candidate), a few hundred bytes against the
        // clean part's thousands.
        let mut forced = None;
        for round in 0..200 {
            assert!(round < 199, "a 1 KiB segment rolled within 200 records");
            let key = format!("k{}", round % 40);
            append_durable(&log, record(&key, Some("new"), 5_000)).await;
            forced = compaction::candidate(&log, true);
            if forced.is_some() {
                break;
            }
        }
        let forced = forced.expect("a forced candidate once the dirty data is sealed");
        assert!(forced.dirty_ratio < 0.5, "{}", forced.dirty_ratio);
        assert!(
            compaction::candidate(&log, false).is_none(),
            "not due unforced"
        );
        let counters = *log_cleaner_counters(&log);
        assert_eq!(counters.passes, 1);
        assert!(counters.bytes_read > 0 && counters.bytes_removed > 0);
    });
}

/// A read's bytes, whatever form they came in, and whether they came from
/// the batch cache (only a cache hit comes as pieces).
fn bytes_of(data: engine::ReadData) -> (Vec<u8>, bool) {
    use std::os::unix::fs::FileExt;
    match data {
        engine::ReadData::Empty => (Vec::new(), false),
        engine::ReadData::Bytes(bytes) => (bytes.to_vec(), false),
        engine::ReadData::Pieces(pieces) => (engine::cache::concat(pieces).to_vec(), true),
        engine::ReadData::File(slice) => {
            let mut bytes = vec![0; slice.length];
            slice
                .file
                .read_exact_at(&mut bytes, slice.position)
                .unwrap();
            (bytes, false)
        }
    }
}

/// The records (offset, key, value) of the batch a read at `offset` in
/// `mode` returns, its bytes, and whether it was a batch-cache hit.
async fn one_batch_at(
    log: &PartitionLog,
    offset: i64,
    mode: engine::log::ReadMode,
) -> (Vec<(i64, String, Option<String>)>, Vec<u8>, bool) {
    // One batch per read (always at least one, whatever max_bytes).
    let result = log.read(offset, 1, mode).await.expect("read");
    let (bytes, hit) = bytes_of(result.data);
    let mut records = Vec::new();
    for item in engine::batch::batches(&bytes) {
        let (header, range) = item.expect("whole batches");
        for r in engine::batch::records(&bytes[range]).expect("records") {
            let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            records.push((
                header.base_offset + i64::from(r.offset_delta),
                s(r.key.as_deref().unwrap_or(b"")),
                r.value.as_deref().map(s),
            ));
        }
    }
    (records, bytes, hit)
}

/// Every batch from offset 0, read one at a time in `mode`: the records,
/// and how many of the reads were batch-cache hits.
async fn walk(
    log: &PartitionLog,
    mode: engine::log::ReadMode,
) -> (Vec<(i64, String, Option<String>)>, usize, usize) {
    let (mut all, mut reads, mut hits) = (Vec::new(), 0, 0);
    let mut offset = 0;
    while offset < log.high_watermark() {
        let (records, bytes, hit) = one_batch_at(log, offset, mode).await;
        let last = engine::batch::batches(&bytes)
            .last()
            .expect("a batch below the high watermark")
            .unwrap()
            .0
            .last_offset();
        reads += 1;
        hits += usize::from(hit);
        all.extend(records);
        offset = last + 1;
    }
    (all, reads, hits)
}

/// The batch cache never serves what a compaction removed. Before the pass
/// every batch is read from the cache (the appends put them there); after
/// it, reads that may use the cache return what the compacted files hold,
/// byte for byte, and a read at an offset the pass removed does not bring
/// that record back.
#[test]
fn reads_after_a_compaction_return_the_compacted_bytes_not_the_cached_ones() {
    use engine::log::ReadMode::{CachedPiecesOrCopy, FileSlice};
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", compacted(&[])).await;
        write_updates(&log, 10, 20).await;
        let (before, reads, hits) = walk(&log, CachedPiecesOrCopy).await;
        assert_eq!(before.len(), 200);
        assert_eq!(hits, reads, "the cache is warm: every batch comes from it");
        let stats = compaction::compact(&log).await.unwrap();
        assert!(
            stats.segments_rewritten > 0 && stats.records_removed > 100,
            "{stats:?}"
        );
        let (after, _, _) = walk(&log, CachedPiecesOrCopy).await;
        let (on_disk, _, disk_hits) = walk(&log, FileSlice).await;
        assert_eq!(disk_hits, 0);
        assert_eq!(after, on_disk, "what the compacted files hold");
        assert_eq!(newest_per_key(&after), newest_per_key(&before));
        assert!(keys_unique_below(&after, stats.end_offset));
        let kept: std::collections::HashSet<i64> = after.iter().map(|r| r.0).collect();
        let removed: Vec<i64> = before
            .iter()
            .map(|r| r.0)
            .filter(|o| !kept.contains(o))
            .collect();
        assert_eq!(removed.len(), stats.records_removed);
        for offset in removed {
            let (records, bytes, _) = one_batch_at(&log, offset, CachedPiecesOrCopy).await;
            assert!(
                records.iter().all(|r| r.0 > offset),
                "offset {offset}, removed by the pass, read back: {records:?}"
            );
            // The same bytes as the file's batch there.
            let (_, file_bytes, _) = one_batch_at(&log, offset, FileSlice).await;
            assert_eq!(bytes, file_bytes, "offset {offset}");
        }
    });
}

fn log_cleaner_counters(log: &PartitionLog) -> std::cell::Ref<'_, compaction::CleanerStats> {
    log.cleaner_stats()
}

#[test]
fn min_compaction_lag_holds_young_segments_and_max_lag_forces_a_pass() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let dir2 = tempdir();
    let path2 = dir2.path().to_path_buf();
    run(async move {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let (_m, log) = open_log(
            config(&path, FlushPolicy::Fsync),
            "t",
            compacted(&[("min.compaction.lag.ms", "3600000")]),
        )
        .await;
        for i in 0..100 {
            append_durable(&log, record(&format!("k{}", i % 5), Some("v"), now)).await;
        }
        assert!(
            compaction::candidate(&log, true).is_none(),
            "every segment is younger than min.compaction.lag.ms"
        );
        // A ratio of 1 is never reached once something is clean, but a
        // max.compaction.lag.ms that the old data is past makes it due.
        let (_m2, log2) = open_log(
            config(&path2, FlushPolicy::Fsync),
            "u",
            compacted(&[
                ("min.cleanable.dirty.ratio", "1"),
                ("max.compaction.lag.ms", "1000"),
            ]),
        )
        .await;
        write_updates(&log2, 5, 20).await;
        compaction::compact(&log2).await.unwrap();
        write_updates(&log2, 5, 4).await;
        let due = compaction::candidate(&log2, false).expect("overdue");
        assert!(due.overdue && due.dirty_ratio < 1.0);
    });
}

#[test]
fn a_small_dedupe_buffer_cleans_up_to_what_its_map_covers() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let mut cfg: EngineConfig = config(&path, FlushPolicy::Fsync);
        // 40 slots: 36 keys a pass, for 100 keys.
        cfg.cleaner_dedupe_buffer_bytes = 40 * compaction::offset_map::SLOT_BYTES;
        let (_m, log) = open_log(cfg, "t", compacted(&[])).await;
        write_updates(&log, 100, 3).await;
        let before = newest_per_key(&read_records(&log).await);
        let first = compaction::compact(&log).await.unwrap();
        assert!(first.end_offset <= 36, "{first:?}");
        let mut passes = 1;
        while compaction::candidate(&log, true).is_some() {
            compaction::compact(&log).await.unwrap();
            passes += 1;
            assert!(passes < 50, "the cleaner makes progress");
        }
        assert!(passes > 5, "{passes}");
        let after = read_records(&log).await;
        assert_eq!(newest_per_key(&after), before);
        let end = compaction::read_checkpoint(log.dir()).unwrap();
        assert!(keys_unique_below(&after, end));
        assert!(after.len() < 150, "{}", after.len());
    });
}

#[test]
fn tombstones_stay_for_delete_retention_then_go() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let dir2 = tempdir();
    let path2 = dir2.path().to_path_buf();
    run(async move {
        // Kept for a day (the default), whatever the passes.
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", compacted(&[])).await;
        write_updates(&log, 5, 4).await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        append_durable(&log, record("k1", None, now)).await;
        write_keys(&log, "f", 20, 3).await;
        compaction::compact(&log).await.unwrap();
        write_keys(&log, "f", 20, 3).await;
        compaction::compact(&log).await.unwrap();
        let after = read_records(&log).await;
        assert_eq!(newest_per_key(&after)["k1"], None, "the tombstone stays");
        assert!(after.iter().all(|(_, k, v)| k != "k1" || v.is_none()));

        // delete.retention.ms=0 and old timestamps: the first pass keeps the
        // tombstone (it is dirty), a later one drops it.
        let (_m2, log2) = open_log(
            config(&path2, FlushPolicy::Fsync),
            "u",
            compacted(&[("delete.retention.ms", "0")]),
        )
        .await;
        write_updates(&log2, 5, 4).await;
        append_durable(&log2, record("k1", None, 2_000)).await;
        write_keys(&log2, "f", 20, 3).await;
        compaction::compact(&log2).await.unwrap();
        let first = read_records(&log2).await;
        assert!(
            first.iter().any(|(_, k, v)| k == "k1" && v.is_none()),
            "kept by the first pass"
        );
        write_keys(&log2, "f", 20, 3).await;
        compaction::compact(&log2).await.unwrap();
        let second = read_records(&log2).await;
        assert!(
            second.iter().all(|(_, k, _)| k != "k1"),
            "gone after delete.retention.ms"
        );
    });
}

/// A transactional batch of `count` records of keys `tk0..`.
fn txn_batch(producer_id: i64, sequence: i32, count: usize, value: &str) -> Vec<u8> {
    let mut builder =
        BatchBuilder::new(0, Compression::None).producer(producer_id, 0, sequence, true);
    for i in 0..count {
        let key = format!("tk{i}");
        builder.push(
            i as i32,
            1_000,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[],
        );
    }
    builder.build().unwrap()
}

#[test]
fn aborted_transactions_and_then_their_markers_are_removed() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(
            config(&path, FlushPolicy::Fsync),
            "t",
            compacted(&[("delete.retention.ms", "0")]),
        )
        .await;
        // A commits "good", B aborts "bad" over the same keys, later.
        let mut a = txn_batch(100, 0, 5, "good");
        let r = log.append(&mut a, 0).unwrap();
        log.wait_durable(r.last_offset).await.unwrap();
        let m = log.append_control(100, 0, true, 5).unwrap();
        log.wait_durable(m.last_offset).await.unwrap();
        let mut b = txn_batch(200, 0, 5, "bad");
        let r = log.append(&mut b, 0).unwrap();
        log.wait_durable(r.last_offset).await.unwrap();
        let abort = log.append_control(200, 0, false, 5).unwrap();
        log.wait_durable(abort.last_offset).await.unwrap();
        write_updates(&log, 10, 5).await;
        compaction::compact(&log).await.unwrap();
        let after = read_records(&log).await;
        let tk: Vec<_> = after
            .iter()
            .filter(|(_, k, _)| k.starts_with("tk"))
            .collect();
        assert_eq!(tk.len(), 5, "{tk:?}");
        assert!(
            tk.iter().all(|(_, _, v)| v.as_deref() == Some("good")),
            "the aborted values went and did not shadow the committed ones: {tk:?}"
        );
        // The markers: kept by the first pass, dropped once clean and past
        // delete.retention.ms — B's at once (no data left), A's never while
        // its data stays.
        write_updates(&log, 10, 5).await;
        compaction::compact(&log).await.unwrap();
        let markers = control_offsets(&log).await;
        assert!(!markers.contains(&abort.base_offset), "{markers:?}");
        assert!(markers.contains(&m.base_offset), "{markers:?}");
    });
}

/// Offsets of the control batches readable from 0.
async fn control_offsets(log: &PartitionLog) -> Vec<i64> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let result = log
            .read(offset, 1 << 20, engine::log::ReadMode::Copy)
            .await
            .unwrap();
        let engine::ReadData::Bytes(bytes) = result.data else {
            break;
        };
        if bytes.is_empty() {
            break;
        }
        for item in engine::batch::batches(&bytes) {
            let (header, _) = item.unwrap();
            if header.is_control() {
                out.push(header.base_offset);
            }
            offset = header.last_offset() + 1;
        }
    }
    out
}

#[test]
fn keyless_records_are_refused_on_compacted_topics() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let dir2 = tempdir();
    let path2 = dir2.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", compacted(&[])).await;
        let mut builder = BatchBuilder::new(0, Compression::Lz4);
        builder.push(0, 1_000, Some(b"k"), Some(b"v"), &[]);
        builder.push(1, 1_000, None, Some(b"v"), &[]);
        let mut keyless = builder.build().unwrap();
        let err = log.append(&mut keyless, 0).unwrap_err();
        assert_eq!(err.error_code(), engine::ErrorCode::InvalidRecord, "{err}");
        // Keyed records pass; on a delete topic keyless ones do too.
        log.append(&mut record("k", Some("v"), 1_000), 0).unwrap();
        let (_m2, plain) = open_log(
            config(&path2, FlushPolicy::Fsync),
            "u",
            TopicConfig::default(),
        )
        .await;
        let mut builder = BatchBuilder::new(0, Compression::None);
        builder.push(0, 1_000, None, Some(b"v"), &[]);
        plain.append(&mut builder.build().unwrap(), 0).unwrap();
    });
}

/// Copies the regular files of `from` into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Each crash point of the swap, simulated by the files it leaves: the
/// reopened log holds the old segments (a `.cleaned` file) or the new ones
/// (a `.swap` file), every record that should be there, and no leftover.
#[test]
fn a_crash_at_any_point_of_the_swap_leaves_old_or_new_segments() {
    let dir = tempdir();
    let root = dir.path().to_path_buf();
    run(async move {
        let data = root.join("a");
        let (m, log) = open_log(config(&data, FlushPolicy::Fsync), "t", compacted(&[])).await;
        write_updates(&log, 10, 20).await;
        let old_records = read_records(&log).await;
        let part = log.dir().to_path_buf();
        m.shutdown().await.unwrap();
        drop((m, log));
        let before = root.join("before");
        copy_dir(&part, &before);
        // The cleaned result, on a copy.
        let (m, log) = open_log(config(&data, FlushPolicy::Fsync), "t", compacted(&[])).await;
        compaction::compact(&log).await.unwrap();
        let new_records = read_records(&log).await;
        assert!(new_records.len() < old_records.len());
        m.shutdown().await.unwrap();
        drop((m, log));
        let after = root.join("after");
        copy_dir(&part, &after);
        let first_log = std::fs::read_dir(&before)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .min()
            .unwrap();
        let cleaned_bytes = std::fs::read(after.join(&first_log)).unwrap();
        assert_ne!(
            cleaned_bytes,
            std::fs::read(before.join(&first_log)).unwrap()
        );

        // Each case: the old dir plus the files a crash leaves, reopened.
        let stem = first_log.trim_end_matches(".log");
        let new_file = |ext: &str| std::fs::read(after.join(format!("{stem}.{ext}"))).unwrap();
        let torn = cleaned_bytes[..cleaned_bytes.len() / 2].to_vec();
        type Case = (&'static str, Vec<(&'static str, Vec<u8>)>, bool);
        let cases: Vec<Case> = vec![
            // Killed while writing the cleaned log: torn, discarded.
            ("cleaned-torn", vec![("log.cleaned", torn)], false),
            // Killed after the syncs, before any rename: discarded.
            (
                "cleaned-whole",
                vec![
                    ("log.cleaned", cleaned_bytes.clone()),
                    ("index.cleaned", new_file("index")),
                    ("timeindex.cleaned", new_file("timeindex")),
                ],
                false,
            ),
            // Killed after the indexes' renames, before the log's (the
            // commit point): discarded, the old indexes kept.
            (
                "index-swapped",
                vec![
                    ("log.cleaned", cleaned_bytes.clone()),
                    ("index.swap", new_file("index")),
                    ("timeindex.swap", new_file("timeindex")),
                ],
                false,
            ),
            // Killed after the rename to .log.swap: completed.
            (
                "swap",
                vec![
                    ("log.swap", cleaned_bytes.clone()),
                    ("index.swap", new_file("index")),
                    ("timeindex.swap", new_file("timeindex")),
                ],
                true,
            ),
            // Killed after the indexes moved over, before the log did.
            (
                "swap-indexes-done",
                vec![
                    ("log.swap", cleaned_bytes.clone()),
                    ("index", new_file("index")),
                    ("timeindex", new_file("timeindex")),
                ],
                true,
            ),
        ];
        for (name, files, completes) in cases {
            let data = root.join(name);
            let target = data.join(part.file_name().unwrap());
            copy_dir(&before, &target);
            for (ext, bytes) in &files {
                std::fs::write(target.join(format!("{stem}.{ext}")), bytes).unwrap();
            }
            let (m, log) = open_log(config(&data, FlushPolicy::Fsync), "t", compacted(&[])).await;
            let records = read_records(&log).await;
            assert_eq!(
                newest_per_key(&records),
                newest_per_key(&old_records),
                "{name}"
            );
            if completes {
                // The first segment is the cleaned one, the rest the old ones.
                let first_len = segment_records(&after.join(&first_log));
                let first_end = segment_next_offset(&before.join(&first_log));
                let mut expected: Vec<_> = new_records[..first_len].to_vec();
                expected.extend(old_records.iter().filter(|r| r.0 >= first_end).cloned());
                assert!(
                    records.len() < old_records.len(),
                    "{name}: the cleaned segment is in"
                );
                assert_eq!(records, expected, "{name}");
            } else {
                assert_eq!(records, old_records, "{name}: the old segments stand");
            }
            let leftovers: Vec<_> = std::fs::read_dir(&target)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
                .collect();
            assert!(leftovers.is_empty(), "{name}: {leftovers:?}");
            m.shutdown().await.unwrap();
        }
        // The recovery on its own: nothing to do on a clean dir.
        assert_eq!(swap::recover(&after).unwrap(), (0, 0));
    });
}

/// Records in a segment file (its valid batches).
fn segment_records(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    engine::batch::batches(&bytes)
        .map_while(Result::ok)
        .map(|(h, r)| {
            engine::batch::records(&bytes[r])
                .map(|v| v.len())
                .unwrap_or(0)
                * usize::from(!h.is_control())
        })
        .sum()
}

/// One past the last offset of a segment file.
fn segment_next_offset(path: &Path) -> i64 {
    let bytes = std::fs::read(path).unwrap();
    engine::batch::batches(&bytes)
        .map_while(Result::ok)
        .map(|(h, _)| h.last_offset() + 1)
        .max()
        .unwrap()
}

/// Throughput of one cleaning pass (the file work, on this thread) over a
/// keyed log of `RILL_CLEANER_BENCH_MB` MiB (default 1024) in 100 MiB
/// segments under `RILL_CLEANER_BENCH_DIR`: 1 KiB values, each key written
/// 4 times. Prints MB/s cleaned (bytes read by the pass over its time).
/// `RILL_CLEANER_BENCH_DIR=/path cargo test --release -p rill-engine --test
/// log_cleaner -- --ignored --nocapture cleaner_throughput`
#[test]
#[ignore = "a benchmark: run by hand on a release build"]
fn cleaner_throughput() {
    use std::io::Write;
    let root = std::path::PathBuf::from(
        std::env::var("RILL_CLEANER_BENCH_DIR").expect("RILL_CLEANER_BENCH_DIR"),
    );
    let total_mb: u64 = std::env::var("RILL_CLEANER_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    std::fs::create_dir_all(&root).unwrap();
    let segment_bytes: u64 = 100 << 20;
    let value = vec![b'v'; 1024];
    let records_per_batch = 16;
    let total_records = (total_mb << 20) / 1100;
    let keys = total_records / 4;
    let mut segments = Vec::new();
    let mut offset = 0i64;
    let written = std::time::Instant::now();
    while (offset as u64) < total_records {
        let base = offset;
        let path = root.join(engine::segment::file_name(base, "log"));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut size = 0u64;
        while size < segment_bytes && (offset as u64) < total_records {
            let mut builder = BatchBuilder::new(offset, Compression::None);
            for i in 0..records_per_batch {
                let key = format!("key-{}", (offset as u64 + i as u64) % keys);
                builder.push(i, 1_000, Some(key.as_bytes()), Some(&value), &[]);
            }
            let batch = builder.build().unwrap();
            file.write_all(&batch).unwrap();
            size += batch.len() as u64;
            offset += i64::from(records_per_batch);
        }
        file.flush().unwrap();
        segments.push(compaction::rewrite::SegmentFile {
            base_offset: base,
            path,
            size_bytes: size,
            next_offset: offset,
            max_timestamp_ms: 1_000,
        });
    }
    let log_bytes: u64 = segments.iter().map(|s| s.size_bytes).sum();
    eprintln!(
        "wrote {} MB in {} segments ({} records, {} keys) in {:?}",
        log_bytes >> 20,
        segments.len(),
        offset,
        keys,
        written.elapsed()
    );
    let job = compaction::rewrite::Job {
        segments,
        first_dirty: 0,
        map_bytes: 128 << 20,
        aborted: Vec::new(),
        now_ms: 2_000,
        delete_retention_ms: 86_400_000,
        index_interval_bytes: 4096,
        throttle: compaction::rewrite::Throttle::new(None),
    };
    let started = std::time::Instant::now();
    let outcome = compaction::rewrite::run(&job).unwrap();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "pass: read {} MB, rewrote {} MB into {} MB, removed {} records, map end {} in {:.2} s: {:.0} MB/s cleaned ({:.0} MB/s of log)",
        outcome.bytes_read >> 20,
        outcome.bytes_before >> 20,
        outcome.bytes_after >> 20,
        outcome.records_removed,
        outcome.end_offset,
        secs,
        outcome.bytes_read as f64 / 1e6 / secs,
        log_bytes as f64 / 1e6 / secs,
    );
    assert!(outcome.records_removed > 0);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_pass_whose_rewrites_would_take_the_reserve_waits_for_room() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", compacted(&[])).await;
        write_updates(&log, 40, 20).await;
        let before = read_records(&log).await;
        let section_bytes: u64 = log.size_bytes();
        let space = log.context().space_of(log.log_dir_index());
        // 1 KiB of room above an 8 KiB reserve: far less than the section.
        let reserve = 8 << 10;
        space.update(reserve + 1024, 1 << 40, Some(reserve));
        assert!(section_bytes > 1024, "{section_bytes}");
        // No await between the update and the check in `clean`: the shard's
        // periodic statvfs refresh cannot restore the room meanwhile.
        let due = compaction::candidate(&log, false).expect("dirty");
        let stats = compaction::clean(&log, due).await.unwrap();
        assert_eq!(
            space.free_bytes(),
            reserve + 1024,
            "a put-off pass charges nothing"
        );
        assert_eq!(stats.records_removed, 0, "{stats:?}");
        assert_eq!(read_records(&log).await, before, "nothing rewritten");
        assert_eq!(compaction::read_checkpoint(log.dir()), None);
        assert_eq!(log_cleaner_counters(&log).passes, 0);
        // Room again: the pass runs.
        space.update(reserve + (1 << 30), 1 << 40, Some(reserve));
        let due = compaction::candidate(&log, false).expect("still dirty");
        let stats = compaction::clean(&log, due).await.unwrap();
        assert!(stats.records_removed > 100, "{stats:?}");
        assert_eq!(log_cleaner_counters(&log).passes, 1);
    });
}
