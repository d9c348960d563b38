//! What every backend test checks, whatever server it runs against: a
//! multipart upload, whole and ranged reads, a listing, the chunk cache,
//! reads past the end, and a prefix deleted.

// Each test binary uses part of this module (file_backend only `pattern`).
#![allow(dead_code)]

use bytes::Bytes;
use futures::executor::block_on;
use remote_storage::{RemoteError, RemoteStore};

pub const MIB: u64 = 1024 * 1024;

/// `length` bytes that differ from one offset to the next (xorshift).
pub fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The segment `upload_and_read` put up, under the store's prefix.
pub struct Uploaded {
    pub log_key: String,
    pub content: Vec<u8>,
}

/// Uploads a 12 MiB segment (parts of 5, 5 and 2 MiB and a tail, with a
/// 5 MiB part size) and a 4 KiB index, and reads both back whole, by
/// ranges that cross chunk and part edges, and by listing.
pub fn upload_and_read(store: &RemoteStore) -> Uploaded {
    let dir = tempfile::tempdir().unwrap();
    let content = pattern((12 * MIB + 4321) as usize, 11);
    let length = content.len() as u64;
    let local = dir.path().join("segment.log");
    std::fs::write(&local, &content).unwrap();
    let log_key = "orders-0/00000000000000000000.log".to_string();
    let index_key = "orders-0/00000000000000000000.index".to_string();
    block_on(async {
        assert_eq!(
            store.put_file(local, log_key.clone()).await.unwrap(),
            length
        );
        let index = Bytes::from(pattern(4096, 12));
        store
            .put_bytes(index_key.clone(), index.clone())
            .await
            .unwrap();
        assert_eq!(store.get(index_key.clone()).await.unwrap(), index);
        assert_eq!(store.get(log_key.clone()).await.unwrap(), content);
        for range in [
            0..100,
            MIB - 10..MIB + 10,
            5 * MIB - 1..10 * MIB + 1,
            length - 4321..length,
        ] {
            let read = store
                .get_range(log_key.clone(), range.clone())
                .await
                .unwrap();
            assert!(
                read == content[range.start as usize..range.end as usize],
                "{range:?}"
            );
        }
        let listed = store.list("orders-0".into()).await.unwrap();
        assert_eq!(
            listed,
            vec![(index_key.clone(), 4096), (log_key.clone(), length)]
        );
    });
    Uploaded { log_key, content }
}

/// After `upload_and_read` on a store with 1 MiB chunks and 4 MiB of
/// cache: the last chunk read is served from the cache, reads past the end
/// fail as `InvalidRange`, and the prefix deleted leaves nothing, the
/// cached chunks included.
pub fn cache_bounds_and_delete(store: &RemoteStore, uploaded: &Uploaded) {
    let log_key = uploaded.log_key.clone();
    let length = uploaded.content.len() as u64;
    let before = store.stats();
    assert!(before.cache_bytes <= 4 * MIB, "{before:?}");
    block_on(async {
        let tail = store
            .get_range(log_key.clone(), length - 100..length)
            .await
            .unwrap();
        assert!(tail == uploaded.content[(length - 100) as usize..]);
    });
    let after = store.stats();
    assert_eq!(
        after.cache_hits,
        before.cache_hits + 1,
        "the last chunk is cached"
    );
    assert_eq!(after.bytes_fetched, before.bytes_fetched, "nothing fetched");

    block_on(async {
        // Past the end: the cached short last chunk tells for the first two;
        // chunk 13 starts past the end, the store refuses the range, and a
        // HEAD tells the object's length.
        for range in [
            length - 10..length + 10,
            length..length + 1,
            13 * MIB..13 * MIB + 1,
        ] {
            let read = store.get_range(log_key.clone(), range.clone()).await;
            assert!(
                matches!(read, Err(RemoteError::InvalidRange { object_bytes, .. }) if object_bytes == length),
                "{range:?}: {read:?}"
            );
        }
        assert_eq!(store.delete_prefix("orders-0".into()).await.unwrap(), 2);
        assert!(store.list(String::new()).await.unwrap().is_empty());
        assert!(matches!(
            store.get(log_key.clone()).await,
            Err(RemoteError::NotFound { .. })
        ));
        // The deleted object's chunks went with it.
        assert!(matches!(
            store.get_range(log_key.clone(), 0..100).await,
            Err(RemoteError::NotFound { .. })
        ));
    });
    let stats = store.stats();
    assert_eq!(stats.objects_uploaded, 2);
    assert_eq!(stats.bytes_uploaded, length + 4096);
    assert_eq!(stats.put_errors + stats.get_errors + stats.delete_errors, 0);
}
