//! Kafka's remote copy and fetch quotas (KIP-956):
//! `remote.log.manager.copy.max.bytes.per.second` and
//! `remote.log.manager.fetch.max.bytes.per.second`, byte rates of the whole
//! broker over `*.quota.window.num` samples of `*.quota.window.size.seconds`
//! (11 of 1 s by default, as Kafka's), shared by every shard. Past
//! the copy quota an upload waits for a later round; past the fetch quota a
//! fetch's remote read waits up to `remote.fetch.max.wait.ms` for the rate
//! to fall, then answers empty, as Kafka skips the remote read.

use crate::quotas::rate::WindowedRate;
use kernel::config::tiered::TieredStorageConfig;
use std::sync::Mutex;
use std::time::Instant;

/// One broker-wide byte rate and its cap.
#[derive(Debug)]
struct Quota {
    max_bytes_per_second: f64,
    rate: Mutex<WindowedRate>,
}

impl Quota {
    fn new(max_bytes_per_second: u64, windows: u64, window_seconds: u64) -> Quota {
        let windows = usize::try_from(windows).unwrap_or(usize::MAX);
        Quota {
            max_bytes_per_second: max_bytes_per_second as f64,
            rate: Mutex::new(WindowedRate::new(
                windows,
                window_seconds.saturating_mul(1000),
            )),
        }
    }

    fn with_rate<R>(&self, f: impl FnOnce(&mut WindowedRate) -> R) -> R {
        // A panic while holding the lock leaves a rate that is still a rate.
        let mut rate = self.rate.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut rate)
    }
}

/// The broker's remote copy and fetch quotas.
#[derive(Debug)]
pub struct RemoteQuotas {
    epoch: Instant,
    copy: Quota,
    fetch: Quota,
}

impl RemoteQuotas {
    /// The quotas `config` sets.
    pub fn new(config: &TieredStorageConfig) -> RemoteQuotas {
        let (windows, seconds) = (config.quota_window_num, config.quota_window_size_seconds);
        RemoteQuotas {
            epoch: Instant::now(),
            copy: Quota::new(config.copy_max_bytes_per_second, windows.0, seconds.0),
            fetch: Quota::new(config.fetch_max_bytes_per_second, windows.1, seconds.1),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether uploads are over the copy quota now.
    pub fn copy_exceeded(&self) -> bool {
        let now = self.now_ms();
        let max = self.copy.max_bytes_per_second;
        self.copy.with_rate(|rate| rate.per_second(now) >= max)
    }

    /// Counts `bytes` uploaded.
    pub fn record_copy(&self, bytes: u64) {
        let now = self.now_ms();
        self.copy.with_rate(|rate| rate.record(now, bytes as f64));
    }

    /// How long remote reads must wait for the fetch rate to fall under
    /// its quota (ms; 0: they may go now).
    pub fn fetch_wait_ms(&self) -> u64 {
        let now = self.now_ms();
        let max = self.fetch.max_bytes_per_second;
        self.fetch.with_rate(|rate| rate.throttle_ms(now, max))
    }

    /// Counts `bytes` read from the store for a fetch.
    pub fn record_fetch(&self, bytes: u64) {
        let now = self.now_ms();
        self.fetch.with_rate(|rate| rate.record(now, bytes as f64));
    }
}

impl Default for RemoteQuotas {
    /// Kafka's defaults: no limit.
    fn default() -> Self {
        RemoteQuotas::new(&TieredStorageConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_their_quota_are_held_back_and_unlimited_ones_never() {
        let quotas = RemoteQuotas::new(&TieredStorageConfig {
            copy_max_bytes_per_second: 1_000,
            fetch_max_bytes_per_second: 1_000,
            ..TieredStorageConfig::default()
        });
        assert!(!quotas.copy_exceeded());
        assert_eq!(quotas.fetch_wait_ms(), 0);
        // The window counts as 10 s at least: 10,000 bytes reach 1,000/s.
        quotas.record_copy(10_000);
        quotas.record_fetch(20_000);
        assert!(quotas.copy_exceeded());
        assert!(quotas.fetch_wait_ms() > 0);

        let unlimited = RemoteQuotas::default();
        unlimited.record_copy(u64::from(u32::MAX));
        unlimited.record_fetch(u64::from(u32::MAX));
        assert!(!unlimited.copy_exceeded());
        assert_eq!(unlimited.fetch_wait_ms(), 0);
    }
}
