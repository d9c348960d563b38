//! Unit tests of partition reassignment (start, complete, cancel, replace),
//! on the controller tests' small cluster.

use super::super::error::MetadataError;
use super::super::record::{MetadataRecord, PartitionChangeRecord};
use super::tests::{topic_id, Cluster};
use super::*;
use engine::ErrorCode;

/// Four live brokers 0..4 and topic `t` (id 1): one partition on 0, 1, 2
/// led by 0, all in sync.
fn four_brokers_one_partition() -> Cluster {
    let mut cluster = Cluster::new();
    for broker in 0..4 {
        cluster.start_broker(broker, None, 0);
    }
    let records = cluster
        .controller()
        .create_topic(&CreateTopicRequest {
            name: "t".into(),
            topic_id: topic_id(1),
            assignment: TopicAssignment::Explicit(vec![(0, vec![0, 1, 2])]),
            configs: Default::default(),
        })
        .unwrap();
    cluster.commit(&records);
    let state = cluster.state(1, 0);
    assert_eq!((state.leader, state.isr.clone()), (0, vec![0, 1, 2]));
    cluster
}

fn reassign(cluster: &mut Cluster, target: Option<&[i32]>) -> Result<(), MetadataError> {
    let records = cluster.controller().alter_reassignment("t", 0, target)?;
    cluster.commit(&records);
    Ok(())
}

/// The leader's AlterPartition adding `joining` to the ISR.
fn join_isr(cluster: &mut Cluster, joining: i32) -> AlterPartitionOutcome {
    let mut isr = cluster.state(1, 0).isr;
    isr.push(joining);
    let state = cluster.state(1, 0);
    let request = AlterPartitionRequest {
        broker_id: state.leader,
        broker_epoch: cluster.epochs[&state.leader],
        topic_id: topic_id(1),
        partition: 0,
        leader_epoch: state.leader_epoch,
        partition_epoch: state.partition_epoch,
        new_isr: isr,
    };
    let outcome = cluster.controller().alter_partition(&request).unwrap();
    cluster.commit(&outcome.records);
    outcome
}

#[test]
fn a_moved_replica_catches_up_then_the_old_one_is_removed() {
    let mut cluster = four_brokers_one_partition();
    reassign(&mut cluster, Some(&[3, 1, 2])).unwrap();
    let state = cluster.state(1, 0);
    assert_eq!(state.replicas, vec![3, 1, 2, 0]);
    assert_eq!(state.adding_replicas, vec![3]);
    assert_eq!(state.removing_replicas, vec![0]);
    assert_eq!((state.leader, state.isr.clone()), (0, vec![0, 1, 2]));
    let listed = cluster.controller().ongoing_reassignments();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].adding.clone(), listed[0].removing.clone()),
        (vec![3], vec![0])
    );
    // Nothing completes before the new replica is in sync.
    assert!(cluster.controller().complete_reassignments().is_empty());

    let outcome = join_isr(&mut cluster, 3);
    let done = cluster.state(1, 0);
    assert_eq!(done.replicas, vec![3, 1, 2]);
    assert!(!done.is_reassigning());
    assert!(!done.isr.contains(&0));
    // The leader was removed: a new one from the target's ISR, next epoch.
    assert_eq!(done.leader, 3);
    assert_eq!(done.leader_epoch, state.leader_epoch + 1);
    assert_eq!(outcome.leader, 3);
    assert!(cluster.controller().ongoing_reassignments().is_empty());
}

#[test]
fn a_reassignment_that_only_removes_completes_at_once() {
    let mut cluster = four_brokers_one_partition();
    reassign(&mut cluster, Some(&[1, 2])).unwrap();
    let state = cluster.state(1, 0);
    assert_eq!(state.replicas, vec![1, 2]);
    assert_eq!(state.leader, 1);
    assert!(!state.is_reassigning());
}

#[test]
fn a_cancelled_reassignment_returns_to_the_original_replicas() {
    let mut cluster = four_brokers_one_partition();
    reassign(&mut cluster, Some(&[3, 1, 2])).unwrap();
    reassign(&mut cluster, None).unwrap();
    let state = cluster.state(1, 0);
    assert_eq!(state.replicas, vec![1, 2, 0]);
    assert_eq!(state.leader, 0);
    assert!(!state.is_reassigning());
    // Nothing to cancel now.
    let error = reassign(&mut cluster, None).unwrap_err();
    assert_eq!(error.error_code(), ErrorCode::NoReassignmentInProgress);
}

#[test]
fn a_new_target_replaces_the_reassignment_in_progress() {
    let mut cluster = four_brokers_one_partition();
    reassign(&mut cluster, Some(&[3, 1, 2])).unwrap();
    reassign(&mut cluster, Some(&[0, 3, 2])).unwrap();
    let state = cluster.state(1, 0);
    assert_eq!(state.replicas, vec![0, 3, 2, 1]);
    assert_eq!(state.adding_replicas, vec![3]);
    assert_eq!(state.removing_replicas, vec![1]);
    join_isr(&mut cluster, 3);
    let done = cluster.state(1, 0);
    assert_eq!(done.replicas, vec![0, 3, 2]);
    assert_eq!(done.leader, 0);
    assert_eq!(done.isr, vec![0, 2, 3]);
}

#[test]
fn bad_targets_are_refused_with_kafka_codes() {
    let mut cluster = four_brokers_one_partition();
    let code = |cluster: &mut Cluster, target: &[i32]| {
        reassign(cluster, Some(target)).unwrap_err().error_code()
    };
    assert_eq!(code(&mut cluster, &[]), ErrorCode::InvalidReplicaAssignment);
    assert_eq!(
        code(&mut cluster, &[1, 1]),
        ErrorCode::InvalidReplicaAssignment
    );
    assert_eq!(
        code(&mut cluster, &[1, 9]),
        ErrorCode::InvalidReplicaAssignment
    );
    let unknown = cluster
        .controller()
        .alter_reassignment("nope", 0, Some(&[1]))
        .unwrap_err();
    assert_eq!(unknown.error_code(), ErrorCode::UnknownTopicOrPartition);
    let partition = cluster
        .controller()
        .alter_reassignment("t", 5, Some(&[1]))
        .unwrap_err();
    assert_eq!(partition.error_code(), ErrorCode::UnknownTopicOrPartition);
}

#[test]
fn a_reassignment_survives_a_snapshot_and_the_codec() {
    let mut cluster = four_brokers_one_partition();
    reassign(&mut cluster, Some(&[3, 1, 2])).unwrap();
    let bytes = cluster.image.encode_snapshot();
    let restored = MetadataImage::decode_snapshot(&bytes).unwrap();
    assert_eq!(restored, cluster.image);
    let record = MetadataRecord::Reassignment {
        topic_id: topic_id(1),
        partition: 0,
        adding: vec![3],
        removing: vec![0],
    };
    assert_eq!(MetadataRecord::decode(&record.encode()), Ok(record));
}

#[test]
fn the_image_refuses_reassignments_outside_the_replicas() {
    let mut cluster = four_brokers_one_partition();
    let offset = cluster.image.last_applied_offset() + 1;
    let outside = MetadataRecord::Reassignment {
        topic_id: topic_id(1),
        partition: 0,
        adding: vec![3],
        removing: vec![],
    };
    assert!(cluster.image.apply(offset, &outside).is_err());
    let overlapping = MetadataRecord::Reassignment {
        topic_id: topic_id(1),
        partition: 0,
        adding: vec![1],
        removing: vec![1],
    };
    assert!(cluster.image.apply(offset, &overlapping).is_err());
    // New replicas end a reassignment.
    reassign(&mut cluster, Some(&[3, 1, 2])).unwrap();
    let change = MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: topic_id(1),
        partition: 0,
        leader: None,
        isr: None,
        replicas: Some(vec![3, 1, 2, 0]),
        eligible_leader_replicas: None,
        last_known_elr: None,
    });
    cluster.commit(&[change]);
    assert!(!cluster.state(1, 0).is_reassigning());
}
