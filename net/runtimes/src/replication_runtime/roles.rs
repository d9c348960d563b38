//! [`ReplicaManager`]: the roles of one shard's replicated partitions, each
//! with a generation so that a task started for a role stops when it ends.

use crate::Shard;
use cluster::replication::LeaderState;
use engine::log::watch::OffsetWatch;
use engine::TopicPartition;
use kernel::metrics::ReplicationCounters;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// `replica.lag.time.max.ms`: a follower not caught up for this long leaves
/// the ISR (Kafka's default is 30 s; rill fences a dead broker much sooner,
/// so this only catches a live but slow one).
pub const REPLICA_LAG_TIME_MAX_MS: i64 = 10_000;

/// A replicated partition's role on this broker.
#[derive(Clone)]
pub enum Role {
    /// This broker leads it.
    Leader(Rc<RefCell<LeaderState>>),
    /// This broker follows `leader` in `leader_epoch`.
    Follower {
        /// The leader's node id.
        leader: i32,
        /// Its epoch.
        leader_epoch: i32,
    },
    /// No leader (every ISR member is down): nobody serves it.
    Offline,
}

/// Called when this shard becomes the leader of a replicated partition
/// (the coordinators load the state of their partitions this way).
pub type LeadershipHook = Rc<dyn Fn(&Rc<Shard>, &TopicPartition)>;

/// The roles of this shard's replicated partitions.
pub struct ReplicaManager {
    roles: RefCell<HashMap<TopicPartition, (u64, Role)>>,
    generation: Cell<u64>,
    /// Counts role changes (set or forgotten): a task that must stop when
    /// its role ends (an acks=all produce waiting on its leader's HW)
    /// waits on this besides its own condition.
    changes: OffsetWatch,
    on_leadership: RefCell<Vec<LeadershipHook>>,
    /// Counts the partition states applied per partition: a state whose
    /// apply waits (for a truncation to end) is applied only if no later
    /// one came meanwhile.
    applies: RefCell<HashMap<TopicPartition, u64>>,
    /// The single-replica partitions the reconciler made this broker's,
    /// with the leader epoch it applied: a coordinator leases one only in
    /// the epoch the image names (see `leader::leader_lease`).
    alone: RefCell<HashMap<TopicPartition, i32>>,
    /// What `/metrics` reports of this shard's replication.
    pub counters: RefCell<ReplicationCounters>,
}

impl Default for ReplicaManager {
    fn default() -> Self {
        ReplicaManager {
            roles: RefCell::default(),
            generation: Cell::new(0),
            changes: OffsetWatch::new(0),
            on_leadership: RefCell::default(),
            applies: RefCell::default(),
            alone: RefCell::default(),
            counters: RefCell::default(),
        }
    }
}

impl ReplicaManager {
    /// Counts a partition state arriving for `tp`; returns its number.
    pub fn next_apply(&self, tp: &TopicPartition) -> u64 {
        let mut applies = self.applies.borrow_mut();
        let count = applies.entry(tp.clone()).or_insert(0);
        *count += 1;
        *count
    }

    /// Whether the state numbered `apply` is still the last one for `tp`.
    pub fn is_last_apply(&self, tp: &TopicPartition, apply: u64) -> bool {
        self.applies.borrow().get(tp) == Some(&apply)
    }

    /// The partition's role and its generation (a task started for a role
    /// stops once the generation moves on), if it is replicated.
    pub fn role(&self, tp: &TopicPartition) -> Option<(u64, Role)> {
        self.roles.borrow().get(tp).cloned()
    }

    /// The leader state of a partition this shard leads, if replicated.
    pub fn leader_state(&self, tp: &TopicPartition) -> Option<Rc<RefCell<LeaderState>>> {
        match self.role(tp) {
            Some((_, Role::Leader(state))) => Some(state),
            _ => None,
        }
    }

    /// Whether `generation` is still the partition's current role.
    pub fn is_current(&self, tp: &TopicPartition, generation: u64) -> bool {
        self.roles
            .borrow()
            .get(tp)
            .is_some_and(|(current, _)| *current == generation)
    }

    pub(super) fn set(&self, tp: TopicPartition, role: Role) -> u64 {
        self.alone.borrow_mut().remove(&tp);
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        self.roles.borrow_mut().insert(tp, (generation, role));
        self.changed();
        generation
    }

    /// Resolves at the next role change on this shard (any partition's)
    /// after this call.
    pub fn next_change(&self) -> impl std::future::Future<Output = ()> + '_ {
        let seen = self.changes.get();
        async move {
            let _ = self.changes.wait_past(seen).await;
        }
    }

    fn changed(&self) {
        self.changes.set(self.changes.get() + 1);
    }

    /// Registers a hook run each time this shard starts leading a
    /// replicated partition (a new leader epoch).
    pub fn on_leadership(&self, hook: LeadershipHook) {
        self.on_leadership.borrow_mut().push(hook);
    }

    pub(super) fn leadership_hooks(&self) -> Vec<LeadershipHook> {
        self.on_leadership.borrow().clone()
    }

    /// For each partition this shard leads, each follower's distance from
    /// the leader's log end, in messages, as of its last fetch: `(topic,
    /// partition, follower, lag)`. A follower that has not fetched from
    /// this leader yet is left out.
    pub fn lag_at_leader(&self) -> Vec<(String, i32, i32, i64)> {
        let roles = self.roles.borrow();
        let mut rows = Vec::new();
        for (tp, (_, role)) in roles.iter() {
            let Role::Leader(state) = role else {
                continue;
            };
            let state = state.borrow();
            for &replica in state.replicas() {
                let Some(view) = state.follower(replica) else {
                    continue;
                };
                if view.log_end_offset >= 0 {
                    let lag = (state.log_end_offset() - view.log_end_offset).max(0);
                    rows.push((tp.topic.clone(), tp.partition, replica, lag));
                }
            }
        }
        rows.sort();
        rows
    }

    /// Drops a deleted partition's role.
    pub fn forget_deleted(&self, tp: &TopicPartition) {
        self.alone.borrow_mut().remove(tp);
        self.forget(tp);
    }

    /// Records that the reconciler applied `tp` as this broker's only
    /// replica, in `leader_epoch`.
    pub(super) fn hold_alone(&self, tp: &TopicPartition, leader_epoch: i32) {
        self.forget(tp);
        self.alone.borrow_mut().insert(tp.clone(), leader_epoch);
        self.changed();
    }

    /// The leader epoch `tp` was last applied in as this broker's only
    /// replica, if it is one.
    pub fn held_alone_in(&self, tp: &TopicPartition) -> Option<i32> {
        self.alone.borrow().get(tp).copied()
    }

    pub(super) fn forget(&self, tp: &TopicPartition) {
        if self.roles.borrow_mut().remove(tp).is_some() {
            self.changed();
        }
    }
}
