//! The image's remote log accessors (tiered storage, KIP-405): what a
//! broker reads of [`super::remote_segments`] through its
//! [`MetadataImage`], kept apart from both so that neither file imports
//! the other.

use engine::types::TopicId;

use super::image::MetadataImage;
use super::record::{MetadataRecord, RemoteSegmentState};
use super::remote_segments::{RemotePartitionSegments, RemoteSegment, RemoteTopicToPurge};

/// The remote log metadata a broker reads (tiered storage, KIP-405).
impl MetadataImage {
    /// The invariants of what a remote log record changed (after the
    /// change).
    pub(super) fn assert_touched_remote(&self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RemoteLogSegment(segment) => {
                let (topic_id, partition) = (&segment.topic_id, segment.partition);
                let now = self.remote_segment(topic_id, partition, &segment.segment_id);
                assert_eq!(now, Some(segment));
            }
            MetadataRecord::RemoteLogSegmentState {
                topic_id,
                partition,
                segment_id,
                state,
            } => {
                let now = self.remote_segment(topic_id, *partition, segment_id);
                match state {
                    RemoteSegmentState::DeleteSegmentFinished => assert!(now.is_none()),
                    _ => assert_eq!(now.map(|s| s.state), Some(*state)),
                }
            }
            MetadataRecord::RemoteTopicPurged { topic_id } => {
                assert!(!self.remote_log().is_purging(topic_id));
            }
            _ => unreachable!("not a remote log record: {}", record.kind()),
        }
    }

    /// A partition's remote segments in every state, by base offset.
    pub fn remote_segments(
        &self,
        topic_id: &TopicId,
        partition: i32,
    ) -> impl Iterator<Item = &RemoteSegment> {
        self.remote_log()
            .partition(topic_id, partition)
            .into_iter()
            .flat_map(RemotePartitionSegments::iter)
    }

    /// One remote segment by id, in any state.
    pub fn remote_segment(
        &self,
        topic_id: &TopicId,
        partition: i32,
        segment_id: &[u8; 16],
    ) -> Option<&RemoteSegment> {
        self.remote_log()
            .partition(topic_id, partition)?
            .get(segment_id)
    }

    /// The first offset in remote storage: the lowest base offset of a
    /// CopySegmentFinished segment. A segment whose deletion started no
    /// longer counts (Kafka moves the log start offset when deletion
    /// starts, before any object is gone).
    pub fn remote_log_start_offset(&self, topic_id: &TopicId, partition: i32) -> Option<i64> {
        self.remote_log()
            .partition(topic_id, partition)?
            .log_start_offset()
    }

    /// The highest end offset of a CopySegmentFinished segment: everything
    /// at or below it is safely uploaded (the local log may drop it).
    pub fn remote_log_end_offset(&self, topic_id: &TopicId, partition: i32) -> Option<i64> {
        self.remote_log()
            .partition(topic_id, partition)?
            .log_end_offset()
    }

    /// The CopySegmentFinished segment that holds `offset`.
    pub fn remote_segment_for_offset(
        &self,
        topic_id: &TopicId,
        partition: i32,
        offset: i64,
    ) -> Option<&RemoteSegment> {
        self.remote_log()
            .partition(topic_id, partition)?
            .segment_for_offset(offset)
    }

    /// Deleted topics whose remote objects are still to delete, by id.
    pub fn remote_topics_to_purge(&self) -> impl Iterator<Item = (TopicId, &RemoteTopicToPurge)> {
        self.remote_log().to_purge()
    }
}
