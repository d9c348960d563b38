//! What the broker configures: where the store is, and the sizes of the
//! cache, its chunks and the upload parts.
//!
//! Credentials are not here: each backend's builder reads its own from the
//! environment (`AWS_ACCESS_KEY_ID`, `GOOGLE_SERVICE_ACCOUNT`,
//! `AZURE_STORAGE_ACCOUNT_KEY`, …) or the machine's identity service. A URL
//! can still carry user information, so `Debug` is written by hand and
//! prints URLs redacted.

use crate::error::{redact_url, RemoteError};
use crate::location::{Backend, Location};
use std::fmt;
use std::time::Duration;

const MIB: u64 = 1024 * 1024;

/// The smallest part S3 and GCS accept in a multipart upload (all parts
/// but the last).
pub(crate) const MIN_PART_BYTES_S3: u64 = 5 * MIB;

/// How rill reaches its object store.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteStorageConfig {
    /// `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`
    /// or `file:///absolute/path`.
    pub url: String,
    /// An S3-compatible (MinIO, Ceph…) or Azurite endpoint in place of the
    /// cloud's own, e.g. `http://127.0.0.1:9000`.
    pub endpoint: Option<String>,
    /// The S3 region; the environment's (`AWS_REGION`) when `None`.
    pub region: Option<String>,
    /// Whether plain-HTTP endpoints are allowed (a loopback test server).
    pub allow_http: bool,
    /// The chunk cache's size in bytes; 0 turns it off.
    pub cache_bytes: u64,
    /// The unit `get_range` reads and caches: a range is served from the
    /// whole chunks that cover it.
    pub chunk_bytes: u64,
    /// The part size of a multipart upload; a file no larger goes up in one
    /// request.
    pub part_bytes: u64,
    /// How long one operation (or one part of an upload) may take before it
    /// fails with `Unavailable`.
    pub op_timeout_ms: u64,
}

impl RemoteStorageConfig {
    /// 256 MiB: 64 chunks of 4 MiB, a few segments' worth of hot reads.
    pub const DEFAULT_CACHE_BYTES: u64 = 256 * MIB;
    /// 4 MiB: a Kafka fetch asks for up to 1 MiB per partition (50 MiB per
    /// request), so one GET of 4 MiB serves several fetches of a consumer
    /// reading forward, and a GET's ~20-50 ms first-byte latency on S3 is
    /// paid once per 4 MiB rather than per fetch.
    pub const DEFAULT_CHUNK_BYTES: u64 = 4 * MIB;
    /// 8 MiB: a 1 GiB segment in 128 parts (S3 allows 10,000), and two in
    /// flight hold 24 MiB of memory per upload.
    pub const DEFAULT_PART_BYTES: u64 = 8 * MIB;
    /// 30 s, as object_store's own request timeout.
    pub const DEFAULT_OP_TIMEOUT_MS: u64 = 30_000;

    /// A configuration with this URL and the defaults above.
    pub fn from_url(url: &str) -> Self {
        RemoteStorageConfig {
            url: url.to_string(),
            endpoint: None,
            region: None,
            allow_http: false,
            cache_bytes: Self::DEFAULT_CACHE_BYTES,
            chunk_bytes: Self::DEFAULT_CHUNK_BYTES,
            part_bytes: Self::DEFAULT_PART_BYTES,
            op_timeout_ms: Self::DEFAULT_OP_TIMEOUT_MS,
        }
    }

    /// The time limit of one operation.
    pub(crate) fn op_timeout(&self) -> Duration {
        Duration::from_millis(self.op_timeout_ms)
    }

    /// Refuses sizes that cannot work with this backend.
    pub(crate) fn validate(&self, location: &Location) -> Result<(), RemoteError> {
        if self.chunk_bytes == 0 || self.part_bytes == 0 || self.op_timeout_ms == 0 {
            return Err(RemoteError::config(
                "chunk_bytes, part_bytes and op_timeout_ms must be above 0",
            ));
        }
        let minimum_part = match location.backend {
            Backend::S3 { .. } | Backend::Gcs { .. } => MIN_PART_BYTES_S3,
            Backend::Azure { .. } | Backend::File { .. } => 1,
        };
        if self.part_bytes < minimum_part {
            return Err(RemoteError::config(format!(
                "part_bytes {} is below this store's minimum part size {minimum_part}",
                self.part_bytes
            )));
        }
        // Chunks are sliced into `Bytes` and counted in memory as `usize`.
        if usize::try_from(self.chunk_bytes).is_err() || usize::try_from(self.part_bytes).is_err() {
            return Err(RemoteError::config("chunk_bytes or part_bytes too large"));
        }
        Ok(())
    }
}

impl fmt::Debug for RemoteStorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteStorageConfig")
            .field("url", &redact_url(&self.url))
            .field("endpoint", &self.endpoint.as_deref().map(redact_url))
            .field("region", &self.region)
            .field("allow_http", &self.allow_http)
            .field("cache_bytes", &self.cache_bytes)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("part_bytes", &self.part_bytes)
            .field("op_timeout_ms", &self.op_timeout_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::parse;

    #[test]
    fn debug_prints_no_user_information() {
        let mut config = RemoteStorageConfig::from_url("s3://bucket/prefix");
        config.endpoint = Some("http://key:secret@127.0.0.1:9000".into());
        let printed = format!("{config:?}");
        assert!(!printed.contains("secret"), "{printed}");
        assert!(printed.contains("127.0.0.1:9000"), "{printed}");
    }

    #[test]
    fn s3_parts_below_five_mib_are_refused() {
        let mut config = RemoteStorageConfig::from_url("s3://bucket/prefix");
        let location = parse(&config.url).unwrap();
        assert!(config.validate(&location).is_ok());
        config.part_bytes = MIN_PART_BYTES_S3 - 1;
        assert!(matches!(
            config.validate(&location),
            Err(RemoteError::Config { .. })
        ));
        // The local store has no minimum: tests upload many small parts.
        let local = parse("file:///tmp/x").unwrap();
        assert!(config.validate(&local).is_ok());
        config.chunk_bytes = 0;
        assert!(config.validate(&local).is_err());
    }
}
