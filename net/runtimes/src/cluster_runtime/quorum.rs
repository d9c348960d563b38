//! [`MetadataQuorum`]: this node's member of the metadata quorum, on the
//! metadata shard. A voter owns raft-rs's node (over the durable
//! `FileStorage` in `<data-dir>/__cluster_metadata-0`) and a
//! [`MetadataMachine`] that applies the committed records. A broker-only
//! node is an observer instead: it holds the last image it fetched from a
//! voter (see [`super::observer`]) and nothing on disk. Either way the rest
//! of the broker sees one type: an observer is never the leader, cannot
//! propose, and knows the leader a voter last told it of.
//!
//! Everything that touches the node is synchronous and short: a step, a
//! tick or a proposal is followed by [`MetadataQuorum::pump`], which runs
//! raft-rs's ready cycle (persist, fsync, then send, then apply), queues
//! the messages to the peer links, resolves proposals that committed and
//! publishes the new image to every shard. No borrow of the node is held
//! across an await.
//!
//! The storage writes are blocking `std::fs` calls with fsync on this
//! shard's thread. Metadata changes are rare (registrations, elections,
//! topic changes), so this costs the shard's partitions a few stalls of a
//! millisecond, not throughput.

use super::raft_id;
use super::rpc::QuorumDescription;
use super::view::{publish, QuorumStatus};
use crate::Shard;
use cluster::metadata::{
    BrokerHeartbeats, ControllerConfig, MetadataImage, MetadataMachine, MetadataRecord,
};
use cluster::quorum::node::{membership_change, QuorumConfig, QuorumNode};
use cluster::quorum::storage::{FileStorage, LogStore};
use cluster::quorum::QuorumError;
use futures::channel::{mpsc, oneshot};
use kernel::cluster_config::Voter;
use raft::eraftpb::ConfChangeType;
use raft::eraftpb::Message;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

/// Between the campaigns of the surviving voters after the leader's
/// process died (see [`MetadataQuorum::leader_gone`]): a vote round trip
/// and its fsyncs, with room to spare.
const CAMPAIGN_STAGGER: std::time::Duration = std::time::Duration::from_millis(150);

/// The shard that runs the metadata quorum (and the active controller when
/// this node leads it).
pub const METADATA_SHARD: usize = 0;

/// A proposal waiting to be committed.
struct Waiter {
    /// Index of its last entry.
    index: u64,
    /// Term it was proposed in: committed at that index in the same term
    /// means it is ours (a leader never overwrites its own entries).
    term: u64,
    done: oneshot::Sender<bool>,
}

/// A voter's Raft state.
struct RaftMember {
    node: RefCell<QuorumNode<MetadataMachine>>,
    /// Outgoing Raft frames per peer (raft id).
    peers: RefCell<BTreeMap<u64, mpsc::UnboundedSender<Vec<u8>>>>,
    waiters: RefCell<Vec<Waiter>>,
    was_leader: Cell<bool>,
}

/// What an observer knows: the last image a voter sent and the quorum as
/// that voter saw it.
struct Observed {
    image: Arc<MetadataImage>,
    status: QuorumStatus,
    /// The configured voters' node ids (for DescribeQuorum).
    voters: Vec<i32>,
}

/// A voter or an observer (see the module doc). The Raft member is boxed:
/// it is ~1.4 KB and made once per process.
enum Member {
    Voter(Box<RaftMember>),
    Observer(RefCell<Observed>),
}

/// This node's quorum member (see the module doc).
pub struct MetadataQuorum {
    member: Member,
    /// The active controller's record of broker heartbeats (not replicated).
    pub(super) heartbeats: RefCell<BrokerHeartbeats>,
    /// The settings controller decisions read.
    pub(super) controller_config: ControllerConfig,
    /// Held while a controller decision is made and committed, so each one
    /// reads the image with every earlier decision applied.
    pub(super) decisions: futures::lock::Mutex<()>,
    published: RefCell<Option<(Arc<MetadataImage>, QuorumStatus)>>,
    publications: Cell<u64>,
    /// The metadata log was empty when this process opened it.
    started_fresh: bool,
    /// This process's random id, sent with its registration: an image whose
    /// registration of this node carries it was made after this start.
    incarnation_id: [u8; 16],
    /// The broker epoch of this process's registration, once committed.
    pub(super) broker_epoch: Cell<Option<i64>>,
    /// A controlled shutdown started: the heartbeat loop stops, so that no
    /// ordinary heartbeat unfences the broker again.
    pub(super) shutting_down: Cell<bool>,
}

impl MetadataQuorum {
    /// Opens the store and the node; the caller registers it as a service.
    pub fn open(shard: &Shard) -> Result<MetadataQuorum, String> {
        let config = &shard.config;
        let own = raft_id(config.broker_id);
        let directory = config
            .cluster
            .metadata_log_dir
            .as_ref()
            .unwrap_or(&config.data_dir)
            .join(engine::types::CLUSTER_METADATA_DIR);
        let store = FileStorage::open(&directory, &initial_voters(config)).map_err(|e| {
            format!(
                "cannot open the metadata log in {}: {e}",
                directory.display()
            )
        })?;
        check_membership(config, store.cache().conf_state(), &directory)?;
        let mut quorum_config = QuorumConfig::new(own, rand::random());
        quorum_config.election_tick = 10;
        quorum_config.heartbeat_tick = 2;
        quorum_config.snapshot_interval_entries = config.cluster.snapshot_interval_entries;
        let started_fresh = store.cache().last_index() == 0;
        let node = QuorumNode::open(quorum_config, store, MetadataMachine::new())
            .map_err(|e| format!("cannot start the metadata quorum: {e}"))?;
        let member = Member::Voter(Box::new(RaftMember {
            node: RefCell::new(node),
            peers: RefCell::new(BTreeMap::new()),
            waiters: RefCell::new(Vec::new()),
            was_leader: Cell::new(false),
        }));
        Ok(MetadataQuorum::with_member(shard, member, started_fresh))
    }

    /// An observer (a broker-only node): it opens nothing on disk, so a
    /// restart fetches the image again, and a later start as a voter finds
    /// no metadata log of its own to misread. It never counts as started
    /// fresh: adopting topics found on disk is a single node's migration,
    /// and an observer's partitions on disk are the cluster's.
    pub fn observer(shard: &Shard) -> MetadataQuorum {
        let member = Member::Observer(RefCell::new(Observed {
            image: Arc::new(MetadataImage::new()),
            status: QuorumStatus::default(),
            voters: shard
                .config
                .cluster
                .voters
                .iter()
                .map(|v| v.node_id)
                .collect(),
        }));
        MetadataQuorum::with_member(shard, member, false)
    }

    fn with_member(shard: &Shard, member: Member, started_fresh: bool) -> MetadataQuorum {
        let config = &shard.config;
        let controller_config = ControllerConfig {
            broker_session_timeout_ms: config.cluster.session_timeout_ms,
            unclean_leader_election_enable: config.topic_defaults().unclean_leader_election_enable,
            min_insync_replicas: usize::try_from(config.topic_defaults().min_insync_replicas)
                .unwrap_or(1)
                .max(1),
            leader_imbalance_per_broker_percentage: config
                .cluster
                .leader_imbalance_per_broker_percentage,
        };
        MetadataQuorum {
            member,
            heartbeats: RefCell::new(BrokerHeartbeats::new()),
            controller_config,
            decisions: futures::lock::Mutex::new(()),
            published: RefCell::new(None),
            publications: Cell::new(0),
            started_fresh,
            incarnation_id: rand::random(),
            broker_epoch: Cell::new(None),
            shutting_down: Cell::new(false),
        }
    }

    fn voter(&self) -> Option<&RaftMember> {
        match &self.member {
            Member::Voter(voter) => Some(voter),
            Member::Observer(_) => None,
        }
    }

    /// Adds the outgoing queue of a peer (a voter's; an observer has none).
    pub fn add_peer(&self, peer_raft_id: u64, frames: mpsc::UnboundedSender<Vec<u8>>) {
        if let Some(voter) = self.voter() {
            voter.peers.borrow_mut().insert(peer_raft_id, frames);
        }
    }

    /// A message from a peer (dropped by an observer: it has no Raft node,
    /// and no listener that would receive one).
    pub fn step(&self, shard: &Rc<Shard>, message: Message) {
        let Some(voter) = self.voter() else {
            tracing::debug!("Raft message to an observer dropped");
            return;
        };
        let result = voter.node.borrow_mut().step(message);
        if let Err(e) = result {
            tracing::debug!(error = %e, "Raft message not stepped");
        }
        self.pump(shard);
    }

    /// One tick of the election and heartbeat timers.
    pub fn tick(&self, shard: &Rc<Shard>) {
        if let Some(voter) = self.voter() {
            voter.node.borrow_mut().tick();
            self.pump(shard);
        }
    }

    /// The leader `leader_raft_id` this voter follows is gone: its process
    /// no longer listens. The surviving voters campaign in turn, lowest id
    /// first and each [`CAMPAIGN_STAGGER`] after the one before while no
    /// leader is known: one at a time, so that two do not split the vote,
    /// and the next soon, in case the first cannot win (its log is behind
    /// the others', or it is gone too). The election timeout remains the
    /// last resort.
    pub fn leader_gone(&self, shard: &Rc<Shard>, leader_raft_id: u64) {
        let Some(voter) = self.voter() else {
            return;
        };
        let rank = {
            let node = voter.node.borrow();
            let own = node.node_id();
            let voters = &node.conf_state().voters;
            let survivors = voters.iter().filter(|&&id| id != leader_raft_id);
            survivors.filter(|&&id| id < own).count() as u32
        };
        if rank == 0 {
            self.campaign_for(shard, leader_raft_id);
            return;
        }
        let (Some(quorum), shard) = (shard.runtime().quorum.clone(), shard.clone()) else {
            return;
        };
        glommio::spawn_local(async move {
            glommio::timer::sleep(CAMPAIGN_STAGGER * rank).await;
            quorum.campaign_for(&shard, leader_raft_id);
        })
        .detach();
    }

    fn campaign_for(&self, shard: &Rc<Shard>, gone: u64) {
        let Some(voter) = self.voter() else {
            return;
        };
        let campaigned = {
            let mut node = voter.node.borrow_mut();
            if node.is_leader() || node.leader_id().is_some_and(|known| known != gone) {
                return;
            }
            tracing::info!(
                leader = super::node_id(gone),
                "the active controller's process is gone: campaigning now"
            );
            node.campaign_after_leader_loss(gone)
        };
        if let Err(e) = campaigned {
            tracing::debug!(error = %e, "no campaign after the leader's loss");
        }
        self.pump(shard);
    }

    /// The link to a peer failed: raft-rs probes it instead of streaming.
    pub fn peer_unreachable(&self, shard: &Rc<Shard>, peer_raft_id: u64) {
        if let Some(voter) = self.voter() {
            voter.node.borrow_mut().report_unreachable(peer_raft_id);
            self.pump(shard);
        }
    }

    /// Proposes `records` (on the leader) and returns a receiver told whether
    /// they committed in this leader's term, and the index of the last one;
    /// `None` when not the leader.
    pub fn propose(
        &self,
        shard: &Rc<Shard>,
        records: &[cluster::metadata::MetadataRecord],
    ) -> Option<(oneshot::Receiver<bool>, u64)> {
        self.propose_with(shard, |node| {
            records
                .iter()
                .try_for_each(|record| node.propose(record.encode()))
        })
    }

    /// Proposes a membership change of `node_id` (KIP-853), as
    /// [`Self::propose`] does records. raft-rs drops a change while another
    /// is pending: the caller checks [`Self::membership`] once committed.
    pub fn propose_membership(
        &self,
        shard: &Rc<Shard>,
        node_id: i32,
        change_type: ConfChangeType,
    ) -> Option<(oneshot::Receiver<bool>, u64)> {
        let change = membership_change(super::raft_id(node_id), change_type);
        self.propose_with(shard, |node| node.propose_conf_change(change))
    }

    fn propose_with(
        &self,
        shard: &Rc<Shard>,
        propose: impl FnOnce(&mut QuorumNode<MetadataMachine>) -> Result<(), QuorumError>,
    ) -> Option<(oneshot::Receiver<bool>, u64)> {
        let voter = self.voter()?;
        let receiver = {
            let mut node = voter.node.borrow_mut();
            if !node.is_leader() {
                return None;
            }
            if let Err(e) = propose(&mut node) {
                tracing::warn!(error = %e, "metadata proposal dropped");
                return None;
            }
            let (done, receiver) = oneshot::channel();
            let index = node.last_index();
            voter.waiters.borrow_mut().push(Waiter {
                index,
                term: node.term(),
                done,
            });
            (receiver, index)
        };
        self.pump(shard);
        Some(receiver)
    }

    /// The voters and the learners (members being added, still catching
    /// up) as node ids; `None` on an observer.
    pub fn membership(&self) -> Option<(Vec<i32>, Vec<i32>)> {
        let voter = self.voter()?;
        let node = voter.node.borrow();
        let ids = |raft_ids: &[u64]| raft_ids.iter().map(|&id| super::node_id(id)).collect();
        let conf_state = node.conf_state();
        Some((ids(&conf_state.voters), ids(&conf_state.learners)))
    }

    /// Whether `node_id` holds every entry committed so far, as the leader
    /// knows; false on any other member.
    pub fn caught_up(&self, node_id: i32) -> bool {
        self.voter().is_some_and(|voter| {
            let node = voter.node.borrow();
            node.matched_index(super::raft_id(node_id))
                .is_some_and(|matched| matched >= node.commit_index())
        })
    }

    /// Every controller this node knows how to reach: the configured
    /// voters, then those AddRaftVoter registered (never empty on a node
    /// with configured voters).
    pub fn known_controllers(&self, shard: &Shard) -> Vec<Voter> {
        let mut known = shard.config.cluster.voters.clone();
        self.with_image(|image| {
            for (&node_id, (host, port)) in image.controllers() {
                if !known.iter().any(|voter| voter.node_id == node_id) {
                    known.push(Voter {
                        node_id,
                        host: host.clone(),
                        port: *port,
                    });
                }
            }
        });
        known
    }

    /// Where `node_id`'s controller listener is: its entry in
    /// `controller.quorum.voters`, else what AddRaftVoter registered.
    pub fn controller_endpoint(&self, shard: &Shard, node_id: i32) -> Option<Voter> {
        if let Some(voter) = shard.config.cluster.voter(node_id) {
            return Some(voter.clone());
        }
        self.with_image(|image| {
            image.controllers().get(&node_id).map(|(host, port)| Voter {
                node_id,
                host: host.clone(),
                port: *port,
            })
        })
    }

    /// Runs raft-rs's ready cycle and hands out what it produced (a no-op
    /// on an observer, whose images arrive through [`Self::observed`]).
    pub fn pump(&self, shard: &Rc<Shard>) {
        let Some(voter) = self.voter() else {
            return;
        };
        let advanced = voter.node.borrow_mut().advance();
        let outgoing = match kernel::fatal::metadata_log_fault(advanced) {
            Ok(outgoing) => outgoing,
            Err(e) => {
                // The metadata log could not be written: this node cannot
                // keep its promises to the quorum any more. Not a clean
                // stop: its controlled shutdown would ask this quorum.
                kernel::fatal::stop(
                    kernel::fatal::Reason::MetadataLog,
                    &format!("metadata quorum failed: {e}{}", descriptor_hint(&e)),
                );
            }
        };
        for message in outgoing.messages {
            if !voter.peers.borrow().contains_key(&message.to) {
                super::open_peer_link(shard, message.to);
            }
            Self::send(voter, message);
        }
        let node = voter.node.borrow();
        let is_leader = node.is_leader();
        if is_leader && !voter.was_leader.get() {
            tracing::info!(term = node.term(), "this node is the active controller");
            self.heartbeats
                .borrow_mut()
                .start_sessions(node.state_machine().image(), shard.monotonic_ms());
        }
        voter.was_leader.set(is_leader);
        let (applied, term) = (node.applied_index(), node.term());
        let waiters = std::mem::take(&mut *voter.waiters.borrow_mut());
        let mut pending = Vec::with_capacity(waiters.len());
        for waiter in waiters {
            if term != waiter.term || !is_leader {
                let _ = waiter.done.send(false);
            } else if applied >= waiter.index {
                let _ = waiter.done.send(true);
            } else {
                pending.push(waiter);
            }
        }
        voter.waiters.borrow_mut().extend(pending);
        let status = QuorumStatus {
            leader_id: node.leader_id().map(super::node_id),
            term: node.term(),
            commit_index: node.commit_index(),
            applied_index: applied,
        };
        let image = node.state_machine().image();
        let publication = self.publication(status, image.last_applied_offset(), || {
            Arc::new(image.clone())
        });
        drop(node);
        if let Some((sequence, image, status)) = publication {
            publish(shard, sequence, image, status);
        }
    }

    /// An observer's news from a voter: the quorum as it sees it, and a
    /// newer image if there is one. Published to every shard like a
    /// voter's commits, so everything downstream works the same.
    pub fn observed(&self, shard: &Rc<Shard>, status: QuorumStatus, image: Option<MetadataImage>) {
        let Member::Observer(observed) = &self.member else {
            return;
        };
        let mut observed = observed.borrow_mut();
        if let Some(image) = image {
            // A voter answers only with an image past ours; one that is not
            // (an answer overtaken by a newer one) is dropped, never applied.
            if image.last_applied_offset() > observed.image.last_applied_offset() {
                observed.image = Arc::new(image);
            }
        }
        let applied_offset = observed.image.last_applied_offset();
        observed.status = QuorumStatus {
            applied_index: u64::try_from(applied_offset).unwrap_or(0),
            ..status
        };
        let current = observed.image.clone();
        let publication =
            self.publication(observed.status.clone(), applied_offset, move || current);
        drop(observed);
        if let Some((sequence, image, status)) = publication {
            publish(shard, sequence, image, status);
        }
    }

    /// A voter's records applied after `offset`, at most `max_bytes` of
    /// them, encoded as a FetchMetadata delta (each record's offset, i64
    /// BE, then its frame); `None` on an observer, or when some of them are
    /// no longer kept.
    pub fn records_after(&self, offset: i64, max_bytes: usize) -> Option<Vec<u8>> {
        let voter = self.voter()?;
        let node = voter.node.borrow();
        let records = node.state_machine().records_after(offset, max_bytes)?;
        let mut body = Vec::with_capacity(records.iter().map(|(_, f)| 8 + f.len()).sum());
        for (at, frame) in records {
            body.extend_from_slice(&at.to_be_bytes());
            body.extend_from_slice(frame);
        }
        Some(body)
    }

    /// An observer's delta from a voter: `records`, applied in order to a
    /// copy of its image, which is then published as a whole image is. A
    /// record that does not apply leaves the image as it was, and is the
    /// error: the observer then asks for the whole image.
    pub fn observed_records(
        &self,
        shard: &Rc<Shard>,
        status: QuorumStatus,
        records: &[(i64, MetadataRecord)],
    ) -> Result<(), String> {
        let Member::Observer(observed) = &self.member else {
            return Ok(());
        };
        let mut image = MetadataImage::clone(&observed.borrow().image);
        for (offset, record) in records {
            // Records at or below the image's offset were applied already
            // (an answer overtaken by a newer one).
            if *offset > image.last_applied_offset() {
                image.apply(*offset, record).map_err(|e| e.to_string())?;
            }
        }
        self.observed(shard, status, Some(image));
        Ok(())
    }

    /// An observer's controller `leader` stopped answering: forget it, so
    /// that the observer asks the other voters and requests for the
    /// controller wait until a voter names the next one.
    pub fn forget_leader(&self, shard: &Rc<Shard>, leader: i32) {
        let status = match &self.member {
            Member::Observer(observed) => observed.borrow().status.clone(),
            Member::Voter(_) => return,
        };
        if status.leader_id == Some(leader) {
            let forgotten = QuorumStatus {
                leader_id: None,
                ..status
            };
            self.observed(shard, forgotten, None);
        }
    }

    /// Records what to publish when the image or the status changed since
    /// the last publication; `image` is asked for only when the image did.
    fn publication(
        &self,
        status: QuorumStatus,
        applied_offset: i64,
        image: impl FnOnce() -> Arc<MetadataImage>,
    ) -> Option<(u64, Arc<MetadataImage>, QuorumStatus)> {
        let mut published = self.published.borrow_mut();
        let (image_changed, status_changed) = match published.as_ref() {
            None => (true, true),
            Some((image, old)) => (
                image.last_applied_offset() != applied_offset,
                *old != status,
            ),
        };
        if !image_changed && !status_changed {
            return None;
        }
        let image = match published.as_ref() {
            Some((image, _)) if !image_changed => image.clone(),
            _ => image(),
        };
        *published = Some((image.clone(), status.clone()));
        let sequence = self.publications.get() + 1;
        self.publications.set(sequence);
        Some((sequence, image, status))
    }

    fn send(voter: &RaftMember, message: Message) {
        let to = message.to;
        let frame = match cluster::quorum::wire::encode_message(&message) {
            Ok(body) => super::frame::frame(super::frame::KIND_RAFT, &body),
            Err(e) => {
                tracing::error!(error = %e, "Raft message not encodable");
                return;
            }
        };
        let sent = voter
            .peers
            .borrow()
            .get(&to)
            .is_some_and(|queue| queue.unbounded_send(frame).is_ok());
        if !sent {
            voter.node.borrow_mut().report_unreachable(to);
        }
    }

    /// Whether the metadata log was empty when this process opened it (a new
    /// node, or a single node's first start since it keeps metadata).
    pub fn started_fresh(&self) -> bool {
        self.started_fresh
    }

    /// The broker epoch of this process's registration, once committed.
    pub fn registered_epoch(&self) -> Option<i64> {
        self.broker_epoch.get()
    }

    /// This process's incarnation id (BrokerRegistration's).
    pub fn incarnation_id(&self) -> [u8; 16] {
        self.incarnation_id
    }

    /// Whether this node leads the quorum (is the active controller); never
    /// an observer.
    pub fn is_leader(&self) -> bool {
        self.voter()
            .is_some_and(|voter| voter.node.borrow().is_leader())
    }

    /// The active controller's node id, if known (an observer: the one a
    /// voter last named).
    pub fn leader(&self) -> Option<i32> {
        match &self.member {
            Member::Voter(voter) => voter.node.borrow().leader_id().map(super::node_id),
            Member::Observer(observed) => observed.borrow().status.leader_id,
        }
    }

    /// The committed image, for a controller decision (a clone: decisions
    /// run while the node keeps stepping).
    pub fn image(&self) -> MetadataImage {
        match &self.member {
            Member::Voter(voter) => voter.node.borrow().state_machine().image().clone(),
            Member::Observer(observed) => MetadataImage::clone(&observed.borrow().image),
        }
    }

    /// `read` of the committed image in place, for a decision made without
    /// an await: no clone of an image that, with thousands of partitions,
    /// costs milliseconds to copy (heartbeats and the fencing timer run
    /// several times a second).
    pub fn with_image<R>(&self, read: impl FnOnce(&MetadataImage) -> R) -> R {
        match &self.member {
            Member::Voter(voter) => read(voter.node.borrow().state_machine().image()),
            Member::Observer(observed) => {
                let image = observed.borrow().image.clone();
                read(&image)
            }
        }
    }

    /// The highest log index applied to the image (an observer: its
    /// image's offset).
    pub fn applied_index(&self) -> u64 {
        match &self.member {
            Member::Voter(voter) => voter.node.borrow().applied_index(),
            Member::Observer(observed) => observed.borrow().status.applied_index,
        }
    }

    /// The highest metadata offset this node has applied.
    pub fn applied_offset(&self) -> i64 {
        match &self.member {
            Member::Voter(voter) => voter
                .node
                .borrow()
                .state_machine()
                .image()
                .last_applied_offset(),
            Member::Observer(observed) => observed.borrow().image.last_applied_offset(),
        }
    }

    /// DescribeQuorum's view from this member: (node id, log end offset or
    /// -1 when unknown) per voter, leader, term, high watermark. An
    /// observer knows the voters from its config and none of their
    /// progress.
    pub fn describe(&self, shard: &Shard) -> QuorumDescription {
        let mut description = match &self.member {
            Member::Voter(voter) => {
                let node = voter.node.borrow();
                let progress = |id: u64| {
                    let matched = if id == node.node_id() {
                        Some(node.last_index())
                    } else {
                        node.matched_index(id)
                    };
                    (super::node_id(id), matched.map_or(-1, |m| m as i64))
                };
                QuorumDescription {
                    leader_id: node.leader_id().map(super::node_id),
                    term: node.term(),
                    high_watermark: node.commit_index(),
                    voters: node
                        .conf_state()
                        .voters
                        .iter()
                        .map(|&id| progress(id))
                        .collect(),
                    observers: node
                        .conf_state()
                        .learners
                        .iter()
                        .map(|&id| progress(id))
                        .collect(),
                    endpoints: Vec::new(),
                }
            }
            Member::Observer(observed) => {
                let observed = observed.borrow();
                QuorumDescription {
                    leader_id: observed.status.leader_id,
                    term: observed.status.term,
                    high_watermark: observed.status.commit_index,
                    voters: observed.voters.iter().map(|&id| (id, -1)).collect(),
                    observers: Vec::new(),
                    endpoints: Vec::new(),
                }
            }
        };
        description.voters.sort_unstable();
        let members = description.voters.iter().chain(&description.observers);
        let ids: Vec<i32> = members.map(|&(id, _)| id).collect();
        description.endpoints = ids
            .into_iter()
            .filter_map(|id| self.controller_endpoint(shard, id))
            .map(|voter| (voter.node_id, voter.host, voter.port))
            .collect();
        description
    }
}

/// The voters a new metadata log starts with: the configured ones; none
/// for a controller that joins a running quorum (it learns them from the
/// leader's snapshot once AddRaftVoter added it); itself on a single node.
fn initial_voters(config: &kernel::config::BrokerConfig) -> Vec<u64> {
    let own = raft_id(config.broker_id);
    if config.cluster.is_single_node() {
        vec![own]
    } else if config.cluster.voter(config.broker_id).is_none() {
        Vec::new()
    } else {
        let voters = config.cluster.voters.iter();
        voters.map(|v| raft_id(v.node_id)).collect()
    }
}

/// The metadata log's membership is the quorum's: AddRaftVoter and
/// RemoveRaftVoter change it after `controller.quorum.voters` was written,
/// so a difference is told, not refused. A log that does not name this
/// node at all is refused: it is another quorum's (a single node's data
/// dir reused for a cluster), or this node was removed, and either way it
/// cannot vote.
fn check_membership(
    config: &kernel::config::BrokerConfig,
    conf_state: &raft::eraftpb::ConfState,
    directory: &std::path::Path,
) -> Result<(), String> {
    let show = |ids: &[u64]| {
        let ids: Vec<String> = ids
            .iter()
            .map(|&id| super::node_id(id).to_string())
            .collect();
        ids.join(",")
    };
    let mut stored = conf_state.voters.clone();
    stored.sort_unstable();
    let mut configured = initial_voters(config);
    configured.sort_unstable();
    let own = raft_id(config.broker_id);
    if stored.is_empty() {
        tracing::info!(
            "this controller is not a voter yet: it waits for AddRaftVoter \
             (rill admin quorum add-voter) to add it"
        );
    } else if !stored.contains(&own) && !conf_state.learners.contains(&own) {
        return Err(format!(
            "the metadata log in {} names the voters [{}], not this node {}: it belongs to \
             another quorum, or this node was removed by RemoveRaftVoter; give it an empty \
             data dir and add it with `rill admin quorum add-voter`",
            directory.display(),
            show(&stored),
            config.broker_id
        ));
    } else if stored != configured {
        tracing::info!(
            voters = %show(&stored),
            configured = %show(&configured),
            "the quorum's voters changed since controller.quorum.voters was written \
             (AddRaftVoter / RemoveRaftVoter); the metadata log's are used"
        );
    }
    Ok(())
}

/// What to do about a metadata log write that failed for want of file
/// descriptors: not a broken disk, but a limit too low for the partitions
/// this broker holds (each keeps its log and index files open).
fn descriptor_hint(error: &cluster::quorum::QuorumError) -> &'static str {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    match error {
        cluster::quorum::QuorumError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(EMFILE | ENFILE)) =>
        {
            " (out of file descriptors: each partition replica keeps about three \
             files open; raise LimitNOFILE or `ulimit -n`)"
        }
        _ => "",
    }
}
