//! The broker's quota sensors: one windowed rate per (kind, user, client
//! id) that has a quota, shared by every shard — a client's connections may
//! land on different shards, and Kafka's quota is per broker. The lock is
//! taken only for clients that have a quota; without any configured quota
//! the request path does not touch it.

use super::entity::{
    resolve, CONSUMER_BYTE_RATE, FOLLOWER_REPLICATION_RATE, LEADER_REPLICATION_RATE,
    PRODUCER_BYTE_RATE,
};
use super::rate::WindowedRate;
use cluster::metadata::QuotaEntity;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Sensors idle this many windows are dropped, so that many short-lived
/// client ids do not grow the table without bound.
const IDLE_WINDOWS: u64 = 2;
/// The table is swept for idle sensors when it grows past this.
const SWEEP_ABOVE: usize = 1024;

/// Which byte rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Bytes produced (request sizes), `producer_byte_rate`.
    Produce,
    /// Bytes fetched (response sizes), `consumer_byte_rate`.
    Fetch,
    /// Bytes of throttled partitions a leader sends followers
    /// (`leader.replication.throttled.rate`).
    LeaderReplication,
    /// Bytes of throttled partitions a follower fetches
    /// (`follower.replication.throttled.rate`).
    FollowerReplication,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::LeaderReplication => LEADER_REPLICATION_RATE,
            QuotaKind::FollowerReplication => FOLLOWER_REPLICATION_RATE,
        }
    }
}

type SensorKey = (QuotaKind, String, String);

/// Every shard's view of the broker-wide sensors.
#[derive(Debug)]
pub struct Sensors {
    epoch: Instant,
    window_count: usize,
    sample_ms: u64,
    table: Mutex<HashMap<SensorKey, WindowedRate>>,
}

impl Sensors {
    /// Sensors of `window_count` samples of `sample_ms` each
    /// (`quota.window.num`, `quota.window.size.seconds`).
    pub fn new(window_count: usize, sample_ms: u64) -> Sensors {
        Sensors {
            epoch: Instant::now(),
            window_count: window_count.max(1),
            sample_ms: sample_ms.max(1),
            table: Mutex::new(HashMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub(super) fn with_sensor<R>(
        &self,
        key: SensorKey,
        f: impl FnOnce(&mut WindowedRate, u64) -> R,
    ) -> R {
        let now = self.now_ms();
        // A panic while holding the lock cannot leave a rate half-updated
        // in a way that matters: use the table as it is.
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if table.len() > SWEEP_ABOVE {
            let idle = IDLE_WINDOWS * self.window_count as u64 * self.sample_ms;
            table.retain(|_, rate| {
                rate.last_sample_ms()
                    .is_some_and(|last| now.saturating_sub(last) < idle)
            });
        }
        let rate = table
            .entry(key)
            .or_insert_with(|| WindowedRate::new(self.window_count, self.sample_ms));
        f(rate, now)
    }
}

/// The quota service of one shard (registered at start; absent in tests
/// that build shards without it, where nothing is throttled).
#[derive(Debug, Clone)]
pub struct QuotaManager {
    pub(super) sensors: Arc<Sensors>,
}

impl QuotaManager {
    /// A shard's handle on the shared sensors.
    pub fn new(sensors: Arc<Sensors>) -> QuotaManager {
        QuotaManager { sensors }
    }

    /// Counts `bytes` for the client and returns how long it must wait
    /// (ms; 0 when it has no quota or is within it).
    pub fn record(
        &self,
        quotas: &BTreeMap<QuotaEntity, BTreeMap<String, String>>,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        bytes: usize,
    ) -> u64 {
        let Some(found) = resolve(quotas, user, client_id, kind.key()) else {
            return 0;
        };
        let (u, c) = found.sensor;
        self.sensors.with_sensor((kind, u, c), |rate, now| {
            rate.record(now, bytes as f64);
            rate.throttle_ms(now, found.limit)
        })
    }

    /// How long the client must still wait, without counting anything (a
    /// fetch checks this before it reads).
    pub fn owed(
        &self,
        quotas: &BTreeMap<QuotaEntity, BTreeMap<String, String>>,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
    ) -> u64 {
        let Some(found) = resolve(quotas, user, client_id, kind.key()) else {
            return 0;
        };
        let (u, c) = found.sensor;
        self.sensors
            .with_sensor((kind, u, c), |rate, now| rate.throttle_ms(now, found.limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_share_one_sensor_per_client() {
        let sensors = Arc::new(Sensors::new(11, 1000));
        let (a, b) = (
            QuotaManager::new(sensors.clone()),
            QuotaManager::new(sensors),
        );
        let mut quotas = BTreeMap::new();
        quotas.insert(
            vec![(String::from("client-id"), Some(String::from("slow")))],
            BTreeMap::from([(String::from(PRODUCER_BYTE_RATE), String::from("1000"))]),
        );
        // 10 s × 1000 B/s fits the first window; the next byte on the other
        // shard is over it.
        assert_eq!(
            a.record(&quotas, QuotaKind::Produce, "ANONYMOUS", "slow", 10_000),
            0
        );
        assert!(b.record(&quotas, QuotaKind::Produce, "ANONYMOUS", "slow", 5_000) > 0);
        assert!(b.owed(&quotas, QuotaKind::Produce, "ANONYMOUS", "slow") > 0);
        // Another client id, or the fetch side, has no quota.
        assert_eq!(
            a.record(&quotas, QuotaKind::Produce, "ANONYMOUS", "fast", 1 << 30),
            0
        );
        assert_eq!(a.owed(&quotas, QuotaKind::Fetch, "ANONYMOUS", "slow"), 0);
    }
}
