//! Counters of the remote-storage thread, read from any thread for
//! `/metrics`.
//!
//! Written only by the remote thread, read by whoever scrapes: relaxed
//! atomics suffice, as no reader needs two counters to agree with each
//! other (a scrape between the two adds of one fetch sees the bytes a
//! moment before the latency).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The live counters, shared by the handles and the remote thread.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    bytes_uploaded: AtomicU64,
    objects_uploaded: AtomicU64,
    bytes_fetched: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    cache_bytes: AtomicU64,
    put_errors: AtomicU64,
    get_errors: AtomicU64,
    list_errors: AtomicU64,
    delete_errors: AtomicU64,
    fetch_latency_us_sum: AtomicU64,
    fetch_latency_us_count: AtomicU64,
}

/// The counters at one moment. All but `cache_bytes` only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Bytes of completed uploads.
    pub bytes_uploaded: u64,
    /// Completed uploads.
    pub objects_uploaded: u64,
    /// Bytes read from the store (cache misses and whole-object gets).
    pub bytes_fetched: u64,
    /// Chunks `get_range` found in the cache.
    pub cache_hits: u64,
    /// Chunks `get_range` had to fetch.
    pub cache_misses: u64,
    /// Bytes held in the chunk cache now (a gauge).
    pub cache_bytes: u64,
    /// Failed `put_file` and `put_bytes`. The error counts hold the store's
    /// and the node's failures (`Unavailable`, `Io`, `Config`), not answers
    /// about the request (`NotFound`, `InvalidKey`, `InvalidRange`).
    pub put_errors: u64,
    /// Failed `get` and `get_range`.
    pub get_errors: u64,
    /// Failed `list`.
    pub list_errors: u64,
    /// Failed `delete` and `delete_prefix`.
    pub delete_errors: u64,
    /// The sum of the latencies of reads from the store, in microseconds.
    pub fetch_latency_us_sum: u64,
    /// How many reads `fetch_latency_us_sum` adds up.
    pub fetch_latency_us_count: u64,
}

/// The operations whose failures are counted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Put,
    Get,
    List,
    Delete,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            bytes_uploaded: self.bytes_uploaded.load(Relaxed),
            objects_uploaded: self.objects_uploaded.load(Relaxed),
            bytes_fetched: self.bytes_fetched.load(Relaxed),
            cache_hits: self.cache_hits.load(Relaxed),
            cache_misses: self.cache_misses.load(Relaxed),
            cache_bytes: self.cache_bytes.load(Relaxed),
            put_errors: self.put_errors.load(Relaxed),
            get_errors: self.get_errors.load(Relaxed),
            list_errors: self.list_errors.load(Relaxed),
            delete_errors: self.delete_errors.load(Relaxed),
            fetch_latency_us_sum: self.fetch_latency_us_sum.load(Relaxed),
            fetch_latency_us_count: self.fetch_latency_us_count.load(Relaxed),
        }
    }

    /// One object of `bytes` uploaded.
    pub fn record_upload(&self, bytes: u64) {
        self.bytes_uploaded.fetch_add(bytes, Relaxed);
        self.objects_uploaded.fetch_add(1, Relaxed);
    }

    /// One read of `bytes` from the store that took `latency`.
    pub fn record_fetch(&self, bytes: u64, latency: Duration) {
        let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.bytes_fetched.fetch_add(bytes, Relaxed);
        self.fetch_latency_us_sum.fetch_add(latency_us, Relaxed);
        self.fetch_latency_us_count.fetch_add(1, Relaxed);
    }

    /// One chunk looked up in the cache.
    pub fn record_cache_lookup(&self, hit: bool) {
        let counter = if hit {
            &self.cache_hits
        } else {
            &self.cache_misses
        };
        counter.fetch_add(1, Relaxed);
    }

    /// The cache now holds `bytes`.
    pub fn set_cache_bytes(&self, bytes: u64) {
        self.cache_bytes.store(bytes, Relaxed);
    }

    /// One operation of `kind` failed.
    pub fn record_error(&self, kind: ErrorKind) {
        let counter = match kind {
            ErrorKind::Put => &self.put_errors,
            ErrorKind::Get => &self.get_errors,
            ErrorKind::List => &self.list_errors,
            ErrorKind::Delete => &self.delete_errors,
        };
        counter.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_reads_what_was_recorded() {
        let stats = Stats::default();
        stats.record_upload(10);
        stats.record_fetch(4, Duration::from_micros(1500));
        stats.record_fetch(4, Duration::from_micros(500));
        stats.record_cache_lookup(true);
        stats.record_cache_lookup(false);
        stats.record_cache_lookup(false);
        stats.set_cache_bytes(8);
        stats.record_error(ErrorKind::Delete);
        let snapshot = stats.snapshot();
        assert_eq!(
            snapshot,
            StatsSnapshot {
                bytes_uploaded: 10,
                objects_uploaded: 1,
                bytes_fetched: 8,
                cache_hits: 1,
                cache_misses: 2,
                cache_bytes: 8,
                delete_errors: 1,
                fetch_latency_us_sum: 2000,
                fetch_latency_us_count: 2,
                ..StatsSnapshot::default()
            }
        );
    }
}
