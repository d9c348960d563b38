//! The cluster runtime: this node's member of the metadata quorum and its
//! membership in the cluster, wired onto the shards. The decisions and the
//! consensus are `rill-cluster`'s pure cores; this module does their I/O.
//!
//! - [`quorum`]: [`MetadataQuorum`] on the metadata shard — a voter's
//!   raft-rs node over the durable metadata log in
//!   `<data-dir>/__cluster_metadata-0`, its ready cycle, proposals that
//!   wait for commit; or a broker-only node's observed image.
//! - [`transport`]: the controller listener and the links to the other
//!   voters (Raft messages, broker requests, FetchMetadata), as
//!   length-prefixed frames.
//! - [`rpc`]: what brokers ask the active controller (registration,
//!   heartbeat) and its answers.
//! - [`metadata_fetch`]: FetchMetadata, any voter's answer to an observer
//!   (the committed image as snapshot bytes, long-polled).
//! - [`observer`]: a broker-only node's fetch loop.
//! - [`active_controller`]: the active controller answering them with the
//!   metadata core's decisions, and fencing silent brokers.
//! - [`lifecycle`]: this broker registering and heartbeating.
//! - [`view`]: every shard's copy of the committed image and quorum status,
//!   and the shard's topic table derived from that image.
//! - [`acls`]: every shard's authorizer over the image's ACLs, and
//!   [`authz`], the checks a handler makes.
//! - [`metrics`]: the cluster gauges of `/metrics`.
//!
//! A single node (no `controller.quorum.voters`) runs all of it as a
//! quorum of one, with no listener: its requests to the controller are
//! handled in place. A broker-only node (not among the voters) runs no
//! Raft node and no listener: it observes, registers and heartbeats.

pub mod acls;
mod active_controller;
mod frame;
mod lifecycle;
mod membership;
mod metadata_fetch;
pub mod metrics;
mod observer;
mod quorum;
mod rpc;
mod transport;
mod view;

pub use acls::{authz, AclView};
pub use lifecycle::{call_controller_until_answered, controlled_shutdown};
pub use quorum::{MetadataQuorum, METADATA_SHARD};
pub use rpc::{ControllerReply, ControllerRpc, QuorumDescription, TopicElections, WireAcl};
pub use view::{
    every_shard_reached, leads, own_endpoint, partition_leader, partition_leader_on, ClusterView,
    LeaderEndpoint, QuorumStatus, ViewReached,
};

use crate::Shard;
use futures::channel::mpsc;
use kernel::call::OwnerCall;
use std::rc::Rc;
use std::time::Duration;

/// raft-rs reserves id 0; a node's Raft id is its `node.id` + 1.
pub fn raft_id(node_id: i32) -> u64 {
    u64::try_from(node_id).unwrap_or(0) + 1
}

/// The `node.id` of a Raft id.
pub fn node_id(raft_id: u64) -> i32 {
    i32::try_from(raft_id.saturating_sub(1)).unwrap_or(i32::MAX)
}

/// Opens the quorum member on the metadata shard (none elsewhere): a voter
/// opens its metadata log, an observer (a broker-only node) nothing.
pub fn open_quorum(shard: &Shard) -> Result<Option<MetadataQuorum>, String> {
    if shard.id != METADATA_SHARD {
        return Ok(None);
    }
    let config = &shard.config;
    if config.cluster.is_observer(config.broker_id) {
        return Ok(Some(MetadataQuorum::observer(shard)));
    }
    MetadataQuorum::open(shard).map(Some)
}

/// Starts the quorum member's listener and links, the registration and
/// the controller's timers, on the metadata shard (a no-op elsewhere).
pub async fn start(shard: &Rc<Shard>) -> Result<(), String> {
    let Some(quorum) = shard.runtime().quorum.clone() else {
        return Ok(());
    };
    let config = shard.config.clone();
    if config.cluster.is_observer(config.broker_id) {
        start_observer(quorum, shard);
        return Ok(());
    }
    if !config.cluster.is_single_node() {
        let own = config
            .cluster
            .own_controller_endpoint(config.broker_id)
            .ok_or_else(|| String::from("this node has no controller listener"))?;
        let address = own.resolve()?;
        // `serve::start` waited until no other socket held this port.
        let listener = kernel::listen::bind_shared(address)
            .map_err(|e| format!("cannot listen for the controller quorum on {address}: {e}"))?;
        tracing::info!(controller_listener = %address, "serving the metadata quorum");
        glommio::spawn_local(accept(quorum.clone(), shard.clone(), listener)).detach();
        for voter in config
            .cluster
            .voters
            .iter()
            .filter(|v| v.node_id != own.node_id)
        {
            let (frames, queue) = mpsc::unbounded();
            let peer = raft_id(voter.node_id);
            quorum.add_peer(peer, frames);
            glommio::spawn_local(transport::run_peer_link(
                quorum.clone(),
                shard.clone(),
                peer,
                voter.clone(),
                queue,
            ))
            .detach();
        }
    }
    quorum.pump(shard);
    glommio::spawn_local(run_ticker(quorum.clone(), shard.clone())).detach();
    glommio::spawn_local(active_controller::run_fencing_timer(
        quorum.clone(),
        shard.clone(),
    ))
    .detach();
    // A controller-only node (`process.roles=controller`) votes and may be
    // the active controller, but never registers as a broker: it holds no
    // partition and clients are not sent to it.
    if config.cluster.roles.is_none_or(|roles| roles.broker) {
        glommio::spawn_local(lifecycle::run(quorum, shard.clone())).detach();
    } else {
        tracing::info!(
            node_id = config.broker_id,
            "a controller-only node: not registering as a broker"
        );
    }
    Ok(())
}

/// A broker-only node: the observer's fetch loop and the broker's
/// registration, no Raft node, no listener, no controller timers.
fn start_observer(quorum: Rc<MetadataQuorum>, shard: &Rc<Shard>) {
    let config = &shard.config;
    let why = if config.cluster.roles.is_some() {
        "process.roles=broker"
    } else {
        "its node.id is not among controller.quorum.voters and process.roles is unset"
    };
    tracing::info!(
        node_id = config.broker_id,
        "starting as a broker-only node, an observer of the metadata quorum: {why}"
    );
    glommio::spawn_local(observer::run(quorum.clone(), shard.clone())).detach();
    glommio::spawn_local(lifecycle::run(quorum, shard.clone())).detach();
}

/// Starts the link to a member this node has no link to yet: a voter
/// added by AddRaftVoter, or, on a controller that is joining, the
/// leader it answers. A member whose listener is unknown gets none (its
/// messages are dropped and raft-rs retries).
fn open_peer_link(shard: &Rc<Shard>, peer: u64) {
    let Some(quorum) = shard.runtime().quorum.clone() else {
        return;
    };
    let Some(endpoint) = quorum.controller_endpoint(shard, node_id(peer)) else {
        tracing::debug!(peer, "no controller listener known for a quorum member");
        return;
    };
    let (frames, queue) = mpsc::unbounded();
    quorum.add_peer(peer, frames);
    glommio::spawn_local(transport::run_peer_link(
        quorum,
        shard.clone(),
        peer,
        endpoint,
        queue,
    ))
    .detach();
}

async fn accept(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>, listener: glommio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                glommio::spawn_local(transport::serve_connection(
                    quorum.clone(),
                    shard.clone(),
                    stream,
                ))
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "controller listener accept failed");
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn run_ticker(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>) {
    let tick = Duration::from_millis(shard.config.cluster.quorum_tick_ms.max(1));
    loop {
        glommio::timer::sleep(tick).await;
        quorum.tick(&shard);
    }
}

/// DescribeQuorum's question, answered by the metadata shard.
#[derive(Debug)]
pub struct DescribeQuorum;

impl OwnerCall<crate::ShardRuntime> for DescribeQuorum {
    type Reply = Option<QuorumDescription>;

    /// Asks the active controller, which alone knows every member's
    /// progress; this node's own view when it cannot be reached.
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let quorum = shard.runtime().quorum.clone()?;
        if !quorum.is_leader() && quorum.leader().is_some() {
            let asked = lifecycle::call_controller(&quorum, &shard, ControllerRpc::DescribeQuorum);
            if let Ok(ControllerReply::Quorum(description)) = asked.await {
                return Some(description);
            }
        }
        Some(quorum.describe(&shard))
    }
}

/// A request for the active controller from any shard: the metadata shard
/// sends it (waiting through an election) and returns the answer.
#[derive(Debug)]
pub struct SendToController(pub ControllerRpc);

impl OwnerCall<crate::ShardRuntime> for SendToController {
    type Reply = Result<ControllerReply, (engine::ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        call_controller_until_answered(&shard, self.0).await
    }
}
