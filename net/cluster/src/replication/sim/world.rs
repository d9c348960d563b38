//! The simulated world and its scheduler: three [`Node`]s with a
//! [`Coordinator`] each, the [`Controller`], the [`Network`], the clients'
//! acks=all produces, the transactional clients and the [`DataPartition`]s
//! their markers go to, and the one random choice per step of what happens
//! next. Every step's outcome comes from the seeded [`SplitMix64`], so a
//! seed replays a run.

use engine::types::{LeaderEpoch, Offset};

use super::auditor::{Acked, Auditor};
use super::config::SimConfig;
use super::controller::Controller;
use super::coordinator::{Action, Coordinator, TxnIo};
use super::network::{
    data_partition_endpoint, Endpoint, Entry, Envelope, Network, Payload, CONTROLLER,
};
use super::node::{Node, Outbox};
use super::report::{Rule, SimStats};
use super::rng::SplitMix64;
use super::txn::{DataPartition, Decision, Marker, ProducerId, DATA_PARTITIONS};
use crate::replication::{ReplicaId, ReplicationError};

/// An acks=all produce waiting for the HW.
#[derive(Debug, Clone, Copy)]
struct PendingAck {
    node: usize,
    epoch: LeaderEpoch,
    offset: Offset,
    entry: Entry,
}

/// A transactional client (one producer): between transactions, or with
/// one open whose data it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Idle,
    Open { txn: u64 },
}

/// A WriteTxnMarkers request on its way to a data partition. Markers are
/// lost only to a full network; they wait any number of steps, and all the
/// time their link is cut (a request in a socket buffer), so one can arrive
/// after its coordinator lost its lease and a newer one finished the
/// transaction: the case the coordinator-epoch fence is for.
#[derive(Debug, Clone, Copy)]
struct MarkerInFlight {
    from: usize,
    partition: usize,
    marker: Marker,
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
    /// One per node.
    coordinators: Vec<Coordinator>,
    clients: Vec<Client>,
    partitions: Vec<DataPartition>,
    markers: Vec<MarkerInFlight>,
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
            controller: Controller::new(
                replica_ids.clone(),
                config.election,
                config.eligible_leader_replicas,
            ),
            replica_ids,
            network: Network::new(config.max_in_flight),
            pending_acks: Vec::new(),
            acked: Vec::new(),
            next_record_id: 1,
            coordinators: (0..config.replicas)
                .map(|_| Coordinator::default())
                .collect(),
            clients: vec![Client::Idle; config.producers],
            partitions: (0..DATA_PARTITIONS)
                .map(|_| DataPartition::default())
                .collect(),
            markers: Vec::new(),
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
        let roll = self.rng.below(130);
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
            98..=99 => self.unfence_reachable(),
            100..=114 => self.client_request(),
            115..=116 => self.coordinator_tick(),
            117 => self.cut_marker_link(),
            118 => self.heal_marker_link(),
            _ => self.deliver_marker(),
        };
        result.map_err(|detail| (Rule::CoreRefused, detail))?;
        self.settle_acks();
        self.settle_coordinators()
            .map_err(|detail| (Rule::CoreRefused, detail))
    }

    pub(super) fn audit(&mut self) -> Result<(), (Rule, String)> {
        let isr = self.controller.published().isr.clone();
        self.auditor.check(&mut self.nodes, &isr, &self.acked)?;
        self.auditor.check_transactions(&self.partitions)
    }

    pub(super) fn count_step(&mut self) {
        self.stats.steps += 1;
    }

    pub(super) fn final_stats(&self) -> SimStats {
        let counts = self.controller.counts;
        let coordinators = self.coordinators.iter().map(|c| c.counts);
        SimStats {
            transactions_committed: coordinators.clone().map(|c| c.committed).sum(),
            transactions_aborted: coordinators.clone().map(|c| c.aborted).sum(),
            transactions_timed_out: coordinators.clone().map(|c| c.timed_out).sum(),
            coordinator_writes_abandoned: coordinators.clone().map(|c| c.writes_abandoned).sum(),
            coordinator_loads: coordinators.map(|c| c.loads).sum(),
            elections: counts.elections,
            elections_from_elr: counts.elections_from_elr,
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
        match self.nodes[i].produce(id, None) {
            Ok(Some((epoch, offset))) => {
                self.next_record_id += 1;
                self.stats.records_produced += 1;
                self.pending_acks.push(PendingAck {
                    node: i,
                    epoch,
                    offset,
                    entry: Entry {
                        epoch,
                        id,
                        txn: None,
                    },
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
        self.coordinators[i].unload();
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

    /// Heals a cut link between replicas and the controller (links to
    /// data partitions have their own step).
    fn heal_link(&mut self) -> Result<(), String> {
        let endpoints = self.endpoints();
        let links: Vec<(Endpoint, Endpoint)> = self
            .network
            .cut_links()
            .into_iter()
            .filter(|&(_, b)| endpoints.contains(&b))
            .collect();
        if let Some((a, b)) = self.rng.pick(&links) {
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

    /// Runs `call` on node `i`'s coordinator, then what it asked for.
    fn with_coordinator(
        &mut self,
        i: usize,
        call: impl FnOnce(&mut Coordinator, &mut Node, &mut TxnIo) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut io = TxnIo {
            now_ms: self.now_ms,
            next_id: self.next_record_id,
            writes_locally: self.config.coordinator_writes_locally,
            loads_early: self.config.coordinator_loads_early,
            epoch_per_transaction: self.config.producer_epoch_per_transaction,
            txn_timeout_ms: self.config.txn_timeout_ms,
            actions: Vec::new(),
        };
        let result = call(&mut self.coordinators[i], &mut self.nodes[i], &mut io);
        self.next_record_id = io.next_id;
        self.apply_actions(i, io.actions);
        result
    }

    /// A transactional client's next request, to a broker whose
    /// coordinator believes it is one (the client found it by metadata
    /// that may be stale): begin a transaction, or end the open one.
    fn client_request(&mut self) -> Result<(), String> {
        let producer = self.rng.index(self.clients.len());
        let coordinators: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up && self.coordinators[i].lease().is_some())
            .collect();
        let Some(i) = self.rng.pick(&coordinators) else {
            return Ok(());
        };
        let producer_id = producer as ProducerId;
        match self.clients[producer] {
            Client::Idle => {
                // A non-empty set of the data partitions.
                let partitions = 1 + self.rng.below((1 << DATA_PARTITIONS) - 1) as u8;
                self.with_coordinator(i, |c, node, io| c.begin(node, producer_id, partitions, io))
            }
            Client::Open { txn } => {
                let decision = if self.rng.chance(60) {
                    Decision::Commit
                } else {
                    Decision::Abort
                };
                self.with_coordinator(i, |c, node, io| c.end(node, producer_id, txn, decision, io))
            }
        }
    }

    fn coordinator_tick(&mut self) -> Result<(), String> {
        let Some(i) = self.rng.pick(&self.up_nodes()) else {
            return Ok(());
        };
        self.with_coordinator(i, |c, node, io| c.tick(node, io))
    }

    /// Cuts the link between a broker and a data partition's leader.
    fn cut_marker_link(&mut self) -> Result<(), String> {
        let broker = self.replica_ids[self.rng.index(self.replica_ids.len())];
        let partition = self.rng.index(DATA_PARTITIONS);
        self.network.cut(broker, data_partition_endpoint(partition));
        Ok(())
    }

    /// Heals a cut link to a data partition's leader. Rarer than other
    /// heals: the markers waiting on it arrive late, after the
    /// transaction moved on.
    fn heal_marker_link(&mut self) -> Result<(), String> {
        let endpoints = self.endpoints();
        let links: Vec<(Endpoint, Endpoint)> = self
            .network
            .cut_links()
            .into_iter()
            .filter(|&(_, b)| !endpoints.contains(&b))
            .collect();
        if let Some((a, b)) = self.rng.pick(&links) {
            self.network.heal(a, b);
        }
        Ok(())
    }

    /// Delivers one marker in flight (any one: delay and reordering), and
    /// its answer to the coordinator that sent it; one over a cut link
    /// waits.
    fn deliver_marker(&mut self) -> Result<(), String> {
        if self.markers.is_empty() {
            return Ok(());
        }
        let index = self.rng.index(self.markers.len());
        let MarkerInFlight {
            from,
            partition,
            marker,
        } = self.markers[index];
        let link = data_partition_endpoint(partition);
        if !self.network.connected(from as Endpoint, link) {
            return Ok(());
        }
        self.markers.swap_remove(index);
        let fenced = !self.config.markers_unfenced;
        let accepted = self.partitions[partition].apply_marker(marker, fenced);
        if accepted {
            self.stats.markers_accepted += 1;
        } else {
            self.stats.markers_refused += 1;
        }
        if !self.nodes[from].up {
            return Ok(());
        }
        self.with_coordinator(from, |c, node, io| {
            c.on_marker_answer(node, partition, marker, accepted, io)
        })
    }

    /// Every up coordinator loads, unloads and acts on what the HW passed.
    fn settle_coordinators(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].up {
                self.with_coordinator(i, |c, node, io| {
                    c.settle(node, io);
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// What a coordinator asked for: markers onto the way, answers to the
    /// clients (who write their data when a transaction opens).
    fn apply_actions(&mut self, from: usize, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::SendMarker { partition, marker } => {
                    if self.markers.len() < self.config.max_in_flight {
                        self.markers.push(MarkerInFlight {
                            from,
                            partition,
                            marker,
                        });
                    } else {
                        self.stats.markers_dropped += 1;
                    }
                }
                Action::Begun {
                    producer,
                    txn,
                    producer_epoch,
                    partitions,
                } => {
                    self.stats.transactions_begun += 1;
                    self.clients[producer as usize] = Client::Open { txn };
                    for p in (0..DATA_PARTITIONS).filter(|p| partitions & (1 << p) != 0) {
                        self.partitions[p].write(producer, txn, producer_epoch);
                    }
                }
                Action::Decided { producer, txn, .. } => {
                    let client = &mut self.clients[producer as usize];
                    if *client == (Client::Open { txn }) {
                        *client = Client::Idle;
                    }
                }
            }
        }
    }
}
