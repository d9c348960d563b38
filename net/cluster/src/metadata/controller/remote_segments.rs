//! Remote log segment decisions (tiered storage, KIP-405): a leader starts
//! and finishes a segment's copy to remote storage, deletes remote
//! segments, and a deleted topic's remote data is declared purged.
//!
//! Why the controller decides rather than each leader writing its own
//! records: the controller sees the partition's leader and epoch as the
//! log orders them, so a deposed leader's late request is fenced here
//! (`FENCED_LEADER_EPOCH`, `NOT_LEADER_OR_FOLLOWER`) before its record
//! exists, and no two leaders can both extend the remote log.
//!
//! The rules:
//! - Only the partition's leader, at its current leader epoch, changes its
//!   remote segments. A copy is finished only in the epoch it started in:
//!   the uploader of an earlier epoch is fenced, and a later leader, which
//!   cannot know whether the objects are whole, abandons such a copy
//!   (CopySegmentStarted → DeleteSegmentStarted).
//! - Uploads extend the remote log contiguously: a copy starts at or below
//!   the remote log end + 1 and ends above it (an overlapping re-upload
//!   after a leader change is fine). The finished segments always cover one
//!   run of offsets: a finish or a deletion that would leave a gap in it is
//!   refused (retention deletes from the start, a truncation from the end).
//! - A request for what is already committed (a retry whose answer was
//!   lost to a timeout or a controller move) is answered with no records,
//!   whoever asks: the state it asks for is there. A DeleteSegmentFinished
//!   for a segment that is gone is such a retry.
//! - Objects are written only after CopySegmentStarted commits and deleted
//!   only after DeleteSegmentStarted commits; an uploader that is fenced
//!   leaves its objects to the next leader's cleanup. This is the broker's
//!   side of the contract, which makes every object named in the image.

use engine::types::TopicId;

use crate::placement::BrokerId;

use super::super::error::MetadataError;
use super::super::image::{PartitionState, TopicImage};
use super::super::record::{MetadataRecord, RemoteSegmentRecord, RemoteSegmentState, NO_LEADER};
use super::super::remote_segments::{check_segment, RemoteSegment};
use super::Controller;

/// A leader starts copying a segment to remote storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteCopyRequest {
    /// The topic.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// Random id drawn by the uploader for this upload (never all zeros).
    pub segment_id: [u8; 16],
    /// First offset in the segment.
    pub base_offset: i64,
    /// Last offset in the segment (inclusive).
    pub end_offset: i64,
    /// The largest record timestamp in the segment.
    pub max_timestamp_ms: i64,
    /// The segment's size in bytes.
    pub size_bytes: i64,
    /// The uploader, which must lead the partition.
    pub broker_id: BrokerId,
    /// The uploader's leader epoch, which must be the partition's.
    pub leader_epoch: i32,
    /// Leader epochs within the segment and where each starts.
    pub segment_leader_epochs: Vec<(i32, i64)>,
}

impl RemoteCopyRequest {
    /// The record that starts this copy.
    pub fn record(&self) -> RemoteSegmentRecord {
        RemoteSegmentRecord {
            topic_id: self.topic_id,
            partition: self.partition,
            segment_id: self.segment_id,
            base_offset: self.base_offset,
            end_offset: self.end_offset,
            max_timestamp_ms: self.max_timestamp_ms,
            size_bytes: self.size_bytes,
            broker_id: self.broker_id,
            leader_epoch: self.leader_epoch,
            segment_leader_epochs: self.segment_leader_epochs.clone(),
            state: RemoteSegmentState::CopySegmentStarted,
        }
    }
}

/// A leader moves one of its partition's remote segments to a new state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSegmentTransition {
    /// The broker asking, which must lead the partition.
    pub broker_id: BrokerId,
    /// Its leader epoch, which must be the partition's.
    pub leader_epoch: i32,
    /// The topic.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The segment.
    pub segment_id: [u8; 16],
    /// The state asked for.
    pub state: RemoteSegmentState,
}

impl Controller<'_> {
    /// A leader starts copying a segment: the `RemoteLogSegment` record,
    /// once the partition, the topic's config, the leader and the offsets
    /// are checked (see the module doc). A retry of a committed start gets
    /// no records.
    pub fn remote_copy_started(
        &self,
        request: &RemoteCopyRequest,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let (topic_id, partition) = (request.topic_id, request.partition);
        let (topic, state) = self.remote_partition(&topic_id, partition)?;
        let record = request.record();
        let existing = self
            .image
            .remote_segment(&topic_id, partition, &request.segment_id);
        if let Some(existing) = existing {
            let same = RemoteSegmentRecord {
                state: existing.state,
                ..record.clone()
            };
            if *existing == same {
                return Ok(Vec::new());
            }
            return Err(MetadataError::RemoteSegmentIdInUse {
                topic_id,
                partition,
                segment_id: request.segment_id,
            });
        }
        if !topic.remote_storage_enabled() {
            let name = topic.name.clone();
            return Err(MetadataError::RemoteStorageNotEnabled { topic: name });
        }
        check_leader(
            state,
            &topic_id,
            partition,
            request.broker_id,
            request.leader_epoch,
        )?;
        check_segment(&record).map_err(|reason| MetadataError::InvalidRequest { reason })?;
        let remote_end = self.image.remote_log_end_offset(&topic_id, partition);
        if let Some(end) = remote_end {
            // `base - 1` cannot overflow: check_segment saw base >= 0.
            if request.base_offset - 1 > end || request.end_offset <= end {
                return Err(MetadataError::RemoteSegmentNotExtending {
                    topic_id,
                    partition,
                    base_offset: request.base_offset,
                    end_offset: request.end_offset,
                    remote_log_end_offset: remote_end,
                });
            }
        }
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::RemoteLogSegment(record));
        Ok(proposal.into_records())
    }

    /// A leader moves a remote segment to `request.state`: one
    /// `RemoteLogSegmentState` record, or none for a retry of a committed
    /// transition (see the module doc for who may do what).
    pub fn remote_segment_transition(
        &self,
        request: &RemoteSegmentTransition,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        let (topic_id, partition) = (request.topic_id, request.partition);
        let (_, state) = self.remote_partition(&topic_id, partition)?;
        let segment = self
            .image
            .remote_segment(&topic_id, partition, &request.segment_id);
        let Some(segment) = segment else {
            if request.state == RemoteSegmentState::DeleteSegmentFinished {
                return Ok(Vec::new());
            }
            return Err(MetadataError::UnknownRemoteSegment {
                topic_id,
                partition,
                segment_id: request.segment_id,
            });
        };
        if segment.state == request.state {
            return Ok(Vec::new());
        }
        if !segment.state.may_become(request.state) {
            return Err(MetadataError::InvalidRemoteSegmentTransition {
                segment_id: request.segment_id,
                from: segment.state,
                to: request.state,
            });
        }
        check_leader(
            state,
            &topic_id,
            partition,
            request.broker_id,
            request.leader_epoch,
        )?;
        match (segment.state, request.state) {
            (RemoteSegmentState::CopySegmentStarted, RemoteSegmentState::CopySegmentFinished) => {
                if segment.leader_epoch != state.leader_epoch {
                    return Err(MetadataError::FencedLeaderEpoch {
                        topic_id,
                        partition,
                        leader_epoch: segment.leader_epoch,
                        current_leader_epoch: state.leader_epoch,
                    });
                }
                self.check_one_run(segment, true)?;
            }
            (RemoteSegmentState::CopySegmentFinished, _) => self.check_one_run(segment, false)?,
            _ => {}
        }
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::RemoteLogSegmentState {
            topic_id,
            partition,
            segment_id: request.segment_id,
            state: request.state,
        });
        Ok(proposal.into_records())
    }

    /// Every remote object of the deleted topic `topic_id` is gone: the
    /// `RemoteTopicPurged` record. A topic with nothing to purge (purged
    /// already: a retry; or deleted without remote segments) gets no
    /// records; a live topic is refused.
    pub fn remote_topic_purged(
        &self,
        topic_id: &TopicId,
    ) -> Result<Vec<MetadataRecord>, MetadataError> {
        if self.image.topic(topic_id).is_some() {
            return Err(MetadataError::RemoteTopicNotDeleted {
                topic_id: *topic_id,
            });
        }
        if !self.image.remote_log().is_purging(topic_id) {
            return Ok(Vec::new());
        }
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::RemoteTopicPurged {
            topic_id: *topic_id,
        });
        Ok(proposal.into_records())
    }

    /// The topic and partition a remote log request names.
    fn remote_partition(
        &self,
        topic_id: &TopicId,
        partition: i32,
    ) -> Result<(&TopicImage, &PartitionState), MetadataError> {
        let topic = self
            .image
            .topic(topic_id)
            .ok_or(MetadataError::UnknownTopicId {
                topic_id: *topic_id,
            })?;
        let state = topic
            .partitions
            .get(&partition)
            .ok_or(MetadataError::UnknownPartition {
                topic_id: *topic_id,
                partition,
            })?;
        Ok((topic, state))
    }

    /// Whether the finished segments still cover one run of offsets once
    /// `segment` is finished (`finishing`) or, finished now, is deleted.
    fn check_one_run(&self, segment: &RemoteSegment, finishing: bool) -> Result<(), MetadataError> {
        let (topic_id, partition) = (segment.topic_id, segment.partition);
        let others: Vec<(i64, i64)> = self
            .image
            .remote_segments(&topic_id, partition)
            .filter(|s| s.state == RemoteSegmentState::CopySegmentFinished)
            .filter(|s| s.segment_id != segment.segment_id)
            .map(|s| (s.base_offset, s.end_offset))
            .collect();
        let mut with = others.clone();
        with.push((segment.base_offset, segment.end_offset));
        let (mut before, mut after) = match finishing {
            true => (others, with),
            false => (with, others),
        };
        if one_run(&mut after).is_ok() {
            return Ok(());
        }
        Err(MetadataError::RemoteLogGap {
            topic_id,
            partition,
            change: if finishing { "finishing" } else { "deleting" },
            base_offset: segment.base_offset,
            end_offset: segment.end_offset,
            remote_log: one_run(&mut before).ok().flatten(),
        })
    }
}

/// The broker leads the partition at `leader_epoch`, the partition's
/// current one. An epoch other than the current is fenced first, as
/// AlterPartition and Kafka's fetch do: a deposed leader hears that it is
/// stale rather than that it is not the leader. A leaderless partition is
/// led by nobody, whatever a request says.
fn check_leader(
    state: &PartitionState,
    topic_id: &TopicId,
    partition: i32,
    broker_id: BrokerId,
    leader_epoch: i32,
) -> Result<(), MetadataError> {
    if leader_epoch != state.leader_epoch {
        return Err(MetadataError::FencedLeaderEpoch {
            topic_id: *topic_id,
            partition,
            leader_epoch,
            current_leader_epoch: state.leader_epoch,
        });
    }
    if state.leader == NO_LEADER || broker_id != state.leader {
        return Err(MetadataError::NotLeaderOrFollower {
            topic_id: *topic_id,
            partition,
            broker_id,
            leader: state.leader,
        });
    }
    Ok(())
}

/// The offsets `segments` (base, end) cover if they form one run without a
/// gap (`None`: no segment); else the first offset missing.
fn one_run(segments: &mut [(i64, i64)]) -> Result<Option<(i64, i64)>, i64> {
    segments.sort_unstable();
    let mut run: Option<(i64, i64)> = None;
    for &(base, end) in segments.iter() {
        run = match run {
            None => Some((base, end)),
            // `base - 1`: bases are not negative (check_segment).
            Some((start, last)) if base - 1 <= last => Some((start, last.max(end))),
            Some((_, last)) => return Err(last + 1),
        };
    }
    Ok(run)
}
