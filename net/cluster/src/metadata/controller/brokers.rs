//! Broker lifecycle decisions: registration (BrokerRegistration), heartbeats
//! (BrokerHeartbeat), fencing a broker whose session expired, unfencing one
//! that caught up, controlled shutdown, and unregistration.
//!
//! A broker's life, as in KRaft: it registers (a new broker epoch, fenced),
//! heartbeats; once its heartbeat reports a metadata offset at or past its
//! registration it is unfenced and may lead. Silent for
//! `broker.session.timeout.ms` it is fenced: its leaderships move to live ISR
//! members and it leaves every ISR, so acks=all writes stop waiting for it.
//! A controlled shutdown does the same at the broker's request, before it
//! stops, so clients see a new leader instead of a timeout.

use std::collections::BTreeSet;

use crate::placement::BrokerId;

use super::super::error::MetadataError;
use super::super::heartbeats::BrokerHeartbeats;
use super::super::image::BrokerRegistration;
use super::super::record::{Endpoint, MetadataRecord, PartitionChangeRecord, SupportedFeature};
use super::election::{elect, elect_without, partitions_touching, Election};
use super::elr::effective_min_insync_replicas;
use super::{Controller, ControllerConfig, Proposal};

/// A BrokerRegistration request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistrationRequest {
    /// Broker id.
    pub broker_id: BrokerId,
    /// Random id of the registering process.
    pub incarnation_id: [u8; 16],
    /// Client listeners.
    pub listeners: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// The feature levels its binary supports.
    pub features: Vec<SupportedFeature>,
}

/// What a registration decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterOutcome {
    /// The broker's new epoch (its heartbeats carry it).
    pub broker_epoch: i64,
    /// Records to propose.
    pub records: Vec<MetadataRecord>,
}

/// A BrokerHeartbeat request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerHeartbeatRequest {
    /// Broker id.
    pub broker_id: BrokerId,
    /// Its epoch.
    pub broker_epoch: i64,
    /// The highest metadata offset the broker has applied.
    pub current_metadata_offset: i64,
    /// The broker asks to stay fenced (it is not ready to serve).
    pub want_fence: bool,
    /// The broker asks for a controlled shutdown.
    pub want_shutdown: bool,
    /// Every one of its log dirs is cordoned (KIP-1066).
    pub cordoned: bool,
    /// The partitions it cannot append to now (a full data dir, an offline
    /// partition), as `(topic id, partition)`.
    pub unwritable: Vec<([u8; 16], i32)>,
}

/// What a heartbeat decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    /// Records to propose (unfencing, or a controlled shutdown).
    pub records: Vec<MetadataRecord>,
    /// Whether the broker has caught up with its registration.
    pub is_caught_up: bool,
    /// Whether the broker is fenced once `records` are applied.
    pub is_fenced: bool,
    /// Whether a broker asking for shutdown may now stop (it leads nothing
    /// once `records` are applied).
    pub should_shut_down: bool,
}

impl Controller<'_> {
    /// The broker's registration, if `broker_epoch` is its current epoch.
    pub(super) fn registered(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<&BrokerRegistration, MetadataError> {
        let broker = self
            .image
            .broker(broker_id)
            .ok_or(MetadataError::BrokerNotRegistered { broker_id })?;
        if broker.broker_epoch != broker_epoch {
            return Err(MetadataError::StaleBrokerEpoch {
                broker_id,
                broker_epoch,
                current_epoch: broker.broker_epoch,
            });
        }
        Ok(broker)
    }

    /// BrokerRegistration: a new epoch for the broker, which starts fenced.
    ///
    /// Refused while another incarnation of the same id still has a live
    /// session (two processes with one `node.id`); a fenced incarnation
    /// has none (Kafka's rule), so a broker that stopped cleanly, which its
    /// controlled shutdown fenced, registers again at once. A live
    /// incarnation that re-registers (a restart faster than its session)
    /// first loses its leaderships and ISR memberships, as if fenced: its
    /// new process has not caught up yet.
    pub fn register_broker(
        &self,
        heartbeats: &mut BrokerHeartbeats,
        request: &BrokerRegistrationRequest,
        now_ms: i64,
    ) -> Result<RegisterOutcome, MetadataError> {
        let broker_id = request.broker_id;
        if broker_id < 0 {
            return Err(MetadataError::InvalidRequest {
                reason: format!("negative broker id {broker_id}"),
            });
        }
        self.check_registration_features(broker_id, &request.features)?;
        let mut proposal = self.proposal();
        if let Some(existing) = self.image.broker(broker_id) {
            let session = heartbeats.has_valid_session(
                broker_id,
                now_ms,
                self.config.broker_session_timeout_ms,
            );
            if existing.incarnation_id != request.incarnation_id && !existing.fenced && session {
                return Err(MetadataError::DuplicateBrokerRegistration { broker_id });
            }
            // A fenced incarnation serves nothing already; the ISRs it was
            // last in are kept so that it can lead them cleanly once back.
            if !existing.fenced {
                move_away(&mut proposal, self.config, &BTreeSet::from([broker_id]));
            }
        }
        let broker_epoch =
            self.image
                .last_broker_epoch()
                .checked_add(1)
                .ok_or(MetadataError::InvalidRequest {
                    reason: "broker epochs exhausted".to_owned(),
                })?;
        proposal.push(MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id: request.incarnation_id,
            broker_epoch,
            listeners: request.listeners.clone(),
            rack: request.rack.clone(),
            features: request.features.clone(),
        });
        heartbeats.touch(broker_id, now_ms);
        assert!(proposal.image().broker(broker_id).is_some_and(|b| b.fenced));
        Ok(RegisterOutcome {
            broker_epoch,
            records: proposal.into_records(),
        })
    }

    /// BrokerHeartbeat: renews the broker's session, unfences it once it has
    /// caught up (unless it asks to stay fenced), and runs its controlled
    /// shutdown when it asks for one.
    pub fn heartbeat(
        &self,
        heartbeats: &mut BrokerHeartbeats,
        request: &BrokerHeartbeatRequest,
        now_ms: i64,
    ) -> Result<HeartbeatOutcome, MetadataError> {
        let broker = self.registered(request.broker_id, request.broker_epoch)?;
        heartbeats.touch(request.broker_id, now_ms);
        let is_caught_up = request.current_metadata_offset >= broker.registered_at_offset;
        let mut records = if request.want_shutdown {
            self.controlled_shutdown(request.broker_id, request.broker_epoch)?
        } else if broker.fenced && !request.want_fence && is_caught_up {
            self.unfence_broker(request.broker_id)?
        } else {
            Vec::new()
        };
        if broker.cordoned != request.cordoned && !request.want_shutdown {
            records.push(MetadataRecord::CordonBroker {
                broker_id: request.broker_id,
                broker_epoch: request.broker_epoch,
                cordoned: request.cordoned,
            });
        }
        if records.is_empty() && !broker.fenced {
            let unwritable = request.unwritable.iter().copied().collect();
            heartbeats.set_unwritable(request.broker_id, unwritable);
            records = self.move_off_unwritable(heartbeats, request.broker_id);
        }
        let unfenced = records
            .iter()
            .any(|record| matches!(record, MetadataRecord::UnfenceBroker { .. }));
        let is_fenced = (broker.fenced && !unfenced) || request.want_shutdown;
        Ok(HeartbeatOutcome {
            records,
            is_caught_up,
            is_fenced,
            should_shut_down: request.want_shutdown,
        })
    }

    /// The changes that take `broker_id` out of the leadership and ISR of
    /// each partition it said it cannot append to, as KIP-858 does for a
    /// failed log dir: a new leader from the ISR members that can, the ISR
    /// without those that cannot. A partition whose every live ISR member
    /// cannot append keeps its leader: reads go on from it. So does one
    /// whose ISR would fall below `min.insync.replicas`.
    fn move_off_unwritable(
        &self,
        heartbeats: &BrokerHeartbeats,
        broker_id: BrokerId,
    ) -> Vec<MetadataRecord> {
        let mut proposal = self.proposal();
        for (topic_id, partition) in heartbeats.unwritable_of(broker_id) {
            let image = proposal.image();
            let Some(topic) = image.topic(&topic_id) else {
                continue;
            };
            let Some(state) = topic.partitions.get(&partition) else {
                continue;
            };
            if state.leader != broker_id && !state.isr.contains(&broker_id) {
                continue;
            }
            let leaving = heartbeats.unwritable_at(topic_id, partition);
            let writable = |b: &BrokerId| !leaving.contains(b) && image.is_live(*b);
            if !state.isr.iter().any(writable) {
                continue;
            }
            let change = elect(image, topic, partition, &leaving, Election::Online);
            // Only a move that leaves min.insync.replicas in the ISR: below
            // it acks=all writes are refused either way, and the move would
            // hide the last acknowledged records behind the new leader's
            // high watermark (one fetch round behind the old leader's),
            // which cannot advance with fewer members than that.
            let min_isr =
                effective_min_insync_replicas(image, self.config, topic, state.replicas.len());
            let keeps_min_isr = |change: &PartitionChangeRecord| {
                change.isr.as_ref().map_or(state.isr.len(), Vec::len) >= min_isr
            };
            if let Some(change) = change.filter(keeps_min_isr) {
                proposal.push(MetadataRecord::PartitionChange(change));
            }
        }
        proposal.into_records()
    }

    /// Fences every unfenced broker whose session has expired at `now_ms`:
    /// their leaderships move to live ISR members, they leave every ISR.
    pub fn fence_stale_brokers(
        &self,
        heartbeats: &mut BrokerHeartbeats,
        now_ms: i64,
    ) -> Vec<MetadataRecord> {
        let expired = heartbeats.expired(self.image, now_ms, self.config.broker_session_timeout_ms);
        if expired.is_empty() {
            return Vec::new();
        }
        let leaving: BTreeSet<BrokerId> = expired.into_iter().collect();
        self.fence(&leaving)
    }

    /// The records fencing `leaving`: their leaderships and ISR places
    /// first, then each broker.
    fn fence(&self, leaving: &BTreeSet<BrokerId>) -> Vec<MetadataRecord> {
        let mut proposal = self.proposal();
        move_away(&mut proposal, self.config, leaving);
        for &broker_id in leaving {
            let broker_epoch = proposal
                .image()
                .broker(broker_id)
                .map_or(-1, |broker| broker.broker_epoch);
            proposal.push(MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            });
        }
        proposal.into_records()
    }

    /// Fences the given unfenced brokers now, before their session expires:
    /// the controller knows their process is gone (its connection to them
    /// is refused, which only a dead or restarting process answers). Their
    /// leaderships move and they leave every ISR, as at a session expiry;
    /// their sessions end so that a heartbeat from the same epoch does not
    /// count as alive. Brokers unknown or fenced already are skipped.
    pub fn fence_brokers_now(
        &self,
        heartbeats: &mut BrokerHeartbeats,
        broker_ids: &[BrokerId],
    ) -> Vec<MetadataRecord> {
        let leaving: BTreeSet<BrokerId> = broker_ids
            .iter()
            .copied()
            .filter(|&id| self.image.is_live(id))
            .collect();
        if leaving.is_empty() {
            return Vec::new();
        }
        for &broker_id in &leaving {
            heartbeats.forget(broker_id);
        }
        self.fence(&leaving)
    }

    /// Unfences a fenced broker and gives it the leadership of every
    /// leaderless partition it can now lead. Nothing if it is not fenced.
    pub fn unfence_broker(
        &self,
        broker_id: BrokerId,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let broker = self
            .image
            .broker(broker_id)
            .ok_or(MetadataError::BrokerNotRegistered { broker_id })?;
        if !broker.fenced {
            return Ok(Vec::new());
        }
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::UnfenceBroker {
            broker_id,
            broker_epoch: broker.broker_epoch,
        });
        let leaderless: Vec<([u8; 16], i32)> = proposal
            .image()
            .partitions()
            .filter(|(_, _, state)| {
                state.leader == super::super::record::NO_LEADER
                    && state.replicas.contains(&broker_id)
            })
            .map(|(topic, partition, _)| (topic.topic_id, partition))
            .collect();
        for (topic_id, partition) in leaderless {
            let change = proposal.image().topic(&topic_id).and_then(|topic| {
                elect_without(
                    proposal.image(),
                    self.config,
                    topic,
                    partition,
                    &BTreeSet::new(),
                )
            });
            if let Some(change) = change {
                proposal.push(MetadataRecord::PartitionChange(change));
            }
        }
        Ok(proposal.into_records())
    }

    /// Controlled shutdown: the broker's leaderships move to live ISR
    /// members first, it leaves every ISR, and it is fenced. Nothing if it
    /// is fenced already.
    pub fn controlled_shutdown(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let broker = self.registered(broker_id, broker_epoch)?;
        if broker.fenced {
            return Ok(Vec::new());
        }
        let mut proposal = self.proposal();
        move_away(&mut proposal, self.config, &BTreeSet::from([broker_id]));
        proposal.push(MetadataRecord::FenceBroker {
            broker_id,
            broker_epoch,
        });
        Ok(proposal.into_records())
    }

    /// Removes a broker from the cluster for good: its leaderships and ISR
    /// memberships go first. Its id may stay in replica lists (offline
    /// replicas) until they are reassigned.
    pub fn unregister_broker(
        &self,
        heartbeats: &mut BrokerHeartbeats,
        broker_id: BrokerId,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let broker = self
            .image
            .broker(broker_id)
            .ok_or(MetadataError::BrokerNotRegistered { broker_id })?;
        let mut proposal = self.proposal();
        move_away(&mut proposal, self.config, &BTreeSet::from([broker_id]));
        proposal.push(MetadataRecord::UnregisterBroker {
            broker_id,
            broker_epoch: broker.broker_epoch,
        });
        heartbeats.forget(broker_id);
        Ok(proposal.into_records())
    }
}

/// Adds the partition changes that take the `leaving` brokers out of every
/// leadership and ISR.
fn move_away(proposal: &mut Proposal, config: &ControllerConfig, leaving: &BTreeSet<BrokerId>) {
    for (topic_id, partition) in partitions_touching(proposal.image(), leaving) {
        let image = proposal.image();
        let change = image
            .topic(&topic_id)
            .and_then(|topic| elect_without(image, config, topic, partition, leaving));
        if let Some(change) = change {
            proposal.push(MetadataRecord::PartitionChange(change));
        }
    }
    for &broker_id in leaving {
        let still_leads = proposal
            .image()
            .partitions()
            .any(|(_, _, state)| state.leader == broker_id);
        assert!(
            !still_leads,
            "broker {broker_id} still leads after moving away"
        );
    }
}
