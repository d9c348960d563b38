//! [`MetadataMachine`]: the [`MetadataImage`] as the metadata quorum's
//! state machine, so that what the quorum commits is what every node's
//! image holds.
//!
//! Why a wrapper rather than implementing the trait on the image: the
//! quorum's contract is that a committed entry cannot be refused, while
//! [`MetadataImage::apply`] refuses records that break its rules. The
//! machine is where that meets: an entry that does not decode or that the
//! image refuses is skipped — deterministically, since every member holds
//! the same image and sees the same bytes — logged and counted, and the
//! image stays as it was. A skip means a controller proposed something it
//! should not have (or a disk lied past its CRC); the count is there for a
//! metric and the tests.
//!
//! It also keeps what changed for the runtime above it (partition
//! leadership for the replication core, topics for the shards):
//! [`MetadataMachine::take_changes`] hands out the records applied since
//! the last call; [`MetadataMachine::take_restored`] says the image was
//! replaced wholesale (a snapshot was installed, or the change list
//! overflowed) and every derived view must be rebuilt from
//! [`MetadataMachine::image`].
//!
//! And it keeps the encoded records it applied most recently, up to
//! [`RECENT_MAX_BYTES`], so that a voter can send a broker-only node the
//! records since its offset (a delta) rather than the whole image
//! ([`MetadataMachine::records_after`]).

use std::collections::VecDeque;

use crate::quorum::node::StateMachine;

use super::image::MetadataImage;
use super::record::MetadataRecord;

/// The most changes kept for the runtime between two
/// [`MetadataMachine::take_changes`]. The runtime takes them after every
/// quorum `advance`, which applies what one ready batch committed: at most
/// a few thousand records in practice (8 rounds of 1 MiB messages of
/// ~60-byte frames would be ~140 000, only when a member replays a long
/// log). Past the bound the list is dropped and the runtime is told to
/// rebuild from the image instead, which is no slower than walking that
/// many changes, so memory stays bounded whatever the log holds.
pub const CHANGES_MAX: usize = 65_536;

/// The most bytes of recently applied records kept for deltas: thousands
/// of records (most frames are under 200 bytes), so that an observer a
/// few seconds or a burst of topic creations behind takes a delta.
pub const RECENT_MAX_BYTES: usize = 4 << 20;

/// The metadata state machine that the quorum applies committed records to
/// (see the module doc).
#[derive(Debug)]
pub struct MetadataMachine {
    image: MetadataImage,
    skipped_records: u64,
    changes: Vec<(u64, MetadataRecord)>,
    restored: bool,
    /// Applied records as (offset, frame), oldest first: every record
    /// applied after `recent_after` is here.
    recent: VecDeque<(i64, Vec<u8>)>,
    recent_after: i64,
    recent_bytes: usize,
}

impl Default for MetadataMachine {
    fn default() -> Self {
        MetadataMachine {
            image: MetadataImage::new(),
            skipped_records: 0,
            changes: Vec::new(),
            restored: false,
            recent: VecDeque::new(),
            recent_after: -1,
            recent_bytes: 0,
        }
    }
}

impl MetadataMachine {
    /// A machine with the empty image.
    pub fn new() -> Self {
        MetadataMachine::default()
    }

    /// The image as of the last applied record.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// Committed entries skipped since this machine was created (they did
    /// not decode, or the image refused them). Not part of the replicated
    /// state: a restart or a restore does not bring it back.
    pub fn skipped_records(&self) -> u64 {
        self.skipped_records
    }

    /// The records applied, with their log index and in order, since the
    /// previous call (or since the last restore).
    pub fn take_changes(&mut self) -> Vec<(u64, MetadataRecord)> {
        std::mem::take(&mut self.changes)
    }

    /// Whether the image was replaced wholesale since the previous call (a
    /// snapshot restored, or more than [`CHANGES_MAX`] changes piled up):
    /// then [`MetadataMachine::take_changes`] holds only what came after,
    /// and whatever the runtime derived from the image must be rebuilt.
    pub fn take_restored(&mut self) -> bool {
        std::mem::take(&mut self.restored)
    }

    /// The records applied after `offset`, oldest first, as (offset,
    /// frame), at most `max_bytes` of frames (at least one record when
    /// there is one); `None` when some were applied after `offset` but are
    /// no longer kept (the asker needs the whole image).
    pub fn records_after(&self, offset: i64, max_bytes: usize) -> Option<Vec<(i64, &[u8])>> {
        if offset < self.recent_after {
            return None;
        }
        let mut bytes = 0usize;
        let mut records = Vec::new();
        for (at, frame) in self.recent.iter().filter(|(at, _)| *at > offset) {
            if !records.is_empty() && bytes + frame.len() > max_bytes {
                break;
            }
            bytes += frame.len();
            records.push((*at, frame.as_slice()));
        }
        Some(records)
    }

    fn keep_recent(&mut self, offset: i64, frame: &[u8]) {
        self.recent.push_back((offset, frame.to_vec()));
        self.recent_bytes += frame.len();
        while self.recent_bytes > RECENT_MAX_BYTES {
            let Some((dropped_at, dropped)) = self.recent.pop_front() else {
                break;
            };
            self.recent_bytes -= dropped.len();
            self.recent_after = dropped_at;
        }
    }

    fn skip(&mut self, index: u64, reason: &dyn std::fmt::Display) {
        self.skipped_records += 1;
        tracing::warn!(
            index,
            skipped_records = self.skipped_records,
            "metadata: skipping committed entry: {reason}"
        );
    }

    fn record_change(&mut self, index: u64, record: MetadataRecord) {
        if self.changes.len() >= CHANGES_MAX {
            self.changes.clear();
            self.restored = true;
        }
        self.changes.push((index, record));
        assert!(self.changes.len() <= CHANGES_MAX);
    }
}

impl StateMachine for MetadataMachine {
    fn apply(&mut self, index: u64, data: &[u8]) {
        let Ok(offset) = i64::try_from(index) else {
            self.skip(index, &"log index beyond i64 offsets");
            return;
        };
        let record = match MetadataRecord::decode(data) {
            Ok(record) => record,
            Err(error) => return self.skip(index, &error),
        };
        let before_offset = self.image.last_applied_offset();
        match self.image.apply(offset, &record) {
            Ok(()) => {
                assert_eq!(self.image.last_applied_offset(), offset);
                self.keep_recent(offset, data);
                self.record_change(index, record);
            }
            Err(error) => {
                assert_eq!(self.image.last_applied_offset(), before_offset);
                self.skip(index, &error);
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.image.encode_snapshot()
    }

    fn restore(&mut self, data: &[u8]) -> Result<(), String> {
        let image = MetadataImage::decode_snapshot(data).map_err(|error| error.to_string())?;
        self.image = image;
        self.changes.clear();
        self.restored = true;
        // What the snapshot holds was never seen record by record here.
        self.recent.clear();
        self.recent_bytes = 0;
        self.recent_after = self.image.last_applied_offset();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::metadata::record::{PartitionChangeRecord, PartitionRecord};
    use crate::quorum::node::{QuorumConfig, QuorumNode};
    use crate::quorum::sim_storage::SimStorage;
    use crate::quorum::storage::{FileStorage, LogStore};

    const TOPIC_ID: [u8; 16] = [9; 16];

    fn register(broker_id: i32, broker_epoch: i64) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id: [broker_id as u8; 16],
            broker_epoch,
            listeners: vec![],
            rack: Some(format!("rack-{broker_id}")),
            features: Vec::new(),
        }
    }

    fn unfence(broker_id: i32, broker_epoch: i64) -> MetadataRecord {
        MetadataRecord::UnfenceBroker {
            broker_id,
            broker_epoch,
        }
    }

    fn topic(name: &str) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.to_owned(),
            topic_id: TOPIC_ID,
            configs: BTreeMap::from([("retention.ms".to_owned(), "60000".to_owned())]),
        }
    }

    fn partition(partition: i32, leader: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            topic_id: TOPIC_ID,
            partition,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        })
    }

    fn shrink_isr(partition: i32) -> MetadataRecord {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: TOPIC_ID,
            partition,
            leader: None,
            isr: Some(vec![1]),
            replicas: None,
            eligible_leader_replicas: None,
            last_known_elr: None,
        })
    }

    /// Records that build a small cluster: two live brokers, a topic with
    /// two partitions, an ISR change and a producer-id block.
    fn cluster_records() -> Vec<MetadataRecord> {
        vec![
            register(1, 0),
            register(2, 1),
            unfence(1, 0),
            unfence(2, 1),
            topic("orders"),
            partition(0, 1),
            partition(1, 2),
            shrink_isr(0),
            MetadataRecord::ProducerIds {
                broker_id: 2,
                broker_epoch: 1,
                next_block_start: 1000,
            },
        ]
    }

    #[test]
    fn applies_valid_records_and_hands_out_the_changes_once() {
        let mut machine = MetadataMachine::new();
        let records = cluster_records();
        for (index, record) in (1u64..).zip(&records) {
            machine.apply(index, &record.encode());
        }
        assert_eq!(machine.skipped_records(), 0);
        assert_eq!(machine.image().last_applied_offset(), records.len() as i64);
        assert_eq!(machine.image().brokers().len(), 2);
        let state = machine.image().partition(&TOPIC_ID, 0).expect("partition");
        assert_eq!(state.isr, vec![1]);
        assert_eq!(state.partition_epoch, 1);
        assert_eq!(machine.image().next_producer_id_block_start(), 1000);
        let expected: Vec<_> = (1u64..).zip(records).collect();
        assert_eq!(machine.take_changes(), expected);
        assert!(machine.take_changes().is_empty());
        assert!(!machine.take_restored());
    }

    #[test]
    fn skips_garbage_and_refused_records_deterministically() {
        let mut machine = MetadataMachine::new();
        machine.apply(1, &register(1, 0).encode());
        let image = machine.image().clone();
        // Not a frame; a damaged frame; a record the image refuses (a
        // partition of an unknown topic; a stale epoch); an index that is
        // no offset; an index not after the last.
        let mut damaged = register(2, 1).encode();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        machine.apply(2, b"not a record");
        machine.apply(3, &damaged);
        machine.apply(4, &partition(0, 1).encode());
        machine.apply(5, &unfence(1, 7).encode());
        machine.apply(u64::MAX, &register(2, 1).encode());
        machine.apply(1, &register(2, 1).encode());
        assert_eq!(machine.skipped_records(), 6);
        assert_eq!(machine.image(), &image);
        assert_eq!(machine.take_changes(), vec![(1, register(1, 0))]);
        // It goes on applying afterwards.
        machine.apply(6, &unfence(1, 0).encode());
        assert!(machine.image().is_live(1));
        assert_eq!(machine.skipped_records(), 6);
    }

    #[test]
    fn recent_records_give_a_delta_until_they_are_dropped_or_restored_over() {
        let mut machine = MetadataMachine::new();
        let records = cluster_records();
        let mut offsets = Vec::new();
        for (index, record) in (10u64..).step_by(3).zip(&records) {
            machine.apply(index, &record.encode());
            offsets.push(index as i64);
        }
        // From the start, or from any applied offset: the rest, in order,
        // and they rebuild the same image.
        let all = machine.records_after(-1, usize::MAX).unwrap();
        assert_eq!(all.len(), records.len());
        let mut rebuilt = MetadataImage::new();
        for (offset, frame) in &all {
            rebuilt
                .apply(*offset, &MetadataRecord::decode(frame).unwrap())
                .unwrap();
        }
        assert_eq!(&rebuilt, machine.image());
        let tail = machine.records_after(offsets[1], usize::MAX).unwrap();
        assert_eq!(tail.len(), records.len() - 2);
        assert_eq!(tail[0].0, offsets[2]);
        assert!(machine
            .records_after(*offsets.last().unwrap(), usize::MAX)
            .unwrap()
            .is_empty());
        // A byte cap still gives one record.
        assert_eq!(machine.records_after(-1, 1).unwrap().len(), 1);
        // Restored from a snapshot: nothing before the snapshot is kept.
        let bytes = machine.snapshot();
        let mut other = MetadataMachine::new();
        other.restore(&bytes).unwrap();
        assert!(other.records_after(-1, usize::MAX).is_none());
        assert_eq!(
            other.records_after(*offsets.last().unwrap(), usize::MAX),
            Some(vec![])
        );
    }

    #[test]
    fn snapshot_and_restore_give_the_same_image_and_reset_the_changes() {
        let mut machine = MetadataMachine::new();
        for (index, record) in (10u64..).step_by(3).zip(cluster_records()) {
            machine.apply(index, &record.encode());
        }
        let bytes = machine.snapshot();
        let mut other = MetadataMachine::new();
        other.apply(1, &register(5, 0).encode());
        assert_eq!(other.restore(&bytes), Ok(()));
        assert_eq!(other.image(), machine.image());
        assert!(other.take_changes().is_empty());
        assert!(other.take_restored());
        assert!(!other.take_restored());

        // Both go on alike from there.
        let next_index = 1000;
        let more = register(3, 2);
        machine.apply(next_index, &more.encode());
        other.apply(next_index, &more.encode());
        assert_eq!(other.image(), machine.image());
        assert_eq!(other.take_changes(), vec![(next_index, more)]);

        // A damaged snapshot is refused and changes nothing.
        let before = other.image().clone();
        let mut damaged = bytes.clone();
        damaged[20] ^= 0xff;
        assert!(other.restore(&damaged).is_err());
        assert!(other.restore(&[]).is_err());
        assert_eq!(other.image(), &before);
        assert!(!other.take_restored());
    }

    #[test]
    fn too_many_changes_turn_into_a_rebuild() {
        let mut machine = MetadataMachine::new();
        let mut index = 0u64;
        let mut apply = |machine: &mut MetadataMachine, record: &MetadataRecord| {
            index += 1;
            machine.apply(index, &record.encode());
            index
        };
        for record in [register(1, 0), register(2, 1), unfence(1, 0), unfence(2, 1)] {
            apply(&mut machine, &record);
        }
        apply(&mut machine, &topic("t"));
        apply(&mut machine, &partition(0, 1));
        // Every change bumps the partition epoch, even to the same ISR.
        let mut last_index = 0;
        for _ in 0..CHANGES_MAX + 10 {
            last_index = apply(&mut machine, &shrink_isr(0));
        }
        assert_eq!(machine.skipped_records(), 0);
        assert!(machine.take_restored());
        let kept = machine.take_changes();
        assert!(!kept.is_empty() && kept.len() <= CHANGES_MAX);
        assert_eq!(kept.last().map(|(index, _)| *index), Some(last_index));
        assert!(!machine.take_restored());
    }

    fn settle(node: &mut QuorumNode<MetadataMachine>) {
        for _ in 0..10 {
            let outgoing = node.advance().expect("advance");
            assert!(outgoing.messages.is_empty(), "a lone voter talks to no one");
        }
    }

    #[test]
    fn a_quorum_node_compacts_into_snapshots_and_reopens_to_the_same_image() {
        let directory = tempfile::tempdir().expect("tempdir");
        let mut config = QuorumConfig::new(1, 11);
        config.snapshot_interval_entries = 3;
        let store = FileStorage::open(directory.path(), &[1]).expect("store");
        let mut node =
            QuorumNode::open(config.clone(), store, MetadataMachine::new()).expect("open");
        settle(&mut node);
        assert!(node.is_leader());
        let mut proposals: Vec<Vec<u8>> = cluster_records()
            .iter()
            .map(MetadataRecord::encode)
            .collect();
        // A record the image refuses, committed in the middle: skipped.
        proposals.insert(5, unfence(1, 0).encode());
        proposals.push(MetadataRecord::RemoveTopic { topic_id: [1; 16] }.encode());
        proposals.push(register(3, 2).encode());
        for proposal in proposals {
            node.propose(proposal).expect("propose");
            settle(&mut node);
        }
        let image = node.state_machine().image().clone();
        assert_eq!(node.state_machine().skipped_records(), 2);
        assert_eq!(image.brokers().len(), 3);
        assert_eq!(
            image.topic_by_name("orders").map(|t| t.partition_count()),
            Some(2)
        );
        assert_eq!(image.next_producer_id_block_start(), 1000);
        let snapshot_index = node.store().cache().snapshot_index();
        assert!(snapshot_index > 0, "compacted");
        image.check_invariants();

        drop(node);
        let store = FileStorage::open(directory.path(), &[1]).expect("reopen");
        let mut node = QuorumNode::open(config, store, MetadataMachine::new()).expect("reopen");
        settle(&mut node);
        assert_eq!(node.state_machine().image(), &image);
        assert!(node.is_leader());

        // And it goes on from there.
        node.propose(unfence(3, 2).encode()).expect("propose");
        settle(&mut node);
        assert!(node.state_machine().image().is_live(3));
        assert!(node.state_machine().image().last_applied_offset() > image.last_applied_offset());
    }

    type SimNode = QuorumNode<MetadataMachine, SimStorage>;

    fn open_sim_node(id: u64, store: SimStorage) -> SimNode {
        let mut config = QuorumConfig::new(id, 200 + id);
        config.snapshot_interval_entries = 4;
        QuorumNode::open(config, store, MetadataMachine::new()).expect("open")
    }

    /// Advances the running nodes and delivers their messages until the
    /// network is quiet; a stopped node's messages are lost.
    fn pump(nodes: &mut [Option<SimNode>]) {
        for _ in 0..100 {
            let mut messages = Vec::new();
            for node in nodes.iter_mut().flatten() {
                messages.extend(node.advance().expect("advance").messages);
            }
            if messages.is_empty() {
                return;
            }
            for message in messages {
                if let Some(node) = nodes[(message.to - 1) as usize].as_mut() {
                    node.step(message).expect("step");
                }
            }
        }
        panic!("the network did not quiet down");
    }

    fn tick_until_leader(nodes: &mut [Option<SimNode>]) -> usize {
        for _ in 0..200 {
            let leader = nodes
                .iter()
                .position(|node| node.as_ref().is_some_and(|node| node.is_leader()));
            if let Some(leader) = leader {
                return leader;
            }
            for node in nodes.iter_mut().flatten() {
                node.tick();
            }
            pump(nodes);
        }
        panic!("no leader elected");
    }

    #[test]
    fn a_lagging_member_installs_the_leaders_snapshot_and_holds_the_same_image() {
        let mut nodes: Vec<Option<SimNode>> = (1..=3u64)
            .map(|id| Some(open_sim_node(id, SimStorage::new(&[1, 2, 3]))))
            .collect();
        let first_leader = tick_until_leader(&mut nodes);
        let stopped = (first_leader + 1) % 3;
        let stopped_store = nodes[stopped]
            .take()
            .map(|node| node.store().clone().restart())
            .expect("ran");
        let mut records = cluster_records();
        records.extend([register(3, 2), unfence(3, 2), topic("twice")]);
        for record in &records {
            let leader = tick_until_leader(&mut nodes);
            let node = nodes[leader].as_mut().expect("leader runs");
            node.propose(record.encode()).expect("propose");
            pump(&mut nodes);
        }
        let leader = tick_until_leader(&mut nodes);
        let leader_node = nodes[leader].as_ref().expect("leader runs");
        let image = leader_node.state_machine().image().clone();
        assert_eq!(
            leader_node.state_machine().skipped_records(),
            1,
            "topic id taken"
        );
        assert_eq!(image.brokers().len(), 3);
        let leader_snapshot_index = leader_node.store().cache().snapshot_index();
        assert!(leader_snapshot_index > stopped_store.cache().last_index());

        // The stopped member comes back behind the leader's compacted log:
        // it can only catch up by installing the leader's snapshot.
        nodes[stopped] = Some(open_sim_node(stopped as u64 + 1, stopped_store));
        for _ in 0..50 {
            for node in nodes.iter_mut().flatten() {
                node.tick();
            }
            pump(&mut nodes);
        }
        for node in nodes.iter().flatten() {
            assert_eq!(node.state_machine().image(), &image);
        }
        let caught_up = nodes[stopped].as_ref().expect("runs");
        assert!(caught_up.store().cache().snapshot_index() >= leader_snapshot_index);
    }
}
