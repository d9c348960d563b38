//! The simulated world and its scheduler: three [`Node`]s, the
//! [`Controller`], the [`Network`], the clients' acks=all produces, and the
//! one random choice per step of what happens next. Every step's outcome
//! comes from the seeded [`SplitMix64`], so a seed replays a run.

use engine::types::{LeaderEpoch, Offset};

use super::auditor::{Acked, Auditor};
use super::controller::Controller;
use super::network::{Endpoint, Entry, Envelope, Network, Payload, CONTROLLER};
use super::node::{Node, Outbox};
use super::rng::SplitMix64;
use super::{Rule, SimConfig, SimStats};
use crate::replication::{ReplicaId, ReplicationError};

/// An acks=all produce waiting for the HW.
#[derive(Debug, Clone, Copy)]
struct PendingAck {
    node: usize,
    epoch: LeaderEpoch,
    offset: Offset,
    entry: Entry,
}

pub(super) struct World {
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
    pub(super) fn new(config: SimConfig, seed: u64) -> Self {
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
    pub(super) fn step(&mut self) -> Result<(), (Rule, String)> {
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

    pub(super) fn audit(&mut self) -> Result<(), (Rule, String)> {
        let isr = self.controller.published().isr.clone();
        self.auditor.check(&mut self.nodes, &isr, &self.acked)
    }

    pub(super) fn count_step(&mut self) {
        self.stats.steps += 1;
    }

    pub(super) fn final_stats(&self) -> SimStats {
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
