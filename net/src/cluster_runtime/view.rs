//! [`ClusterView`]: every shard's read-only copy of the cluster metadata
//! (the committed image and the quorum's leader and term), published by the
//! metadata shard after each change. Handlers (Metadata, DescribeCluster)
//! read it without crossing cores.
//!
//! Each publication carries a sequence number: the copies travel as
//! separate envelopes, and one that arrives after a newer one is ignored.

use crate::mesh::Envelope;
use crate::shard::{Shard, ShardService};
use cluster::metadata::MetadataImage;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The quorum as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuorumStatus {
    /// The active controller's node id, if known.
    pub leader_id: Option<i32>,
    /// The Raft term.
    pub term: u64,
    /// The highest committed index this node knows.
    pub commit_index: u64,
    /// The highest index applied to the image.
    pub applied_index: u64,
}

/// One shard's copy of the cluster metadata.
#[derive(Debug, Default)]
pub struct ClusterView {
    current: RefCell<(u64, Arc<MetadataImage>, QuorumStatus)>,
}

impl ShardService for ClusterView {
    fn build(_shard: &Shard) -> Self {
        ClusterView::default()
    }
}

impl ClusterView {
    /// The committed image as last published to this shard.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.current.borrow().1.clone()
    }

    /// The quorum status as last published to this shard.
    pub fn quorum(&self) -> QuorumStatus {
        self.current.borrow().2.clone()
    }

    fn install(&self, sequence: u64, image: Arc<MetadataImage>, status: QuorumStatus) {
        let mut current = self.current.borrow_mut();
        if sequence > current.0 {
            *current = (sequence, image, status);
        }
    }
}

/// Installs a new copy here and sends it to every other shard.
pub fn publish(shard: &Rc<Shard>, sequence: u64, image: Arc<MetadataImage>, status: QuorumStatus) {
    shard
        .service::<ClusterView>()
        .install(sequence, image.clone(), status.clone());
    for other in (0..shard.count).filter(|&s| s != shard.id) {
        let (image, status) = (image.clone(), status.clone());
        let message = Envelope::new(move |receiver: &Rc<Shard>| {
            receiver
                .service::<ClusterView>()
                .install(sequence, image, status);
        });
        let shard = shard.clone();
        glommio::spawn_local(async move {
            if let Err(e) = shard.send_to(other, message).await {
                tracing::debug!(shard = other, error = %e, "cluster metadata not delivered");
            }
        })
        .detach();
    }
}
