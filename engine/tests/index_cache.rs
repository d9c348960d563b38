//! Sealed segments' indexes through the bounded index cache: a cache so
//! small that every lookup evicts answers exactly what a large one does and
//! what a model of the appended records says; the sparse time index lands
//! lookups by time right; index files lost or garbled while the log runs are
//! rebuilt on demand, never trusted.

mod common;

use common::*;
use engine::log::ReadMode;
use engine::{FlushPolicy, ReadData, TopicConfig};
use std::path::Path;

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

const BATCHES: usize = 300;
const PER_BATCH: usize = 5;

/// Base timestamp of batch `k`: rising, with every seventh batch far in the
/// past and every eleventh ahead, so max timestamps are not monotonic in
/// offset order.
fn batch_timestamp(k: usize) -> i64 {
    let base = 100_000 + k as i64 * 50;
    if k % 7 == 3 {
        base - 20_000
    } else if k % 11 == 5 {
        base + 3_000
    } else {
        base
    }
}

/// `(offset, timestamp)` of every record appended.
fn model() -> Vec<(i64, i64)> {
    (0..BATCHES)
        .flat_map(|k| {
            (0..PER_BATCH).map(move |i| ((k * PER_BATCH + i) as i64, batch_timestamp(k) + i as i64))
        })
        .collect()
}

/// The first key read from each probed offset, and each lookup by time's answer.
type Answers = (Vec<String>, Vec<Option<(i64, i64)>>);

fn topic() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([("segment.bytes", "2048"), ("index.interval.bytes", "400")])
        .unwrap()
}

/// Writes the log (many small segments) and closes it.
fn write_log(path: &Path) {
    let path = path.to_path_buf();
    run(async move {
        let (manager, log) = open_log(config(&path, FlushPolicy::Fsync), "t", topic()).await;
        for k in 0..BATCHES {
            append_durable(&log, batch(k * PER_BATCH, PER_BATCH, batch_timestamp(k))).await;
        }
        manager.shutdown().await.unwrap();
    });
}

/// What the reads and lookups answer: the first key read from every offset,
/// and the answer of a lookup by time for each target.
async fn answers(log: &engine::PartitionLog, targets: &[i64]) -> Answers {
    let end = (BATCHES * PER_BATCH) as i64;
    let mut first_keys = Vec::new();
    // Backwards and strided, so the cache keeps missing when it is small.
    for offset in (0..end).rev().step_by(3) {
        let mut keys = read_all_once(log, offset).await;
        first_keys.push(keys.swap_remove(0));
    }
    let mut found = Vec::new();
    for &target in targets {
        found.push(log.offset_for_timestamp(target).await.unwrap());
    }
    (first_keys, found)
}

/// The key of the record at `offset` (first read from it, file path).
async fn read_all_once(log: &engine::PartitionLog, offset: i64) -> Vec<String> {
    let result = log.read(offset, 1 << 10, ReadMode::Copy).await.unwrap();
    let ReadData::Bytes(bytes) = result.data else {
        panic!("no data at {offset}");
    };
    let mut keys = Vec::new();
    for item in engine::batch::batches(&bytes) {
        let (header, range) = item.unwrap();
        for record in engine::batch::records(&bytes[range]).unwrap() {
            if header.base_offset + i64::from(record.offset_delta) >= offset {
                keys.push(String::from_utf8(record.key.unwrap().to_vec()).unwrap());
            }
        }
    }
    keys
}

fn targets() -> Vec<i64> {
    let mut targets: Vec<i64> = (70_000..120_000).step_by(37).collect();
    targets.extend([0, 80_000, 100_000, 100_004, 114_950, 200_000]);
    targets
}

fn expected(targets: &[i64]) -> Answers {
    let records = model();
    let end = records.len() as i64;
    let keys = (0..end)
        .rev()
        .step_by(3)
        .map(|o| format!("key-{o}"))
        .collect();
    let found = targets
        .iter()
        .map(|&t| records.iter().find(|&&(_, ts)| ts >= t).copied())
        .collect();
    (keys, found)
}

/// Opens the written log with an index cache of `cap` bytes and returns
/// its answers and the cache's stats.
fn answers_with_cap(path: &Path, cap: u64) -> (Answers, engine::index_cache::IndexCacheStats) {
    let path = path.to_path_buf();
    run(async move {
        let mut config = config(&path, FlushPolicy::Fsync);
        config.index_cache_bytes = cap;
        config.batch_cache_bytes = 0;
        let (manager, log) = open_log(config, "t", topic()).await;
        assert!(log.segment_count() > 20, "many sealed segments");
        let got = answers(&log, &targets()).await;
        let stats = manager.context().index_cache.stats();
        manager.shutdown().await.unwrap();
        (got, stats)
    })
}

#[test]
fn a_tiny_index_cache_answers_what_a_large_one_does() {
    let dir = tempdir();
    write_log(dir.path());
    let want = expected(&targets());
    let (big, big_stats) = answers_with_cap(dir.path(), 64 << 20);
    assert_eq!(big, want, "large cache against the model");
    assert_eq!(big_stats.evictions, 0);
    assert!(big_stats.hits > 0 && big_stats.misses > 0);
    // Room for a couple of segments' indexes: most lookups evict.
    let (tiny, tiny_stats) = answers_with_cap(dir.path(), 500);
    assert_eq!(tiny, want, "tiny cache against the model");
    assert!(tiny_stats.evictions > 20, "{tiny_stats:?}");
    assert!(
        tiny_stats.bytes <= 500 && tiny_stats.entries > 0,
        "{tiny_stats:?}"
    );
    // A zero cap keeps nothing and still answers.
    let (none, none_stats) = answers_with_cap(dir.path(), 0);
    assert_eq!(none, want, "no cache against the model");
    assert_eq!(none_stats.bytes, 0);
    assert_eq!(none_stats.hits, 0);
}

#[test]
fn the_time_index_is_sparse() {
    let dir = tempdir();
    write_log(dir.path());
    let part = dir.path().join("t-0");
    let mut checked = 0;
    for entry in std::fs::read_dir(&part).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "timeindex") {
            let log_bytes = std::fs::metadata(path.with_extension("log")).unwrap().len();
            let entries = std::fs::metadata(&path).unwrap().len() / 12;
            // One per 400 bytes of log at most, plus the sealing entry.
            assert!(
                entries <= log_bytes / 400 + 1,
                "{path:?}: {entries} entries for {log_bytes} bytes"
            );
            checked += 1;
        }
    }
    assert!(checked > 20);
}

#[test]
fn lost_or_garbled_index_files_are_rebuilt_on_demand() {
    let dir = tempdir();
    write_log(dir.path());
    let path = dir.path().to_path_buf();
    let want = expected(&targets());
    run(async move {
        let mut config = config(&path, FlushPolicy::Fsync);
        config.index_cache_bytes = 0;
        config.batch_cache_bytes = 0;
        let (manager, log) = open_log(config, "t", topic()).await;
        // After the open checked them: delete, truncate, or garble the
        // index files of the sealed segments.
        let part = path.join("t-0");
        let mut files: Vec<_> = std::fs::read_dir(&part)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == "index" || e == "timeindex")
            })
            .collect();
        files.sort();
        for (i, file) in files.iter().enumerate() {
            match i % 4 {
                0 => std::fs::remove_file(file).unwrap(),
                1 => std::fs::write(file, [0xAB; 13]).unwrap(),
                // Entries past the end of the segment.
                2 => std::fs::write(file, [0x7F; 24]).unwrap(),
                _ => {}
            }
        }
        let got = answers(&log, &targets()).await;
        assert_eq!(got, want);
        let stats = manager.context().index_cache.stats();
        assert!(stats.rebuilds > 0, "{stats:?}");
        manager.shutdown().await.unwrap();
    });
}

#[test]
fn truncating_into_a_sealed_segment_brings_its_indexes_back_and_keeps_lookups_right() {
    let dir = tempdir();
    write_log(dir.path());
    let path = dir.path().to_path_buf();
    // Cut at batch 159: the largest timestamp left is batch 148's (ahead).
    let cut = (159 * PER_BATCH) as i64;
    let kept: Vec<(i64, i64)> = model().into_iter().filter(|&(o, _)| o < cut).collect();
    run(async move {
        let mut config = config(&path, FlushPolicy::Fsync);
        config.index_cache_bytes = 500;
        config.batch_cache_bytes = 0;
        let (manager, log) = open_log(config, "t", topic()).await;
        // Fill the cache with the segment about to be cut.
        assert_eq!(
            log.offset_for_timestamp(batch_timestamp(159))
                .await
                .unwrap(),
            Some((cut, batch_timestamp(159)))
        );
        assert!(log.truncate_to(cut + 2).await.unwrap());
        assert_eq!(log.log_end_offset(), cut);
        let max = kept
            .iter()
            .fold(kept[0], |best, &r| if r.1 > best.1 { r } else { best });
        assert_eq!(log.offset_for_timestamp(-3).await.unwrap(), Some(max));
        for target in targets() {
            let want = kept.iter().find(|&&(_, ts)| ts >= target).copied();
            assert_eq!(
                log.offset_for_timestamp(target).await.unwrap(),
                want,
                "target {target}"
            );
        }
        // Appends go on in the cut segment, now the active one.
        for k in 159..170 {
            append_durable(&log, batch(k * PER_BATCH, PER_BATCH, batch_timestamp(k))).await;
        }
        for offset in (0..170 * PER_BATCH as i64).step_by(7) {
            assert_eq!(
                read_all_once(&log, offset).await[0],
                format!("key-{offset}")
            );
        }
        manager.shutdown().await.unwrap();
    });
}
