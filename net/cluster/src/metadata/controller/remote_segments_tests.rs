//! Unit tests of the remote log segment decisions (tiered storage,
//! KIP-405) and of how the image applies their records, on the controller
//! tests' small cluster.

use std::collections::BTreeMap;

use engine::ErrorCode;

use super::super::error::MetadataError;
use super::super::image::MetadataImage;
use super::super::image::REMOTE_STORAGE_ENABLE;
use super::super::record::{MetadataRecord, RemoteSegmentRecord, RemoteSegmentState, NO_LEADER};
use super::tests::{three_brokers, topic_id, Cluster};
use super::*;

use RemoteSegmentState::{
    CopySegmentFinished as Finished, CopySegmentStarted as Started,
    DeleteSegmentFinished as Deleted, DeleteSegmentStarted as Deleting,
};

/// Topic `tiered` (id 1) with `remote.storage.enable=true`: partitions 0
/// and 1 on brokers 0, 1, 2, both led by 0 at leader epoch 0.
fn tiered() -> Cluster {
    let mut cluster = three_brokers();
    create(&mut cluster, "tiered", 1, Some("true"));
    cluster
}

fn create(cluster: &mut Cluster, name: &str, id: u8, remote: Option<&str>) {
    let configs: BTreeMap<String, String> = remote
        .map(|value| (REMOTE_STORAGE_ENABLE.to_owned(), value.to_owned()))
        .into_iter()
        .collect();
    let request = CreateTopicRequest {
        name: name.into(),
        topic_id: topic_id(id),
        assignment: TopicAssignment::Explicit(vec![(0, vec![0, 1, 2]), (1, vec![0, 1, 2])]),
        configs,
    };
    let records = cluster.controller().create_topic(&request).unwrap();
    cluster.commit(&records);
}

/// A copy of `base..=end` of partition 0 by its current leader, segment id
/// `[n; 16]`.
fn copy(cluster: &Cluster, n: u8, base: i64, end: i64) -> RemoteCopyRequest {
    let state = cluster.state(1, 0);
    RemoteCopyRequest {
        topic_id: topic_id(1),
        partition: 0,
        segment_id: [n; 16],
        base_offset: base,
        end_offset: end,
        max_timestamp_ms: 1_000 + end,
        size_bytes: 1 << 20,
        broker_id: state.leader,
        leader_epoch: state.leader_epoch,
        segment_leader_epochs: vec![(state.leader_epoch, base)],
    }
}

/// Segment `[n; 16]` of partition 0 to `to`, asked by the current leader.
fn move_to(n: u8, to: RemoteSegmentState, cluster: &Cluster) -> RemoteSegmentTransition {
    let state = cluster.state(1, 0);
    RemoteSegmentTransition {
        broker_id: state.leader,
        leader_epoch: state.leader_epoch,
        topic_id: topic_id(1),
        partition: 0,
        segment_id: [n; 16],
        state: to,
    }
}

fn start(cluster: &mut Cluster, request: &RemoteCopyRequest) -> Result<usize, MetadataError> {
    let records = cluster.controller().remote_copy_started(request)?;
    cluster.commit(&records);
    Ok(records.len())
}

fn transition(
    cluster: &mut Cluster,
    request: &RemoteSegmentTransition,
) -> Result<usize, MetadataError> {
    let records = cluster.controller().remote_segment_transition(request)?;
    cluster.commit(&records);
    Ok(records.len())
}

/// Starts copying `base..=end` as segment `[n; 16]`.
fn start_copy(cluster: &mut Cluster, n: u8, base: i64, end: i64) -> Result<usize, MetadataError> {
    let request = copy(cluster, n, base, end);
    start(cluster, &request)
}

/// Moves segment `[n; 16]` to `to`, asked by the current leader.
fn move_segment(
    cluster: &mut Cluster,
    n: u8,
    to: RemoteSegmentState,
) -> Result<usize, MetadataError> {
    let request = move_to(n, to, cluster);
    transition(cluster, &request)
}

/// Copies and finishes `base..=end` as segment `[n; 16]`.
fn upload(cluster: &mut Cluster, n: u8, base: i64, end: i64) {
    assert_eq!(start_copy(cluster, n, base, end), Ok(1));
    assert_eq!(move_segment(cluster, n, Finished), Ok(1));
}

/// The leader of partition 0 (broker 0) shuts down: broker 1 leads at a
/// new epoch.
fn move_leadership(cluster: &mut Cluster) {
    let before = cluster.state(1, 0);
    let records = cluster
        .controller()
        .controlled_shutdown(before.leader, cluster.epochs[&before.leader])
        .unwrap();
    cluster.commit(&records);
    let after = cluster.state(1, 0);
    assert_ne!(after.leader, before.leader);
    assert!(after.leader_epoch > before.leader_epoch);
}

fn ends(cluster: &Cluster) -> (Option<i64>, Option<i64>) {
    let image = &cluster.image;
    (
        image.remote_log_start_offset(&topic_id(1), 0),
        image.remote_log_end_offset(&topic_id(1), 0),
    )
}

fn states(cluster: &Cluster) -> Vec<(u8, RemoteSegmentState)> {
    let segments = cluster.image.remote_segments(&topic_id(1), 0);
    segments.map(|s| (s.segment_id[0], s.state)).collect()
}

#[test]
fn a_finished_copy_moves_the_remote_log_end() {
    let mut cluster = tiered();
    assert_eq!(ends(&cluster), (None, None));
    let request = copy(&cluster, 1, 0, 99);
    let records = cluster.controller().remote_copy_started(&request).unwrap();
    assert_eq!(
        records,
        vec![MetadataRecord::RemoteLogSegment(request.record())]
    );
    cluster.commit(&records);
    // Started: listed, but nothing is readable or safely uploaded yet.
    assert_eq!(states(&cluster), vec![(1, Started)]);
    assert_eq!(ends(&cluster), (None, None));
    let image = &cluster.image;
    assert!(image
        .remote_segment_for_offset(&topic_id(1), 0, 50)
        .is_none());

    assert_eq!(move_segment(&mut cluster, 1, Finished), Ok(1));
    assert_eq!(ends(&cluster), (Some(0), Some(99)));
    upload(&mut cluster, 2, 100, 199);
    assert_eq!(ends(&cluster), (Some(0), Some(199)));
    let image = &cluster.image;
    let holder = |offset| {
        let segment = image.remote_segment_for_offset(&topic_id(1), 0, offset);
        segment.map(|s| s.segment_id[0])
    };
    assert_eq!(
        [
            holder(0),
            holder(99),
            holder(100),
            holder(199),
            holder(200),
            holder(-1)
        ],
        [Some(1), Some(1), Some(2), Some(2), None, None]
    );
    // The other partition has nothing.
    assert_eq!(image.remote_segments(&topic_id(1), 1).count(), 0);
    assert_eq!(image.remote_log_end_offset(&topic_id(1), 1), None);
}

#[test]
fn a_stale_leader_epoch_is_fenced() {
    let mut cluster = tiered();
    let old = copy(&cluster, 1, 0, 99);
    assert_eq!(start(&mut cluster, &old), Ok(1));
    move_leadership(&mut cluster);
    let current = cluster.state(1, 0);

    // The deposed leader can neither start another copy nor finish its own.
    let error = start(&mut cluster, &copy_as(&old, 2)).unwrap_err();
    assert_eq!(
        error,
        MetadataError::FencedLeaderEpoch {
            topic_id: topic_id(1),
            partition: 0,
            leader_epoch: old.leader_epoch,
            current_leader_epoch: current.leader_epoch,
        }
    );
    assert_eq!(error.error_code().code(), 74);
    let finish = RemoteSegmentTransition {
        broker_id: old.broker_id,
        leader_epoch: old.leader_epoch,
        ..move_to(1, Finished, &cluster)
    };
    let error = transition(&mut cluster, &finish).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::FencedLeaderEpoch);

    // Nor may the new leader finish a copy started in another epoch (it
    // cannot know whether the objects are whole): it abandons it.
    let error = move_segment(&mut cluster, 1, Finished).unwrap_err();
    assert!(
        matches!(error, MetadataError::FencedLeaderEpoch { leader_epoch, .. } if leader_epoch == old.leader_epoch),
        "{error:?}"
    );
    assert_eq!(move_segment(&mut cluster, 1, Deleting), Ok(1));
    assert_eq!(move_segment(&mut cluster, 1, Deleted), Ok(1));
    assert_eq!(states(&cluster), vec![]);
    // And uploads the same offsets again, under a new id.
    upload(&mut cluster, 3, 0, 99);
    assert_eq!(states(&cluster), vec![(3, Finished)]);
}

/// `request` under another segment id.
fn copy_as(request: &RemoteCopyRequest, n: u8) -> RemoteCopyRequest {
    RemoteCopyRequest {
        segment_id: [n; 16],
        ..request.clone()
    }
}

#[test]
fn a_broker_that_does_not_lead_is_refused() {
    let mut cluster = tiered();
    let request = RemoteCopyRequest {
        broker_id: 1,
        ..copy(&cluster, 1, 0, 99)
    };
    let error = start(&mut cluster, &request).unwrap_err();
    assert_eq!(
        error,
        MetadataError::NotLeaderOrFollower {
            topic_id: topic_id(1),
            partition: 0,
            broker_id: 1,
            leader: 0,
        }
    );
    assert_eq!(error.error_code().code(), 6);
    assert_eq!(start_copy(&mut cluster, 1, 0, 99), Ok(1));
    let finish = RemoteSegmentTransition {
        broker_id: 2,
        ..move_to(1, Finished, &cluster)
    };
    let error = transition(&mut cluster, &finish).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::NotLeaderOrFollower);
    assert_eq!(states(&cluster), vec![(1, Started)]);
}

#[test]
fn a_leaderless_partition_is_led_by_nobody() {
    let mut cluster = tiered();
    for broker in 0..3 {
        let records = cluster
            .controller()
            .controlled_shutdown(broker, cluster.epochs[&broker])
            .unwrap();
        cluster.commit(&records);
    }
    assert_eq!(cluster.state(1, 0).leader, NO_LEADER);
    let request = copy(&cluster, 1, 0, 99);
    assert_eq!(request.broker_id, NO_LEADER);
    let error = start(&mut cluster, &request).unwrap_err();
    assert!(
        matches!(
            error,
            MetadataError::NotLeaderOrFollower {
                leader: NO_LEADER,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn uploads_extend_the_remote_log_without_a_gap() {
    let mut cluster = tiered();
    upload(&mut cluster, 1, 0, 99);
    for (base, end) in [(101, 200), (50, 99), (0, 10), (100, 99), (-1, 5)] {
        let error = start_copy(&mut cluster, 2, base, end).unwrap_err();
        assert_eq!(
            error.error_code(),
            ErrorCode::InvalidRequest,
            "{base}..={end}"
        );
        if base <= end && base >= 0 {
            assert_eq!(
                error,
                MetadataError::RemoteSegmentNotExtending {
                    topic_id: topic_id(1),
                    partition: 0,
                    base_offset: base,
                    end_offset: end,
                    remote_log_end_offset: Some(99),
                }
            );
        }
    }
    // An overlapping re-upload that extends the end is fine.
    upload(&mut cluster, 2, 50, 150);
    assert_eq!(ends(&cluster), (Some(0), Some(150)));
    let holder = cluster.image.remote_segment_for_offset(&topic_id(1), 0, 60);
    assert_eq!(holder.map(|s| s.segment_id[0]), Some(2));
    // Bad leader epochs within the segment are refused too.
    let mut request = copy(&cluster, 3, 151, 200);
    request.segment_leader_epochs = vec![(0, 160)];
    assert!(matches!(
        start(&mut cluster, &request),
        Err(MetadataError::InvalidRequest { .. })
    ));
}

#[test]
fn copies_started_on_an_empty_remote_log_cannot_finish_apart() {
    let mut cluster = tiered();
    // Nothing finished yet: both starts are accepted...
    assert_eq!(start_copy(&mut cluster, 1, 0, 99), Ok(1));
    assert_eq!(start_copy(&mut cluster, 2, 200, 299), Ok(1));
    assert_eq!(move_segment(&mut cluster, 2, Finished), Ok(1));
    // ...but the second to finish would leave 100..=199 out.
    let error = move_segment(&mut cluster, 1, Finished).unwrap_err();
    assert_eq!(
        error,
        MetadataError::RemoteLogGap {
            topic_id: topic_id(1),
            partition: 0,
            change: "finishing",
            base_offset: 0,
            end_offset: 99,
            remote_log: Some((200, 299)),
        }
    );
    assert_eq!(error.error_code(), ErrorCode::InvalidRequest);
    assert_eq!(ends(&cluster), (Some(200), Some(299)));
}

#[test]
fn deletion_moves_the_remote_log_start_and_removes_the_segment() {
    let mut cluster = tiered();
    for (n, base) in [(1, 0), (2, 100), (3, 200)] {
        upload(&mut cluster, n, base, base + 99);
    }
    // Deleting the middle segment would leave a gap.
    let error = move_segment(&mut cluster, 2, Deleting).unwrap_err();
    assert!(
        matches!(
            error,
            MetadataError::RemoteLogGap {
                change: "deleting",
                remote_log: Some((0, 299)),
                ..
            }
        ),
        "{error:?}"
    );
    // Retention deletes from the start: the log start moves when the
    // deletion starts, and the segment no longer serves reads.
    assert_eq!(move_segment(&mut cluster, 1, Deleting), Ok(1));
    assert_eq!(ends(&cluster), (Some(100), Some(299)));
    let image = &cluster.image;
    assert!(image
        .remote_segment_for_offset(&topic_id(1), 0, 50)
        .is_none());
    assert_eq!(
        states(&cluster),
        vec![(1, Deleting), (2, Finished), (3, Finished)]
    );
    assert_eq!(move_segment(&mut cluster, 1, Deleted), Ok(1));
    assert_eq!(states(&cluster), vec![(2, Finished), (3, Finished)]);
    // A truncation deletes from the end.
    assert_eq!(move_segment(&mut cluster, 3, Deleting), Ok(1));
    assert_eq!(ends(&cluster), (Some(100), Some(199)));
    // Transitions KIP-405 does not allow.
    for (n, to) in [(2, Deleted), (3, Finished), (3, Started)] {
        let error = move_segment(&mut cluster, n, to).unwrap_err();
        assert!(
            matches!(error, MetadataError::InvalidRemoteSegmentTransition { to: asked, .. } if asked == to),
            "{error:?}"
        );
        assert_eq!(error.error_code(), ErrorCode::InvalidRequest);
    }
    assert_eq!(start_copy(&mut cluster, 4, 200, 250), Ok(1));
    let error = move_segment(&mut cluster, 4, Deleted).unwrap_err();
    assert!(matches!(
        error,
        MetadataError::InvalidRemoteSegmentTransition {
            from: Started,
            to: Deleted,
            ..
        }
    ));
}

#[test]
fn retries_of_committed_requests_get_no_records() {
    let mut cluster = tiered();
    let request = copy(&cluster, 1, 0, 99);
    assert_eq!(start(&mut cluster, &request), Ok(1));
    assert_eq!(start(&mut cluster, &request), Ok(0));
    // The same id for another segment is not a retry.
    let other = RemoteCopyRequest {
        end_offset: 98,
        ..request.clone()
    };
    let error = start(&mut cluster, &other).unwrap_err();
    assert!(matches!(error, MetadataError::RemoteSegmentIdInUse { .. }));
    assert_eq!(error.error_code(), ErrorCode::InvalidRequest);
    for to in [Finished, Deleting, Deleted] {
        assert_eq!(move_segment(&mut cluster, 1, to), Ok(1));
        assert_eq!(move_segment(&mut cluster, 1, to), Ok(0));
    }
    // A retried finish is answered even after the leader moved on: the
    // state it asks for is committed.
    upload(&mut cluster, 2, 0, 99);
    let finish = move_to(2, Finished, &cluster);
    move_leadership(&mut cluster);
    assert_eq!(transition(&mut cluster, &finish), Ok(0));
    // A segment never seen cannot move (but is "deleted" already).
    let error = move_segment(&mut cluster, 9, Finished).unwrap_err();
    assert_eq!(
        error,
        MetadataError::UnknownRemoteSegment {
            topic_id: topic_id(1),
            partition: 0,
            segment_id: [9; 16],
        }
    );
    assert_eq!(error.error_code().code(), 91);
    assert_eq!(move_segment(&mut cluster, 9, Deleted), Ok(0));
}

#[test]
fn copies_need_remote_storage_enabled_and_a_known_partition() {
    let mut cluster = tiered();
    create(&mut cluster, "local", 2, None);
    create(&mut cluster, "off", 3, Some("false"));
    create(&mut cluster, "upper", 4, Some("TRUE"));
    for (id, name) in [(2, "local"), (3, "off")] {
        let request = RemoteCopyRequest {
            topic_id: topic_id(id),
            ..copy(&cluster, 1, 0, 99)
        };
        let error = start(&mut cluster, &request).unwrap_err();
        assert_eq!(
            error,
            MetadataError::RemoteStorageNotEnabled { topic: name.into() }
        );
        assert_eq!(error.error_code(), ErrorCode::InvalidRequest);
        assert!(error.to_string().contains("remote.storage.enable=true"));
    }
    let upper = RemoteCopyRequest {
        topic_id: topic_id(4),
        ..copy(&cluster, 1, 0, 99)
    };
    assert_eq!(start(&mut cluster, &upper), Ok(1));
    let unknown_topic = RemoteCopyRequest {
        topic_id: topic_id(9),
        ..copy(&cluster, 1, 0, 99)
    };
    let error = start(&mut cluster, &unknown_topic).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::UnknownTopicId);
    let unknown_partition = RemoteSegmentTransition {
        partition: 2,
        ..move_to(1, Finished, &cluster)
    };
    let error = transition(&mut cluster, &unknown_partition).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::UnknownTopicOrPartition);
}

#[test]
fn a_deleted_topic_keeps_its_segments_until_purged() {
    let mut cluster = tiered();
    create(&mut cluster, "plain", 2, Some("true"));
    upload(&mut cluster, 1, 0, 99);
    assert_eq!(start_copy(&mut cluster, 2, 100, 199), Ok(1));
    let purged = |cluster: &Cluster| cluster.controller().remote_topic_purged(&topic_id(1));
    let error = purged(&cluster).unwrap_err();
    assert_eq!(
        error,
        MetadataError::RemoteTopicNotDeleted {
            topic_id: topic_id(1)
        }
    );
    assert_eq!(error.error_code(), ErrorCode::InvalidRequest);

    for name in ["tiered", "plain"] {
        let records = cluster.controller().delete_topic(name).unwrap();
        cluster.commit(&records);
    }
    // Only the topic with remote segments is to purge, with every segment.
    let image = &cluster.image;
    let to_purge: Vec<_> = image.remote_topics_to_purge().collect();
    assert_eq!(to_purge.len(), 1);
    let (id, topic) = to_purge[0];
    assert_eq!((id, topic.name()), (topic_id(1), "tiered"));
    let segments: Vec<_> = topic
        .segments()
        .map(|s| (s.segment_id[0], s.state))
        .collect();
    assert_eq!(segments, vec![(1, Finished), (2, Started)]);
    assert_eq!(ends(&cluster), (None, None));
    assert_eq!(cluster.image.remote_segments(&topic_id(1), 0).count(), 0);
    // Its segments can no longer move; its name can be taken again, not
    // its id.
    let error = transition(&mut cluster, &move_to_gone(2, Finished)).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::UnknownTopicId);
    create(&mut cluster, "tiered", 5, Some("true"));
    // A CreateTopics with the deleted topic's id (a very late retry of its
    // creation) is refused, not proposed for the image to refuse.
    let request = CreateTopicRequest {
        name: "late".into(),
        topic_id: topic_id(1),
        assignment: TopicAssignment::Explicit(vec![(0, vec![0])]),
        configs: BTreeMap::new(),
    };
    let error = cluster.controller().create_topic(&request).unwrap_err();
    assert!(
        matches!(error, MetadataError::InvalidRequest { .. }),
        "{error:?}"
    );
    let refused = cluster.image.clone().apply(
        cluster.image.last_applied_offset() + 1,
        &MetadataRecord::Topic {
            name: "again".into(),
            topic_id: topic_id(1),
            configs: BTreeMap::new(),
        },
    );
    assert!(refused.is_err());

    let records = purged(&cluster).unwrap();
    assert_eq!(
        records,
        vec![MetadataRecord::RemoteTopicPurged {
            topic_id: topic_id(1)
        }]
    );
    cluster.commit(&records);
    assert_eq!(cluster.image.remote_topics_to_purge().count(), 0);
    // A retry, and a topic deleted without remote segments: nothing to do.
    assert_eq!(purged(&cluster), Ok(Vec::new()));
    let plain = cluster.controller().remote_topic_purged(&topic_id(2));
    assert_eq!(plain, Ok(Vec::new()));
}

/// A transition of segment `[n; 16]` of partition 0 of topic 1, which no
/// longer exists.
fn move_to_gone(n: u8, to: RemoteSegmentState) -> RemoteSegmentTransition {
    RemoteSegmentTransition {
        broker_id: 0,
        leader_epoch: 0,
        topic_id: topic_id(1),
        partition: 0,
        segment_id: [n; 16],
        state: to,
    }
}

#[test]
fn apply_refuses_odd_remote_records_and_changes_nothing() {
    let mut cluster = tiered();
    upload(&mut cluster, 1, 0, 99);
    let request = copy(&cluster, 2, 100, 199);
    let image = cluster.image.clone();
    let offset = image.last_applied_offset() + 1;
    let state = |n: u8, partition, state| MetadataRecord::RemoteLogSegmentState {
        topic_id: topic_id(1),
        partition,
        segment_id: [n; 16],
        state,
    };
    let segment = |edit: &dyn Fn(&mut RemoteSegmentRecord)| {
        let mut record = request.record();
        edit(&mut record);
        MetadataRecord::RemoteLogSegment(record)
    };
    let odd = [
        state(9, 0, Finished),
        state(1, 1, Deleting),
        state(1, 0, Started),
        state(1, 0, Deleted),
        state(1, 0, Finished),
        segment(&|r| r.segment_id = [1; 16]),
        segment(&|r| r.segment_id = [0; 16]),
        segment(&|r| r.partition = 5),
        segment(&|r| r.topic_id = topic_id(7)),
        segment(&|r| r.end_offset = 99),
        segment(&|r| r.size_bytes = -1),
        segment(&|r| r.state = Deleted),
        segment(&|r| r.segment_leader_epochs = Vec::new()),
        segment(&|r| r.segment_leader_epochs = vec![(0, 100), (0, 150)]),
        segment(&|r| r.segment_leader_epochs = vec![(1, 100)]),
        segment(&|r| r.segment_leader_epochs = vec![(0, 100), (1, 200)]),
        MetadataRecord::RemoteTopicPurged {
            topic_id: topic_id(1),
        },
        MetadataRecord::RemoteTopicPurged {
            topic_id: topic_id(8),
        },
    ];
    for record in &odd {
        let mut applied = image.clone();
        let result = applied.apply(offset, record);
        assert!(
            matches!(result, Err(MetadataError::InvalidRecord { .. })),
            "{record:?}: {result:?}"
        );
        assert_eq!(applied, image, "{record:?} changed the image");
    }
    // A snapshot may store a segment in the state it reached.
    let mut applied = image.clone();
    let finished = segment(&|r| r.state = Finished);
    assert_eq!(applied.apply(offset, &finished), Ok(()));
    applied.check_invariants();
    assert_eq!(applied.remote_log_end_offset(&topic_id(1), 0), Some(199));
}

#[test]
fn a_clone_shares_the_remote_segments_a_change_does_not_touch() {
    let mut cluster = tiered();
    upload(&mut cluster, 1, 0, 99);
    let other = RemoteCopyRequest {
        partition: 1,
        ..copy(&cluster, 2, 0, 99)
    };
    assert_eq!(start(&mut cluster, &other), Ok(1));
    let before = cluster.image.clone();
    assert_eq!(start_copy(&mut cluster, 3, 100, 199), Ok(1));
    let remote = |image: &MetadataImage, partition| {
        let segments = image.remote_log().partition(&topic_id(1), partition);
        segments.map(|s| s as *const _)
    };
    assert_eq!(remote(&before, 1), remote(&cluster.image, 1));
    assert_ne!(remote(&before, 0), remote(&cluster.image, 0));
}
