//! Tiered storage's broker settings (KIP-405). Kafka's names where Kafka
//! has one: `remote.log.storage.system.enable` turns it on, and the remote
//! log manager's `remote.log.manager.*` keys keep their meaning with tasks
//! in place of thread pools. Kafka plugs a `RemoteStorageManager` class in;
//! rill has one store, the `object_store` crate, named by one URL
//! (`rill.remote.storage.url`: `s3://`, `gs://`, `az://` or `file://`), so
//! Kafka's class-name keys are refused when they name anything. The
//! credentials come from the environment the store's SDK reads
//! (`AWS_ACCESS_KEY_ID`, `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_*`, ...),
//! never from this file, so no secret sits in a config file or a log.

use crate::error::ConfigError;

/// The settings, with Kafka's defaults (tiered storage off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TieredStorageConfig {
    /// `remote.log.storage.system.enable` (default false).
    pub enabled: bool,
    /// `rill.remote.storage.url`: where segments go.
    pub url: Option<String>,
    /// `rill.remote.storage.endpoint`: an S3-compatible store's endpoint
    /// (MinIO, Ceph, R2, ...).
    pub endpoint: Option<String>,
    /// `rill.remote.storage.region`.
    pub region: Option<String>,
    /// `rill.remote.storage.allow.http`: plain HTTP to the endpoint.
    pub allow_http: bool,
    /// `remote.log.manager.task.interval.ms` (default 30 s): how often each
    /// leader looks for segments to upload and remote segments to expire.
    pub task_interval_ms: u64,
    /// `remote.log.manager.task.retry.backoff.ms` (default 500 ms): the
    /// first wait after a failed upload or deletion.
    pub retry_backoff_ms: u64,
    /// `remote.log.manager.task.retry.backoff.max.ms` (default 30 s).
    pub retry_backoff_max_ms: u64,
    /// `remote.log.index.file.cache.total.size.bytes` (default 1 GiB): the
    /// cap on the cache of fetched remote indexes and log chunks.
    pub cache_bytes: u64,
    /// `rill.remote.storage.chunk.bytes` (default 4 MiB): the unit remote
    /// log reads fetch and cache.
    pub chunk_bytes: u64,
    /// `rill.remote.storage.op.timeout.ms` (default 30 s): one store call's
    /// limit, after which it fails as unavailable.
    pub op_timeout_ms: u64,
    /// `remote.fetch.max.wait.ms` (default 500 ms): the longest a fetch
    /// waits for its remote reads; past it the partition answers empty this
    /// time (the read goes on filling the cache for the next fetch).
    pub fetch_max_wait_ms: u64,
    /// `remote.log.manager.copy.max.bytes.per.second` (default unlimited):
    /// the broker's upload rate; past it uploads wait for a later round.
    pub copy_max_bytes_per_second: u64,
    /// `remote.log.manager.fetch.max.bytes.per.second` (default
    /// unlimited): the broker's remote read rate; past it a fetch's remote
    /// reads wait, then answer empty.
    pub fetch_max_bytes_per_second: u64,
    /// `remote.log.manager.{copy,fetch}.quota.window.num` (default 11
    /// each): the samples each quota's rate is measured over.
    pub quota_window_num: (u64, u64),
    /// `remote.log.manager.{copy,fetch}.quota.window.size.seconds`
    /// (default 1 each): each sample's length.
    pub quota_window_size_seconds: (u64, u64),
}

impl Default for TieredStorageConfig {
    fn default() -> Self {
        TieredStorageConfig {
            enabled: false,
            url: None,
            endpoint: None,
            region: None,
            allow_http: false,
            task_interval_ms: 30_000,
            retry_backoff_ms: 500,
            retry_backoff_max_ms: 30_000,
            cache_bytes: 1 << 30,
            chunk_bytes: 4 << 20,
            op_timeout_ms: 30_000,
            fetch_max_wait_ms: 500,
            copy_max_bytes_per_second: i64::MAX as u64,
            fetch_max_bytes_per_second: i64::MAX as u64,
            quota_window_num: (11, 11),
            quota_window_size_seconds: (1, 1),
        }
    }
}

/// Kafka's plug-in class keys: rill has its own store and metadata manager.
const PLUGIN_CLASS_KEYS: [&str; 2] = [
    "remote.log.storage.manager.class.name",
    "remote.log.metadata.manager.class.name",
];

impl TieredStorageConfig {
    /// Applies one broker setting if it is one of these; `Ok(false)` when
    /// `name` is not.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let text = || Some(value.trim().to_string()).filter(|v| !v.is_empty());
        match name {
            "remote.log.storage.system.enable" => self.enabled = flag(name, value)?,
            "rill.remote.storage.url" => self.url = text(),
            "rill.remote.storage.endpoint" => self.endpoint = text(),
            "rill.remote.storage.region" => self.region = text(),
            "rill.remote.storage.allow.http" => self.allow_http = flag(name, value)?,
            "remote.log.manager.task.interval.ms" => self.task_interval_ms = positive(name, value)?,
            "remote.log.manager.task.retry.backoff.ms" => {
                self.retry_backoff_ms = positive(name, value)?
            }
            "remote.log.manager.task.retry.backoff.max.ms" => {
                self.retry_backoff_max_ms = positive(name, value)?
            }
            "remote.log.index.file.cache.total.size.bytes" => {
                self.cache_bytes = value
                    .trim()
                    .parse()
                    .map_err(|_| ConfigError::invalid(name, value, "bytes, at least 0"))?
            }
            "rill.remote.storage.chunk.bytes" => self.chunk_bytes = positive(name, value)?,
            "rill.remote.storage.op.timeout.ms" => self.op_timeout_ms = positive(name, value)?,
            "remote.fetch.max.wait.ms" => self.fetch_max_wait_ms = positive(name, value)?,
            "remote.log.manager.copy.max.bytes.per.second" => {
                self.copy_max_bytes_per_second = positive(name, value)?
            }
            "remote.log.manager.fetch.max.bytes.per.second" => {
                self.fetch_max_bytes_per_second = positive(name, value)?
            }
            "remote.log.manager.copy.quota.window.num" => {
                self.quota_window_num.0 = positive(name, value)?
            }
            "remote.log.manager.fetch.quota.window.num" => {
                self.quota_window_num.1 = positive(name, value)?
            }
            "remote.log.manager.copy.quota.window.size.seconds" => {
                self.quota_window_size_seconds.0 = positive(name, value)?
            }
            "remote.log.manager.fetch.quota.window.size.seconds" => {
                self.quota_window_size_seconds.1 = positive(name, value)?
            }
            _ if PLUGIN_CLASS_KEYS.contains(&name) => {
                if !value.trim().is_empty() {
                    return Err(ConfigError::invalid(
                        name,
                        value,
                        "rill has its own remote storage (rill.remote.storage.url) and keeps \
                         the remote log metadata in the metadata quorum; no plug-in class",
                    ));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Refuses a start that turns tiered storage on without a store.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.enabled && self.url.is_none() {
            return Err(ConfigError::invalid(
                "remote.log.storage.system.enable",
                "true",
                "tiered storage needs rill.remote.storage.url (s3://bucket/prefix, \
                 gs://bucket/prefix, az://container/prefix or file:///path)",
            ));
        }
        Ok(())
    }
}

fn flag(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::invalid(name, value, "true or false")),
    }
}

fn positive(name: &str, value: &str) -> Result<u64, ConfigError> {
    match value.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(ConfigError::invalid(name, value, "an integer, at least 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_and_rill_keys_apply_and_bad_values_are_refused() {
        let mut config = TieredStorageConfig::default();
        assert!(config.validate().is_ok());
        assert!(config
            .apply("remote.log.storage.system.enable", "true")
            .unwrap());
        assert!(config.validate().is_err(), "on without a store");
        assert!(config
            .apply("rill.remote.storage.url", "s3://bucket/rill")
            .unwrap());
        assert!(config
            .apply("remote.log.manager.task.interval.ms", "1000")
            .unwrap());
        assert!(config.validate().is_ok());
        assert_eq!(config.url.as_deref(), Some("s3://bucket/rill"));
        assert_eq!(config.task_interval_ms, 1000);
        assert!(config
            .apply("remote.log.manager.task.interval.ms", "0")
            .is_err());
        assert!(config
            .apply("remote.log.storage.manager.class.name", "com.example.Rsm")
            .is_err());
        assert!(config
            .apply("remote.log.storage.manager.class.name", "")
            .unwrap());
        assert!(!config.apply("log.retention.ms", "1").unwrap());
        assert_eq!(config.fetch_max_bytes_per_second, i64::MAX as u64);
        assert!(config
            .apply("remote.log.manager.fetch.max.bytes.per.second", "1048576")
            .unwrap());
        assert_eq!(config.fetch_max_bytes_per_second, 1 << 20);
        assert!(config.apply("remote.fetch.max.wait.ms", "0").is_err());
    }
}
