//! A seeded simulation of the metadata quorum (TigerBeetle's VOPR and
//! FoundationDB's simulation are the models): 3 or 5 [`QuorumNode`]s on
//! [`SimStorage`], a network that delays, drops, duplicates and reorders
//! messages and splits into partitions, crash-restarts that keep only what
//! the store made durable, clock jumps (a burst of ticks on one node), and
//! clients proposing at random nodes. After every step the [`Auditor`]
//! checks agreement, election safety and durability (see its doc).
//!
//! A run is a function of its seed: the scheduler draws from one
//! [`SplitMix64`], each node's election timeouts from a seed drawn from it,
//! and every collection is ordered. A failing run names its seed and step
//! in the [`Violation`], so `simulate(seed, steps)` replays it.

use raft::eraftpb::{Message, MessageType};

use super::auditor::{Auditor, ViolationKind};
use super::node::{QuorumConfig, QuorumNode, StateMachine};
use super::rng::SplitMix64;
use super::sim_storage::{DiskFault, SimStorage};
use super::storage::LogStore;
use super::QuorumError;

/// The most messages in flight; past it the network drops new ones, as a
/// full socket buffer would.
const NETWORK_MESSAGES_MAX: usize = 4096;
/// A message is delivered at the earliest this many steps after it is sent
/// (drawn in `0..`).
const DELAY_STEPS_MAX: u64 = 8;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The seed: the same seed, the same run.
    pub seed: u64,
    /// How many scheduler steps.
    pub steps: u64,
    /// Quorum size (3 or 5 make sense).
    pub node_count: u64,
    /// Makes every store lie about fsync (see [`DiskFault`]); for the
    /// tests that the auditor catches a broken disk.
    pub disk_fault: DiskFault,
}

impl SimConfig {
    /// A run of `steps` steps; odd seeds run 5 nodes, even seeds 3.
    pub fn new(seed: u64, steps: u64) -> Self {
        SimConfig {
            seed,
            steps,
            node_count: if seed & 1 == 0 { 3 } else { 5 },
            disk_fault: DiskFault::None,
        }
    }
}

/// What a run did, to see that it exercised something.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Nodes in the quorum.
    pub node_count: u64,
    /// Steps run.
    pub steps: u64,
    /// Records committed (distinct indexes).
    pub committed_records: u64,
    /// Proposals raft-rs accepted (not all commit: a leader change can drop
    /// them).
    pub proposals_accepted: u64,
    /// Proposals refused (no leader known).
    pub proposals_refused: u64,
    /// Terms that had a leader.
    pub leaders_elected: u64,
    /// The highest term reached.
    pub term_max: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// Messages dropped (lost, cut by a partition, or the network full).
    pub messages_dropped: u64,
    /// Messages delivered twice.
    pub messages_duplicated: u64,
    /// Snapshot messages delivered.
    pub snapshots_delivered: u64,
    /// Crash-restarts.
    pub crashes: u64,
    /// Partition changes.
    pub partitions: u64,
    /// Clock jumps.
    pub clock_jumps: u64,
}

/// A broken promise, with the seed and step that replay it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quorum simulation seed {seed}, step {step}: {kind}")]
pub struct Violation {
    /// The seed of the run.
    pub seed: u64,
    /// The step after which the auditor saw it.
    pub step: u64,
    /// What broke.
    pub kind: ViolationKind,
}

/// The simulation's state machine: it records every record with its index.
/// Its snapshot is the records, each `[index u64][length u32][bytes]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordingMachine {
    /// The records applied, in order, with their indexes.
    pub records: Vec<(u64, Vec<u8>)>,
}

impl StateMachine for RecordingMachine {
    fn apply(&mut self, index: u64, data: &[u8]) {
        self.records.push((index, data.to_vec()));
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (index, data) in &self.records {
            out.extend_from_slice(&index.to_le_bytes());
            let length = u32::try_from(data.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&length.to_le_bytes());
            out.extend_from_slice(data);
        }
        out
    }

    fn restore(&mut self, mut data: &[u8]) -> Result<(), String> {
        let mut records = Vec::new();
        while !data.is_empty() {
            let (head, rest) = data
                .split_at_checked(12)
                .ok_or_else(|| "record header cut short".to_string())?;
            let mut index = [0u8; 8];
            index.copy_from_slice(&head[..8]);
            let mut length = [0u8; 4];
            length.copy_from_slice(&head[8..]);
            let (bytes, rest) = rest
                .split_at_checked(u32::from_le_bytes(length) as usize)
                .ok_or_else(|| "record bytes cut short".to_string())?;
            records.push((u64::from_le_bytes(index), bytes.to_vec()));
            data = rest;
        }
        self.records = records;
        Ok(())
    }
}

/// Runs the simulation of `SimConfig::new(seed, steps)`.
pub fn simulate(seed: u64, steps: u64) -> Result<SimStats, Violation> {
    simulate_with(&SimConfig::new(seed, steps))
}

/// Runs a simulation; the first violation ends it.
pub fn simulate_with(config: &SimConfig) -> Result<SimStats, Violation> {
    assert!(config.node_count >= 1);
    let mut sim = Sim::new(config).map_err(|kind| Violation {
        seed: config.seed,
        step: 0,
        kind,
    })?;
    for step in 1..=config.steps {
        sim.step = step;
        sim.run_step().map_err(|kind| Violation {
            seed: config.seed,
            step,
            kind,
        })?;
    }
    sim.finish().map_err(|kind| Violation {
        seed: config.seed,
        step: config.steps,
        kind,
    })
}

type SimNode = QuorumNode<RecordingMachine, SimStorage>;

struct InFlight {
    deliver_at_step: u64,
    /// The node that sent it: `message.from` is the origin, which differs
    /// for a proposal forwarded twice.
    sender: u64,
    message: Message,
}

struct Sim {
    config: SimConfig,
    rng: SplitMix64,
    /// `nodes[i]` is node id `i + 1`; `None` only while it restarts.
    nodes: Vec<Option<SimNode>>,
    /// Partition side per node; messages cross only within a side.
    sides: Vec<u8>,
    network: Vec<InFlight>,
    auditor: Auditor,
    stats: SimStats,
    step: u64,
    next_record: u64,
}

impl Sim {
    fn new(config: &SimConfig) -> Result<Self, ViolationKind> {
        let mut rng = SplitMix64::new(config.seed);
        let voters: Vec<u64> = (1..=config.node_count).collect();
        let mut nodes = Vec::new();
        for &id in &voters {
            let store = SimStorage::new(&voters).with_fault(config.disk_fault);
            let node = open_node(id, rng.next_u64(), store)?;
            nodes.push(Some(node));
        }
        Ok(Sim {
            stats: SimStats {
                node_count: config.node_count,
                steps: config.steps,
                ..Default::default()
            },
            config: config.clone(),
            rng,
            nodes,
            sides: vec![0; config.node_count as usize],
            network: Vec::new(),
            auditor: Auditor::default(),
            step: 0,
            next_record: 0,
        })
    }

    fn random_node(&mut self) -> u64 {
        self.rng.range(1, self.config.node_count + 1)
    }

    fn node(&mut self, id: u64) -> &mut SimNode {
        match self.nodes[(id - 1) as usize].as_mut() {
            Some(node) => node,
            None => panic!("node {id} is down outside a restart"),
        }
    }

    /// One scheduler step, then the audit.
    fn run_step(&mut self) -> Result<(), ViolationKind> {
        let roll = self.rng.range(0, 100);
        match roll {
            0..=49 => {
                let count = self.rng.range(1, 5);
                for _ in 0..count {
                    self.deliver_one()?;
                }
            }
            50..=74 => {
                let id = self.random_node();
                self.node(id).tick();
                self.advance(id)?;
            }
            75..=79 => {
                for id in 1..=self.config.node_count {
                    self.node(id).tick();
                    self.advance(id)?;
                }
            }
            80..=91 => self.propose()?,
            92..=93 => self.crash_restart()?,
            94..=95 => self.repartition(),
            96 => self.clock_jump()?,
            _ => {
                let id = self.random_node();
                self.advance(id)?;
            }
        }
        self.audit()
    }

    /// Runs the node's `advance`, puts its messages on the network and
    /// shows its committed records to the auditor.
    fn advance(&mut self, id: u64) -> Result<(), ViolationKind> {
        let outgoing = self
            .node(id)
            .advance()
            .map_err(|error| node_error(id, error))?;
        for (index, data) in &outgoing.committed {
            self.auditor.applied(id, *index, data)?;
        }
        for message in outgoing.messages {
            assert!(message.to >= 1 && message.to <= self.config.node_count);
            self.send(id, message);
        }
        Ok(())
    }

    fn send(&mut self, sender: u64, message: Message) {
        if self.network.len() >= NETWORK_MESSAGES_MAX {
            self.drop_message(sender, &message);
            return;
        }
        let deliver_at_step = self.step + self.rng.range(0, DELAY_STEPS_MAX);
        self.network.push(InFlight {
            deliver_at_step,
            sender,
            message,
        });
    }

    /// A lost snapshot is reported to its sender, as the transport would,
    /// so the leader sends another instead of waiting on it.
    fn drop_message(&mut self, sender: u64, message: &Message) {
        self.stats.messages_dropped += 1;
        if message.get_msg_type() == MessageType::MsgSnapshot {
            self.node(sender).report_snapshot(message.to, false);
        }
    }

    /// Delivers one message whose delay has passed, picked at random (so
    /// messages overtake each other); it may be lost, cut by a partition,
    /// or duplicated.
    fn deliver_one(&mut self) -> Result<(), ViolationKind> {
        let ready: Vec<usize> = (0..self.network.len())
            .filter(|&position| self.network[position].deliver_at_step <= self.step)
            .collect();
        if ready.is_empty() {
            return Ok(());
        }
        let pick = ready[self.rng.range(0, ready.len() as u64) as usize];
        let InFlight {
            sender, message, ..
        } = self.network.swap_remove(pick);
        let to = message.to;
        let cut = self.sides[(sender - 1) as usize] != self.sides[(to - 1) as usize];
        if cut || self.rng.percent(5) {
            self.drop_message(sender, &message);
            return Ok(());
        }
        if self.rng.percent(3) {
            self.stats.messages_duplicated += 1;
            self.send(sender, message.clone());
        }
        if message.get_msg_type() == MessageType::MsgSnapshot {
            self.stats.snapshots_delivered += 1;
        }
        self.stats.messages_delivered += 1;
        match self.node(to).step(message) {
            // A proposal forwarded to a leader that has since lost its
            // leadership, with no new leader known: dropped, as designed.
            Ok(()) | Err(QuorumError::Raft(raft::Error::ProposalDropped)) => {}
            Err(error) => return Err(node_error(to, error)),
        }
        // Mostly the receiver handles its ready at once; sometimes later,
        // so a crash can fall between a step and its persistence.
        if self.rng.percent(90) {
            self.advance(to)?;
        }
        Ok(())
    }

    fn propose(&mut self) -> Result<(), ViolationKind> {
        let id = self.random_node();
        self.next_record += 1;
        let record = format!("seed{}-record{}", self.config.seed, self.next_record);
        match self.node(id).propose(record.into_bytes()) {
            Ok(()) => self.stats.proposals_accepted += 1,
            Err(QuorumError::Raft(raft::Error::ProposalDropped)) => {
                self.stats.proposals_refused += 1
            }
            Err(error) => return Err(node_error(id, error)),
        }
        self.advance(id)
    }

    /// Crashes a node and starts it again from what its store made durable.
    fn crash_restart(&mut self) -> Result<(), ViolationKind> {
        let id = self.random_node();
        self.stats.crashes += 1;
        let Some(node) = self.nodes[(id - 1) as usize].take() else {
            panic!("node {id} is down outside a restart");
        };
        let applied_index = node.applied_index();
        // raft-rs keeps its store inside; a crash leaves the durable copy.
        let store = node.store().clone().restart();
        drop(node);
        let commit_index = store.cache().hard_state().commit;
        if commit_index < applied_index {
            return Err(ViolationKind::LostAfterRestart {
                node: id,
                applied_index,
                commit_index,
            });
        }
        let seed = self.rng.next_u64();
        let node = open_node(id, seed, store)?;
        self.auditor.restarted(id, node.applied_index());
        self.nodes[(id - 1) as usize] = Some(node);
        self.advance(id)?;
        // The replay must rebuild exactly the committed log.
        let node = self.node(id);
        let applied_index = node.applied_index();
        let records = node.state_machine().records.clone();
        self.auditor.check_machine(id, &records, applied_index)
    }

    /// Splits the nodes into two random sides, or heals the split.
    fn repartition(&mut self) {
        self.stats.partitions += 1;
        let heal = self.rng.percent(50);
        for side in 0..self.sides.len() {
            self.sides[side] = if heal { 0 } else { self.rng.range(0, 2) as u8 };
        }
    }

    /// A node's clock jumps: many ticks at once (a stalled process waking).
    fn clock_jump(&mut self) -> Result<(), ViolationKind> {
        self.stats.clock_jumps += 1;
        let id = self.random_node();
        let ticks = self.rng.range(5, 40);
        for _ in 0..ticks {
            self.node(id).tick();
        }
        self.advance(id)
    }

    fn audit(&mut self) -> Result<(), ViolationKind> {
        let mut leaders = Vec::new();
        for node in self.nodes.iter().flatten() {
            self.stats.term_max = self.stats.term_max.max(node.term());
            if node.is_leader() {
                leaders.push((node.term(), node.node_id()));
            }
        }
        for (term, id) in leaders {
            self.auditor.leader(term, id)?;
        }
        self.check_newest_on_majority()
    }

    /// The newest committed entry must be durable on a majority: raft
    /// commits only what a majority persisted, and never truncates it.
    fn check_newest_on_majority(&self) -> Result<(), ViolationKind> {
        let Some((index, data)) = self.auditor.newest_committed() else {
            return Ok(());
        };
        let holders = self
            .nodes
            .iter()
            .flatten()
            .filter(|node| {
                let cache = node.store().cache();
                cache.snapshot_index() >= index
                    || cache
                        .entry(index)
                        .is_some_and(|entry| &entry.data[..] == data)
            })
            .count();
        let nodes = self.config.node_count as usize;
        if holders * 2 <= nodes {
            return Err(ViolationKind::NotOnMajority {
                index,
                holders,
                nodes,
            });
        }
        Ok(())
    }

    /// At the end: every state machine is the committed log up to its
    /// applied index.
    fn finish(mut self) -> Result<SimStats, ViolationKind> {
        for node in self.nodes.iter().flatten() {
            let records = &node.state_machine().records;
            self.auditor
                .check_machine(node.node_id(), records, node.applied_index())?;
        }
        self.stats.committed_records = self.auditor.committed_count();
        self.stats.leaders_elected = self.auditor.leader_count();
        Ok(self.stats)
    }
}

fn open_node(id: u64, seed: u64, store: SimStorage) -> Result<SimNode, ViolationKind> {
    let mut config = QuorumConfig::new(id, seed);
    // Small, so that compaction and snapshot transfers happen in a run.
    config.snapshot_interval_entries = 16;
    config.max_inflight_msgs = 16;
    config.max_size_per_msg_bytes = 4096;
    QuorumNode::open(config, store, RecordingMachine::default())
        .map_err(|error| node_error(id, error))
}

fn node_error(node: u64, error: QuorumError) -> ViolationKind {
    ViolationKind::NodeError {
        node,
        error: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a seed, turning a panic (raft-rs's or an assertion) into a
    /// failure that names the seed.
    fn run(config: &SimConfig) -> Result<SimStats, Violation> {
        match run_catching(config) {
            Some(result) => result,
            None => panic!(
                "quorum simulation seed {} panicked; replay with simulate({}, {})",
                config.seed, config.seed, config.steps
            ),
        }
    }

    /// Runs a seed; `None` if it panicked.
    fn run_catching(config: &SimConfig) -> Option<Result<SimStats, Violation>> {
        let config = config.clone();
        std::panic::catch_unwind(move || simulate_with(&config)).ok()
    }

    #[test]
    fn fifty_seeds_keep_every_promise() {
        let mut committed_total = 0;
        let mut snapshots_total = 0;
        let mut crashes_total = 0;
        for seed in 0..50 {
            let stats = match run(&SimConfig::new(seed, 3_000)) {
                Ok(stats) => stats,
                Err(violation) => panic!("{violation}"),
            };
            assert!(
                stats.leaders_elected >= 1,
                "seed {seed} never elected: {stats:?}"
            );
            committed_total += stats.committed_records;
            snapshots_total += stats.snapshots_delivered;
            crashes_total += stats.crashes;
        }
        // The runs did something worth auditing.
        assert!(
            committed_total > 50 * 20,
            "only {committed_total} records committed"
        );
        assert!(snapshots_total > 0, "no snapshot was ever sent");
        assert!(crashes_total > 50 * 20);
    }

    /// A longer search, for a developer to run by hand
    /// (`cargo test -p rill-cluster soak -- --ignored`).
    #[test]
    #[ignore]
    fn soak_a_thousand_seeds() {
        for seed in 1_000..2_000 {
            if let Err(violation) = run(&SimConfig::new(seed, 10_000)) {
                panic!("{violation}");
            }
        }
    }

    #[test]
    fn a_seed_replays_identically() {
        assert_eq!(simulate(11, 1_500), simulate(11, 1_500));
        assert_eq!(simulate(12, 1_500), simulate(12, 1_500));
    }

    /// The first violation the auditor reports over seeds `0..20` with a
    /// lying disk. raft-rs may trip over the lost entry first and panic (a
    /// follower told to commit past its log): those seeds do not count,
    /// only the auditor's findings do.
    fn first_caught(fault: DiskFault) -> Violation {
        let caught = (0..20).find_map(|seed| {
            let mut config = SimConfig::new(seed, 3_000);
            config.disk_fault = fault;
            run_catching(&config).and_then(Result::err)
        });
        let Some(violation) = caught else {
            panic!("20 seeds with {fault:?} and no violation found");
        };
        eprintln!("{fault:?}: {violation}");
        assert!(violation
            .to_string()
            .contains(&format!("seed {}", violation.seed)));
        violation
    }

    #[test]
    fn the_auditor_catches_a_disk_that_forgets_committed_entries() {
        let violation = first_caught(DiskFault::ForgetLastEntry);
        assert!(
            matches!(violation.kind, ViolationKind::LostAfterRestart { .. }),
            "{violation}"
        );
    }

    #[test]
    fn the_auditor_catches_a_disk_that_forgets_acknowledged_entries() {
        // Nothing local gives this loss away: the majority and agreement
        // checks must find it.
        let violation = first_caught(DiskFault::ForgetUncommittedLastEntry);
        assert!(
            matches!(
                violation.kind,
                ViolationKind::NotOnMajority { .. }
                    | ViolationKind::Divergence { .. }
                    | ViolationKind::StateMismatch { .. }
            ),
            "{violation}"
        );
    }

    #[test]
    fn recording_machine_snapshot_round_trips() {
        let machine = RecordingMachine {
            records: vec![(3, b"a".to_vec()), (9, Vec::new()), (10, b"bcd".to_vec())],
        };
        let mut restored = RecordingMachine::default();
        assert_eq!(restored.restore(&machine.snapshot()), Ok(()));
        assert_eq!(restored, machine);
        assert!(restored.restore(&machine.snapshot()[..5]).is_err());
    }
}
