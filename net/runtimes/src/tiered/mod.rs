//! Tiered storage (KIP-405) on a shard: Kafka's remote log manager, as
//! tasks on the shard that owns each partition.
//!
//! - The store is the `remote-storage` crate's: one thread with its own
//!   tokio runtime for the whole broker, reached through futures any
//!   executor can await, so no shard blocks or runs tokio.
//! - The remote log metadata is in the metadata quorum (each segment's
//!   copy and delete states, committed by the controller, fenced by leader
//!   epoch): every broker's image knows what is uploaded.
//! - [`manager`]: every `remote.log.manager.task.interval.ms`, tells each
//!   local log how far its remote copy reaches (so local retention deletes
//!   only what is uploaded), and on leaders uploads sealed segments
//!   ([`upload`]) and expires remote ones ([`expire`]).
//! - [`read`]: a consumer's fetch below the local log, from the store.
//! - [`crate::remote_keys`]: the objects' names.
//!
//! Shard-local but for the store handle, which every shard clones.

pub mod expire;
pub mod manager;
pub mod quota;
pub mod read;
pub mod upload;

use crate::remote_keys::SegmentKeys;
use bytes::Bytes;
use engine::{ErrorCode, TopicPartition};
use quota::RemoteQuotas;
use remote_storage::{RemoteError, RemoteStore};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// Offset indexes of remote segments kept per shard (each up to
/// `segment.index.bytes`, 10 MiB by default; most far smaller).
const INDEX_CACHE_ENTRIES: usize = 32;

/// This shard's tiered-storage state.
#[derive(Default)]
pub struct TieredRuntime {
    /// The object store; `None` when tiered storage is off.
    pub store: Option<RemoteStore>,
    /// The broker's remote copy and fetch quotas (shared by every shard).
    pub quotas: Arc<RemoteQuotas>,
    /// Recently used remote offset indexes, newest last.
    indexes: RefCell<VecDeque<([u8; 16], Bytes)>>,
    /// Partitions whose last round failed: (wait, next try at, ms).
    backoff: RefCell<HashMap<TopicPartition, (u64, i64)>>,
    /// What this shard did, for `/metrics`.
    pub counters: TieredCounters,
}

/// Counters of one shard's remote log work.
#[derive(Default)]
pub struct TieredCounters {
    /// Segments uploaded and committed.
    pub segments_uploaded: Cell<u64>,
    /// Log bytes of those segments.
    pub bytes_uploaded: Cell<u64>,
    /// Uploads or deletions that failed (retried later).
    pub task_errors: Cell<u64>,
    /// Remote segments deleted (retention, abandoned copies, topics).
    pub segments_deleted: Cell<u64>,
    /// Fetches served from the store.
    pub remote_reads: Cell<u64>,
    /// Bytes they returned.
    pub remote_read_bytes: Cell<u64>,
    /// Their total time, in microseconds.
    pub remote_read_micros: Cell<u64>,
    /// Fetches the store could not serve.
    pub remote_read_errors: Cell<u64>,
    /// Upload rounds held back by the copy quota.
    pub copy_throttled: Cell<u64>,
    /// Remote reads answered empty (fetch quota, `remote.fetch.max.wait.ms`).
    pub fetch_throttled: Cell<u64>,
    /// Sealed segments waiting for upload on the partitions led here, and
    /// their bytes, at the last task round.
    pub upload_lag_segments: Cell<u64>,
    /// See `upload_lag_segments`.
    pub upload_lag_bytes: Cell<u64>,
}

/// The Kafka error a store failure answers a fetch with: retriable, as
/// Kafka's remote fetch failures are.
fn fetch_error(error: &RemoteError) -> ErrorCode {
    tracing::warn!(%error, "remote read failed");
    ErrorCode::KafkaStorageError
}

impl TieredRuntime {
    /// The runtime of a shard; `store` is the broker's, if tiered storage
    /// is on.
    pub fn new(store: Option<RemoteStore>, quotas: Arc<RemoteQuotas>) -> TieredRuntime {
        TieredRuntime {
            store,
            quotas,
            ..TieredRuntime::default()
        }
    }

    fn store(&self) -> Result<&RemoteStore, ErrorCode> {
        self.store.as_ref().ok_or(ErrorCode::KafkaStorageError)
    }

    /// A range of an object, through the store's chunk cache.
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, ErrorCode> {
        let store = self.store()?;
        (store.get_range(key.to_string(), range).await).map_err(|e| fetch_error(&e))
    }

    /// A whole (small) object.
    async fn get_whole(&self, key: &str) -> Result<Bytes, ErrorCode> {
        let store = self.store()?;
        store
            .get(key.to_string())
            .await
            .map_err(|e| fetch_error(&e))
    }

    /// The offset index of remote segment `segment_id`, cached.
    async fn offset_index(
        &self,
        segment_id: &[u8; 16],
        keys: &SegmentKeys,
    ) -> Result<Bytes, ErrorCode> {
        let cached = {
            let mut indexes = self.indexes.borrow_mut();
            let found = indexes.iter().position(|(id, _)| id == segment_id);
            found.and_then(|i| indexes.remove(i))
        };
        let index = match cached {
            Some((_, index)) => index,
            None => self.get_whole(&keys.offset_index()).await?,
        };
        let mut indexes = self.indexes.borrow_mut();
        indexes.push_back((*segment_id, index.clone()));
        if indexes.len() > INDEX_CACHE_ENTRIES {
            indexes.pop_front();
        }
        Ok(index)
    }

    fn record_read(&self, bytes: usize, took: Duration) {
        self.quotas.record_fetch(bytes as u64);
        let c = &self.counters;
        c.remote_reads.set(c.remote_reads.get() + 1);
        c.remote_read_bytes
            .set(c.remote_read_bytes.get() + bytes as u64);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        c.remote_read_micros
            .set(c.remote_read_micros.get().saturating_add(micros));
    }

    fn record_fetch_throttled(&self) {
        let c = &self.counters;
        c.fetch_throttled.set(c.fetch_throttled.get() + 1);
    }

    fn record_read_error(&self) {
        let c = &self.counters;
        c.remote_read_errors.set(c.remote_read_errors.get() + 1);
    }

    /// This shard's counters, for `/metrics`.
    pub fn snapshot(&self) -> kernel::metrics::TieredCounters {
        let c = &self.counters;
        kernel::metrics::TieredCounters {
            segments_uploaded: c.segments_uploaded.get(),
            bytes_uploaded: c.bytes_uploaded.get(),
            upload_lag_segments: c.upload_lag_segments.get(),
            upload_lag_bytes: c.upload_lag_bytes.get(),
            segments_deleted: c.segments_deleted.get(),
            task_errors: c.task_errors.get(),
            remote_reads: c.remote_reads.get(),
            remote_read_bytes: c.remote_read_bytes.get(),
            remote_read_micros: c.remote_read_micros.get(),
            remote_read_errors: c.remote_read_errors.get(),
            copy_throttled: c.copy_throttled.get(),
            fetch_throttled: c.fetch_throttled.get(),
        }
    }

    /// The store's figures (the same from every shard), with the cache's
    /// cap; `None` when tiered storage is off.
    pub fn store_figures(
        &self,
        cache_max_bytes: u64,
    ) -> Option<kernel::metrics::RemoteStoreFigures> {
        let stats = self.store.as_ref()?.stats();
        Some(kernel::metrics::RemoteStoreFigures {
            cache_bytes: stats.cache_bytes,
            cache_max_bytes,
            cache_hits: stats.cache_hits,
            cache_misses: stats.cache_misses,
            bytes_fetched: stats.bytes_fetched,
            errors: stats.put_errors + stats.get_errors + stats.list_errors + stats.delete_errors,
        })
    }
}
