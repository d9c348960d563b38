//! [`ApplyPartitionState`]: the committed state of a partition (from the
//! reconciler) becomes this shard's role for it — leader (a fresh
//! `LeaderState` for a new epoch, or the committed ISR and replicas for the
//! current one), follower (a fetcher for the new leader or epoch), offline,
//! or none (a reassignment moved the replica off this broker).

use super::roles::{ReplicaManager, Role, REPLICA_LAG_TIME_MAX_MS};
use super::{follower, leader};
use crate::Shard;
use cluster::replication::{LeaderConfig, LeaderInit, LeaderState};
use engine::{PartitionLog, TopicPartition};
use kernel::call::OwnerCall;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

/// A partition's committed state, for the shard that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyPartitionState {
    /// The partition.
    pub tp: TopicPartition,
    /// Its replicas, in assignment order.
    pub replicas: Vec<i32>,
    /// Its ISR.
    pub isr: Vec<i32>,
    /// Its leader (-1: none).
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch.
    pub partition_epoch: i32,
    /// The topic's `min.insync.replicas`.
    pub min_insync_replicas: usize,
}

impl OwnerCall<crate::ShardRuntime> for ApplyPartitionState {
    type Reply = ();

    async fn run(self, shard: Rc<Shard>) {
        apply(&shard, self);
    }
}

fn apply(shard: &Rc<Shard>, state: ApplyPartitionState) {
    // The reconciler sends it to `shard.owner(tp)`: a role lives only on
    // the shard that owns the partition's log.
    assert_eq!(
        shard.owner(&state.tp),
        shard.id,
        "a partition's role is applied on its owner: {} is shard {}'s, applied on shard {}",
        state.tp,
        shard.owner(&state.tp),
        shard.id
    );
    let Some(log) = shard.logs.get(&state.tp) else {
        return;
    };
    let manager = shard.runtime().replicas.clone();
    let apply_number = manager.next_apply(&state.tp);
    let own = shard.config.broker_id;
    if state.leader == own && log.is_truncating() && !leads_in_epoch(&manager, &state) {
        // A follower's truncation is in flight: its log end is still the
        // old one, and a leader state built from it would see the log
        // shrink under it. Lead once the truncation has ended.
        apply_after_truncation(shard, state, apply_number);
        return;
    }
    if state.leader == own {
        log.set_leader_epoch(state.leader_epoch.max(log.leader_epoch()));
    }
    if !state.replicas.contains(&own) {
        apply_moved_off(&manager, &log, &state.tp);
        return;
    }
    if state.replicas.len() <= 1 {
        // One replica: the single-node rules (HW = what is durable here).
        manager.hold_alone(&state.tp, state.leader_epoch);
        log.set_replication_limit(None);
        log.set_leading(true);
        return;
    }
    let isr: BTreeSet<i32> = state.isr.iter().copied().collect();
    let current = manager.role(&state.tp);
    if !matches!(current, Some((_, Role::Follower { .. }))) || state.leader == own {
        manager
            .counters
            .borrow_mut()
            .follower_lag
            .remove(&(state.tp.topic.clone(), state.tp.partition));
    }
    if state.leader == own {
        apply_leader(shard, &manager, &log, state, isr, current);
    } else if state.leader >= 0 && state.replicas.contains(&own) {
        apply_follower(shard, &manager, &log, state, current);
    } else {
        log.set_replication_limit(Some(log.high_watermark()));
        log.set_leading(false);
        manager.set(state.tp, Role::Offline);
    }
}

/// Whether this shard already leads `state`'s partition in its epoch (an
/// ISR change, applied to the running leader state).
fn leads_in_epoch(manager: &ReplicaManager, state: &ApplyPartitionState) -> bool {
    matches!(manager.role(&state.tp),
        Some((_, Role::Leader(leader))) if leader.borrow().leader_epoch() == state.leader_epoch)
}

/// Applies `state` once the partition's truncation has ended, unless a
/// later state for the partition arrived meanwhile (it is applied in turn).
fn apply_after_truncation(shard: &Rc<Shard>, state: ApplyPartitionState, apply_number: u64) {
    let shard = shard.clone();
    glommio::spawn_local(async move {
        let truncating =
            |shard: &Shard| (shard.logs.get(&state.tp)).is_some_and(|log| log.is_truncating());
        while truncating(&shard) {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        if shard
            .runtime()
            .replicas
            .is_last_apply(&state.tp, apply_number)
        {
            apply(&shard, state);
        }
    })
    .detach();
}

/// Moved off this broker by a reassignment: the reconciler deletes the
/// replica next; its fetcher or leader timer stops with the role. Offline,
/// not forgotten, until then: a partition without a role follows the
/// single-replica rules and would take (and acknowledge) produces that the
/// new leader never sees.
fn apply_moved_off(manager: &ReplicaManager, log: &PartitionLog, tp: &TopicPartition) {
    log.set_leading(false);
    manager.set(tp.clone(), Role::Offline);
    manager
        .counters
        .borrow_mut()
        .follower_lag
        .remove(&(tp.topic.clone(), tp.partition));
    log.set_replication_limit(Some(log.high_watermark()));
    tracing::info!(
        tp = %tp,
        log_end_offset = log.log_end_offset(),
        high_watermark = log.high_watermark(),
        "no longer a replica here"
    );
}

/// This broker leads the partition: the committed ISR for the current
/// epoch, or a fresh `LeaderState` (and the coordinators' load) for a new one.
fn apply_leader(
    shard: &Rc<Shard>,
    manager: &ReplicaManager,
    log: &PartitionLog,
    state: ApplyPartitionState,
    isr: BTreeSet<i32>,
    current: Option<(u64, Role)>,
) {
    let own = shard.config.broker_id;
    if let Some((_, Role::Leader(leader))) = &current {
        if leader.borrow().leader_epoch() == state.leader_epoch {
            let isr_before = leader.borrow().isr().len();
            let isr_after = isr.len();
            let moved = leader.borrow_mut().on_partition_committed(
                state.leader_epoch,
                state.partition_epoch,
                &state.replicas,
                isr,
                shard.now_ms(),
            );
            // The topic's minimum ISR may have changed alone (the strict
            // high watermark rule reads it).
            let released = leader
                .borrow_mut()
                .set_min_insync_replicas(state.min_insync_replicas);
            let moved = moved.map(|hw| hw.max(released));
            match moved {
                Ok(Some(hw)) => log.set_replication_limit(Some(hw)),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(tp = %state.tp, error = %e, "committed ISR not applied")
                }
            }
            let mut counters = manager.counters.borrow_mut();
            if isr_after < isr_before {
                counters.isr_shrinks += 1;
            } else if isr_after > isr_before {
                counters.isr_expands += 1;
            }
            return;
        }
    }
    let init = LeaderInit {
        leader: own,
        leader_epoch: state.leader_epoch,
        partition_epoch: state.partition_epoch,
        replicas: state.replicas.clone(),
        isr,
        log_end_offset: log.log_end_offset(),
        durable_offset: log.published_offset(),
        high_watermark: log.high_watermark(),
    };
    let config = LeaderConfig {
        min_insync_replicas: state.min_insync_replicas.max(1),
        replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS,
    };
    match LeaderState::new(config, init, shard.now_ms()) {
        Ok(leader) => {
            log.set_replication_limit(Some(leader.high_watermark()));
            log.set_leading(true);
            let generation = manager.set(
                state.tp.clone(),
                Role::Leader(Rc::new(RefCell::new(leader))),
            );
            tracing::info!(
                tp = %state.tp,
                epoch = state.leader_epoch,
                log_end_offset = log.log_end_offset(),
                high_watermark = log.high_watermark(),
                "leading"
            );
            manager.counters.borrow_mut().leaderships_taken += 1;
            for hook in manager.leadership_hooks() {
                hook(shard, &state.tp);
            }
            spawn_leader_tasks(shard, state.tp, generation);
        }
        Err(e) => tracing::error!(tp = %state.tp, error = %e, "cannot lead"),
    }
}

/// The tasks of a leader role, which end with it: the durable watch (the
/// HW follows what the log makes durable) and the timer (ISR changes).
fn spawn_leader_tasks(shard: &Rc<Shard>, tp: TopicPartition, generation: u64) {
    glommio::spawn_local(leader::run_durable_watch(
        shard.clone(),
        tp.clone(),
        generation,
    ))
    .detach();
    glommio::spawn_local(leader::run_leader_timer(shard.clone(), tp, generation)).detach();
}

/// This broker follows `state.leader`: a fetcher for a new leader or epoch.
fn apply_follower(
    shard: &Rc<Shard>,
    manager: &ReplicaManager,
    log: &PartitionLog,
    state: ApplyPartitionState,
    current: Option<(u64, Role)>,
) {
    if let Some((
        _,
        Role::Follower {
            leader,
            leader_epoch,
        },
    )) = &current
    {
        if *leader == state.leader && *leader_epoch == state.leader_epoch {
            return;
        }
    }
    // Until the fetcher hears from the leader, readers see no further.
    log.set_replication_limit(Some(log.high_watermark()));
    log.set_leading(false);
    let generation = manager.set(
        state.tp.clone(),
        Role::Follower {
            leader: state.leader,
            leader_epoch: state.leader_epoch,
        },
    );
    tracing::info!(tp = %state.tp, leader = state.leader, epoch = state.leader_epoch, "following");
    glommio::spawn_local(follower::run_fetcher(
        shard.clone(),
        state.tp,
        state.leader,
        state.leader_epoch,
        generation,
    ))
    .detach();
}
