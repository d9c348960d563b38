//! rill's cluster cores: what a Kafka cluster decides, as pure modules
//! stepped with messages and `now_ms`, so that a seeded simulation can drive
//! several nodes and an auditor can check them. It depends only on `engine`.
//! The runtimes that do the I/O (a follower's fetcher, the quorum's
//! transport, applying metadata on every shard) live in `rill-runtimes`
//! (`cluster_runtime`, `replication_runtime`).
//!
//! Map of the modules:
//! - [`placement`]: Kafka's replica placement (rack-unaware and rack-aware)
//!   and the checks of an explicit replica assignment.
//! - [`metadata`]: the cluster metadata state machine: broker registrations
//!   and fencing, topics, partitions with leader, leader epoch, ISR and
//!   eligible leader replicas, topic configs, producer-id blocks; records
//!   applied in log order; the controller's decisions (elections included).
//! - [`replication`]: a partition leader's view of its followers (LEO, ISR,
//!   high watermark, `min.insync.replicas`) and a returning replica's
//!   truncation point from leader epochs.
//! - [`quorum`]: the metadata quorum on raft-rs, its durable log, and a
//!   seeded simulation of several nodes.

pub mod metadata;
pub mod placement;
pub mod quorum;
pub mod replication;
