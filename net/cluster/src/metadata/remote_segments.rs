//! Tiered storage's remote log metadata (KIP-405) as part of the image:
//! each partition's segments in remote storage with their state, and the
//! deleted topics whose remote objects are still to delete.
//!
//! Why here rather than in Kafka's `__remote_log_metadata` topic: the
//! metadata log is already durable, replicated, ordered and fenced by the
//! controller, and every broker holds its image; a new leader finds the
//! segments its predecessor uploaded in the image, with no extra topic,
//! coordinator or consumer to wait for. The volume is small: a few records
//! per segment of up to 1 GiB. 1 000 partitions × 100 segments (100 TB)
//! are 100 000 segments: ~200 bytes each in the image (the record and two
//! map entries), ~20 MB; ~100 bytes each in a snapshot, ~10 MB.
//!
//! The protocol the records follow (the controller's side is in
//! `controller/remote_segments.rs`): the uploader commits
//! CopySegmentStarted *before* it writes any object, and nobody deletes an
//! object before its segment's DeleteSegmentStarted is committed. Every
//! object is therefore named by a segment of the image, and a topic
//! deleted without remote segments has no objects (it needs no purge).
//!
//! Reads follow Kafka: only CopySegmentFinished segments serve offsets;
//! the remote log start moves past a segment when its deletion *starts*
//! (Kafka moves the log start offset before it deletes), so a segment
//! being deleted is never read.
//!
//! Sharing: an image is cloned for every applied batch and every
//! controller decision, so the segments sit behind an `Arc` per topic and
//! per partition: a clone copies a map of topics, a change copies the one
//! partition it touches (`Arc::make_mut`).
//!
//! Records for unknown segments, partitions or topics, and transitions
//! Kafka does not allow, are refused by [`MetadataImage::apply`] with the
//! image unchanged, like every other record that breaks the image's rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::types::TopicId;

use super::record::{MetadataRecord, RemoteSegmentRecord, RemoteSegmentState};

/// A remote segment as the image holds it: the record that started its
/// copy, `state` being the state it has reached.
pub type RemoteSegment = RemoteSegmentRecord;

/// One partition's remote segments, by base offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemotePartitionSegments {
    /// By (base offset, segment id): a re-upload after a leader change may
    /// start at the same offset as an abandoned copy.
    by_base: BTreeMap<(i64, [u8; 16]), RemoteSegment>,
    /// Each segment id's base offset.
    base_of: BTreeMap<[u8; 16], i64>,
    /// The lowest base and the highest end offset of the
    /// CopySegmentFinished segments, kept with every change so that the
    /// broker's reads of them cost nothing (a change copies the partition's
    /// segments anyway when an older image shares them).
    finished_span: Option<(i64, i64)>,
}

impl RemotePartitionSegments {
    /// Every segment, in any state, by base offset.
    pub fn iter(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.by_base.values()
    }

    /// A segment by id.
    pub fn get(&self, segment_id: &[u8; 16]) -> Option<&RemoteSegment> {
        let base = *self.base_of.get(segment_id)?;
        self.by_base.get(&(base, *segment_id))
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.by_base.len()
    }

    /// Whether there is no segment.
    pub fn is_empty(&self) -> bool {
        self.by_base.is_empty()
    }

    /// The finished segments, by base offset.
    pub fn finished(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.iter()
            .filter(|s| s.state == RemoteSegmentState::CopySegmentFinished)
    }

    /// The first offset served from remote storage: the lowest base offset
    /// of a CopySegmentFinished segment (one being deleted no longer
    /// counts).
    pub fn log_start_offset(&self) -> Option<i64> {
        self.finished_span.map(|(start, _)| start)
    }

    /// The highest end offset of a CopySegmentFinished segment: every
    /// offset up to it is safely in remote storage.
    pub fn log_end_offset(&self) -> Option<i64> {
        self.finished_span.map(|(_, end)| end)
    }

    /// `finished_span` computed afresh.
    fn span_of_finished(&self) -> Option<(i64, i64)> {
        let start = self.finished().next()?.base_offset;
        let end = self.finished().map(|s| s.end_offset).max()?;
        Some((start, end))
    }

    /// The CopySegmentFinished segment holding `offset`, the one with the
    /// highest base offset if re-uploads overlap.
    pub fn segment_for_offset(&self, offset: i64) -> Option<&RemoteSegment> {
        self.by_base
            .range(..=(offset, [u8::MAX; 16]))
            .rev()
            .map(|(_, segment)| segment)
            .find(|s| s.state == RemoteSegmentState::CopySegmentFinished && s.end_offset >= offset)
    }

    fn insert(&mut self, segment: RemoteSegment) {
        let key = (segment.base_offset, segment.segment_id);
        assert!(self.base_of.insert(key.1, key.0).is_none());
        assert!(self.by_base.insert(key, segment).is_none());
        self.finished_span = self.span_of_finished();
    }

    fn set_state(&mut self, segment_id: &[u8; 16], state: RemoteSegmentState) {
        let Some(&base) = self.base_of.get(segment_id) else {
            unreachable!("validated: segment {segment_id:?} exists")
        };
        if state == RemoteSegmentState::DeleteSegmentFinished {
            self.base_of.remove(segment_id);
            let removed = self.by_base.remove(&(base, *segment_id));
            assert!(removed.is_some_and(|s| s.state.may_become(state)));
        } else {
            let Some(segment) = self.by_base.get_mut(&(base, *segment_id)) else {
                unreachable!("segment {segment_id:?} indexed at {base} but absent")
            };
            assert!(segment.state.may_become(state));
            segment.state = state;
        }
        self.finished_span = self.span_of_finished();
    }

    /// The index agrees with the segments, each of which is well formed
    /// and filed under its own key.
    fn check(&self, topic_id: &TopicId, partition: i32) {
        assert!(
            !self.is_empty(),
            "{topic_id:?}-{partition}: empty entry kept"
        );
        assert_eq!(self.by_base.len(), self.base_of.len());
        assert_eq!(self.finished_span, self.span_of_finished());
        for ((base, id), segment) in &self.by_base {
            assert_eq!((*base, *id), (segment.base_offset, segment.segment_id));
            assert_eq!(
                (segment.topic_id, segment.partition),
                (*topic_id, partition)
            );
            assert_eq!(self.base_of.get(id), Some(base));
            assert_eq!(check_segment(segment), Ok(()));
        }
    }
}

/// A topic's remote segments by partition.
type RemoteTopicSegments = BTreeMap<i32, Arc<RemotePartitionSegments>>;

/// A deleted topic that had remote segments: its objects are to delete
/// (all of them, whatever their segment's state), then
/// `RemoteTopicPurged` forgets it. Object keys hold the topic's name and
/// id, so both are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteTopicToPurge {
    name: String,
    partitions: Arc<RemoteTopicSegments>,
}

impl RemoteTopicToPurge {
    /// The topic's name when it was deleted.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its segments by partition.
    pub fn partitions(&self) -> impl Iterator<Item = (i32, &RemotePartitionSegments)> {
        self.partitions
            .iter()
            .map(|(&p, segments)| (p, &**segments))
    }

    /// Every segment, by partition and base offset.
    pub fn segments(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.partitions
            .values()
            .flat_map(|segments| segments.iter())
    }
}

/// The image's remote log metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteLogImage {
    /// Live topics' segments; a topic or partition without any is absent.
    topics: BTreeMap<TopicId, Arc<RemoteTopicSegments>>,
    /// Deleted topics with remote objects left.
    to_purge: BTreeMap<TopicId, Arc<RemoteTopicToPurge>>,
}

impl RemoteLogImage {
    /// A partition's segments, if it has any.
    pub fn partition(
        &self,
        topic_id: &TopicId,
        partition: i32,
    ) -> Option<&RemotePartitionSegments> {
        self.topics.get(topic_id)?.get(&partition).map(Arc::as_ref)
    }

    /// Whether a live topic has remote segments.
    pub fn has_segments(&self, topic_id: &TopicId) -> bool {
        self.topics.contains_key(topic_id)
    }

    /// Deleted topics whose remote objects are still to delete.
    pub fn to_purge(&self) -> impl Iterator<Item = (TopicId, &RemoteTopicToPurge)> {
        self.to_purge.iter().map(|(&id, topic)| (id, &**topic))
    }

    /// Whether a deleted topic's objects are still to delete.
    pub fn is_purging(&self, topic_id: &TopicId) -> bool {
        self.to_purge.contains_key(topic_id)
    }

    /// Whether a remote-log record may be applied, the topic's partition
    /// (for the segment records) being known to exist; the reason if not.
    pub(super) fn validate(&self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::RemoteLogSegment(segment) => {
                check_segment(segment)?;
                let (topic_id, partition) = (&segment.topic_id, segment.partition);
                let existing = self.partition(topic_id, partition);
                if existing.is_some_and(|p| p.get(&segment.segment_id).is_some()) {
                    return Err(format!(
                        "remote segment {:?} of {topic_id:?}-{partition} exists",
                        segment.segment_id
                    ));
                }
                Ok(())
            }
            MetadataRecord::RemoteLogSegmentState {
                topic_id,
                partition,
                segment_id,
                state,
            } => {
                let segment = self
                    .partition(topic_id, *partition)
                    .and_then(|p| p.get(segment_id))
                    .ok_or_else(|| {
                        format!("unknown remote segment {segment_id:?} of {topic_id:?}-{partition}")
                    })?;
                if !segment.state.may_become(*state) {
                    return Err(format!(
                        "remote segment {segment_id:?} cannot go from {:?} to {state:?}",
                        segment.state
                    ));
                }
                Ok(())
            }
            MetadataRecord::RemoteTopicPurged { topic_id } => match self.is_purging(topic_id) {
                true => Ok(()),
                false => Err(format!("topic {topic_id:?} has no remote data to purge")),
            },
            _ => unreachable!("not a remote log record: {}", record.kind()),
        }
    }

    /// Changes the image; `validate` accepted the record.
    pub(super) fn mutate(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RemoteLogSegment(segment) => {
                let partitions = self.topics.entry(segment.topic_id).or_default();
                let segments = Arc::make_mut(partitions)
                    .entry(segment.partition)
                    .or_default();
                Arc::make_mut(segments).insert(segment.clone());
            }
            MetadataRecord::RemoteLogSegmentState {
                topic_id,
                partition,
                segment_id,
                state,
            } => {
                let Some(partitions) = self.topics.get_mut(topic_id) else {
                    unreachable!("validated: {topic_id:?} has remote segments")
                };
                let partitions = Arc::make_mut(partitions);
                let Some(segments) = partitions.get_mut(partition) else {
                    unreachable!("validated: {topic_id:?}-{partition} has remote segments")
                };
                Arc::make_mut(segments).set_state(segment_id, *state);
                // No empty entry stays: equal states make equal images.
                if segments.is_empty() {
                    partitions.remove(partition);
                }
                if partitions.is_empty() {
                    self.topics.remove(topic_id);
                }
            }
            MetadataRecord::RemoteTopicPurged { topic_id } => {
                assert!(self.to_purge.remove(topic_id).is_some());
            }
            _ => unreachable!("not a remote log record: {}", record.kind()),
        }
    }

    /// A topic is deleted: its segments, if it has any, become a topic to
    /// purge.
    pub(super) fn remove_topic(&mut self, topic_id: &TopicId, name: &str) {
        if let Some(partitions) = self.topics.remove(topic_id) {
            let purge = RemoteTopicToPurge {
                name: name.to_owned(),
                partitions,
            };
            assert!(self.to_purge.insert(*topic_id, Arc::new(purge)).is_none());
        }
    }

    /// Checks every rule against the image this is part of (asked through
    /// `partition_exists` and `topic_live`): live topics' segments are of
    /// existing partitions, topics to purge are not live. Panics on a
    /// broken one (a bug).
    pub(super) fn check_invariants(
        &self,
        partition_exists: impl Fn(&TopicId, i32) -> bool,
        topic_live: impl Fn(&TopicId) -> bool,
    ) {
        for (topic_id, partitions) in &self.topics {
            assert!(!partitions.is_empty(), "{topic_id:?}: empty entry kept");
            assert!(!self.to_purge.contains_key(topic_id));
            for (&partition, segments) in partitions.iter() {
                assert!(partition_exists(topic_id, partition));
                segments.check(topic_id, partition);
            }
        }
        for (topic_id, purge) in &self.to_purge {
            assert!(
                !purge.partitions.is_empty(),
                "{topic_id:?}: nothing to purge"
            );
            assert!(!topic_live(topic_id), "{topic_id:?} is live");
            for (&partition, segments) in purge.partitions.iter() {
                segments.check(topic_id, partition);
            }
        }
    }
}

/// The rules of a segment's own fields (the controller checks them before
/// it proposes, `apply` again): a non-zero id, `0 <= base <= end`, sizes,
/// ids and epochs not negative, leader epochs strictly increasing from the
/// base offset, within the segment and up to the uploader's epoch, and a
/// state a segment can be stored in (a finished deletion removes it).
pub(crate) fn check_segment(segment: &RemoteSegmentRecord) -> Result<(), String> {
    let (base, end) = (segment.base_offset, segment.end_offset);
    if segment.segment_id == [0; 16] {
        return Err("remote segment id is zero".to_owned());
    }
    if base < 0 || base > end {
        return Err(format!("remote segment offsets {base}..={end}"));
    }
    if segment.size_bytes < 0 || segment.broker_id < 0 || segment.leader_epoch < 0 {
        return Err(format!(
            "remote segment of {} bytes by broker {} at leader epoch {}",
            segment.size_bytes, segment.broker_id, segment.leader_epoch
        ));
    }
    if segment.state == RemoteSegmentState::DeleteSegmentFinished {
        return Err("a remote segment stored as deleted".to_owned());
    }
    let epochs = &segment.segment_leader_epochs;
    let ordered = epochs
        .windows(2)
        .all(|pair| pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1);
    let first_at_base = epochs
        .first()
        .is_some_and(|&(epoch, at)| epoch >= 0 && at == base);
    let last_within = epochs
        .last()
        .is_some_and(|&(epoch, at)| epoch <= segment.leader_epoch && at <= end);
    if !ordered || !first_at_base || !last_within {
        return Err(format!(
            "remote segment leader epochs {epochs:?} not increasing from {base} \
             within {base}..={end} up to epoch {}",
            segment.leader_epoch
        ));
    }
    Ok(())
}
