//! The active controller's decisions: pure functions of the image, the
//! controller config and `now_ms`, each returning the records to propose.
//!
//! A decision changes nothing by itself: its records take effect when the
//! quorum has committed them and every node applied them. So that two
//! decisions in a row see each other, the controller applies its own
//! proposals to its in-memory image as it makes them (KRaft does the same,
//! and reverts to the last committed image if it loses leadership); the
//! image a decision reads is therefore "committed + proposed by me".
//!
//! Every decision builds its records through a `Proposal`, which applies
//! each one to a scratch copy of the image as it is added: a decision that
//! would propose a record `apply` refuses is a bug and stops the process
//! here, at the decision, rather than on every node that applies it.
//!
//! Every partition change a decision proposes is completed by its
//! `Proposal` with the eligible leader replicas KIP-966 gives it ([`elr`]),
//! so no decision that moves an ISR can forget them.
//!
//! Files by responsibility:
//! - [`election`]: choosing a partition's leader and ISR when brokers leave,
//!   and for ElectLeaders (preferred, unclean).
//! - [`elr`]: eligible leader replicas (KIP-966), and the topic settings the
//!   elections read (`min.insync.replicas`, `unclean.leader.election.enable`).
//! - `leaders.rs`: ElectLeaders, and the automatic preferred-leader
//!   rebalance with its per-broker imbalance threshold.
//! - `acls.rs`: CreateAcls and DeleteAcls.
//! - `client_metrics.rs`: client-metrics subscriptions (KIP-714).
//! - `brokers.rs`: registration, heartbeats, fencing, unfencing, controlled
//!   shutdown, unregistration.
//! - `topics.rs`: CreateTopics, DeleteTopics, CreatePartitions, config changes.
//! - `partitions.rs`: AlterPartition.
//! - `producer_ids.rs`: producer-id blocks (KIP-730).
//! - `quotas.rs`: AlterClientQuotas.
//! - `reassignments.rs`: AlterPartitionReassignments (KIP-455): start,
//!   complete once the added replicas are in sync, cancel.
//! - `remote_segments.rs`: tiered storage's remote log segments (KIP-405):
//!   copy started and finished, deletion, a deleted topic's purge.

mod acls;
mod brokers;
mod client_metrics;
pub mod election;
pub mod elr;
mod features;
mod group_configs;
mod leaders;
mod partitions;
mod producer_ids;
mod quotas;
mod reassignments;
mod remote_segments;
mod topics;

use super::heartbeats::DEFAULT_BROKER_SESSION_TIMEOUT_MS;
use super::image::MetadataImage;
use super::record::MetadataRecord;

pub use brokers::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, HeartbeatOutcome, RegisterOutcome,
};
pub use features::{FeatureUpdate, UpgradeType};
pub use leaders::{ElectLeadersOutcome, ElectionType, PartitionElection};
pub use partitions::{AlterPartitionOutcome, AlterPartitionRequest};
pub use reassignments::{ongoing_reassignments, OngoingReassignment};
pub use remote_segments::{RemoteCopyRequest, RemoteSegmentTransition};
pub use topics::{CreateTopicRequest, TopicAssignment};

/// The controller settings its decisions depend on (Kafka's names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker not heard from for this long is
    /// fenced.
    pub broker_session_timeout_ms: i64,
    /// `unclean.leader.election.enable` of the config file: the default
    /// when neither the topic nor the cluster-wide dynamic config sets it.
    /// Whether an out-of-sync replica may lead when no ISR or ELR member is
    /// alive, losing what only those had.
    pub unclean_leader_election_enable: bool,
    /// `min.insync.replicas` of the config file: the default when neither
    /// the topic nor the cluster-wide dynamic config sets it. Below it an
    /// ISR's removed members become eligible leader replicas (KIP-966).
    pub min_insync_replicas: usize,
    /// `leader.imbalance.per.broker.percentage`: the automatic rebalance
    /// moves a broker's preferred leaderships back only when more than
    /// this share of them is led elsewhere.
    pub leader_imbalance_per_broker_percentage: u32,
}

impl Default for ControllerConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        ControllerConfig {
            broker_session_timeout_ms: DEFAULT_BROKER_SESSION_TIMEOUT_MS,
            unclean_leader_election_enable: false,
            min_insync_replicas: 1,
            leader_imbalance_per_broker_percentage: 10,
        }
    }
}

/// The decisions over one image and config.
#[derive(Clone, Copy, Debug)]
pub struct Controller<'a> {
    /// The image decisions read (committed plus this controller's proposals).
    pub image: &'a MetadataImage,
    /// The settings.
    pub config: &'a ControllerConfig,
}

impl<'a> Controller<'a> {
    /// Decisions over `image` with `config`.
    pub fn new(image: &'a MetadataImage, config: &'a ControllerConfig) -> Self {
        Controller { image, config }
    }

    /// An empty proposal over this controller's image.
    pub(crate) fn proposal(&self) -> Proposal {
        Proposal::new(self.image, self.config)
    }
}

/// Records being proposed, each applied to a scratch image as it is added,
/// so that later records of the same decision see earlier ones and an
/// invalid record is caught where it is made.
#[derive(Debug)]
pub(crate) struct Proposal {
    scratch: MetadataImage,
    records: Vec<MetadataRecord>,
    /// The settings the ELR of each partition change depends on.
    config: ControllerConfig,
}

impl Proposal {
    pub(crate) fn new(image: &MetadataImage, config: &ControllerConfig) -> Self {
        Proposal {
            scratch: image.clone(),
            records: Vec::new(),
            config: config.clone(),
        }
    }

    /// The image with the records so far applied.
    pub(crate) fn image(&self) -> &MetadataImage {
        &self.scratch
    }

    /// The settings decisions read.
    pub(crate) fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Adds a record; panics if the image refuses it (a controller bug). A
    /// partition change whose ELR fields the decision left unset gets them
    /// from KIP-966's rules first ([`elr::complete_elr`]).
    pub(crate) fn push(&mut self, record: MetadataRecord) {
        let record = match record {
            MetadataRecord::PartitionChange(change) => MetadataRecord::PartitionChange(
                elr::complete_elr(&self.scratch, &self.config, change),
            ),
            other => other,
        };
        let offset = self.scratch.last_applied_offset() + 1;
        if let Err(error) = self.scratch.apply(offset, &record) {
            panic!("the controller proposed a record the image refuses: {error}; {record:?}");
        }
        self.records.push(record);
    }

    pub(crate) fn into_records(self) -> Vec<MetadataRecord> {
        self.records
    }
}

#[cfg(test)]
mod election_tests;
#[cfg(test)]
mod reassignment_tests;
#[cfg(test)]
mod remote_segments_tests;
#[cfg(test)]
pub(crate) mod tests;
