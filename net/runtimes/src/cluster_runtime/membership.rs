//! The active controller's side of KIP-853's AddRaftVoter and
//! RemoveRaftVoter: one voter changes at a time, through raft-rs's
//! ConfChangeV2 (see `cluster::quorum::node`).
//!
//! Adding a voter, in order:
//! 1. its controller listener is committed (`RegisterController`), so that
//!    every member can reach it once it is one;
//! 2. it becomes a learner: it gets the leader's snapshot and the log, and
//!    does not count for a majority yet;
//! 3. once it holds everything committed, it is promoted to voter. A voter
//!    added before it caught up would count for a majority it cannot yet
//!    help reach: with one voter dead, every commit would wait for it.
//!
//! Removing one is a single change. The active controller does not remove
//! itself: an operator moves the leadership first (stop that controller,
//! and remove it from the new active one).

use super::quorum::MetadataQuorum;
use super::rpc::{ControllerReply, ControllerRpc, ADD_VOTER_CATCH_UP_TIMEOUT};
use crate::Shard;
use cluster::metadata::MetadataRecord;
use engine::ErrorCode;
use raft::eraftpb::ConfChangeType;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How often the catch-up is checked.
const CATCH_UP_POLL: Duration = Duration::from_millis(50);

/// Answers the quorum's own requests (AddRaftVoter, RemoveRaftVoter, and
/// DescribeQuorum on the leader); hands any other back.
pub async fn answer(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    request: ControllerRpc,
) -> Result<ControllerReply, ControllerRpc> {
    match request {
        ControllerRpc::AddVoter {
            node_id,
            host,
            port,
        } => Ok(add_voter(quorum, shard, node_id, host, port).await),
        ControllerRpc::RemoveVoter { node_id } => Ok(remove_voter(quorum, shard, node_id).await),
        ControllerRpc::DescribeQuorum if quorum.is_leader() => {
            Ok(ControllerReply::Quorum(quorum.describe(shard)))
        }
        other => Err(other),
    }
}

/// AddRaftVoter: `node_id`, listening for the quorum at `host:port`.
async fn add_voter(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    node_id: i32,
    host: String,
    port: u16,
) -> ControllerReply {
    let Some((voters, learners)) = quorum.membership().filter(|_| quorum.is_leader()) else {
        return not_controller(quorum);
    };
    if voters.contains(&node_id) {
        return ControllerReply::error(
            ErrorCode::DuplicateVoter,
            format!("node {node_id} is a voter already"),
        );
    }
    let endpoint = quorum.controller_endpoint(shard, node_id);
    if endpoint.is_none_or(|known| known.host != host || known.port != port) {
        let record = MetadataRecord::RegisterController {
            node_id,
            host: host.clone(),
            port,
        };
        let _decision = quorum.decisions.lock().await;
        let Some((committed, _)) = quorum.propose(shard, &[record]) else {
            return not_controller(quorum);
        };
        if !matches!(committed.await, Ok(true)) {
            return not_controller(quorum);
        }
    }
    tracing::info!(node_id, %host, port, "AddRaftVoter: adding a controller as a learner");
    if !learners.contains(&node_id) {
        if let Err(reply) = change(quorum, shard, node_id, ConfChangeType::AddLearnerNode).await {
            return reply;
        }
    }
    let deadline = Instant::now() + ADD_VOTER_CATCH_UP_TIMEOUT;
    while !quorum.caught_up(node_id) {
        if !quorum.is_leader() {
            return not_controller(quorum);
        }
        if Instant::now() >= deadline {
            return ControllerReply::error(
                ErrorCode::RequestTimedOut,
                format!(
                    "node {node_id} did not catch up within {}s: is it running, with its \
                     controller listener at {host}:{port}? It stays a learner (it counts \
                     for no majority); ask again to promote it",
                    ADD_VOTER_CATCH_UP_TIMEOUT.as_secs()
                ),
            );
        }
        glommio::timer::sleep(CATCH_UP_POLL).await;
    }
    tracing::info!(
        node_id,
        "AddRaftVoter: the learner caught up; promoting it to voter"
    );
    let promoted = change(quorum, shard, node_id, ConfChangeType::AddNode).await;
    promoted.unwrap_or_else(|refused| refused)
}

/// RemoveRaftVoter: `node_id` stops voting.
async fn remove_voter(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    node_id: i32,
) -> ControllerReply {
    let Some((voters, learners)) = quorum.membership().filter(|_| quorum.is_leader()) else {
        return not_controller(quorum);
    };
    if !voters.contains(&node_id) && !learners.contains(&node_id) {
        return ControllerReply::error(
            ErrorCode::VoterNotFound,
            format!("node {node_id} is not a voter"),
        );
    }
    if node_id == shard.config.broker_id {
        return ControllerReply::error(
            ErrorCode::InvalidRequest,
            format!(
                "node {node_id} is the active controller: stop it first, so another voter \
                 takes over, and remove it from there"
            ),
        );
    }
    if voters == [node_id] {
        return ControllerReply::error(
            ErrorCode::InvalidRequest,
            String::from("the last voter cannot be removed"),
        );
    }
    tracing::info!(node_id, "RemoveRaftVoter: removing a voter");
    let removed = change(quorum, shard, node_id, ConfChangeType::RemoveNode).await;
    removed.unwrap_or_else(|refused| refused)
}

/// Proposes one membership change and waits for it to commit; then checks
/// it took effect (raft-rs drops a change while another is pending).
async fn change(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    node_id: i32,
    change_type: ConfChangeType,
) -> Result<ControllerReply, ControllerReply> {
    let Some((committed, _)) = quorum.propose_membership(shard, node_id, change_type) else {
        return Err(not_controller(quorum));
    };
    if !matches!(committed.await, Ok(true)) {
        return Err(not_controller(quorum));
    }
    let (voters, learners) = quorum.membership().unwrap_or_default();
    let took = match change_type {
        ConfChangeType::AddNode => voters.contains(&node_id),
        ConfChangeType::AddLearnerNode => learners.contains(&node_id),
        ConfChangeType::RemoveNode => !voters.contains(&node_id) && !learners.contains(&node_id),
    };
    if !took {
        return Err(ControllerReply::error(
            ErrorCode::RequestTimedOut,
            format!("another membership change was in progress; ask again ({change_type:?} of {node_id})"),
        ));
    }
    // The image's offset, not the change's log index: a membership change
    // is raft-rs's entry, not a metadata record, and moves no image.
    Ok(ControllerReply::Committed {
        offset: quorum.applied_offset(),
    })
}

fn not_controller(quorum: &MetadataQuorum) -> ControllerReply {
    ControllerReply::NotController {
        leader: quorum.leader(),
    }
}
