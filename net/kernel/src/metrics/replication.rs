//! Replication counters and lags, and the consumer groups' committed
//! offsets and lag.

use super::registry::{Declared, Family, Value};
use super::{ReplicationCounters, Shards};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::collections::BTreeMap;

/// Reads one replication counter.
type ReadReplication = fn(&ReplicationCounters) -> u64;

static ISR_SHRINKS: Family = Family::counter(
    "rill_isr_shrinks_total",
    "ISR shrinks this broker's leaders committed.",
    &[],
);
static ISR_EXPANDS: Family = Family::counter(
    "rill_isr_expands_total",
    "ISR expansions this broker's leaders committed.",
    &[],
);
static LEADER_ELECTIONS: Family = Family::counter(
    "rill_leader_elections_total",
    "Times this broker started leading a replicated partition.",
    &[],
);
static DIVERGING_EPOCH_TRUNCATIONS: Family = Family::counter(
    "rill_diverging_epoch_truncations_total",
    "Times a follower truncated its log because the leader named a diverging epoch (KIP-595).",
    &[],
);
static READ_REPLICA_REDIRECTS: Family = Family::counter(
    "rill_read_replica_redirects_total",
    "Consumer partition reads this broker's leaders answered with a follower in the consumer's rack to read from instead (KIP-392, replica.selector.class).",
    &[],
);
static FOLLOWER_CONSUMER_READS: Family = Family::counter(
    "rill_follower_consumer_reads_total",
    "Consumer partition reads this broker served as a follower (KIP-392).",
    &[],
);
static FOLLOWER_LAG_AT_LEADER: Family = Family::gauge(
    "rill_follower_lag_at_leader_messages",
    "Per led partition and follower: the leader's log end minus the follower's at its last fetch, in messages.",
    &["topic", "partition", "follower"],
);
static REPLICA_LAG: Family = Family::gauge(
    "rill_replica_lag_messages",
    "Per followed partition: the leader's high watermark minus this replica's log end at its last fetch, in messages.",
    &["topic", "partition"],
);

/// The replication counters summed over shards, and the lags.
#[derive(Debug)]
pub(super) struct ReplicationCollector(pub(super) Shards);

impl Collector for ReplicationCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let counters: [(&Family, ReadReplication); 6] = [
            (&ISR_SHRINKS, |r| r.isr_shrinks),
            (&ISR_EXPANDS, |r| r.isr_expands),
            (&LEADER_ELECTIONS, |r| r.leaderships_taken),
            (&DIVERGING_EPOCH_TRUNCATIONS, |r| {
                r.diverging_epoch_truncations
            }),
            (&READ_REPLICA_REDIRECTS, |r| r.read_replica_redirects),
            (&FOLLOWER_CONSUMER_READS, |r| r.follower_consumer_reads),
        ];
        for (family, read) in counters {
            let total: u64 = self.0.iter().map(|(_, m)| read(&m.replication)).sum();
            family.encode(&mut encoder, [(Vec::new(), Value::from(total))])?;
        }
        let at_leader = self.0.iter().flat_map(|(_, m)| {
            m.replication
                .lag_at_leader
                .iter()
                .map(|(topic, partition, follower, lag)| {
                    let labels = vec![topic.clone(), partition.to_string(), follower.to_string()];
                    (labels, Value::Int(*lag))
                })
        });
        FOLLOWER_LAG_AT_LEADER.encode(&mut encoder, at_leader)?;
        let followers = self.0.iter().flat_map(|(_, m)| {
            m.replication
                .follower_lag
                .iter()
                .map(|((topic, partition), lag)| {
                    (vec![topic.clone(), partition.to_string()], Value::Int(*lag))
                })
        });
        REPLICA_LAG.encode(&mut encoder, followers)
    }
}

impl Declared for ReplicationCollector {
    fn families(&self) -> Vec<&'static Family> {
        vec![
            &ISR_SHRINKS,
            &ISR_EXPANDS,
            &LEADER_ELECTIONS,
            &DIVERGING_EPOCH_TRUNCATIONS,
            &READ_REPLICA_REDIRECTS,
            &FOLLOWER_CONSUMER_READS,
            &FOLLOWER_LAG_AT_LEADER,
            &REPLICA_LAG,
        ]
    }
}

const GROUP_TOPIC_PARTITION: &[&str] = &["group", "topic", "partition"];

static COMMITTED_OFFSET: Family = Family::gauge(
    "rill_consumer_group_committed_offset",
    "A consumer group's committed offset of a partition.",
    GROUP_TOPIC_PARTITION,
);
static CONSUMER_LAG: Family = Family::gauge(
    "rill_consumer_group_lag",
    "A consumer group's lag on a partition: its log end minus the committed offset, never below 0.",
    GROUP_TOPIC_PARTITION,
);

/// The committed offsets (from the groups' coordinator shards) and the lag,
/// joined with the log ends (from the partitions' owner shards, usually
/// others).
#[derive(Debug)]
pub(super) struct ConsumerLagCollector(pub(super) Shards);

impl Collector for ConsumerLagCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let log_ends: BTreeMap<(&str, i32), i64> = self
            .0
            .iter()
            .flat_map(|(_, m)| m.log_end_offsets.iter())
            .map(|(topic, partition, end)| ((topic.as_str(), *partition), *end))
            .collect();
        let committed = || {
            self.0
                .iter()
                .flat_map(|(_, m)| m.committed_offsets.iter())
                .map(|(group, topic, partition, offset)| {
                    let labels = vec![group.clone(), topic.clone(), partition.to_string()];
                    (labels, topic, *partition, *offset)
                })
        };
        let offsets = committed().map(|(labels, _, _, offset)| (labels, Value::Int(offset)));
        COMMITTED_OFFSET.encode(&mut encoder, offsets)?;
        let lags = committed().filter_map(|(labels, topic, partition, offset)| {
            let end = log_ends.get(&(topic.as_str(), partition))?;
            Some((labels, Value::Int((end - offset).max(0))))
        });
        CONSUMER_LAG.encode(&mut encoder, lags)
    }
}

impl Declared for ConsumerLagCollector {
    fn families(&self) -> Vec<&'static Family> {
        vec![&COMMITTED_OFFSET, &CONSUMER_LAG]
    }
}
