//! The remote store over the `file://` backend, in a temp dir: uploads
//! (single and multipart), whole and ranged reads through the cache, list,
//! delete and their errors. Every future is awaited with
//! `futures::executor::block_on`, on threads with no tokio runtime: the
//! shards that will call this run glommio.

mod common;

use bytes::Bytes;
use common::pattern;
use futures::executor::block_on;
use remote_storage::{RemoteError, RemoteStorageConfig, RemoteStore};
use std::path::Path;

const KIB: u64 = 1024;

/// A store in `dir/remote` with small sizes: 64 KiB parts, 16 KiB chunks,
/// a 64 KiB cache.
fn open_store(dir: &Path) -> RemoteStore {
    let mut config =
        RemoteStorageConfig::from_url(&format!("file://{}", dir.join("remote").display()));
    config.part_bytes = 64 * KIB;
    config.chunk_bytes = 16 * KIB;
    config.cache_bytes = 64 * KIB;
    RemoteStore::open(config).unwrap()
}

fn assert_no_tokio_here() {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "the caller must not need a tokio runtime"
    );
}

#[test]
fn a_multipart_upload_reads_back_whole_and_by_range() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    // Five parts of 64 KiB and a 17-byte tail.
    let content = pattern((5 * 64 * KIB + 17) as usize, 1);
    let local = dir.path().join("00000000000000000000.log");
    std::fs::write(&local, &content).unwrap();
    block_on(async {
        assert_no_tokio_here();
        let key = "orders-0/00000000000000000000.log".to_string();
        let uploaded = store.put_file(local.clone(), key.clone()).await.unwrap();
        assert_eq!(uploaded, content.len() as u64);
        assert_eq!(store.get(key.clone()).await.unwrap(), content);
        let length = content.len() as u64;
        for range in [
            0..1,
            0..16 * KIB,
            5..16 * KIB + 5,
            16 * KIB - 1..48 * KIB + 1,
            length - 17..length,
            100..length,
            0..length,
        ] {
            let read = store.get_range(key.clone(), range.clone()).await.unwrap();
            let expected = &content[range.start as usize..range.end as usize];
            assert!(read == expected, "range {range:?}");
        }
        // Only the object is listed: no staging file of the upload.
        assert_eq!(
            store.list(String::new()).await.unwrap(),
            vec![(key, length)]
        );
    });
    let stats = store.stats();
    assert_eq!(stats.objects_uploaded, 1);
    assert_eq!(stats.bytes_uploaded, content.len() as u64);
    assert!(stats.cache_hits > 0, "{stats:?}");
    assert!(stats.cache_bytes <= 64 * KIB, "{stats:?}");
    assert!(stats.fetch_latency_us_count > 0);
    assert_eq!(stats.put_errors + stats.get_errors, 0, "{stats:?}");
}

#[test]
fn a_failed_multipart_upload_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let mut config = RemoteStorageConfig::from_url(&format!("file://{}", remote.display()));
    config.part_bytes = 16;
    let store = RemoteStore::open(config).unwrap();
    // A directory opens, has a length (4 KiB on ext4, a few hundred bytes
    // on tmpfs or btrfs with these entries: several 16-byte parts) and fails
    // at the first read: the upload starts, then fails and is aborted.
    let unreadable = dir.path().join("not-a-file");
    std::fs::create_dir(&unreadable).unwrap();
    for entry in 0..4 {
        let name = format!("an-entry-with-a-long-name-to-give-the-directory-a-length-{entry}");
        std::fs::write(unreadable.join(name), b"x").unwrap();
    }
    assert!(std::fs::metadata(&unreadable).unwrap().len() > 16);
    block_on(async {
        let answer = store.put_file(unreadable, "t/0/seg.log".into()).await;
        assert!(matches!(answer, Err(RemoteError::Io { .. })), "{answer:?}");
        assert!(matches!(
            store.get("t/0/seg.log".into()).await,
            Err(RemoteError::NotFound { .. })
        ));
        assert!(store.list(String::new()).await.unwrap().is_empty());
    });
    // Not even a staging file of the upload is left.
    let mut left = Vec::new();
    let mut dirs = vec![remote];
    while let Some(next) = dirs.pop() {
        for entry in std::fs::read_dir(next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                left.push(path);
            }
        }
    }
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(store.stats().put_errors, 1);
    assert_eq!(store.stats().objects_uploaded, 0);
}

#[test]
fn a_small_file_goes_up_in_one_put() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let content = pattern(1000, 2);
    let local = dir.path().join("small.index");
    std::fs::write(&local, &content).unwrap();
    let empty = dir.path().join("empty.index");
    std::fs::write(&empty, b"").unwrap();
    block_on(async {
        assert_eq!(
            store.put_file(local, "t/small.index".into()).await.unwrap(),
            1000
        );
        assert_eq!(store.get("t/small.index".into()).await.unwrap(), content);
        assert_eq!(
            store.put_file(empty, "t/empty.index".into()).await.unwrap(),
            0
        );
        assert!(store.get("t/empty.index".into()).await.unwrap().is_empty());
    });
}

#[test]
fn list_delete_and_delete_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    block_on(async {
        for (key, length) in [
            ("t/0/a", 3),
            ("t/0/b", 4),
            ("t/1/a", 5),
            ("t/10/a", 6),
            ("u", 7),
        ] {
            let bytes = Bytes::from(pattern(length, 3));
            store.put_bytes(key.to_string(), bytes).await.unwrap();
        }
        let listed = store.list("t/0".into()).await.unwrap();
        assert_eq!(
            listed,
            vec![("t/0/a".to_string(), 3), ("t/0/b".to_string(), 4)]
        );
        // Prefixes match whole segments: t/1 is not a prefix of t/10/a.
        assert_eq!(store.list("t/1/".into()).await.unwrap().len(), 1);
        assert_eq!(store.list(String::new()).await.unwrap().len(), 5);

        // A missing key is not an error.
        let keys = vec!["t/0/a".to_string(), "t/0/never".to_string()];
        store.delete(keys.clone()).await.unwrap();
        store.delete(keys).await.unwrap();
        assert_eq!(store.list("t/0".into()).await.unwrap().len(), 1);

        assert_eq!(store.delete_prefix("t".into()).await.unwrap(), 3);
        let left = store.list(String::new()).await.unwrap();
        assert_eq!(left, vec![("u".to_string(), 7)]);
        assert_eq!(store.delete_prefix("t".into()).await.unwrap(), 0);
        assert!(matches!(
            store.delete_prefix(String::new()).await,
            Err(RemoteError::InvalidKey { .. })
        ));
        assert_eq!(store.list(String::new()).await.unwrap().len(), 1);
    });
}

#[test]
fn missing_keys_and_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    block_on(async {
        assert!(matches!(
            store.get("t/0/nothing".into()).await,
            Err(RemoteError::NotFound { key }) if key == "t/0/nothing"
        ));
        assert!(matches!(
            store.get_range("t/0/nothing".into(), 0..10).await,
            Err(RemoteError::NotFound { .. })
        ));
        for bad in ["", "a//b", "../etc/passwd"] {
            assert!(
                matches!(
                    store.get(bad.into()).await,
                    Err(RemoteError::InvalidKey { .. })
                ),
                "{bad:?}"
            );
        }
    });
    // Missing is an answer, not a store failure.
    assert_eq!(store.stats().get_errors, 0);
}

#[test]
fn a_range_past_the_end_is_an_invalid_range() {
    let dir = tempfile::tempdir().unwrap();
    for cache_bytes in [64 * KIB, 0] {
        let mut config = RemoteStorageConfig::from_url(&format!("file://{}", dir.path().display()));
        config.chunk_bytes = 16 * KIB;
        config.cache_bytes = cache_bytes;
        let store = RemoteStore::open(config).unwrap();
        block_on(async {
            let content = Bytes::from(pattern((32 * KIB) as usize, 4));
            store.put_bytes("k".into(), content.clone()).await.unwrap();
            for range in [
                32 * KIB - 10..32 * KIB + 10,
                32 * KIB..32 * KIB + 1,
                40 * KIB..50 * KIB,
            ] {
                let read = store.get_range("k".into(), range.clone()).await;
                assert!(
                    matches!(
                        read,
                        Err(RemoteError::InvalidRange { object_bytes, .. }) if object_bytes == 32 * KIB
                    ),
                    "cache {cache_bytes}, range {range:?}: {read:?}"
                );
            }
            // The range that ends exactly at the end is fine, and an empty one.
            let tail = store
                .get_range("k".into(), 32 * KIB - 10..32 * KIB)
                .await
                .unwrap();
            assert_eq!(tail, content.slice((32 * KIB - 10) as usize..));
            assert!(store.get_range("k".into(), 5..5).await.unwrap().is_empty());
        });
    }
}

#[test]
fn the_cache_serves_repeats_and_forgets_overwritten_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    block_on(async {
        let first = Bytes::from(pattern((40 * KIB) as usize, 5));
        store.put_bytes("k".into(), first.clone()).await.unwrap();
        let range = 10 * KIB..30 * KIB;
        let read = store.get_range("k".into(), range.clone()).await.unwrap();
        assert_eq!(read, first.slice(10 * 1024..30 * 1024));
        let fetched = store.stats().bytes_fetched;
        let hits = store.stats().cache_hits;
        let again = store.get_range("k".into(), range.clone()).await.unwrap();
        assert_eq!(again, read);
        assert_eq!(
            store.stats().bytes_fetched,
            fetched,
            "served from the cache"
        );
        assert_eq!(store.stats().cache_hits, hits + 2, "two chunks, both hits");

        let second = Bytes::from(pattern((40 * KIB) as usize, 6));
        store.put_bytes("k".into(), second.clone()).await.unwrap();
        let after = store.get_range("k".into(), range).await.unwrap();
        assert_eq!(after, second.slice(10 * 1024..30 * 1024));
    });
}

#[test]
fn the_cache_stays_under_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    block_on(async {
        let content = Bytes::from(pattern((256 * KIB) as usize, 7));
        store
            .put_bytes("big".into(), content.clone())
            .await
            .unwrap();
        for start in (0..256 * KIB).step_by((8 * KIB) as usize) {
            let read = store
                .get_range("big".into(), start..start + 8 * KIB)
                .await
                .unwrap();
            assert_eq!(
                read,
                content.slice(start as usize..(start + 8 * KIB) as usize)
            );
            assert!(store.stats().cache_bytes <= 64 * KIB);
        }
        // Read forward in 8 KiB steps of 16 KiB chunks: one miss then one hit each.
        let stats = store.stats();
        assert_eq!(
            (stats.cache_misses, stats.cache_hits),
            (16, 16),
            "{stats:?}"
        );
        assert_eq!(stats.cache_bytes, 64 * KIB);
    });
}

#[test]
fn handles_work_from_many_threads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let content = Bytes::from(pattern((128 * KIB) as usize, 8));
    block_on(store.put_bytes("shared".into(), content.clone())).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let store = store.clone();
            let content = content.clone();
            std::thread::spawn(move || {
                for step in 0..20u64 {
                    let start = (thread * 7919 + step * 3571) % (120 * KIB);
                    let range = start..start + 8 * KIB;
                    let read = block_on(store.get_range("shared".into(), range.clone())).unwrap();
                    assert_eq!(
                        read,
                        content.slice(range.start as usize..range.end as usize)
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn open_refuses_configurations_that_cannot_work() {
    for url in ["bucket/prefix", "s3://", "file://relative", "ftp://host/x"] {
        assert!(
            matches!(
                RemoteStore::open(RemoteStorageConfig::from_url(url)),
                Err(RemoteError::Config { .. })
            ),
            "{url}"
        );
    }
    let mut small_parts = RemoteStorageConfig::from_url("s3://bucket/prefix");
    small_parts.part_bytes = 1024 * KIB;
    assert!(matches!(
        RemoteStore::open(small_parts),
        Err(RemoteError::Config { .. })
    ));
}

/// The names of this process's threads, from /proc.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn the_store_runs_on_a_thread_named_rill_remote() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    block_on(store.put_bytes("k".into(), Bytes::from_static(b"v"))).unwrap();
    let names = thread_names();
    assert!(names.iter().any(|name| name == "rill-remote"), "{names:?}");
}
