//! A seeded simulation of one partition replicated on three brokers, with an
//! auditor of Kafka's safety rules (issue #18's replication half of the
//! simulation; TigerBeetle's VOPR is the model).
//!
//! Each step the scheduler, driven only by the seed, does one thing:
//! delivers a message in flight (any one: delay and reordering), drops or
//! duplicates one, has a follower fetch, a client produce with acks=all, a
//! replica fsync, a leader run its ISR check, a replica read the committed
//! metadata, a replica crash (losing its unsynced tail) or restart, a link
//! between two endpoints be cut or healed, or the controller fence an
//! unreachable broker or unfence a reachable one. Time advances by a random
//! few milliseconds per step, and now and then jumps ahead, so followers
//! fall out of the ISR and rejoin.
//!
//! After every step [`auditor`] checks the rules; the first violation stops
//! the run and names the seed and the step, so `simulate(seed, steps)`
//! reproduces it. The replication logic under test is the real one
//! ([`LeaderState`](crate::replication::LeaderState),
//! [`LeaderEpochCache`](crate::replication::LeaderEpochCache),
//! [`truncation_offset`](crate::replication::truncation_offset),
//! [`diverging_epoch`](crate::replication::diverging_epoch)); [`node`] is a
//! thin runtime around it and [`controller`] a minimal KRaft controller.

mod auditor;
mod controller;
mod network;
mod node;
mod rng;
#[cfg(test)]
mod tests;

pub use controller::ElectionRule;

use engine::types::{LeaderEpoch, Offset};

use self::auditor::{Acked, Auditor};
use self::controller::Controller;
use self::network::{Endpoint, Entry, Envelope, Network, Payload, CONTROLLER};
use self::node::{Node, Outbox};
use self::rng::SplitMix64;
use super::{LeaderConfig, ReplicaId, ReplicationError};

/// The simulated cluster's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Replicas of the partition (brokers 0..replicas).
    pub replicas: usize,
    /// `min.insync.replicas` and `replica.lag.time.max.ms`.
    pub leader: LeaderConfig,
    /// Who the controller may elect.
    pub election: ElectionRule,
    /// Followers fsync before they report a fetch offset (the rule the HW's
    /// durability depends on); `false` breaks it on purpose.
    pub follower_fsync_before_fetch: bool,
    /// Leaders wait for the controller to commit an ISR change (the HW uses
    /// the maximal ISR meanwhile); `true` breaks that on purpose: a leader
    /// applies its own proposal at once.
    pub leader_applies_isr_before_commit: bool,
    /// Bound on messages in flight.
    pub max_in_flight: usize,
    /// Records per fetch answer.
    pub max_entries_per_fetch: usize,
    /// Largest time step, in milliseconds.
    pub max_time_step_ms: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            replicas: 3,
            leader: LeaderConfig {
                min_insync_replicas: 2,
                replica_lag_time_max_ms: 300,
            },
            election: ElectionRule::Clean,
            follower_fsync_before_fetch: true,
            leader_applies_isr_before_commit: false,
            max_in_flight: 64,
            max_entries_per_fetch: 4,
            max_time_step_ms: 10,
        }
    }
}

/// What a run did (to see that a run exercised something).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Steps run.
    pub steps: u64,
    /// Records appended by a leader.
    pub records_produced: u64,
    /// Records acknowledged under acks=all.
    pub records_acked: u64,
    /// Produces refused with `NOT_ENOUGH_REPLICAS`.
    pub produces_refused: u64,
    /// Produces whose leader lost its leadership before acknowledging.
    pub produces_abandoned: u64,
    /// Leaders elected after the first.
    pub elections: u64,
    /// ISR shrinks the controller committed.
    pub isr_shrinks: u64,
    /// ISR expansions the controller committed.
    pub isr_expands: u64,
    /// Crashes.
    pub crashes: u64,
    /// Truncations that removed records (reconciliation and crashes).
    pub truncations: u64,
    /// Messages delivered, dropped (including by cut links and crashes)
    /// and duplicated.
    pub messages_delivered: u64,
    /// See `messages_delivered`.
    pub messages_dropped: u64,
    /// See `messages_delivered`.
    pub messages_duplicated: u64,
    /// The committed log's final length (the highest HW reached).
    pub committed_records: u64,
}

/// Which safety rule broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Two replicas led the same leader epoch.
    TwoLeadersInOneEpoch,
    /// A leader's HW moved back.
    HighWatermarkBackwards,
    /// A leader's log below its HW differs from what was committed before.
    CommittedPrefixDiverged,
    /// A replica's log below its own HW differs from the committed log.
    ReplicaDisagreesBelowHighWatermark,
    /// An acknowledged record is not in the committed log.
    AckedRecordNotCommitted,
    /// An ISR member lacks an acknowledged record.
    AckedRecordMissingFromIsr,
    /// A replication core refused an input a correct cluster never sends.
    CoreRefused,
}

/// A broken rule: the seed and step reproduce it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replication simulation seed {seed}, step {step}: {rule:?}: {detail}")]
pub struct Violation {
    /// The seed of the run.
    pub seed: u64,
    /// The step after which the auditor found it (0-based).
    pub step: u64,
    /// The rule.
    pub rule: Rule,
    /// What the auditor saw.
    pub detail: String,
}

/// Runs `steps` steps of the default simulation from `seed`.
pub fn simulate(seed: u64, steps: u64) -> Result<SimStats, Violation> {
    simulate_with(&SimConfig::default(), seed, steps)
}

/// Runs `steps` steps of the simulation with `config` from `seed`.
pub fn simulate_with(config: &SimConfig, seed: u64, steps: u64) -> Result<SimStats, Violation> {
    let mut world = World::new(*config, seed);
    for step in 0..steps {
        let outcome = world.step().and_then(|()| world.audit());
        if let Err((rule, detail)) = outcome {
            return Err(Violation {
                seed,
                step,
                rule,
                detail,
            });
        }
        world.stats.steps += 1;
    }
    Ok(world.final_stats())
}

/// An acks=all produce waiting for the HW.
#[derive(Debug, Clone, Copy)]
struct PendingAck {
    node: usize,
    epoch: LeaderEpoch,
    offset: Offset,
    entry: Entry,
}

struct World {
    config: SimConfig,
    rng: SplitMix64,
    now_ms: i64,
    replica_ids: Vec<ReplicaId>,
    nodes: Vec<Node>,
    controller: Controller,
    network: Network,
    pending_acks: Vec<PendingAck>,
    acked: Vec<Acked>,
    next_record_id: u64,
    auditor: Auditor,
    stats: SimStats,
}

impl World {
    fn new(config: SimConfig, seed: u64) -> Self {
        assert!(config.replicas >= 1);
        let replica_ids: Vec<ReplicaId> = (0..config.replicas as ReplicaId).collect();
        World {
            config,
            rng: SplitMix64::new(seed),
            now_ms: 0,
            nodes: replica_ids.iter().map(|&id| Node::new(id)).collect(),
            controller: Controller::new(replica_ids.clone(), config.election),
            replica_ids,
            network: Network::new(config.max_in_flight),
            pending_acks: Vec::new(),
            acked: Vec::new(),
            next_record_id: 1,
            auditor: Auditor::new(config.replicas),
            stats: SimStats::default(),
        }
    }

    /// One scheduler step, then the acks it completed.
    fn step(&mut self) -> Result<(), (Rule, String)> {
        self.now_ms += self.rng.below(self.config.max_time_step_ms + 1) as i64;
        if self.rng.chance(1) {
            // A clock jump (a stalled process, a VM pause): up to twice the
            // lag time at once, so in-sync followers can all look late.
            let lag_ms = self.config.leader.replica_lag_time_max_ms.max(1) as u64;
            self.now_ms += self.rng.below(2 * lag_ms) as i64;
        }
        let roll = self.rng.below(100);
        let result = match roll {
            0..=29 => self.deliver(),
            30..=44 => self.fetch(),
            45..=54 => self.produce(),
            55..=61 => self.fsync(),
            62..=68 => self.tick(),
            69..=77 => self.metadata_sync(),
            78..=80 => self.drop_message(),
            81..=83 => self.duplicate_message(),
            84 => self.crash(),
            85..=89 => self.restart(),
            90..=91 => self.cut_link(),
            92..=95 => self.heal_link(),
            96..=97 => self.fence_unreachable(),
            _ => self.unfence_reachable(),
        };
        result.map_err(|detail| (Rule::CoreRefused, detail))?;
        self.settle_acks();
        Ok(())
    }

    fn audit(&mut self) -> Result<(), (Rule, String)> {
        let isr = self.controller.published().isr.clone();
        self.auditor.check(&mut self.nodes, &isr, &self.acked)
    }

    fn final_stats(&self) -> SimStats {
        let counts = self.controller.counts;
        SimStats {
            elections: counts.elections,
            isr_shrinks: counts.isr_shrinks,
            isr_expands: counts.isr_expands,
            truncations: self.nodes.iter().map(|n| n.truncations).sum(),
            committed_records: self.auditor.committed_len() as u64,
            ..self.stats
        }
    }

    fn send(&mut self, from: Endpoint, outbox: Outbox) {
        for (to, payload) in outbox {
            if !self.network.send(Envelope { from, to, payload }) {
                self.stats.messages_dropped += 1;
            }
        }
    }

    fn up_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up)
            .collect()
    }

    fn deliver(&mut self) -> Result<(), String> {
        if self.network.in_flight() == 0 {
            return Ok(());
        }
        let index = self.rng.index(self.network.in_flight());
        let Envelope { from, to, payload } = self.network.take(index);
        let reachable =
            self.network.connected(from, to) && (to == CONTROLLER || self.nodes[to as usize].up);
        if !reachable {
            self.stats.messages_dropped += 1;
            return Ok(());
        }
        self.stats.messages_delivered += 1;
        if to == CONTROLLER {
            self.controller_receive(from, payload);
            return Ok(());
        }
        let outbox = self.nodes[to as usize].receive(
            from,
            payload,
            self.now_ms,
            self.config.max_entries_per_fetch,
        )?;
        self.send(to, outbox);
        Ok(())
    }

    fn controller_receive(&mut self, from: Endpoint, payload: Payload) {
        let Payload::AlterPartition(request) = payload else {
            return;
        };
        let answer = match self.controller.alter_partition(from, &request) {
            Ok(state) => Payload::AlterPartitionCommitted {
                leader_epoch: state.leader_epoch,
                partition_epoch: state.partition_epoch,
                isr: state.isr.clone(),
            },
            Err(()) => Payload::AlterPartitionRefused {
                proposal_id: request.proposal_id,
            },
        };
        self.send(CONTROLLER, vec![(from, answer)]);
    }

    fn fetch(&mut self) -> Result<(), String> {
        let Some(i) = self.rng.pick(&self.up_nodes()) else {
            return Ok(());
        };
        let fsync = self.config.follower_fsync_before_fetch;
        if let Some(message) = self.nodes[i].fetch_request(fsync) {
            self.send(i as Endpoint, vec![message]);
        }
        Ok(())
    }

    fn produce(&mut self) -> Result<(), String> {
        let leaders: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].leader.is_some())
            .collect();
        let Some(i) = self.rng.pick(&leaders) else {
            return Ok(());
        };
        let id = self.next_record_id;
        match self.nodes[i].produce(id) {
            Ok(Some((epoch, offset))) => {
                self.next_record_id += 1;
                self.stats.records_produced += 1;
                self.pending_acks.push(PendingAck {
                    node: i,
                    epoch,
                    offset,
                    entry: Entry { epoch, id },
                });
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(ReplicationError::NotEnoughReplicas { .. }) => {
                self.stats.produces_refused += 1;
                Ok(())
            }
            Err(other) => Err(other.to_string()),
        }
    }

    fn fsync(&mut self) -> Result<(), String> {
        if let Some(i) = self.rng.pick(&self.up_nodes()) {
            self.nodes[i].fsync();
        }
        Ok(())
    }

    fn tick(&mut self) -> Result<(), String> {
        let Some(i) = self.rng.pick(&self.up_nodes()) else {
            return Ok(());
        };
        let resend = self.rng.chance(30);
        let apply_before_commit = self.config.leader_applies_isr_before_commit;
        if let Some(message) = self.nodes[i].tick(self.now_ms, resend, apply_before_commit)? {
            self.send(i as Endpoint, vec![message]);
        }
        Ok(())
    }

    fn metadata_sync(&mut self) -> Result<(), String> {
        let Some(i) = self.rng.pick(&self.up_nodes()) else {
            return Ok(());
        };
        if !self.network.connected(i as Endpoint, CONTROLLER) {
            return Ok(());
        }
        let published = self.controller.published().clone();
        self.nodes[i].apply_metadata(
            &published,
            self.config.leader,
            &self.replica_ids,
            self.now_ms,
        )
    }

    fn drop_message(&mut self) -> Result<(), String> {
        if self.network.in_flight() > 0 {
            let index = self.rng.index(self.network.in_flight());
            self.network.take(index);
            self.stats.messages_dropped += 1;
        }
        Ok(())
    }

    fn duplicate_message(&mut self) -> Result<(), String> {
        if self.network.in_flight() > 0 {
            let index = self.rng.index(self.network.in_flight());
            if self.network.duplicate(index) {
                self.stats.messages_duplicated += 1;
            }
        }
        Ok(())
    }

    /// A crash is seen by the controller at once: a restarted broker
    /// registers a new incarnation, which KRaft treats as an unclean
    /// shutdown (fenced, out of the ISR, leadership moved).
    fn crash(&mut self) -> Result<(), String> {
        let Some(i) = self.rng.pick(&self.up_nodes()) else {
            return Ok(());
        };
        self.nodes[i].crash();
        self.controller.fence(i as ReplicaId, &mut self.rng);
        self.stats.crashes += 1;
        Ok(())
    }

    fn restart(&mut self) -> Result<(), String> {
        let down: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| !self.nodes[i].up)
            .collect();
        let Some(i) = self.rng.pick(&down) else {
            return Ok(());
        };
        self.nodes[i].restart();
        if self.network.connected(i as Endpoint, CONTROLLER) {
            self.controller.unfence(i as ReplicaId, &mut self.rng);
        }
        Ok(())
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        let mut all: Vec<Endpoint> = self.replica_ids.clone();
        all.push(CONTROLLER);
        all
    }

    fn cut_link(&mut self) -> Result<(), String> {
        let endpoints = self.endpoints();
        let a = endpoints[self.rng.index(endpoints.len())];
        let b = endpoints[self.rng.index(endpoints.len())];
        if a != b {
            self.network.cut(a, b);
        }
        Ok(())
    }

    fn heal_link(&mut self) -> Result<(), String> {
        if let Some((a, b)) = self.rng.pick(&self.network.cut_links()) {
            self.network.heal(a, b);
        }
        Ok(())
    }

    /// A broker that is down or cut off from the controller stops
    /// heartbeating; the controller fences it.
    fn fence_unreachable(&mut self) -> Result<(), String> {
        let unreachable: Vec<ReplicaId> = self
            .replica_ids
            .iter()
            .copied()
            .filter(|&r| !self.controller.is_fenced(r))
            .filter(|&r| !self.nodes[r as usize].up || !self.network.connected(r, CONTROLLER))
            .collect();
        if let Some(r) = self.rng.pick(&unreachable) {
            self.controller.fence(r, &mut self.rng);
        }
        Ok(())
    }

    fn unfence_reachable(&mut self) -> Result<(), String> {
        let reachable: Vec<ReplicaId> = self
            .replica_ids
            .iter()
            .copied()
            .filter(|&r| self.controller.is_fenced(r))
            .filter(|&r| self.nodes[r as usize].up && self.network.connected(r, CONTROLLER))
            .collect();
        if let Some(r) = self.rng.pick(&reachable) {
            self.controller.unfence(r, &mut self.rng);
        }
        Ok(())
    }

    /// Completes the acks=all produces whose leader's HW passed them, and
    /// abandons those whose leader is gone (the client times out).
    fn settle_acks(&mut self) {
        let nodes = &self.nodes;
        let mut completed = Vec::new();
        let mut abandoned = 0;
        self.pending_acks.retain(|ack| {
            let node = &nodes[ack.node];
            match node
                .leader
                .as_ref()
                .filter(|s| s.leader_epoch() == ack.epoch)
            {
                None => {
                    abandoned += 1;
                    false
                }
                Some(state) if state.acks_all_complete(ack.offset) => {
                    completed.push(Acked {
                        offset: ack.offset,
                        entry: ack.entry,
                    });
                    false
                }
                Some(_) => true,
            }
        });
        self.stats.produces_abandoned += abandoned;
        self.stats.records_acked += completed.len() as u64;
        self.acked.extend(completed);
    }
}
