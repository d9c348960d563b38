//! Replication throttles (Kafka's KIP-73), as `kafka-reassign-partitions
//! --throttle` sets them: a broker's `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` (bytes/s, dynamic per broker or for
//! every broker), and each topic's `leader.replication.throttled.replicas`
//! and `follower.replication.throttled.replicas` (`partition:broker` pairs,
//! or `*`), which name the partitions a broker throttles.
//!
//! As in Kafka, only replicas out of the ISR are throttled (a replica
//! catching up, say one a reassignment adds); an in-sync follower never is,
//! so a throttle cannot hold back the high watermark. The bytes of the
//! throttled partitions are counted in one broker-wide sensor per side
//! (Kafka's `replication.quota.window.num` samples of 1 s); while its rate
//! is above the limit, the leader answers those partitions with no records
//! (after the fetch's wait, as for a fetch with nothing new) and the
//! follower holds their fetches back.

use super::manager::{QuotaKind, QuotaManager, Sensors};
use crate::Shard;
use engine::TopicPartition;
use std::collections::BTreeMap;

/// The leader side's rate (bytes/s).
pub const LEADER_RATE: &str = super::entity::LEADER_REPLICATION_RATE;
/// The follower side's rate (bytes/s).
pub const FOLLOWER_RATE: &str = super::entity::FOLLOWER_REPLICATION_RATE;

/// Which side of replication a throttle is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The leader serving followers' fetches.
    Leader,
    /// A follower fetching from its leader.
    Follower,
}

impl Side {
    /// The broker config of this side's rate.
    pub fn rate_key(self) -> &'static str {
        match self {
            Side::Leader => LEADER_RATE,
            Side::Follower => FOLLOWER_RATE,
        }
    }

    fn kind(self) -> QuotaKind {
        match self {
            Side::Leader => QuotaKind::LeaderReplication,
            Side::Follower => QuotaKind::FollowerReplication,
        }
    }
}

/// A rate as the config holds it: a whole number of bytes/s (Kafka's
/// `LONG`, at least 0); `None` for anything else.
pub fn parse_rate(value: &str) -> Option<u64> {
    value.trim().parse::<u64>().ok()
}

/// The rate of `side` in force on broker `broker_id`: its own dynamic
/// value, else every broker's, else the file's `static_rate`; `None`:
/// unthrottled (Kafka's default, `Long.MAX_VALUE`).
pub fn rate_of(
    side: Side,
    dynamic: &BTreeMap<String, BTreeMap<String, String>>,
    broker_id: i32,
    static_rate: Option<u64>,
) -> Option<u64> {
    let dynamic_value = |resource: &str| dynamic.get(resource)?.get(side.rate_key());
    match dynamic_value(&broker_id.to_string()).or_else(|| dynamic_value("")) {
        Some(value) => parse_rate(value),
        None => static_rate,
    }
    .filter(|rate| *rate < i64::MAX as u64)
}

/// Whether a topic's throttled-replicas value `list` (`*`, or
/// `partition:broker` pairs) names `partition` on broker `broker_id`.
pub fn lists(list: &str, partition: i32, broker_id: i32) -> bool {
    list.split(',').map(str::trim).any(|entry| {
        entry == "*"
            || entry.split_once(':').is_some_and(|(p, b)| {
                p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(broker_id)
            })
    })
}

/// `side`'s throttle on this broker now: `None` when it has no rate (the
/// common case, which costs one lookup), else whether its throttled bytes
/// run above the rate.
pub fn over_rate(shard: &Shard, side: Side) -> Option<bool> {
    let image = shard.runtime().view.image();
    let rates = shard.config.cluster.replication_throttled_rates;
    let static_rate = match side {
        Side::Leader => rates.0,
        Side::Follower => rates.1,
    };
    let rate = rate_of(
        side,
        image.broker_configs(),
        shard.config.broker_id,
        static_rate,
    )?;
    Some(
        shard
            .runtime()
            .quotas
            .sensors
            .replication_exceeded(side, rate),
    )
}

impl QuotaManager {
    /// Counts `bytes` of throttled partitions replicated on `side`.
    pub fn record_replication(&self, side: Side, bytes: usize) {
        self.sensors.record_replication(side, bytes);
    }
}

/// Whether `tp`'s topic lists it on this broker for `side`'s throttle.
pub fn throttles(shard: &Shard, tp: &TopicPartition, side: Side) -> bool {
    let table = shard.topics.borrow();
    let Some(entry) = table.get(&tp.topic) else {
        return false;
    };
    let list = match side {
        Side::Leader => &entry.config.throttled_replicas.leader,
        Side::Follower => &entry.config.throttled_replicas.follower,
    };
    lists(list, tp.partition, shard.config.broker_id)
}

impl Sensors {
    /// Whether `side`'s throttled bytes run above `rate` bytes/s now.
    pub fn replication_exceeded(&self, side: Side, rate: u64) -> bool {
        let key = (side.kind(), String::new(), String::new());
        self.with_sensor(key, |sensor, now| sensor.per_second(now) > rate as f64)
    }

    /// Counts `bytes` of throttled partitions replicated on `side`.
    pub fn record_replication(&self, side: Side, bytes: usize) {
        let key = (side.kind(), String::new(), String::new());
        self.with_sensor(key, |sensor, now| sensor.record(now, bytes as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brokers_rate_wins_then_every_brokers_then_the_file() {
        let mut dynamic = BTreeMap::new();
        assert_eq!(rate_of(Side::Leader, &dynamic, 1, None), None);
        assert_eq!(rate_of(Side::Leader, &dynamic, 1, Some(5)), Some(5));
        let every = BTreeMap::from([(LEADER_RATE.to_string(), "1000".to_string())]);
        dynamic.insert(String::new(), every);
        assert_eq!(rate_of(Side::Leader, &dynamic, 1, Some(5)), Some(1000));
        assert_eq!(rate_of(Side::Follower, &dynamic, 1, None), None);
        let own = BTreeMap::from([(LEADER_RATE.to_string(), "9223372036854775807".to_string())]);
        dynamic.insert("1".to_string(), own);
        assert_eq!(
            rate_of(Side::Leader, &dynamic, 1, None),
            None,
            "Kafka's 'no limit'"
        );
        assert_eq!(rate_of(Side::Leader, &dynamic, 2, None), Some(1000));
    }

    #[test]
    fn throttled_replica_lists_name_partitions_on_brokers() {
        assert!(lists("*", 7, 3));
        assert!(lists("0:1, 1:2", 1, 2));
        assert!(!lists("0:1, 1:2", 1, 1));
        assert!(!lists("", 0, 0));
        assert!(!lists("junk", 0, 0));
    }

    #[test]
    fn a_side_is_exceeded_once_its_bytes_run_above_its_rate() {
        let sensors = Sensors::new(11, 1000);
        assert!(!sensors.replication_exceeded(Side::Leader, 1000));
        // 20 000 bytes over the 10 s least window: 2000 bytes/s.
        sensors.record_replication(Side::Leader, 20_000);
        assert!(sensors.replication_exceeded(Side::Leader, 1000));
        assert!(!sensors.replication_exceeded(Side::Leader, 5000));
        assert!(
            !sensors.replication_exceeded(Side::Follower, 1000),
            "one sensor per side"
        );
    }
}
