//! [`ClusterView`]: every shard's read-only copy of the cluster metadata
//! (the committed image and the quorum's leader and term), published by the
//! metadata shard after each change. Handlers (Metadata, DescribeCluster)
//! read it without crossing cores.
//!
//! Each publication carries a sequence number: the copies travel as
//! separate envelopes, and one that arrives after a newer one is ignored.
//!
//! The shard's topic table is derived here: a publication whose image (or
//! whose adoption of topics found on disk, see [`kernel::topics`]) differs
//! from the one in place makes a new table from it, in the same step that
//! installs the image, so a table's offset is always its shard's image's.
//! [`ViewReached`] waits until a shard holds an image at some offset: the
//! reconciler's waiters are released only once every shard does.

use crate::Shard;
use cluster::metadata::MetadataImage;
use futures::channel::oneshot;
use kernel::call::OwnerCall;
use kernel::mesh::Envelope;
use kernel::topic_defaults::effective_topic_defaults;
use kernel::topics::NO_IMAGE;
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
    /// Tasks waiting for the next publication.
    watchers: RefCell<Vec<oneshot::Sender<()>>>,
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

    /// The last publication here: (sequence, image, quorum status).
    pub fn current(&self) -> (u64, Arc<MetadataImage>, QuorumStatus) {
        self.current.borrow().clone()
    }

    /// Waits for a publication newer than `sequence`; returns its sequence
    /// and image. A waiter given up on (a timed-out long poll) leaves a
    /// cancelled slot behind; each new waiter clears those, so the list
    /// stays as long as the live waiters.
    pub async fn newer_than(&self, sequence: u64) -> (u64, Arc<MetadataImage>) {
        loop {
            {
                let current = self.current.borrow();
                if current.0 > sequence {
                    return (current.0, current.1.clone());
                }
            }
            let (wake, woken) = oneshot::channel();
            {
                let mut watchers = self.watchers.borrow_mut();
                watchers.retain(|watcher| !watcher.is_canceled());
                watchers.push(wake);
            }
            // A dropped sender (never: the view outlives its watchers) just
            // loops back to the check.
            let _ = woken.await;
        }
    }

    fn install(&self, sequence: u64, image: Arc<MetadataImage>, status: QuorumStatus) {
        {
            let mut current = self.current.borrow_mut();
            assert!(
                sequence > current.0,
                "a publication is installed once, in order"
            );
            *current = (sequence, image, status);
        }
        for watcher in self.watchers.borrow_mut().drain(..) {
            let _ = watcher.send(());
        }
    }

    /// The sequence of the last publication here.
    fn sequence(&self) -> u64 {
        self.current.borrow().0
    }
}

/// One publication of the metadata shard to a shard.
struct Publication {
    sequence: u64,
    image: Arc<MetadataImage>,
    status: QuorumStatus,
    /// The broker is adopting the topics found on disk: they are served
    /// where the image does not name them yet.
    adopting: bool,
}

/// Installs `publication` on this shard unless a newer one is in place:
/// the topic table derived from its image first, then the image itself, in
/// one step (no await), so that whoever sees the image sees its table.
fn install(shard: &Shard, publication: Publication) {
    let view = shard.runtime().view.clone();
    if publication.sequence <= view.sequence() {
        return;
    }
    let image = &publication.image;
    let current = shard.topic_table();
    // An image before its first record knows nothing yet (an observer's
    // before it has fetched one): the disk's topics stay served, as before
    // any publication.
    let serve_found_on_disk = publication.adopting || image.last_applied_offset() == NO_IMAGE;
    // A publication of the quorum's status alone keeps the image, and so
    // the table. Otherwise the table is made anew: a full pass over the
    // image's topics, which the image's own copy per change (made once,
    // for every shard) already costs about as much as.
    if image.last_applied_offset() != current.offset()
        || serve_found_on_disk != current.serves_found_on_disk()
    {
        let defaults = effective_topic_defaults(&shard.config, image.broker_configs());
        // Every shard derives the same table: the metadata shard (the one
        // with the quorum member) alone reports a topic config it cannot use.
        let report = shard.runtime().quorum.is_some();
        shard.set_topic_table(current.derive(image, &defaults, serve_found_on_disk, report));
    }
    view.install(publication.sequence, publication.image, publication.status);
    assert_eq!(
        shard.topics.borrow().offset(),
        view.image().last_applied_offset(),
        "shard {}: the topic table is derived from the image in place",
        shard.id
    );
}

/// Installs a new copy here and sends it to every other shard.
pub fn publish(shard: &Rc<Shard>, sequence: u64, image: Arc<MetadataImage>, status: QuorumStatus) {
    let adopting = shard.runtime().reconciler.adopting();
    for other in (0..shard.count).filter(|&s| s != shard.id) {
        let publication = Publication {
            sequence,
            image: image.clone(),
            status: status.clone(),
            adopting,
        };
        let message = Envelope::new(move |receiver: &Rc<Shard>| {
            assert_eq!(
                receiver.id, other,
                "a metadata copy is installed by the shard it was sent to: sent to {other}, opened on {}",
                receiver.id
            );
            install(receiver, publication);
        });
        let shard = shard.clone();
        glommio::spawn_local(async move {
            if let Err(e) = shard.send_to(other, message).await {
                tracing::debug!(shard = other, error = %e, "cluster metadata not delivered");
            }
        })
        .detach();
    }
    let publication = Publication {
        sequence,
        image,
        status,
        adopting,
    };
    install(shard, publication);
}

/// Waits, on the shard it is sent to, until that shard holds an image (and
/// so a topic table) at metadata offset `offset` or later.
#[derive(Debug)]
pub struct ViewReached(pub i64);

impl OwnerCall<crate::ShardRuntime> for ViewReached {
    type Reply = ();

    /// It only waits: an asker that gave up takes the wait with it.
    const CANCEL_WHEN_ASKER_GONE: bool = true;

    async fn run(self, shard: Rc<Shard>) {
        let view = shard.runtime().view.clone();
        let (mut sequence, mut image, _) = view.current();
        while image.last_applied_offset() < self.0 {
            (sequence, image) = view.newer_than(sequence).await;
        }
    }
}

/// Waits until every shard holds an image at `offset` or later (the
/// publications travel as separate envelopes, each shard's at its own pace).
/// A shard gone away (shutting down) is not waited for.
pub async fn every_shard_reached(shard: &Rc<Shard>, offset: i64) {
    let waits = (0..shard.count).map(|other| shard.call(other, ViewReached(offset)));
    for (other, reached) in futures::future::join_all(waits)
        .await
        .into_iter()
        .enumerate()
    {
        if let Err(e) = reached {
            tracing::debug!(shard = other, error = %e, "a shard's view not confirmed");
        }
    }
}

/// Where a partition's leader serves clients: (node id, host, port).
pub type LeaderEndpoint = (i32, String, i32);

/// The leader of `topic`-`partition` from this shard's image. A topic the
/// image does not know (a single node's topic not adopted yet) is served
/// here. A partition without a leader is COORDINATOR_NOT_AVAILABLE (the
/// callers are coordinators; clients retry it).
pub fn partition_leader(
    shard: &Shard,
    topic: &str,
    partition: i32,
) -> Result<LeaderEndpoint, engine::ErrorCode> {
    partition_leader_on(
        shard,
        topic,
        partition,
        shard.config.inter_broker_listener(),
    )
}

/// [`partition_leader`], with the leader's address on listener `listener`
/// (the one a client came in on: Kafka answers each listener's clients with
/// that listener's addresses).
pub fn partition_leader_on(
    shard: &Shard,
    topic: &str,
    partition: i32,
    listener: &str,
) -> Result<LeaderEndpoint, engine::ErrorCode> {
    let (host, port) = own_endpoint(shard, listener);
    let own = (shard.config.broker_id, host, port);
    let image = shard.runtime().view.image();
    let Some(topic) = image.topic_by_name(topic) else {
        return Ok(own);
    };
    let leader = topic
        .partitions
        .get(&partition)
        .map_or(-1, |state| state.leader);
    if leader == shard.config.broker_id {
        return Ok(own);
    }
    image
        .broker(leader)
        .filter(|broker| !broker.fenced)
        .and_then(|broker| broker.listeners.iter().find(|e| e.name == listener))
        .map(|endpoint| (leader, endpoint.host.clone(), i32::from(endpoint.port)))
        .ok_or(engine::ErrorCode::CoordinatorNotAvailable)
}

/// This broker's advertised `(host, port)` on listener `listener` (the
/// first listener's when it has none of that name).
pub fn own_endpoint(shard: &Shard, listener: &str) -> (String, i32) {
    let config = &shard.config;
    match config.listeners.iter().find(|l| l.name == listener) {
        Some(chosen) => (chosen.advertised_host.clone(), chosen.advertised_port),
        None => (config.advertised_host.clone(), config.advertised_port),
    }
}

/// Whether this broker leads `topic`-`partition` (or serves it alone: the
/// image does not know the topic).
pub fn leads(shard: &Shard, topic: &str, partition: i32) -> bool {
    partition_leader(shard, topic, partition)
        .is_ok_and(|(leader, _, _)| leader == shard.config.broker_id)
}
