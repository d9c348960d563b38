//! The cluster's gauges for `/metrics`: the broker's state (Kafka's
//! `BrokerState`), then, from this broker's view of the committed
//! metadata, the quorum (term, commit index, the active controller), the
//! brokers (live, fenced), and the partitions this broker leads (offline,
//! under-replicated — Kafka's `UnderReplicatedPartitions`), and, on a
//! broker-only node, how it learned the metadata (deltas or whole images).

use crate::Shard;
use kernel::metrics::prometheus_client::collector::Collector;
use kernel::metrics::prometheus_client::encoding::DescriptorEncoder;
use kernel::metrics::registry::{Declared, Family, Value};

/// The gauges (and two counters), in the order they are written.
static GAUGES: [Family; 12] = [
    Family::gauge(
        "rill_broker_state",
        "Kafka's BrokerState: 1 starting (answers no client until unfenced), 3 running, 6 pending controlled shutdown, 7 shutting down",
        &[],
    ),
    Family::gauge(
        "rill_metadata_quorum_term",
        "the metadata quorum's Raft term",
        &[],
    ),
    Family::gauge(
        "rill_metadata_quorum_commit_index",
        "the highest committed metadata offset known here",
        &[],
    ),
    Family::gauge(
        "rill_metadata_applied_offset",
        "the metadata offset this broker has applied",
        &[],
    ),
    Family::gauge(
        "rill_active_controller",
        "1 when this node is the active controller",
        &[],
    ),
    Family::gauge("rill_brokers_live", "registered, unfenced brokers", &[]),
    Family::gauge(
        "rill_brokers_fenced",
        "registered brokers fenced (no heartbeat, or shutting down)",
        &[],
    ),
    Family::gauge("rill_partitions_led", "partitions this broker leads", &[]),
    Family::gauge(
        "rill_under_replicated_partitions",
        "partitions led here whose ISR lacks a replica",
        &[],
    ),
    Family::gauge(
        "rill_offline_partitions",
        "partitions of the cluster without a leader",
        &[],
    ),
    Family::counter(
        "rill_metadata_deltas_fetched_total",
        "metadata answers a broker-only node took as the records since its offset",
        &[],
    ),
    Family::counter(
        "rill_metadata_images_fetched_total",
        "metadata answers a broker-only node took as the whole image",
        &[],
    ),
];

/// The values of [`GAUGES`], read at scrape time: the collector of the
/// cluster's gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterGauges([u64; 12]);

impl ClusterGauges {
    /// Reads the gauges from this broker's view of the cluster.
    pub fn read(shard: &Shard) -> Self {
        let view = shard.runtime().view.clone();
        let image = view.image();
        let quorum = view.quorum();
        let own = shard.config.broker_id;
        let (mut live, mut fenced) = (0u64, 0u64);
        for broker in image.brokers().values() {
            if broker.fenced {
                fenced += 1;
            } else {
                live += 1;
            }
        }
        let (mut leader_count, mut under_replicated, mut offline) = (0u64, 0u64, 0u64);
        for (_, _, state) in image.partitions() {
            if state.leader < 0 {
                offline += 1;
            }
            if state.leader == own {
                leader_count += 1;
                if state.isr.len() < state.replicas.len() {
                    under_replicated += 1;
                }
            }
        }
        ClusterGauges([
            u64::from(kernel::broker_state::get()),
            quorum.term,
            quorum.commit_index,
            quorum.applied_index,
            u64::from(quorum.leader_id == Some(own)),
            live,
            fenced,
            leader_count,
            under_replicated,
            offline,
            super::metadata_fetch::OBSERVED_DELTAS.load(std::sync::atomic::Ordering::Relaxed),
            super::metadata_fetch::OBSERVED_IMAGES.load(std::sync::atomic::Ordering::Relaxed),
        ])
    }
}

impl Collector for ClusterGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        for (family, value) in GAUGES.iter().zip(self.0) {
            family.encode(&mut encoder, [(Vec::new(), Value::from(value))])?;
        }
        Ok(())
    }
}

impl Declared for ClusterGauges {
    fn families(&self) -> Vec<&'static Family> {
        GAUGES.iter().collect()
    }
}
