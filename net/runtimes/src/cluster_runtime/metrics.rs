//! The cluster's gauges for `/metrics`, from this broker's view of the
//! committed metadata: the quorum (term, commit index, the active
//! controller), the brokers (live, fenced), and the partitions this broker
//! leads (offline, under-replicated — Kafka's `UnderReplicatedPartitions`).

use super::view::ClusterView;
use kernel::shard::Shard;
use std::fmt::Write;

/// The cluster gauges in Prometheus' text format.
pub fn render(shard: &Shard) -> String {
    let view = shard.service::<ClusterView>();
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
    let gauges: [(&str, &str, u64); 9] = [
        (
            "rill_metadata_quorum_term",
            "the metadata quorum's Raft term",
            quorum.term,
        ),
        (
            "rill_metadata_quorum_commit_index",
            "the highest committed metadata offset known here",
            quorum.commit_index,
        ),
        (
            "rill_metadata_applied_offset",
            "the metadata offset this broker has applied",
            quorum.applied_index,
        ),
        (
            "rill_active_controller",
            "1 when this node is the active controller",
            u64::from(quorum.leader_id == Some(own)),
        ),
        ("rill_brokers_live", "registered, unfenced brokers", live),
        (
            "rill_brokers_fenced",
            "registered brokers fenced (no heartbeat, or shutting down)",
            fenced,
        ),
        (
            "rill_partitions_led",
            "partitions this broker leads",
            leader_count,
        ),
        (
            "rill_under_replicated_partitions",
            "partitions led here whose ISR lacks a replica",
            under_replicated,
        ),
        (
            "rill_offline_partitions",
            "partitions of the cluster without a leader",
            offline,
        ),
    ];
    let mut out = String::new();
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {value}");
    }
    out
}
