//! One member of the metadata quorum: raft-rs's `RawNode` with a durable
//! [`LogStore`] under it and a [`StateMachine`] above it.
//!
//! The node does no network I/O and reads no clock: the runtime calls
//! [`QuorumNode::tick`] every tick interval, hands it the peers' messages
//! with [`QuorumNode::step`], and after either calls
//! [`QuorumNode::advance`], which returns the messages to send and the
//! records that became committed. Storage writes happen inside `advance`,
//! synchronously, before it returns the messages that depend on them.
//!
//! raft-rs's `Ready` order, followed in [`QuorumNode::advance`]:
//! 1. persist the snapshot, the new entries and the hard state (fsynced);
//! 2. hand out the messages (a vote or an append acknowledgement may go out
//!    only once what it promises is on disk — step 1 made sure);
//! 3. apply the committed entries to the state machine;
//! 4. `advance`, then persist the new commit index, hand out the light
//!    ready's messages, apply its committed entries, `advance_apply`.
//!
//! Determinism: raft-rs draws election timeouts from `thread_rng`. The node
//! redraws each timeout from a seeded generator whenever raft-rs restarts
//! the election timer, so a simulated run depends on its seed only.

use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, Message,
    MessageType,
};
use raft::{RawNode, SnapshotStatus, StateRole};

use super::logger::raft_logger;
use super::rng::SplitMix64;
use super::storage::{FileStorage, LogStore};
use super::QuorumError;

/// What the quorum replicates into: cluster metadata in the broker, a
/// recording vector in the simulation. Must be deterministic: every member
/// applies the same records in the same order and must end in the same
/// state.
pub trait StateMachine {
    /// Applies the committed record at log `index` (indexes increase, with
    /// gaps where raft-rs has entries of its own, e.g. a new leader's empty
    /// entry). A record that is invalid for the state must be handled here
    /// (ignored, deterministically): a committed record cannot be refused.
    fn apply(&mut self, index: u64, data: &[u8]);
    /// The whole applied state as bytes, for a snapshot.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the state with a snapshot's bytes.
    fn restore(&mut self, data: &[u8]) -> Result<(), String>;
}

/// A node's settings. Ticks are the runtime's tick interval: with 100 ms,
/// the default election tick of 10 is KRaft's
/// `controller.quorum.election.timeout.ms` default of 1000 ms.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    /// This member's id (non-zero), the broker's `node.id`.
    pub node_id: u64,
    /// Ticks without hearing from a leader before a follower campaigns; the
    /// actual timeout is drawn from `[election_tick, 2 * election_tick)`.
    pub election_tick: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_tick: usize,
    /// Applied entries after which the node snapshots its state machine and
    /// compacts the log, bounding the log's size and a restart's replay.
    pub snapshot_interval_entries: u64,
    /// The most entry bytes in one append message.
    pub max_size_per_msg_bytes: u64,
    /// The most append messages in flight to one follower.
    pub max_inflight_msgs: usize,
    /// Seed of the election-timeout generator; give each member its own.
    pub seed: u64,
}

impl QuorumConfig {
    /// Defaults for member `node_id`.
    pub fn new(node_id: u64, seed: u64) -> Self {
        QuorumConfig {
            node_id,
            election_tick: 10,
            heartbeat_tick: 2,
            snapshot_interval_entries: 1024,
            max_size_per_msg_bytes: 1024 * 1024,
            max_inflight_msgs: 256,
            seed,
        }
    }
}

/// One membership change of one member (KIP-853 changes one voter at a
/// time), for [`QuorumNode::propose_conf_change`].
pub fn membership_change(node_id: u64, change_type: ConfChangeType) -> ConfChangeV2 {
    let mut single = ConfChangeSingle {
        node_id,
        ..Default::default()
    };
    single.set_change_type(change_type);
    ConfChangeV2 {
        changes: vec![single].into(),
        ..Default::default()
    }
}

/// What one [`QuorumNode::advance`] produced.
#[derive(Debug, Default)]
pub struct Outgoing {
    /// Messages for the peers (`message.to`), to send in order.
    pub messages: Vec<Message>,
    /// A membership change was applied: the voters or learners changed.
    pub conf_changed: bool,
    /// Records that became committed and were applied, as `(index, bytes)`,
    /// in index order.
    pub committed: Vec<(u64, Vec<u8>)>,
}

/// Bounds the loop in `advance`: each round persists and applies; a round
/// can make one more ready (e.g. entries that became committed once
/// persisted), and a single-member quorum needs two.
const READY_ROUNDS_MAX: usize = 8;

/// One member of the quorum (see the module doc).
pub struct QuorumNode<S: StateMachine, L: LogStore = FileStorage> {
    raw: RawNode<L>,
    machine: S,
    config: QuorumConfig,
    rng: SplitMix64,
    election_timeout_min_ticks: u64,
    election_timeout_max_ticks: u64,
    applied_index: u64,
    /// A membership change applied since the last snapshot: snapshot now
    /// (see [`QuorumNode::apply_conf_change`]).
    snapshot_due: bool,
}

impl<S: StateMachine, L: LogStore> QuorumNode<S, L> {
    /// Starts a member from its store: restores the state machine from the
    /// stored snapshot; raft-rs then replays the committed entries after it
    /// through `advance`. A member that is the only voter campaigns at once,
    /// so a single-node broker does not wait out an election timeout.
    pub fn open(config: QuorumConfig, store: L, mut machine: S) -> Result<Self, QuorumError> {
        let snapshot_index = store.cache().snapshot_index();
        if snapshot_index > 0 {
            machine
                .restore(&store.cache().snapshot().data)
                .map_err(QuorumError::Restore)?;
        }
        let only_voter = store.cache().conf_state().voters == [config.node_id];
        let raft_config = raft::Config {
            id: config.node_id,
            election_tick: config.election_tick,
            heartbeat_tick: config.heartbeat_tick,
            applied: snapshot_index,
            max_size_per_msg: config.max_size_per_msg_bytes,
            max_inflight_msgs: config.max_inflight_msgs,
            // A leader that cannot reach a majority steps down, and a member
            // coming back from a partition asks before disrupting a term.
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        raft_config.validate()?;
        let raw = RawNode::new(&raft_config, store, &raft_logger(config.node_id))?;
        let mut node = QuorumNode {
            raw,
            machine,
            rng: SplitMix64::new(config.seed),
            election_timeout_min_ticks: raft_config.min_election_tick() as u64,
            election_timeout_max_ticks: raft_config.max_election_tick() as u64,
            config,
            applied_index: snapshot_index,
            snapshot_due: false,
        };
        node.rearm_election_timeout(true);
        if only_voter {
            node.raw.campaign()?;
            node.rearm_election_timeout(false);
        }
        Ok(node)
    }

    /// Proposes a record. Accepted is not committed: the record is
    /// committed when `advance` returns it in `committed`. A follower
    /// forwards the proposal to the leader; with no leader known raft-rs
    /// drops it with `ProposalDropped`.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), QuorumError> {
        if data.is_empty() {
            // Empty entries are raft-rs's own (a new leader's first entry).
            return Err(QuorumError::EmptyProposal);
        }
        let result = self.raw.propose(Vec::new(), data);
        self.rearm_election_timeout(false);
        result.map_err(QuorumError::from)
    }

    /// Proposes a membership change (KIP-853's AddRaftVoter and
    /// RemoveRaftVoter, through raft-rs's ConfChangeV2). raft-rs takes one
    /// change at a time: while another is not applied yet it turns this one
    /// into an empty entry, so the caller checks [`Self::conf_state`] once
    /// it committed.
    pub fn propose_conf_change(&mut self, change: ConfChangeV2) -> Result<(), QuorumError> {
        let result = self.raw.propose_conf_change(Vec::new(), change);
        self.rearm_election_timeout(false);
        result.map_err(QuorumError::from)
    }

    /// Hands the node a message from a peer.
    pub fn step(&mut self, message: Message) -> Result<(), QuorumError> {
        let result = self.raw.step(message);
        self.rearm_election_timeout(false);
        result.map_err(QuorumError::from)
    }

    /// The leader this member follows is gone (its process no longer
    /// listens): campaign now rather than after an election timeout of 1–2
    /// s, as a leadership transfer does. raft-rs's MsgTimeoutNow from that
    /// leader starts the campaign; its vote requests carry the transfer
    /// context, which the other voters grant even within the dead leader's
    /// lease. Safety is Raft's own: a vote goes only to a log at least as
    /// up to date as the voter's, and the term moves on. Nothing happens
    /// once this member knows of another leader.
    pub fn campaign_after_leader_loss(&mut self, leader: u64) -> Result<(), QuorumError> {
        if self.is_leader() || self.leader_id().is_some_and(|known| known != leader) {
            return Ok(());
        }
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgTimeoutNow);
        message.from = leader;
        message.to = self.config.node_id;
        message.term = self.term();
        self.step(message)
    }

    /// One tick of the election and heartbeat timers.
    pub fn tick(&mut self) {
        self.raw.tick();
        self.rearm_election_timeout(false);
    }

    /// Does what raft-rs's ready asks, in its order (see the module doc),
    /// and returns the messages to send and the records committed.
    pub fn advance(&mut self) -> Result<Outgoing, QuorumError> {
        let mut outgoing = Outgoing::default();
        for _ in 0..READY_ROUNDS_MAX {
            if !self.raw.has_ready() {
                break;
            }
            self.handle_ready(&mut outgoing)?;
        }
        self.maybe_compact()?;
        self.rearm_election_timeout(false);
        Ok(outgoing)
    }

    fn handle_ready(&mut self, outgoing: &mut Outgoing) -> Result<(), QuorumError> {
        let mut ready = self.raw.ready();
        // 1. Persist.
        if !ready.snapshot().is_empty() {
            let snapshot = ready.snapshot().clone();
            let index = snapshot.get_metadata().index;
            assert!(
                index > self.applied_index,
                "a leader's snapshot moves forward"
            );
            self.raw.mut_store().apply_snapshot(&snapshot)?;
            self.machine
                .restore(&snapshot.data)
                .map_err(QuorumError::Restore)?;
            self.applied_index = index;
        }
        if !ready.entries().is_empty() {
            self.raw.mut_store().append(ready.entries())?;
        }
        if let Some(hard_state) = ready.hs() {
            self.raw.mut_store().set_hard_state(hard_state)?;
        }
        // 2. Send: everything above is durable now.
        outgoing.messages.extend(ready.take_messages());
        outgoing.messages.extend(ready.take_persisted_messages());
        // 3. Apply.
        self.apply(ready.take_committed_entries(), outgoing)?;
        // 4. Advance and handle the light ready.
        let mut light = self.raw.advance(ready);
        if let Some(commit_index) = light.commit_index() {
            let mut hard_state = self.raw.store().cache().hard_state().clone();
            assert!(commit_index > hard_state.commit, "commit moves forward");
            hard_state.commit = commit_index;
            self.raw.mut_store().set_hard_state(&hard_state)?;
        }
        outgoing.messages.extend(light.take_messages());
        self.apply(light.take_committed_entries(), outgoing)?;
        self.raw.advance_apply();
        assert_eq!(self.raw.raft.raft_log.applied, self.applied_index);
        Ok(())
    }

    fn apply(
        &mut self,
        entries: Vec<raft::eraftpb::Entry>,
        outgoing: &mut Outgoing,
    ) -> Result<(), QuorumError> {
        for entry in entries {
            assert_eq!(
                entry.index,
                self.applied_index + 1,
                "entries apply in order"
            );
            assert!(
                entry.index <= self.raw.store().cache().hard_state().commit,
                "only durably committed entries apply"
            );
            match entry.get_entry_type() {
                EntryType::EntryNormal => {
                    if !entry.data.is_empty() {
                        self.machine.apply(entry.index, &entry.data);
                        outgoing.committed.push((entry.index, entry.data.to_vec()));
                    }
                }
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    self.apply_conf_change(&entry)?;
                    outgoing.conf_changed = true;
                }
            }
            self.applied_index = entry.index;
        }
        Ok(())
    }

    /// Applies a committed membership change and persists the new conf
    /// state. A change raft-rs refuses (one that would leave no voter) is
    /// skipped on every member alike: a committed entry cannot be refused.
    ///
    /// Then a snapshot is due at once: a member that joins with an empty
    /// log must start from a snapshot whose conf state names it (raft-rs
    /// ignores one that does not), never replay the log from its first
    /// entry, which would make it a quorum of itself. A snapshot taken after
    /// the change puts the leader's first index past what the new member
    /// holds, so it is sent one.
    fn apply_conf_change(&mut self, entry: &Entry) -> Result<(), QuorumError> {
        // Only V2 changes are ever proposed (`propose_conf_change`).
        let change = match entry.get_entry_type() {
            EntryType::EntryConfChangeV2 => ConfChangeV2::parse_from_bytes(&entry.data).ok(),
            _ => None,
        };
        let Some(change) = change else {
            return Err(QuorumError::UnsupportedEntry {
                index: entry.index,
                entry_type: format!("{:?}", entry.get_entry_type()),
            });
        };
        match self.raw.apply_conf_change(&change) {
            Ok(conf_state) => {
                tracing::info!(
                    index = entry.index,
                    voters = ?conf_state.voters,
                    learners = ?conf_state.learners,
                    "metadata quorum membership changed"
                );
                self.raw.mut_store().set_conf_state(&conf_state)?;
                self.snapshot_due = true;
            }
            Err(e) => tracing::warn!(index = entry.index, error = %e, "membership change skipped"),
        }
        Ok(())
    }

    fn maybe_compact(&mut self) -> Result<(), QuorumError> {
        let snapshot_index = self.raw.store().cache().snapshot_index();
        assert!(self.applied_index >= snapshot_index);
        let due = self.snapshot_due && self.applied_index > snapshot_index;
        if !due && self.applied_index - snapshot_index < self.config.snapshot_interval_entries {
            return Ok(());
        }
        self.snapshot_due = false;
        let data = self.machine.snapshot();
        self.raw.mut_store().compact(self.applied_index, data)?;
        assert_eq!(
            self.raw.store().cache().snapshot_index(),
            self.applied_index
        );
        Ok(())
    }

    /// raft-rs restarts the election timer (election_elapsed back to 0) on
    /// a term or role change and on a leader's message; redraw the timeout
    /// from our generator then, overriding its `thread_rng` draw.
    fn rearm_election_timeout(&mut self, force: bool) {
        if force || self.raw.raft.election_elapsed == 0 {
            let ticks = self.rng.range(
                self.election_timeout_min_ticks,
                self.election_timeout_max_ticks,
            );
            self.raw
                .raft
                .set_randomized_election_timeout(ticks as usize);
        }
    }

    /// Tells raft-rs a peer could not be reached (the transport failed to
    /// send to it), so the leader probes it instead of streaming.
    pub fn report_unreachable(&mut self, peer_id: u64) {
        self.raw.report_unreachable(peer_id);
    }

    /// Tells raft-rs how sending a snapshot to `peer_id` ended; a failure
    /// lets the leader try again instead of waiting on it.
    pub fn report_snapshot(&mut self, peer_id: u64, finished: bool) {
        let status = if finished {
            SnapshotStatus::Finish
        } else {
            SnapshotStatus::Failure
        };
        self.raw.report_snapshot(peer_id, status);
    }

    /// This member's id.
    pub fn node_id(&self) -> u64 {
        self.config.node_id
    }

    /// The leader this member knows of, if any (DescribeQuorum's leaderId).
    pub fn leader_id(&self) -> Option<u64> {
        match self.raw.raft.leader_id {
            raft::INVALID_ID => None,
            id => Some(id),
        }
    }

    /// Whether this member is the leader.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The current term (DescribeQuorum's leaderEpoch).
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The highest index this member knows is committed (the high
    /// watermark of KIP-595's DescribeQuorum).
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// The index of the last entry in this member's log: on the leader,
    /// right after [`QuorumNode::propose`], the index the proposal got.
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// The voters and learners as last applied.
    pub fn conf_state(&self) -> &ConfState {
        self.raw.store().cache().conf_state()
    }

    /// The highest index the leader knows `peer` holds; `None` on a
    /// follower, or for a peer that is not a member.
    pub fn matched_index(&self, peer: u64) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        self.raw
            .raft
            .prs()
            .get(peer)
            .map(|progress| progress.matched)
    }

    /// The highest index applied to the state machine.
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// The state machine.
    pub fn state_machine(&self) -> &S {
        &self.machine
    }

    /// The store.
    pub fn store(&self) -> &L {
        self.raw.store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quorum::sim::RecordingMachine as Records;

    fn settle(node: &mut QuorumNode<Records>) -> Vec<(u64, Vec<u8>)> {
        let mut committed = Vec::new();
        for _ in 0..10 {
            let outgoing = node.advance().expect("advance");
            assert!(
                outgoing.messages.is_empty(),
                "a lone voter has no one to talk to"
            );
            committed.extend(outgoing.committed);
        }
        committed
    }

    #[test]
    fn a_single_voter_commits_on_its_own_and_survives_a_restart() {
        let directory = tempfile::tempdir().expect("tempdir");
        let mut config = QuorumConfig::new(1, 7);
        config.snapshot_interval_entries = 4;
        let store = FileStorage::open(directory.path(), &[1]).expect("store");
        let mut node = QuorumNode::open(config.clone(), store, Records::default()).expect("open");
        settle(&mut node);
        assert!(node.is_leader());
        assert_eq!(node.leader_id(), Some(1));
        let term = node.term();
        let mut committed = Vec::new();
        for record in 0..10u32 {
            node.propose(format!("record-{record}").into_bytes())
                .expect("propose");
            committed.extend(settle(&mut node));
        }
        let records: Vec<Vec<u8>> = committed.iter().map(|(_, data)| data.clone()).collect();
        let expected: Vec<Vec<u8>> = (0..10u32)
            .map(|record| format!("record-{record}").into_bytes())
            .collect();
        assert_eq!(records, expected);
        assert_eq!(node.commit_index(), committed[9].0);
        assert_eq!(node.state_machine().records, committed);
        assert!(node.store().cache().snapshot_index() > 0, "compacted");

        // Restart: snapshot + replay rebuild the same state; a new term.
        drop(node);
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        let mut node = QuorumNode::open(config, store, Records::default()).expect("reopen");
        settle(&mut node);
        assert_eq!(node.state_machine().records, committed);
        assert!(node.is_leader());
        assert!(node.term() > term);
        node.propose(b"after-restart".to_vec()).expect("propose");
        let after = settle(&mut node);
        assert_eq!(after.len(), 1);
        assert!(after[0].0 > committed[9].0);
    }

    #[test]
    fn empty_proposals_are_refused_and_a_follower_without_leader_drops() {
        let directory = tempfile::tempdir().expect("tempdir");
        let store = FileStorage::open(directory.path(), &[1, 2, 3]).expect("store");
        let mut node =
            QuorumNode::open(QuorumConfig::new(1, 1), store, Records::default()).expect("open");
        assert!(matches!(
            node.propose(Vec::new()),
            Err(QuorumError::EmptyProposal)
        ));
        assert!(matches!(
            node.propose(b"x".to_vec()),
            Err(QuorumError::Raft(raft::Error::ProposalDropped))
        ));
        assert_eq!(node.leader_id(), None);
    }

    #[test]
    fn election_timeouts_follow_the_seed() {
        let ticks_to_campaign = |seed: u64| {
            let directory = tempfile::tempdir().expect("tempdir");
            let store = FileStorage::open(directory.path(), &[1, 2, 3]).expect("store");
            let mut node = QuorumNode::open(QuorumConfig::new(1, seed), store, Records::default())
                .expect("open");
            let mut ticks = 0;
            while node.advance().expect("advance").messages.is_empty() {
                node.tick();
                ticks += 1;
                assert!(ticks < 100, "campaigns within 2 election timeouts");
            }
            ticks
        };
        for seed in 0..5 {
            let ticks = ticks_to_campaign(seed);
            assert_eq!(ticks, ticks_to_campaign(seed));
            assert!((10..20).contains(&ticks), "timeout {ticks} in [10, 20)");
        }
    }

    type FileNode = QuorumNode<Records>;

    fn open_file_node(directory: &std::path::Path, id: u64) -> FileNode {
        let mut config = QuorumConfig::new(id, 100 + id);
        config.snapshot_interval_entries = 4;
        let store = FileStorage::open(directory, &[1, 2, 3]).expect("store");
        QuorumNode::open(config, store, Records::default()).expect("open")
    }

    /// `slots` directories, and members 1, 2 and 3 (the voters) running on
    /// the first three; a slot past them holds no node yet.
    fn file_nodes(slots: usize) -> (Vec<tempfile::TempDir>, Vec<Option<FileNode>>) {
        let directories: Vec<_> = (0..slots)
            .map(|_| tempfile::tempdir().expect("tempdir"))
            .collect();
        let nodes = (1..=slots as u64)
            .map(|id| (id <= 3).then(|| open_file_node(directories[(id - 1) as usize].path(), id)))
            .collect();
        (directories, nodes)
    }

    /// `rounds` ticks of every running node, each followed by a [`pump`].
    fn tick_rounds(nodes: &mut [Option<FileNode>], rounds: usize) {
        for _ in 0..rounds {
            for node in nodes.iter_mut().flatten() {
                node.tick();
            }
            pump(nodes);
        }
    }

    /// Advances every running node and delivers what they send, in rounds,
    /// until the network is quiet. Messages to a stopped node are lost.
    fn pump(nodes: &mut [Option<FileNode>]) {
        for _ in 0..100 {
            let mut messages = Vec::new();
            for node in nodes.iter_mut().flatten() {
                messages.extend(node.advance().expect("advance").messages);
            }
            if messages.is_empty() {
                return;
            }
            for message in messages {
                if let Some(node) = nodes[(message.to - 1) as usize].as_mut() {
                    node.step(message).expect("step");
                }
            }
        }
        panic!("the network did not quiet down");
    }

    fn leader(nodes: &[Option<FileNode>]) -> Option<usize> {
        nodes
            .iter()
            .position(|node| node.as_ref().is_some_and(|node| node.is_leader()))
    }

    fn tick_until_leader(nodes: &mut [Option<FileNode>]) -> usize {
        for _ in 0..200 {
            if let Some(position) = leader(nodes) {
                return position;
            }
            for node in nodes.iter_mut().flatten() {
                node.tick();
            }
            pump(nodes);
        }
        panic!("no leader elected");
    }

    #[test]
    fn three_members_on_files_and_a_lagging_one_catches_up_by_snapshot() {
        let (directories, mut nodes) = file_nodes(3);
        let first_leader = tick_until_leader(&mut nodes);
        // Stop a follower; the other two go on committing and compacting.
        let stopped = (first_leader + 1) % 3;
        nodes[stopped] = None;
        for record in 0..12u32 {
            let leader = tick_until_leader(&mut nodes);
            let node = nodes[leader].as_mut().expect("leader runs");
            node.propose(format!("r{record}").into_bytes())
                .expect("propose");
            pump(&mut nodes);
        }
        let leader = tick_until_leader(&mut nodes);
        let expected = nodes[leader]
            .as_ref()
            .map(|node| node.state_machine().records.clone())
            .unwrap_or_default();
        assert_eq!(expected.len(), 12);
        let leader_snapshot_index = nodes[leader]
            .as_ref()
            .map_or(0, |node| node.store().cache().snapshot_index());
        assert!(
            leader_snapshot_index >= 12,
            "the leader compacted past the stopped node"
        );

        // The stopped follower comes back from its files; the leader's log
        // no longer reaches back to it, so it must take a snapshot.
        nodes[stopped] = Some(open_file_node(
            directories[stopped].path(),
            stopped as u64 + 1,
        ));
        tick_rounds(&mut nodes, 50);
        let caught_up = nodes[stopped].as_ref().expect("runs");
        assert_eq!(caught_up.state_machine().records, expected);
        assert!(caught_up.store().cache().snapshot_index() >= leader_snapshot_index);

        // And a restart of it from disk rebuilds the same state: its
        // snapshot and log from its files, up to the commit it wrote last;
        // the rest once the leader tells it the commit again (the commit
        // is volatile in Raft, see `storage`).
        nodes[stopped] = None;
        let mut reopened = open_file_node(directories[stopped].path(), stopped as u64 + 1);
        reopened.advance().expect("advance");
        let replayed = reopened.state_machine().records.clone();
        assert!(
            expected.starts_with(&replayed) && !replayed.is_empty(),
            "replayed {replayed:?} of {expected:?} from disk"
        );
        nodes[stopped] = Some(reopened);
        tick_rounds(&mut nodes, 50);
        let caught_up = nodes[stopped].as_ref().expect("runs");
        assert_eq!(caught_up.state_machine().records, expected);
    }

    /// Proposes `change` on the leader and runs the quorum until it applied.
    fn reconfigure(nodes: &mut [Option<FileNode>], change: ConfChangeV2) -> ConfState {
        let leader = tick_until_leader(nodes);
        let node = nodes[leader].as_mut().expect("leader runs");
        node.propose_conf_change(change).expect("propose");
        tick_rounds(nodes, 5);
        let leader = tick_until_leader(nodes);
        nodes[leader].as_ref().expect("runs").conf_state().clone()
    }

    fn commit_on_leader(nodes: &mut [Option<FileNode>], record: &str) {
        let leader = tick_until_leader(nodes);
        let node = nodes[leader].as_mut().expect("leader runs");
        node.propose(record.as_bytes().to_vec()).expect("propose");
        pump(nodes);
    }

    #[test]
    fn a_dead_voter_is_replaced_by_a_fresh_member_that_starts_from_a_snapshot() {
        let (directories, mut nodes) = file_nodes(4);
        let first_leader = tick_until_leader(&mut nodes);
        for record in 0..3 {
            commit_on_leader(&mut nodes, &format!("before-{record}"));
        }
        // A follower dies for good; node 4 starts empty, knowing no voter.
        let dead = (first_leader + 1) % 3;
        nodes[dead] = None;
        let mut config = QuorumConfig::new(4, 104);
        config.snapshot_interval_entries = 1000;
        let store = FileStorage::open(directories[3].path(), &[]).expect("store");
        nodes[3] = Some(QuorumNode::open(config, store, Records::default()).expect("open"));
        tick_rounds(&mut nodes, 30);
        assert!(
            !nodes[3].as_ref().expect("runs").is_leader(),
            "not a voter yet"
        );

        let state = reconfigure(
            &mut nodes,
            membership_change(4, ConfChangeType::AddLearnerNode),
        );
        assert_eq!(state.learners, vec![4]);
        let state = reconfigure(&mut nodes, membership_change(4, ConfChangeType::AddNode));
        assert!(state.voters.contains(&4) && state.learners.is_empty());
        let state = reconfigure(
            &mut nodes,
            membership_change(dead as u64 + 1, ConfChangeType::RemoveNode),
        );
        let mut voters = state.voters.clone();
        voters.sort_unstable();
        assert_eq!(voters.len(), 3);
        assert!(!voters.contains(&(dead as u64 + 1)) && voters.contains(&4));
        commit_on_leader(&mut nodes, "after");

        // The new member holds every record, though it never saw the log's
        // start, and knows the voters from its store.
        let leader = tick_until_leader(&mut nodes);
        let expected = nodes[leader]
            .as_ref()
            .expect("runs")
            .state_machine()
            .records
            .clone();
        assert_eq!(expected.len(), 4);
        let joined = nodes[3].as_ref().expect("runs");
        assert_eq!(joined.state_machine().records, expected);
        assert!(
            joined.store().cache().snapshot_index() > 0,
            "began from a snapshot"
        );
        let mut stored = joined.store().cache().conf_state().voters.clone();
        stored.sort_unstable();
        assert_eq!(stored, voters);

        // One more original voter dies: 2 of the 3 voters still commit.
        let other = (0..3).find(|&i| i != dead && i != leader).unwrap_or(leader);
        nodes[other] = None;
        commit_on_leader(&mut nodes, "with-two");
        tick_rounds(&mut nodes, 5);
        let leader = tick_until_leader(&mut nodes);
        let records = &nodes[leader]
            .as_ref()
            .expect("runs")
            .state_machine()
            .records;
        assert_eq!(records.len(), 5, "committed with 2 of 3 voters");
    }

    #[test]
    fn a_follower_campaigns_at_once_when_its_leader_is_gone() {
        let (_directories, mut nodes) = file_nodes(3);
        let first = tick_until_leader(&mut nodes);
        commit_on_leader(&mut nodes, "before");
        let gone = first as u64 + 1;
        nodes[first] = None;
        // No tick: no election timeout passes, and the other follower is
        // still within the dead leader's lease.
        let next = (first + 1) % 3;
        let node = nodes[next].as_mut().expect("runs");
        node.campaign_after_leader_loss(gone).expect("campaign");
        pump(&mut nodes);
        let node = nodes[next].as_ref().expect("runs");
        assert!(node.is_leader(), "elected without an election timeout");
        let term = node.term();
        commit_on_leader(&mut nodes, "after");
        // A late call about the old leader changes nothing.
        let other = (first + 2) % 3;
        let late = nodes[other].as_mut().expect("runs");
        late.campaign_after_leader_loss(gone).expect("no-op");
        pump(&mut nodes);
        let node = nodes[next].as_ref().expect("runs");
        assert!(node.is_leader() && node.term() == term);
        assert_eq!(node.state_machine().records.len(), 2);
    }
}
