//! The controller listener: Raft messages between voters and the brokers'
//! requests to the active controller, as frames
//! `[body length u32 BE][kind u8][body]` over TCP.
//!
//! - Raft messages go one way on a connection per peer that this node
//!   opens ([`run_peer_link`]); a send that fails drops the message and
//!   tells raft-rs the peer is unreachable (it probes and resends — Raft
//!   tolerates loss, so no queue grows while a peer is down).
//! - A request to the active controller opens its own connection and waits
//!   for one reply frame ([`call_remote`]).
//! - An observer keeps one connection to a voter and long-polls it with
//!   FetchMetadata ([`fetch_metadata`]; see [`super::metadata_fetch`]).
//! - [`serve_connection`] reads what a peer sends: it steps Raft messages
//!   into the local quorum and answers requests.

use super::active_controller;
use super::frame::{
    frame, KIND_FETCH_METADATA, KIND_METADATA, KIND_RAFT, KIND_REPLY, KIND_REQUEST,
};
use super::metadata_fetch::{self, FetchMetadata, MetadataReply};
use super::quorum::MetadataQuorum;
use super::rpc::{self, ControllerReply, ControllerRpc};
use crate::Shard;
use futures::channel::mpsc;
use futures::StreamExt;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kernel::cluster_config::Voter;
use std::rc::Rc;
use std::time::Duration;

/// The largest frame body accepted: a Raft append carries at most
/// `max_size_per_msg` (1 MiB) of entries, a snapshot the whole metadata.
const FRAME_BODY_BYTES_MAX: usize = 64 << 20;

/// How long a connection attempt or a request may take.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Pause after a failed connection before the next attempt.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);

/// Reads one frame; `Ok(None)` at a clean end of stream.
async fn read_frame(stream: &mut TcpStream) -> Result<Option<(u8, Vec<u8>)>, String> {
    let mut header = [0u8; 5];
    match stream.read_exact(&mut header).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let length = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if length > FRAME_BODY_BYTES_MAX {
        return Err(format!("frame of {length} bytes is over the limit"));
    }
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Some((header[4], body)))
}

/// Opens a connection to `voter`'s controller listener.
pub async fn connect(voter: &Voter) -> Result<TcpStream, String> {
    connect_or_refused(voter).await.map_err(|(e, _)| e)
}

/// [`connect`], telling apart a refused connection (`true`: nothing
/// listens there, the process is gone) from other failures.
async fn connect_or_refused(voter: &Voter) -> Result<TcpStream, (String, bool)> {
    let address = voter.resolve().map_err(|e| (e, false))?;
    let connecting = TcpStream::connect_timeout(address, IO_TIMEOUT);
    let stream = connecting.await.map_err(|e| {
        let refused = matches!(
            &e,
            glommio::GlommioError::IoError(io) if io.kind() == std::io::ErrorKind::ConnectionRefused
        );
        (format!("cannot connect to {address}: {e}"), refused)
    })?;
    stream
        .set_nodelay(true)
        .map_err(|e| (e.to_string(), false))?;
    Ok(stream)
}

/// Sends the Raft frames queued for one peer, reconnecting as needed.
pub async fn run_peer_link(
    quorum: Rc<MetadataQuorum>,
    shard: Rc<Shard>,
    peer_raft_id: u64,
    voter: Voter,
    mut frames: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let mut stream: Option<TcpStream> = None;
    while let Some(frame) = frames.next().await {
        // A peer that restarted closed our old connection; a write there
        // would be taken and lost (the one answer to a vote, say).
        if stream.as_ref().is_some_and(kernel::listen::peer_has_closed) {
            tracing::debug!(
                peer = voter.node_id,
                "quorum peer closed the link; reconnecting"
            );
            stream = None;
        }
        if stream.is_none() {
            match connect_or_refused(&voter).await {
                Ok(connected) => stream = Some(connected),
                Err((e, refused)) => {
                    tracing::debug!(peer = voter.node_id, error = %e, "quorum peer unreachable");
                    quorum.peer_unreachable(&shard, peer_raft_id);
                    if refused {
                        glommio::spawn_local(active_controller::fence_refused_peer(
                            quorum.clone(),
                            shard.clone(),
                            voter.node_id,
                        ))
                        .detach();
                    }
                    // Drop what queued meanwhile: raft-rs resends after probing.
                    while frames.try_recv().is_ok() {}
                    glommio::timer::sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            }
        }
        if let Some(connected) = stream.as_mut() {
            if let Err(e) = connected.write_all(&frame).await {
                tracing::debug!(peer = voter.node_id, error = %e, "quorum peer connection lost");
                stream = None;
                quorum.peer_unreachable(&shard, peer_raft_id);
            }
        }
    }
}

/// Sends `request` to the controller `voter` and waits for its reply.
pub async fn call_remote(
    voter: &Voter,
    request: &ControllerRpc,
) -> Result<ControllerReply, String> {
    let body = rpc::encode(request)?;
    let exchange = async {
        let mut stream = connect(voter).await?;
        stream
            .write_all(&frame(KIND_REQUEST, &body))
            .await
            .map_err(|e| e.to_string())?;
        match read_frame(&mut stream).await? {
            Some((KIND_REPLY, body)) => rpc::decode::<ControllerReply>(&body),
            Some((kind, _)) => Err(format!("unexpected frame kind {kind}")),
            None => Err(String::from("connection closed before the reply")),
        }
    };
    // AddRaftVoter waits for the new voter to catch up.
    let reply_timeout = match request {
        ControllerRpc::AddVoter { .. } => rpc::ADD_VOTER_CATCH_UP_TIMEOUT + IO_TIMEOUT,
        _ => IO_TIMEOUT,
    };
    match glommio::timer::timeout(reply_timeout, async { Ok(exchange.await) }).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "controller {} did not answer in time",
            voter.node_id
        )),
    }
}

/// Sends a FetchMetadata on an observer's open connection and waits for
/// the answer: up to the voter's long poll plus the usual I/O allowance.
/// An error leaves the connection unusable; the caller drops it.
pub async fn fetch_metadata(
    stream: &mut TcpStream,
    request: &FetchMetadata,
) -> Result<MetadataReply, String> {
    let body = rpc::encode(request)?;
    let exchange = async {
        stream
            .write_all(&frame(KIND_FETCH_METADATA, &body))
            .await
            .map_err(|e| e.to_string())?;
        match read_frame(stream).await? {
            Some((KIND_METADATA, body)) => MetadataReply::decode(&body),
            Some((kind, _)) => Err(format!("unexpected frame kind {kind}")),
            None => Err(String::from("connection closed before the metadata")),
        }
    };
    let limit = metadata_fetch::LONG_POLL + IO_TIMEOUT;
    match glommio::timer::timeout(limit, async { Ok(exchange.await) }).await {
        Ok(result) => result,
        Err(_) => Err(String::from(
            "the voter did not answer FetchMetadata in time",
        )),
    }
}

/// Serves one connection to the controller listener until it closes. A
/// peer's Raft link that closes may mean its process died: see
/// [`raft_link_closed`].
pub async fn serve_connection(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>, mut stream: TcpStream) {
    let mut raft_peer = None;
    serve_frames(&quorum, &shard, &mut stream, &mut raft_peer).await;
    if let Some(peer) = raft_peer {
        raft_link_closed(quorum, shard, peer).await;
    }
}

/// The Raft link from `peer` closed. If `peer` leads the quorum and its
/// controller listener now refuses connections, its process is gone: the
/// election starts now rather than after an election timeout (1–2 s), so
/// that a killed active controller costs about what a killed broker does.
async fn raft_link_closed(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>, peer: u64) {
    let leader = super::node_id(peer);
    if quorum.is_leader() || quorum.leader() != Some(leader) {
        return;
    }
    let Some(endpoint) = quorum.controller_endpoint(&shard, leader) else {
        return;
    };
    if let Err((_, true)) = connect_or_refused(&endpoint).await {
        quorum.leader_gone(&shard, peer);
    }
}

async fn serve_frames(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    stream: &mut TcpStream,
    raft_peer: &mut Option<u64>,
) {
    let (quorum, shard) = (quorum.clone(), shard.clone());
    loop {
        let (kind, body) = match read_frame(stream).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "controller listener connection dropped");
                return;
            }
        };
        match kind {
            KIND_RAFT => match cluster::quorum::wire::decode_message(&body) {
                Ok(message) => {
                    *raft_peer = Some(message.from);
                    quorum.step(&shard, message)
                }
                Err(e) => tracing::warn!(error = %e, "undecodable Raft message dropped"),
            },
            KIND_REQUEST => {
                let reply = match rpc::decode::<ControllerRpc>(&body) {
                    Ok(request) => active_controller::handle(&quorum, &shard, request).await,
                    Err(e) => ControllerReply::Error {
                        code: engine::ErrorCode::InvalidRequest.code(),
                        message: e,
                    },
                };
                let bytes = match rpc::encode(&reply) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        tracing::error!(error = %e, "controller reply not encodable");
                        return;
                    }
                };
                if stream.write_all(&frame(KIND_REPLY, &bytes)).await.is_err() {
                    return;
                }
            }
            KIND_FETCH_METADATA => {
                let reply = match rpc::decode::<FetchMetadata>(&body) {
                    Ok(request) => metadata_fetch::answer(&shard, &request).await,
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable FetchMetadata; closing");
                        return;
                    }
                };
                let bytes = match reply.encode() {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        tracing::error!(error = %e, "metadata reply not encodable");
                        return;
                    }
                };
                if stream
                    .write_all(&frame(KIND_METADATA, &bytes))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            other => {
                tracing::warn!(kind = other, "unknown controller frame; closing");
                return;
            }
        }
    }
}
