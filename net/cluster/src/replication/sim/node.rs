//! One simulated replica: a log with a durable prefix and its leader-epoch
//! cache, and the role it believes it has. As leader it runs a
//! [`LeaderState`] and serves fetches; as follower it fetches, reconciles
//! with the diverging-epoch answer and appends. This is the runtime's part
//! of replication, reduced to what the safety rules depend on.

use engine::types::{LeaderEpoch, Offset};

use super::controller::Published;
use super::network::{Endpoint, Entry, Payload, CONTROLLER};
use super::txn::TxnRecord;
use crate::replication::{
    diverging_epoch, truncation_offset, Acks, AlterPartitionRejection, EpochEndOffset,
    LeaderConfig, LeaderEpochCache, LeaderInit, LeaderState, ReplicaId, ReplicationError,
};

/// Messages a step hands to the network.
pub(super) type Outbox = Vec<(Endpoint, Payload)>;

#[derive(Debug)]
pub(super) struct Node {
    pub(super) id: ReplicaId,
    pub(super) up: bool,
    pub(super) log: Vec<Entry>,
    /// Entries below this survive a crash.
    pub(super) durable_len: usize,
    pub(super) cache: LeaderEpochCache,
    /// This replica's HW (as leader: its `LeaderState`'s).
    pub(super) high_watermark: Offset,
    /// The newest leader epoch read from the metadata (-1 after a restart,
    /// until the first metadata sync).
    pub(super) known_leader_epoch: LeaderEpoch,
    pub(super) known_leader: Option<ReplicaId>,
    pub(super) leader: Option<LeaderState>,
    /// The shortest the log has been since the auditor last looked (so it
    /// knows how far its agreement check still holds).
    pub(super) min_len_since_audit: usize,
    /// Truncations that removed records.
    pub(super) truncations: u64,
}

impl Node {
    pub(super) fn new(id: ReplicaId) -> Self {
        Node {
            id,
            up: true,
            log: Vec::new(),
            durable_len: 0,
            cache: LeaderEpochCache::new(),
            high_watermark: 0,
            known_leader_epoch: -1,
            known_leader: None,
            leader: None,
            min_len_since_audit: 0,
            truncations: 0,
        }
    }

    pub(super) fn log_end_offset(&self) -> Offset {
        self.log.len() as Offset
    }

    fn truncate(&mut self, len: usize) {
        assert!(self.leader.is_none(), "a leader never truncates");
        if len < self.log.len() {
            self.truncations += 1;
        }
        self.log.truncate(len);
        self.durable_len = self.durable_len.min(self.log.len());
        self.min_len_since_audit = self.min_len_since_audit.min(self.log.len());
        self.cache.truncate_from_end(self.log_end_offset());
        self.high_watermark = self.high_watermark.min(self.log_end_offset());
        let log_end_offset = self.log_end_offset();
        assert!(self
            .cache
            .latest_entry()
            .is_none_or(|e| e.start_offset < log_end_offset));
    }

    fn append(&mut self, entry: Entry) -> Result<(), String> {
        let offset = self.log_end_offset();
        if self.cache.latest_epoch() != Some(entry.epoch) {
            let latest = self.cache.latest_epoch().unwrap_or(-1);
            if entry.epoch < latest {
                return Err(format!(
                    "replica {}: record of epoch {} at {offset} after epoch {latest}",
                    self.id, entry.epoch
                ));
            }
            self.cache
                .assign(entry.epoch, offset)
                .map_err(|e| e.to_string())?;
        }
        self.log.push(entry);
        Ok(())
    }

    /// Power loss: what was not fsynced is gone, and so is every role.
    pub(super) fn crash(&mut self) {
        self.up = false;
        self.leader = None;
        self.known_leader_epoch = -1;
        self.known_leader = None;
        self.truncate(self.durable_len);
    }

    pub(super) fn restart(&mut self) {
        assert!(!self.up);
        self.up = true;
    }

    /// Makes the whole log durable.
    pub(super) fn fsync(&mut self) {
        self.durable_len = self.log.len();
        if let Some(state) = self.leader.as_mut() {
            state.on_local_durable(self.durable_len as Offset);
            self.high_watermark = state.high_watermark();
        }
    }

    /// Reads the controller's committed state: a newer leader epoch makes
    /// this replica leader (Kafka's `makeLeader`: a new `LeaderState`, the
    /// epoch assigned at the log end) or follower; the same epoch updates a
    /// leader's ISR.
    pub(super) fn apply_metadata(
        &mut self,
        published: &Published,
        config: LeaderConfig,
        replicas: &[ReplicaId],
        now_ms: i64,
    ) -> Result<(), String> {
        assert!(self.up);
        if published.leader_epoch > self.known_leader_epoch {
            self.leader = None;
            self.known_leader_epoch = published.leader_epoch;
            self.known_leader = published.leader;
            if published.leader == Some(self.id) {
                self.cache
                    .assign(published.leader_epoch, self.log_end_offset())
                    .map_err(|e| e.to_string())?;
                let init = LeaderInit {
                    leader: self.id,
                    leader_epoch: published.leader_epoch,
                    partition_epoch: published.partition_epoch,
                    replicas: replicas.to_vec(),
                    isr: published.isr.clone(),
                    log_end_offset: self.log_end_offset(),
                    durable_offset: self.durable_len as Offset,
                    high_watermark: self.high_watermark,
                };
                let state = LeaderState::new(config, init, now_ms).map_err(|e| e.to_string())?;
                self.high_watermark = state.high_watermark();
                self.leader = Some(state);
            }
        } else if published.leader_epoch == self.known_leader_epoch {
            if let Some(state) = self.leader.as_mut() {
                state
                    .on_isr_committed(
                        published.leader_epoch,
                        published.partition_epoch,
                        published.isr.clone(),
                    )
                    .map_err(|e| e.to_string())?;
                self.high_watermark = state.high_watermark();
            }
        }
        Ok(())
    }

    /// A follower's next fetch, to its leader. Under the fsync rule it
    /// first makes its log durable, so the offset it reports survives a
    /// crash; `fsync_before_fetch = false` breaks that rule on purpose.
    pub(super) fn fetch_request(
        &mut self,
        fsync_before_fetch: bool,
    ) -> Option<(Endpoint, Payload)> {
        let leader = self.known_leader?;
        if !self.up || leader == self.id || self.leader.is_some() {
            return None;
        }
        if fsync_before_fetch {
            self.fsync();
        }
        Some((
            leader,
            Payload::Fetch {
                current_leader_epoch: self.known_leader_epoch,
                fetch_offset: self.log_end_offset(),
                last_fetched_epoch: self.cache.latest_epoch(),
            },
        ))
    }

    /// An acks=all produce of record `id` (a client's, or a coordinator's
    /// `txn` record): the (epoch, offset) it was appended at, `Ok(None)`
    /// when this replica does not lead.
    pub(super) fn produce(
        &mut self,
        id: u64,
        txn: Option<TxnRecord>,
    ) -> Result<Option<(LeaderEpoch, Offset)>, ReplicationError> {
        let Some(state) = self.leader.as_mut() else {
            return Ok(None);
        };
        state.produce_check(Acks::All)?;
        let epoch = state.leader_epoch();
        assert_eq!(self.cache.latest_epoch(), Some(epoch));
        let offset = self.log.len() as Offset;
        self.log.push(Entry { epoch, id, txn });
        state.on_local_append(offset + 1);
        Ok(Some((epoch, offset)))
    }

    /// The leader's periodic ISR check; `resend` re-sends a pending
    /// AlterPartition whose answer may be lost.
    ///
    /// `apply_before_commit` breaks Kafka's rule on purpose: the leader
    /// takes its own proposal as committed at once (a runtime bug the
    /// maximal-ISR rule exists to prevent).
    pub(super) fn tick(
        &mut self,
        now_ms: i64,
        resend: bool,
        apply_before_commit: bool,
    ) -> Result<Option<(Endpoint, Payload)>, String> {
        let Some(state) = self.leader.as_mut() else {
            return Ok(None);
        };
        if let Some(proposal) = state.tick(now_ms) {
            if apply_before_commit {
                state
                    .on_isr_committed(
                        proposal.leader_epoch,
                        proposal.partition_epoch + 1,
                        proposal.new_isr.clone(),
                    )
                    .map_err(|e| e.to_string())?;
            }
            self.high_watermark = state.high_watermark();
            return Ok(Some((CONTROLLER, Payload::AlterPartition(proposal))));
        }
        Ok(state
            .pending_alter_partition()
            .filter(|_| resend)
            .map(|pending| (CONTROLLER, Payload::AlterPartition(pending.clone()))))
    }

    /// A message for this replica.
    pub(super) fn receive(
        &mut self,
        from: Endpoint,
        payload: Payload,
        now_ms: i64,
        max_entries_per_fetch: usize,
    ) -> Result<Outbox, String> {
        assert!(self.up);
        match payload {
            Payload::Fetch {
                current_leader_epoch,
                fetch_offset,
                last_fetched_epoch,
            } => Ok(vec![(
                from,
                self.serve_fetch(
                    from,
                    current_leader_epoch,
                    fetch_offset,
                    last_fetched_epoch,
                    now_ms,
                    max_entries_per_fetch,
                ),
            )]),
            Payload::FetchData {
                leader_epoch,
                fetch_offset,
                entries,
                high_watermark,
            } => {
                if self.is_current_fetch(from, leader_epoch, fetch_offset) {
                    for entry in entries {
                        self.append(entry)?;
                    }
                    let bounded = high_watermark.min(self.log_end_offset());
                    self.high_watermark = self.high_watermark.max(bounded);
                }
                Ok(Vec::new())
            }
            Payload::Diverging {
                leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                answer,
            } => {
                if self.is_current_fetch(from, leader_epoch, fetch_offset)
                    && last_fetched_epoch == self.cache.latest_epoch()
                {
                    self.reconcile(answer);
                }
                Ok(Vec::new())
            }
            Payload::FetchRefused | Payload::AlterPartition(_) => Ok(Vec::new()),
            Payload::AlterPartitionCommitted {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if let Some(state) = self.leader.as_mut() {
                    if state.leader_epoch() == leader_epoch {
                        state
                            .on_isr_committed(leader_epoch, partition_epoch, isr)
                            .map_err(|e| e.to_string())?;
                        self.high_watermark = state.high_watermark();
                    }
                }
                Ok(Vec::new())
            }
            Payload::AlterPartitionRefused { proposal_id } => {
                if let Some(state) = self.leader.as_mut() {
                    state
                        .on_alter_partition_rejected(proposal_id, AlterPartitionRejection::Unknown);
                }
                Ok(Vec::new())
            }
        }
    }

    /// The answer to a follower's fetch (the leader's side).
    fn serve_fetch(
        &mut self,
        from: Endpoint,
        current_leader_epoch: LeaderEpoch,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        now_ms: i64,
        max_entries_per_fetch: usize,
    ) -> Payload {
        let log_end_offset = self.log_end_offset();
        let Some(state) = self.leader.as_mut() else {
            return Payload::FetchRefused;
        };
        if state.check_leader_epoch(current_leader_epoch).is_err() {
            return Payload::FetchRefused;
        }
        match diverging_epoch(
            &self.cache,
            log_end_offset,
            fetch_offset,
            last_fetched_epoch,
        ) {
            Err(_) => Payload::FetchRefused,
            Ok(Some(answer)) => Payload::Diverging {
                leader_epoch: state.leader_epoch(),
                fetch_offset,
                last_fetched_epoch,
                answer,
            },
            Ok(None) => {
                if state.on_follower_fetch(from, fetch_offset, now_ms).is_err() {
                    return Payload::FetchRefused;
                }
                self.high_watermark = state.high_watermark();
                let start = fetch_offset as usize;
                let end = self.log.len().min(start + max_entries_per_fetch);
                Payload::FetchData {
                    leader_epoch: state.leader_epoch(),
                    fetch_offset,
                    entries: self.log[start..end].to_vec(),
                    high_watermark: state.high_watermark(),
                }
            }
        }
    }

    /// Whether a fetch answer is for this follower's current fetch (from
    /// its leader, in its epoch, at its log end): stale and duplicated
    /// answers are dropped, as Kafka's fetcher drops a response whose fetch
    /// offset no longer matches.
    fn is_current_fetch(
        &self,
        from: Endpoint,
        leader_epoch: LeaderEpoch,
        fetch_offset: Offset,
    ) -> bool {
        self.leader.is_none()
            && self.known_leader == Some(from)
            && self.known_leader_epoch == leader_epoch
            && fetch_offset == self.log_end_offset()
    }

    /// Truncates where the leader's diverging-epoch answer says. An
    /// incomplete answer truncates too (at least the epoch the leader does
    /// not know), and the next fetch carries the new latest epoch.
    fn reconcile(&mut self, answer: EpochEndOffset) {
        let point = truncation_offset(
            &self.cache,
            self.log_end_offset(),
            self.high_watermark,
            answer,
        );
        let latest_before = self.cache.latest_epoch();
        self.truncate(point.offset as usize);
        assert!(
            point.complete || self.cache.latest_epoch() != latest_before || self.log.is_empty()
        );
    }
}
