//! The reconciler: makes this broker's partition logs match the committed
//! metadata image, on the metadata shard, after every change the quorum
//! publishes. The topic tables are not its business: every shard derives
//! its own from the image it holds (see [`crate::cluster_runtime::ClusterView`]);
//! the reconciler reads the metadata shard's.
//!
//! - The partitions this broker is a replica of exist on their owner shard,
//!   with the topic's config (changed there when the topic's or the
//!   defaults' change); those of a topic the image removed are deleted, and
//!   so are those a reassignment moved off this broker (and, once per
//!   start, any left on disk while it was down).
//! - A topic found on disk at start that the image does not know is left
//!   alone: adopted into the image when the metadata log is new (a single
//!   node's data from before it kept metadata; the tables serve it
//!   meanwhile), otherwise not served, with a warning — its files stay for
//!   an operator to look at.
//!
//! Changes are applied in publication order by one task; a topic request
//! waits for its commit's offset with [`wait_reconciled`], which also waits
//! until every shard's table is derived from an image at that offset.

use super::topic_id::random_topic_id;
use crate::cluster_runtime::{
    call_controller_until_answered, every_shard_reached, ControllerReply, ControllerRpc,
    MetadataQuorum,
};
use crate::replication_runtime::ApplyPartitionState;
use crate::routing::{run_on_owners, PartitionOp, PartitionReply};
use crate::Shard;
use cluster::metadata::{MetadataImage, PartitionState, TopicImage};
use engine::types::TopicId;
use engine::{ErrorCode, TopicPartition};
use futures::channel::oneshot;
use kernel::topics::{TopicEntry, TopicTable};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

/// A topic as the reconciler last made this broker's logs match it.
#[derive(Debug, Clone)]
struct Reconciled {
    entry: TopicEntry,
    /// From an image; `false`: found on disk at start, not in an image yet.
    from_image: bool,
}

/// The reconciler's progress on this shard.
#[derive(Debug, Default)]
pub struct Reconciler {
    /// The metadata offset of the last image applied.
    reconciled_offset: Cell<i64>,
    waiters: RefCell<Vec<(i64, oneshot::Sender<()>)>>,
    /// Topics found on disk are being adopted: do not drop them yet.
    adopting: Cell<bool>,
    /// The topics as last reconciled, by name: at start, those found on
    /// disk; then the image's (its own memory, not a topic table's, so
    /// that it sees what changed between two images it applied).
    topics: RefCell<BTreeMap<String, Reconciled>>,
    /// The partition state last handed to each local replica's owner
    /// shard, with the topic's `min.insync.replicas` then (a new minimum
    /// reaches a running leader too: its high watermark rule reads it).
    applied: RefCell<HashMap<(String, i32), (PartitionState, usize)>>,
    /// The partitions this broker holds a replica of, by topic id (a topic
    /// deleted and created again under the same name is another topic).
    hosted: RefCell<HashSet<(TopicId, i32)>>,
    /// Replicas on disk that the image assigns elsewhere have been looked
    /// for (once per process, after its registration).
    strays_checked: Cell<bool>,
}

impl Reconciler {
    /// The reconciler of a shard whose topic table is `table` (the topics
    /// found on disk, before any image) and which holds `quorum` (the
    /// metadata shard): it adopts the topics found on disk when the
    /// metadata log is new. Decided here, before the quorum publishes its
    /// first image, since every publication says whether the tables serve
    /// those topics meanwhile.
    pub fn new(table: &TopicTable, quorum: Option<&MetadataQuorum>) -> Reconciler {
        let Some(quorum) = quorum else {
            return Reconciler::default();
        };
        let found = table.found_on_disk_entries();
        let topics = found
            .iter()
            .map(|entry| {
                let reconciled = Reconciled {
                    entry: entry.clone(),
                    from_image: false,
                };
                (entry.name.clone(), reconciled)
            })
            .collect();
        Reconciler {
            adopting: Cell::new(quorum.started_fresh() && !found.is_empty()),
            topics: RefCell::new(topics),
            ..Reconciler::default()
        }
    }

    /// Whether the topics found on disk are being adopted into the metadata
    /// (the tables serve those the image does not name yet).
    pub fn adopting(&self) -> bool {
        self.adopting.get()
    }

    fn reconciled(&self, offset: i64) {
        self.reconciled_offset.set(offset);
        let mut waiters = self.waiters.borrow_mut();
        let (done, pending): (Vec<_>, Vec<_>) =
            waiters.drain(..).partition(|(wanted, _)| *wanted <= offset);
        *waiters = pending;
        for (_, waiter) in done {
            let _ = waiter.send(());
        }
    }
}

/// How long a topic request waits for its change to be applied here; past
/// it the change is committed anyway and shows up a moment later.
const RECONCILE_WAIT: Duration = Duration::from_secs(10);

/// Waits until this broker has applied the metadata up to `offset`: the
/// reconciler (on the metadata shard) and every shard's view and topic
/// table. The shards' copies travel apart from the reconciler's progress,
/// so a client answered here and asking another shard next finds the
/// change there too.
pub async fn wait_reconciled(shard: &Rc<Shard>, offset: i64) {
    let reconciler = shard.runtime().reconciler.clone();
    let _ = glommio::timer::timeout(RECONCILE_WAIT, async {
        if reconciler.reconciled_offset.get() < offset {
            let (wake, woken) = oneshot::channel();
            reconciler.waiters.borrow_mut().push((offset, wake));
            let _ = woken.await;
        }
        every_shard_reached(shard, offset).await;
        Ok(())
    })
    .await;
}

/// Starts the reconciler (and the adoption of topics found on disk when the
/// metadata log is new) on the metadata shard; a no-op elsewhere.
pub fn start(shard: &Rc<Shard>) {
    if shard.runtime().quorum.is_none() {
        return;
    }
    if shard.runtime().reconciler.adopting() {
        glommio::spawn_local(adopt_topics_on_disk(shard.clone())).detach();
    }
    glommio::spawn_local(run(shard.clone())).detach();
}

async fn run(shard: Rc<Shard>) {
    let view = shard.runtime().view.clone();
    let reconciler = shard.runtime().reconciler.clone();
    let mut sequence = 0;
    loop {
        let (newer, image) = view.newer_than(sequence).await;
        sequence = newer;
        if image.last_applied_offset() > reconciler.reconciled_offset.get() {
            // Installed with `image` in one step: its topics and configs.
            let table = shard.topic_table();
            assert_eq!(
                table.offset(),
                image.last_applied_offset(),
                "the reconciler reads the table derived from its image"
            );
            reconcile(&shard, &reconciler, &table, &image).await;
            create_local_replicas(&shard, &reconciler, &table, &image).await;
            apply_partition_states(&shard, &reconciler, &table, &image).await;
            remove_unassigned_replicas(&shard, &reconciler, &image).await;
            reconciler.reconciled(image.last_applied_offset());
        }
    }
}

/// Applies the topics of `image` (their entries in `table`) to this
/// broker's logs, and forgets those it removed (see the module doc).
async fn reconcile(
    shard: &Rc<Shard>,
    reconciler: &Reconciler,
    table: &TopicTable,
    image: &MetadataImage,
) {
    for topic in image.topics().values() {
        let entry = match table.get(&topic.name) {
            Some(entry) if entry.topic_id == topic.topic_id => entry,
            _ => panic!("topic {} of the image is not in its table", topic.name),
        };
        reconcile_topic(shard, reconciler, topic, entry).await;
    }
    let gone: Vec<Reconciled> = reconciler
        .topics
        .borrow()
        .values()
        .filter(|known| image.topic_by_name(&known.entry.name).is_none())
        .cloned()
        .collect();
    for known in gone {
        let name = &known.entry.name;
        if !known.from_image {
            if reconciler.adopting.get() {
                continue;
            }
            tracing::warn!(
                topic = %name,
                "a topic on disk is not in the cluster metadata; not served (its files stay)"
            );
        } else {
            delete_local(shard, &known.entry).await;
            tracing::info!(topic = %name, "topic removed");
        }
        reconciler.topics.borrow_mut().remove(name);
    }
}

/// Brings this broker's replicas of `topic` (its entry `entry`) in line:
/// those of an older topic of that name deleted, their config changed.
async fn reconcile_topic(
    shard: &Rc<Shard>,
    reconciler: &Reconciler,
    topic: &TopicImage,
    entry: &TopicEntry,
) {
    let current = reconciler.topics.borrow().get(&topic.name).cloned();
    if let Some(current) = &current {
        if current.from_image && current.entry == *entry {
            return;
        }
        if current.from_image && current.entry.topic_id != entry.topic_id {
            // Deleted and created again while this broker was away.
            delete_local(shard, &current.entry).await;
        }
    }
    let own = shard.config.broker_id;
    let config_changed = current
        .as_ref()
        .is_some_and(|c| c.entry.topic_id == entry.topic_id && c.entry.config != entry.config);
    if config_changed {
        let alters = topic
            .partitions
            .iter()
            .filter(|(_, state)| state.replicas.contains(&own))
            .map(|(&p, _)| PartitionOp::AlterConfig {
                tp: TopicPartition::new(topic.name.clone(), p),
                config: entry.config.clone(),
            })
            .collect();
        for reply in run_on_owners(shard, alters).await {
            if let PartitionReply::Done(Err(code)) = reply {
                tracing::error!(topic = %topic.name, %code, "cannot change a local replica's config");
            }
        }
    }
    let reconciled = Reconciled {
        entry: entry.clone(),
        from_image: true,
    };
    reconciler
        .topics
        .borrow_mut()
        .insert(topic.name.clone(), reconciled);
}

async fn delete_local(shard: &Rc<Shard>, entry: &TopicEntry) {
    let deletes = (0..entry.partitions)
        .map(|p| PartitionOp::Delete {
            tp: TopicPartition::new(entry.name.clone(), p),
        })
        .collect();
    for reply in run_on_owners(shard, deletes).await {
        if let PartitionReply::Done(Err(code)) = reply {
            // A partition this broker never had is what we wanted.
            if code != ErrorCode::UnknownTopicOrPartition {
                tracing::error!(topic = %entry.name, %code, "cannot delete a local replica");
            }
        }
    }
}

/// Hands each local replica whose committed state changed (leader, epochs,
/// ISR, replicas) to its owner shard, which takes up its role.
///
/// Not before the image holds this process's own registration: an image
/// replayed from the local metadata log at start can be older than the
/// cluster (it may still name this broker leader of a partition that moved
/// while it was down); every change after the registration record is one
/// the controller made knowing this broker restarted.
async fn apply_partition_states(
    shard: &Rc<Shard>,
    reconciler: &Reconciler,
    table: &TopicTable,
    image: &MetadataImage,
) {
    let own = shard.config.broker_id;
    if !registered_here(shard, image) {
        return;
    }
    let mut changed = Vec::new();
    {
        let mut applied = reconciler.applied.borrow_mut();
        applied.retain(|(topic, partition), _| {
            image
                .topic_by_name(topic)
                .is_some_and(|t| t.partitions.contains_key(partition))
        });
        for topic in image.topics().values() {
            let min_insync_replicas = table
                .get(&topic.name)
                .map_or(1, |entry| entry.config.min_insync_replicas.max(1) as usize);
            for (&partition, state) in &topic.partitions {
                let key = (topic.name.clone(), partition);
                if !state.replicas.contains(&own) && !applied.contains_key(&key) {
                    continue;
                }
                // A replica moved off this broker gets its last state (its
                // shard drops the role) and leaves the map.
                let handed = (state.clone(), min_insync_replicas);
                if applied.get(&key) == Some(&handed) {
                    continue;
                }
                if state.replicas.contains(&own) {
                    applied.insert(key, handed);
                } else {
                    applied.remove(&key);
                }
                changed.push(ApplyPartitionState {
                    tp: TopicPartition::new(topic.name.clone(), partition),
                    replicas: state.replicas.clone(),
                    isr: state.isr.clone(),
                    leader: state.leader,
                    leader_epoch: state.leader_epoch,
                    partition_epoch: state.partition_epoch,
                    min_insync_replicas,
                });
            }
        }
    }
    for call in changed {
        let owner = shard.owner(&call.tp);
        if let Err(e) = shard.call(owner, call).await {
            tracing::warn!(owner, error = %e, "partition state not delivered");
        }
    }
}

/// Creates, on their owner shards, the replicas the image newly assigns to
/// this broker (a new topic or partition, or a reassignment onto it).
async fn create_local_replicas(
    shard: &Rc<Shard>,
    reconciler: &Reconciler,
    table: &TopicTable,
    image: &MetadataImage,
) {
    let own = shard.config.broker_id;
    let mut creates = Vec::new();
    {
        let hosted = reconciler.hosted.borrow();
        for topic in image.topics().values() {
            let Some(entry) = table.get(&topic.name) else {
                continue;
            };
            for (&partition, state) in &topic.partitions {
                let key = (topic.topic_id, partition);
                if state.replicas.contains(&own) && !hosted.contains(&key) {
                    creates.push(PartitionOp::Create {
                        tp: TopicPartition::new(topic.name.clone(), partition),
                        topic_id: topic.topic_id,
                        config: entry.config.clone(),
                    });
                }
            }
        }
    }
    if creates.is_empty() {
        return;
    }
    let keys: Vec<(TopicId, i32, String)> = creates
        .iter()
        .filter_map(|op| match op {
            PartitionOp::Create { tp, topic_id, .. } => {
                Some((*topic_id, tp.partition, tp.topic.clone()))
            }
            _ => None,
        })
        .collect();
    let replies = run_on_owners(shard, creates).await;
    let mut hosted = reconciler.hosted.borrow_mut();
    for ((topic_id, partition, topic), reply) in keys.into_iter().zip(replies) {
        match reply {
            PartitionReply::Done(Ok(()))
            | PartitionReply::Done(Err(ErrorCode::TopicAlreadyExists)) => {
                hosted.insert((topic_id, partition));
            }
            other => {
                tracing::error!(%topic, partition, reply = ?other, "cannot create a local replica")
            }
        }
    }
}

/// Deletes the local replicas of partitions the image no longer assigns to
/// this broker (a completed or cancelled reassignment), once their owner
/// shard has dropped its role ([`apply_partition_states`] ran first). On
/// the first image after this process registered, also the replicas left
/// on disk while it was down that the image assigns elsewhere.
async fn remove_unassigned_replicas(
    shard: &Rc<Shard>,
    reconciler: &Reconciler,
    image: &MetadataImage,
) {
    let own = shard.config.broker_id;
    if !registered_here(shard, image) {
        // An image replayed from the local log may be older than the
        // cluster: deleting by it could drop a replica that still counts.
        return;
    }
    let mut deletes = Vec::new();
    {
        let mut hosted = reconciler.hosted.borrow_mut();
        let before = hosted.len();
        hosted.retain(|(topic_id, partition)| {
            let Some(topic) = image.topic(topic_id) else {
                // A removed topic: `reconcile` deleted it already.
                return false;
            };
            match topic.partitions.get(partition) {
                Some(state) if !state.replicas.contains(&own) => {
                    deletes.push(TopicPartition::new(topic.name.clone(), *partition));
                    false
                }
                _ => true,
            }
        });
        assert!(hosted.len() <= before);
        if !reconciler.strays_checked.replace(true) {
            for topic in image.topics().values() {
                for (&partition, state) in &topic.partitions {
                    let tp = TopicPartition::new(topic.name.clone(), partition);
                    let on_disk = shard
                        .config
                        .data_dirs()
                        .iter()
                        .any(|dir| dir.join(tp.dir_name()).is_dir());
                    if !state.replicas.contains(&own) && on_disk && !deletes.contains(&tp) {
                        deletes.push(tp);
                    }
                }
            }
        }
    }
    if deletes.is_empty() {
        return;
    }
    let ops = deletes
        .iter()
        .map(|tp| PartitionOp::Delete { tp: tp.clone() })
        .collect();
    for (tp, reply) in deletes.iter().zip(run_on_owners(shard, ops).await) {
        match reply {
            PartitionReply::Done(Ok(())) => {
                tracing::info!(%tp, "replica moved off this broker; its files are deleted")
            }
            PartitionReply::Done(Err(ErrorCode::UnknownTopicOrPartition)) => {}
            other => tracing::error!(%tp, reply = ?other, "cannot delete a moved replica"),
        }
    }
}

/// Whether `image` holds this process's own registration (was made after
/// this start).
fn registered_here(shard: &Rc<Shard>, image: &MetadataImage) -> bool {
    let Some(quorum) = shard.runtime().quorum.clone() else {
        return false;
    };
    image
        .broker(shard.config.broker_id)
        .is_some_and(|b| b.incarnation_id == quorum.incarnation_id())
}

/// Proposes the topics found on disk (a single node's data from before it
/// kept metadata) with their own ids, on this broker, once it is live.
async fn adopt_topics_on_disk(shard: Rc<Shard>) {
    let own = shard.config.broker_id;
    let view = shard.runtime().view.clone();
    let mut sequence = 0;
    loop {
        let (newer, image) = view.newer_than(sequence).await;
        sequence = newer;
        if image.broker(own).is_some_and(|b| !b.fenced) {
            break;
        }
    }
    // Those the image does not name yet (a fresh log: none, unless another
    // node's broker created one by that name meanwhile).
    let image = view.image();
    let found: Vec<TopicEntry> = shard
        .topic_table()
        .found_on_disk_entries()
        .iter()
        .filter(|e| image.topic_by_name(&e.name).is_none())
        .cloned()
        .collect();
    let defaults = super::topic_defaults::topic_defaults(&shard);
    for entry in found {
        let topic_id = if entry.topic_id == [0; 16] {
            random_topic_id()
        } else {
            entry.topic_id
        };
        let request = ControllerRpc::CreateTopic {
            name: entry.name.clone(),
            topic_id,
            partitions: entry.partitions,
            replication_factor: 1,
            assignment: (0..entry.partitions).map(|p| (p, vec![own])).collect(),
            configs: entry.config.overrides_against(&defaults),
        };
        match call_controller_until_answered(&shard, request).await {
            Ok(ControllerReply::Committed { .. }) => {
                tracing::info!(topic = %entry.name, "topic on disk adopted into the cluster metadata")
            }
            outcome => tracing::error!(
                topic = %entry.name,
                ?outcome,
                "a topic on disk could not be adopted into the cluster metadata; not served"
            ),
        }
    }
    shard.runtime().reconciler.adopting.set(false);
}
