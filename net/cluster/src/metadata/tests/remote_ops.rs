//! The property tests' remote log segment operations (tiered storage,
//! KIP-405): random copies, transitions and purges by the current leaders,
//! some of them stale on purpose, each answer checked against what the
//! image says it must be; and the rule every step keeps, checked apart
//! from the controller's own code: a partition's finished segments cover
//! one run of offsets.

use proptest::prelude::*;

use super::super::controller::{RemoteCopyRequest, RemoteSegmentTransition};
use super::super::error::MetadataError;
use super::super::image::MetadataImage;
use super::super::record::{MetadataRecord, RemoteSegmentRecord, RemoteSegmentState, NO_LEADER};
use super::{Controller, Model, Op};

/// What a stale copy gets wrong on purpose.
const STALE_EPOCH: u8 = 1;
const STALE_LEADER: u8 = 2;
const STALE_GAP: u8 = 3;

impl Model {
    /// The records of a remote log operation (none if it was refused, as
    /// it had to be).
    pub(super) fn remote_step(&self, op: &Op) -> Vec<MetadataRecord> {
        match *op {
            Op::RemoteCopy {
                pick,
                length,
                overlap,
                stale,
            } => self.remote_copy(pick, length, overlap, stale),
            Op::RemoteTransition { pick, to, stale } => self.remote_transition(pick, to, stale),
            Op::RemotePurge { pick } => self.remote_purge(pick),
            _ => unreachable!("not a remote log operation: {op:?}"),
        }
    }

    /// The leader of a random led partition copies the segment after its
    /// remote log end (`overlap` offsets back, `length` offsets past it).
    fn remote_copy(
        &self,
        pick: usize,
        length: i64,
        overlap: i64,
        stale: u8,
    ) -> Vec<MetadataRecord> {
        let led: Vec<_> = self
            .leader
            .partitions()
            .filter(|(_, _, state)| state.leader != NO_LEADER)
            .collect();
        let Some(&(topic, partition, state)) = led.get(pick % led.len().max(1)) else {
            return Vec::new();
        };
        let remote_end = self
            .leader
            .remote_log_end_offset(&topic.topic_id, partition);
        let (base, end) = match (remote_end, stale) {
            (Some(end), STALE_GAP) => (end + 2, end + 1 + length),
            (Some(end), _) => ((end + 1 - overlap).max(0), end + length),
            (None, _) => (overlap, overlap + length - 1),
        };
        let mut segment_id = [0x5e; 16];
        segment_id[..8].copy_from_slice(&(self.log.len() as u64).to_be_bytes());
        let follower = state.replicas.iter().copied().find(|&b| b != state.leader);
        let request = RemoteCopyRequest {
            topic_id: topic.topic_id,
            partition,
            segment_id,
            base_offset: base,
            end_offset: end,
            max_timestamp_ms: end,
            size_bytes: 100 * length,
            broker_id: match stale {
                STALE_LEADER => follower.unwrap_or(state.leader),
                _ => state.leader,
            },
            leader_epoch: state.leader_epoch - i32::from(stale == STALE_EPOCH),
            segment_leader_epochs: vec![(state.leader_epoch, base)],
        };
        let stale = match stale {
            STALE_LEADER if follower.is_none() => 0,
            STALE_GAP if remote_end.is_none() => 0,
            other => other,
        };
        let enabled = topic.remote_storage_enabled();
        let result = Controller::new(&self.leader, &self.config).remote_copy_started(&request);
        match result {
            Ok(records) if enabled && !matches!(stale, STALE_EPOCH..=STALE_GAP) => {
                assert_eq!(records.len(), 1);
                records
            }
            Err(MetadataError::RemoteStorageNotEnabled { .. }) if !enabled => Vec::new(),
            Err(MetadataError::FencedLeaderEpoch { .. }) if stale == STALE_EPOCH => Vec::new(),
            Err(MetadataError::NotLeaderOrFollower { .. }) if stale == STALE_LEADER => Vec::new(),
            Err(MetadataError::RemoteSegmentNotExtending { .. }) if stale == STALE_GAP => {
                Vec::new()
            }
            other => panic!("{request:?} (stale {stale}, enabled {enabled}): {other:?}"),
        }
    }

    /// The leader of a random remote segment's partition moves it to
    /// another state, at a stale epoch if `stale`.
    fn remote_transition(&self, pick: usize, to: u8, stale: bool) -> Vec<MetadataRecord> {
        let segments: Vec<&RemoteSegmentRecord> = self
            .leader
            .partitions()
            .flat_map(|(topic, partition, _)| {
                self.leader.remote_segments(&topic.topic_id, partition)
            })
            .collect();
        let Some(&segment) = segments.get(pick % segments.len().max(1)) else {
            return Vec::new();
        };
        let Some(state) = self.leader.partition(&segment.topic_id, segment.partition) else {
            unreachable!("a live topic's segment is of an existing partition")
        };
        let to = match RemoteSegmentState::ALL.get(usize::from(to)) {
            Some(&to) => to,
            None => next_state(segment.state),
        };
        let request = RemoteSegmentTransition {
            broker_id: state.leader,
            leader_epoch: state.leader_epoch - i32::from(stale),
            topic_id: segment.topic_id,
            partition: segment.partition,
            segment_id: segment.segment_id,
            state: to,
        };
        let from = segment.state;
        let copy_epoch = segment.leader_epoch;
        let result =
            Controller::new(&self.leader, &self.config).remote_segment_transition(&request);
        match result {
            Ok(records) if from == to => assert!(records.is_empty()),
            Ok(records) => {
                assert!(from.may_become(to) && !stale && state.leader != NO_LEADER);
                assert_eq!(records.len(), 1);
                return records;
            }
            Err(MetadataError::InvalidRemoteSegmentTransition { .. }) => {
                assert!(!from.may_become(to) && from != to);
            }
            Err(MetadataError::FencedLeaderEpoch { .. }) => assert!(
                stale
                    || (to == RemoteSegmentState::CopySegmentFinished
                        && copy_epoch != state.leader_epoch)
            ),
            Err(MetadataError::NotLeaderOrFollower { .. }) => assert_eq!(state.leader, NO_LEADER),
            Err(MetadataError::RemoteLogGap { .. }) => assert!(
                to == RemoteSegmentState::CopySegmentFinished
                    || from == RemoteSegmentState::CopySegmentFinished
            ),
            Err(error) => panic!("{request:?} from {from:?}: {error:?}"),
        }
        Vec::new()
    }

    /// RemoteTopicPurged for a random topic: to purge (three times in four
    /// when there is one), live, or long gone.
    fn remote_purge(&self, pick: usize) -> Vec<MetadataRecord> {
        let purging: Vec<_> = self
            .leader
            .remote_topics_to_purge()
            .map(|(id, _)| id)
            .collect();
        let live: Vec<_> = self.leader.topics().keys().copied().collect();
        let candidates = match pick % 4 {
            0..=2 if !purging.is_empty() => purging.clone(),
            _ => [purging.clone(), live.clone(), vec![[0xee; 16]]].concat(),
        };
        let topic_id = candidates[pick / 4 % candidates.len()];
        let result = Controller::new(&self.leader, &self.config).remote_topic_purged(&topic_id);
        match result {
            Ok(records) if purging.contains(&topic_id) => {
                assert_eq!(records.len(), 1);
                records
            }
            Ok(records) if !live.contains(&topic_id) => {
                assert!(records.is_empty());
                records
            }
            Err(MetadataError::RemoteTopicNotDeleted { .. }) if live.contains(&topic_id) => {
                Vec::new()
            }
            other => panic!("purge of {topic_id:?}: {other:?}"),
        }
    }
}

/// The state a segment goes to next in the usual course: copied, then
/// deleted.
fn next_state(state: RemoteSegmentState) -> RemoteSegmentState {
    match state {
        RemoteSegmentState::CopySegmentStarted => RemoteSegmentState::CopySegmentFinished,
        RemoteSegmentState::CopySegmentFinished => RemoteSegmentState::DeleteSegmentStarted,
        _ => RemoteSegmentState::DeleteSegmentFinished,
    }
}

/// Every partition's finished segments cover one run of offsets, from the
/// remote log start to its end, each offset of which finds its segment.
pub(super) fn check_remote_log(image: &MetadataImage) {
    for (topic, partition, _) in image.partitions() {
        let id = &topic.topic_id;
        let mut finished: Vec<(i64, i64)> = image
            .remote_segments(id, partition)
            .filter(|s| s.state == RemoteSegmentState::CopySegmentFinished)
            .map(|s| (s.base_offset, s.end_offset))
            .collect();
        finished.sort_unstable();
        let mut covered: Option<(i64, i64)> = None;
        for (base, end) in finished {
            covered = match covered {
                None => Some((base, end)),
                Some((start, last)) => {
                    assert!(
                        base <= last + 1,
                        "{}-{partition}: gap before {base}",
                        topic.name
                    );
                    Some((start, last.max(end)))
                }
            };
        }
        let start = image.remote_log_start_offset(id, partition);
        let end = image.remote_log_end_offset(id, partition);
        assert_eq!(covered, start.zip(end));
        if let Some((start, end)) = covered {
            for offset in [start, (start + end) / 2, end] {
                let holder = image.remote_segment_for_offset(id, partition, offset);
                assert!(holder.is_some_and(|s| s.base_offset <= offset && offset <= s.end_offset));
            }
            assert!(image
                .remote_segment_for_offset(id, partition, end + 1)
                .is_none());
        }
    }
}

/// Any remote log record, valid or not (for the codec's round trip).
pub(super) fn any_remote_record() -> impl Strategy<Value = MetadataRecord> {
    let state = (0u8..4).prop_map(|id| RemoteSegmentState::ALL[usize::from(id)]);
    let segment = (
        (any::<[u8; 16]>(), any::<i32>(), any::<[u8; 16]>()),
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>()),
        prop::collection::vec((any::<i32>(), any::<i64>()), 0..4),
        state.clone(),
    )
        .prop_map(|(ids, offsets, leader, segment_leader_epochs, state)| {
            MetadataRecord::RemoteLogSegment(RemoteSegmentRecord {
                topic_id: ids.0,
                partition: ids.1,
                segment_id: ids.2,
                base_offset: offsets.0,
                end_offset: offsets.1,
                max_timestamp_ms: offsets.2,
                size_bytes: offsets.3,
                broker_id: leader.0,
                leader_epoch: leader.1,
                segment_leader_epochs,
                state,
            })
        });
    prop_oneof![
        segment,
        (any::<[u8; 16]>(), any::<i32>(), any::<[u8; 16]>(), state).prop_map(
            |(topic_id, partition, segment_id, state)| MetadataRecord::RemoteLogSegmentState {
                topic_id,
                partition,
                segment_id,
                state,
            }
        ),
        any::<[u8; 16]>().prop_map(|topic_id| MetadataRecord::RemoteTopicPurged { topic_id }),
    ]
}
