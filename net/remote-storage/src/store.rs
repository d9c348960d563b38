//! `RemoteStore`: the handle the broker's shards hold. Cheap to clone,
//! `Send + Sync`; each operation sends a job to the remote thread and
//! awaits its answer on a oneshot channel, so the futures it returns need
//! no runtime of their own and run on glommio (or `block_on`) unchanged.
//!
//! Dropping a future does not cancel a write already sent (the upload or
//! delete finishes on the remote thread); a read whose future is dropped
//! before it starts is skipped.

use crate::config::RemoteStorageConfig;
use crate::error::RemoteError;
use crate::job::{Job, Reply};
use crate::location;
use crate::stats::{Stats, StatsSnapshot};
use crate::worker;
use bytes::Bytes;
use futures::channel::oneshot;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// A handle on the object store and its thread.
#[derive(Clone)]
pub struct RemoteStore {
    jobs: async_channel::Sender<Job>,
    stats: Arc<Stats>,
    key_prefix: Arc<str>,
    scheme: &'static str,
}

impl RemoteStore {
    /// Parses the URL, checks the sizes, builds the store and starts the
    /// `rill-remote` thread. Blocking (it waits for the thread to build the
    /// store, and the `file://` store creates its directory): call it at
    /// startup, not on a shard's hot path.
    pub fn open(config: RemoteStorageConfig) -> Result<RemoteStore, RemoteError> {
        let location = location::parse(&config.url)?;
        config.validate(&location)?;
        let stats = Arc::new(Stats::default());
        let key_prefix = Arc::from(location.prefix.as_str());
        let scheme = location.backend.scheme();
        let jobs = worker::start(location, config, stats.clone())?;
        Ok(RemoteStore {
            jobs,
            stats,
            key_prefix,
            scheme,
        })
    }

    /// Uploads the file at `local` under `key` (multipart above
    /// `part_bytes`: nothing is visible under `key` until all of it is);
    /// returns its length.
    pub async fn put_file(&self, local: PathBuf, key: String) -> Result<u64, RemoteError> {
        (self.call(|reply| Job::PutFile {
            local,
            length: None,
            key,
            reply,
        }))
        .await
    }

    /// [`RemoteStore::put_file`] of the file's first `length` bytes (a
    /// segment whose file is preallocated past its data).
    pub async fn put_file_prefix(
        &self,
        local: PathBuf,
        length: u64,
        key: String,
    ) -> Result<u64, RemoteError> {
        (self.call(|reply| Job::PutFile {
            local,
            length: Some(length),
            key,
            reply,
        }))
        .await
    }

    /// Stores `bytes` under `key` in one request.
    pub async fn put_bytes(&self, key: String, bytes: Bytes) -> Result<(), RemoteError> {
        self.call(|reply| Job::PutBytes { key, bytes, reply }).await
    }

    /// The whole object under `key`, not through the cache.
    pub async fn get(&self, key: String) -> Result<Bytes, RemoteError> {
        self.call(|reply| Job::Get { key, reply }).await
    }

    /// Bytes `range` of the object under `key`, served from whole chunks
    /// through the chunk cache. `InvalidRange` if it reaches past the end.
    pub async fn get_range(&self, key: String, range: Range<u64>) -> Result<Bytes, RemoteError> {
        self.call(|reply| Job::GetRange { key, range, reply }).await
    }

    /// The keys under `prefix` (whole segments: `t/0` lists `t/0/…`) with
    /// their lengths, sorted; the empty prefix lists everything.
    pub async fn list(&self, prefix: String) -> Result<Vec<(String, u64)>, RemoteError> {
        self.call(|reply| Job::List { prefix, reply }).await
    }

    /// Deletes `keys`; missing keys are not an error.
    pub async fn delete(&self, keys: Vec<String>) -> Result<(), RemoteError> {
        self.call(|reply| Job::Delete { keys, reply }).await
    }

    /// Deletes every object under `prefix` (not the empty prefix); returns
    /// how many there were.
    pub async fn delete_prefix(&self, prefix: String) -> Result<usize, RemoteError> {
        self.call(|reply| Job::DeletePrefix { prefix, reply }).await
    }

    /// The counters now.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The URL's prefix (`rill/c1` of `s3://bucket/rill/c1`), joined in
    /// front of every key; empty for none.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    async fn call<T>(&self, job: impl FnOnce(Reply<T>) -> Job) -> Result<T, RemoteError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(job(reply))
            .await
            .map_err(|_closed| RemoteError::Closed)?;
        answer.await.map_err(|_canceled| RemoteError::Closed)?
    }
}

impl fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteStore")
            .field("scheme", &self.scheme)
            .field("key_prefix", &self.key_prefix)
            .field("jobs_queued", &self.jobs.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Send + Sync + Clone + 'static>() {}
    fn sendable<T: Send>(_: &T) {}

    #[test]
    fn handles_and_their_futures_cross_threads() {
        shareable::<RemoteStore>();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let store = RemoteStore::open(RemoteStorageConfig::from_url(&url)).unwrap();
        // Send futures: a caller may move one to another executor's thread.
        sendable(&store.get("k".into()));
        sendable(&store.put_file(PathBuf::from("f"), "k".into()));
        let printed = format!("{store:?}");
        assert!(printed.contains("file"), "{printed}");
    }
}
