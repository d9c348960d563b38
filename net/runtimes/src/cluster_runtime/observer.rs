//! A broker-only node's link to the metadata quorum: it runs no Raft node
//! and no controller listener, and learns the committed metadata by
//! long-polling a voter with FetchMetadata ([`super::metadata_fetch`]).
//! Runs on the metadata shard for the life of the broker.
//!
//! Which voter: the active controller when one is known (it commits first,
//! so its image is the newest), else the voters in turn. A voter that
//! cannot be reached, or answers with something unreadable, is dropped and
//! the next one tried after a short pause.

use super::metadata_fetch::{FetchMetadata, OBSERVED_DELTAS, OBSERVED_IMAGES};
use super::quorum::MetadataQuorum;
use super::transport;
use super::view::QuorumStatus;
use crate::Shard;
use glommio::net::TcpStream;
use kernel::cluster_config::Voter;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Pause before asking the next voter after one failed.
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Fetches the committed metadata for the life of the broker.
pub async fn run(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>) {
    if shard.config.cluster.voters.is_empty() {
        return;
    }
    // The next voter to try when no controller is known.
    let mut next_voter = 0usize;
    // The open connection and the voter it goes to.
    let mut link: Option<(i32, TcpStream)> = None;
    // Take deltas until one does not apply; then the whole image once.
    let mut deltas = true;
    loop {
        // With no controller known, the voters in turn: the configured ones
        // and those AddRaftVoter added since, so that a broker still finds
        // the quorum once every configured voter is gone.
        let leader = quorum.leader();
        let wanted = leader.and_then(|leader| quorum.controller_endpoint(&shard, leader));
        let wanted = wanted.or_else(|| {
            let known = quorum.known_controllers(&shard);
            known.get(next_voter % known.len().max(1)).cloned()
        });
        let Some(wanted) = wanted else {
            return;
        };
        if link.as_ref().is_some_and(|(id, _)| *id != wanted.node_id) {
            link = None;
        }
        match fetch_once(&quorum, &shard, &wanted, &mut link, &mut deltas).await {
            Ok(()) => {}
            Err(e) => {
                tracing::debug!(voter = wanted.node_id, error = %e, "metadata fetch failed");
                link = None;
                next_voter = next_voter.wrapping_add(1);
                // Forget the controller this voter stood for, so that the
                // next round tries the other voters rather than it again.
                quorum.forget_leader(&shard, wanted.node_id);
                glommio::timer::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// One FetchMetadata round trip to `voter`, connecting first if needed;
/// its news goes to the quorum (and from there to every shard).
async fn fetch_once(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    voter: &Voter,
    link: &mut Option<(i32, TcpStream)>,
    deltas: &mut bool,
) -> Result<(), String> {
    if link.is_none() {
        *link = Some((voter.node_id, transport::connect(voter).await?));
    }
    let Some((_, stream)) = link.as_mut() else {
        return Err(String::from("no connection"));
    };
    let request = FetchMetadata {
        node_id: shard.config.broker_id,
        applied_offset: quorum.applied_offset(),
        deltas: *deltas,
    };
    let reply = transport::fetch_metadata(stream, &request).await?;
    let status = QuorumStatus {
        leader_id: reply.header.leader_id,
        term: reply.header.term,
        commit_index: reply.header.commit_index,
        applied_index: 0,
    };
    if reply.header.delta {
        let applied = reply
            .records()
            .and_then(|records| quorum.observed_records(shard, status, &records));
        *deltas = applied.is_ok();
        OBSERVED_DELTAS.fetch_add(1, Ordering::Relaxed);
        return applied.map_err(|e| format!("a metadata delta did not apply: {e}"));
    }
    *deltas = true;
    let image = reply.image()?;
    if image.is_some() {
        OBSERVED_IMAGES.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(image) = &image {
        tracing::debug!(
            voter = voter.node_id,
            offset = image.last_applied_offset(),
            "metadata image fetched"
        );
    }
    quorum.observed(shard, status, image);
    Ok(())
}
