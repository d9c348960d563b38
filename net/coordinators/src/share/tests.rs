use super::*;
use engine::ErrorCode;

fn batch(first_offset: i64, last_offset: i64) -> BatchSpan {
    BatchSpan {
        first_offset,
        last_offset,
        control: false,
        aborted: false,
    }
}

fn settings() -> ShareSettings {
    ShareSettings {
        lock_duration_ms: 1_000,
        delivery_limit: 3,
        max_in_flight: 100,
    }
}

fn range(first_offset: i64, last_offset: i64, delivery_count: i16) -> AcquiredRange {
    AcquiredRange {
        first_offset,
        last_offset,
        delivery_count,
    }
}

#[test]
fn two_members_split_the_records() {
    let s = settings();
    let mut p = SharePartition::new(0);
    let a = p.acquire("a", &[batch(0, 4), batch(5, 9)], 5, 0, &s);
    assert_eq!(a, vec![range(0, 4, 1)]);
    assert_eq!(p.next_read_offset(), 5);
    let b = p.acquire("b", &[batch(5, 9)], 5, 0, &s);
    assert_eq!(b, vec![range(5, 9, 1)]);
    // Nothing is left for a third fetch of the same batches.
    assert!(p
        .acquire("c", &[batch(0, 4), batch(5, 9)], 5, 0, &s)
        .is_empty());
    p.acknowledge("a", (0, 4), &[AckType::Accept], &s).unwrap();
    assert_eq!(p.start_offset(), 5);
    p.acknowledge("b", (5, 9), &[AckType::Accept], &s).unwrap();
    assert_eq!(
        (p.start_offset(), p.end_offset(), p.in_flight()),
        (10, 10, 0)
    );
}

#[test]
fn only_the_holder_acknowledges() {
    let s = settings();
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 1)], 10, 0, &s);
    let err = p.acknowledge("b", (0, 1), &[AckType::Accept], &s);
    assert_eq!(err, Err(ErrorCode::InvalidRecordState));
    // Beyond what was delivered.
    let err = p.acknowledge("a", (0, 2), &[AckType::Accept], &s);
    assert_eq!(err, Err(ErrorCode::InvalidRecordState));
    // A per-offset list of the wrong length.
    let err = p.acknowledge("a", (0, 1), &[AckType::Accept; 3], &s);
    assert_eq!(err, Err(ErrorCode::InvalidRequest));
    assert_eq!(
        p.start_offset(),
        0,
        "a refused acknowledgement changes nothing"
    );
    p.acknowledge("a", (0, 1), &[AckType::Accept, AckType::Reject], &s)
        .unwrap();
    assert_eq!(p.start_offset(), 2);
}

#[test]
fn a_release_is_delivered_again_with_a_higher_count() {
    let s = settings();
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 2)], 10, 0, &s);
    p.acknowledge(
        "a",
        (0, 2),
        &[AckType::Accept, AckType::Release, AckType::Accept],
        &s,
    )
    .unwrap();
    assert_eq!(p.start_offset(), 1);
    assert_eq!(p.next_read_offset(), 1);
    let again = p.acquire("b", &[batch(0, 2)], 10, 0, &s);
    assert_eq!(again, vec![range(1, 1, 2)]);
}

#[test]
fn the_attempt_limit_archives() {
    let s = settings();
    let mut p = SharePartition::new(0);
    for delivery in 1..=3 {
        let got = p.acquire("a", &[batch(0, 0)], 10, 0, &s);
        assert_eq!(got, vec![range(0, 0, delivery)]);
        p.acknowledge("a", (0, 0), &[AckType::Release], &s).unwrap();
    }
    // The third release reached the limit: archived, and the start moved.
    assert_eq!(p.start_offset(), 1);
    assert!(p.acquire("a", &[batch(0, 0)], 10, 0, &s).is_empty());
}

#[test]
fn an_expired_lock_gives_the_records_back() {
    let s = settings();
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 1)], 10, 0, &s);
    assert_eq!(p.next_deadline_ms(), Some(1_000));
    assert!(p.acquire("b", &[batch(0, 1)], 10, 999, &s).is_empty());
    let got = p.acquire("b", &[batch(0, 1)], 10, 1_000, &s);
    assert_eq!(got, vec![range(0, 1, 2)]);
    // The first holder's late acknowledgement is refused.
    let late = p.acknowledge("a", (0, 1), &[AckType::Accept], &s);
    assert_eq!(late, Err(ErrorCode::InvalidRecordState));
}

#[test]
fn a_member_that_leaves_gives_its_records_back() {
    let s = settings();
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 1)], 10, 0, &s);
    p.release_member("a", &s);
    assert_eq!(
        p.acquire("b", &[batch(0, 1)], 10, 0, &s),
        vec![range(0, 1, 2)]
    );
}

#[test]
fn control_batches_and_gaps_are_never_delivered() {
    let s = settings();
    let mut p = SharePartition::new(0);
    let marker = BatchSpan {
        control: true,
        ..batch(3, 3)
    };
    let got = p.acquire("a", &[batch(0, 1), marker, batch(6, 7)], 10, 0, &s);
    // Offset 2 is a gap (compacted), 3 a marker, 4-5 a gap.
    assert_eq!(got, vec![range(0, 1, 1), range(6, 7, 1)]);
    p.acknowledge("a", (0, 1), &[AckType::Accept], &s).unwrap();
    assert_eq!(p.start_offset(), 6);
}

#[test]
fn max_records_ends_an_acquisition_at_a_batch_boundary() {
    let s = settings();
    let mut p = SharePartition::new(0);
    let got = p.acquire("a", &[batch(0, 4), batch(5, 9)], 3, 0, &s);
    assert_eq!(got, vec![range(0, 4, 1)], "a batch begun is taken whole");
    assert_eq!(p.end_offset(), 5, "no batch past the limit is taken on");
    let got = p.acquire("b", &[batch(0, 4), batch(5, 9)], 3, 0, &s);
    assert_eq!(got, vec![range(5, 9, 1)]);
    let got = p.acquire("c", &[batch(10, 11), batch(12, 13)], 3, 0, &s);
    assert_eq!(
        got,
        vec![range(10, 13, 1)],
        "batches are taken until the limit is reached"
    );
    p.acknowledge("a", (0, 2), &[AckType::Release], &s).unwrap();
    let got = p.acquire("d", &[batch(0, 4), batch(5, 9)], 1, 0, &s);
    assert_eq!(
        got,
        vec![range(0, 2, 2)],
        "a redelivery takes what is available of its batch"
    );
}

#[test]
fn a_full_window_takes_no_new_batch() {
    let s = ShareSettings {
        max_in_flight: 4,
        ..settings()
    };
    let mut p = SharePartition::new(0);
    assert_eq!(
        p.acquire("a", &[batch(0, 4)], 100, 0, &s),
        vec![range(0, 4, 1)]
    );
    assert!(!p.has_room(&s));
    assert!(p.acquire("b", &[batch(5, 6)], 100, 0, &s).is_empty());
    p.acknowledge("a", (0, 4), &[AckType::Accept], &s).unwrap();
    assert_eq!(
        p.acquire("b", &[batch(5, 6)], 100, 0, &s),
        vec![range(5, 6, 1)]
    );
}

#[test]
fn a_moved_log_start_skips_the_window_ahead() {
    let s = settings();
    let mut p = SharePartition::new(0);
    p.acquire("a", &[batch(0, 9)], 100, 0, &s);
    p.skip_to(5);
    assert_eq!((p.start_offset(), p.in_flight()), (5, 5));
    p.skip_to(20);
    assert_eq!(
        (p.start_offset(), p.end_offset(), p.in_flight()),
        (20, 20, 0)
    );
    assert_eq!(
        p.acquire("a", &[batch(20, 21)], 100, 0, &s),
        vec![range(20, 21, 1)]
    );
}

#[test]
fn wire_ack_types() {
    assert_eq!(AckType::from_wire(0), Some(AckType::Gap));
    assert_eq!(AckType::from_wire(1), Some(AckType::Accept));
    assert_eq!(AckType::from_wire(2), Some(AckType::Release));
    assert_eq!(AckType::from_wire(3), Some(AckType::Reject));
    assert_eq!(AckType::from_wire(4), None);
}

#[test]
fn a_snapshot_restores_the_window_with_nothing_acquired() {
    let s = settings();
    let mut p = SharePartition::new(10);
    p.acquire("a", &[batch(10, 14), batch(16, 17)], 100, 0, &s);
    p.acknowledge("a", (11, 11), &[AckType::Accept], &s)
        .unwrap();
    p.acknowledge("a", (12, 12), &[AckType::Release], &s)
        .unwrap();
    p.acknowledge("a", (13, 13), &[AckType::Reject], &s)
        .unwrap();
    let snapshot = p.snapshot(3, 7);
    assert_eq!((snapshot.leader_epoch, snapshot.sequence), (3, 7));
    let bytes = state::encode_value(&snapshot);
    let decoded = state::decode_value(&bytes).unwrap();
    assert_eq!(decoded, snapshot);
    let mut restored = SharePartition::restore(&decoded).unwrap();
    assert_eq!(restored.start_offset(), 10);
    assert_eq!(restored.end_offset(), 18);
    // 10, 12, 14, 16, 17 come back (10, 14, 16, 17 were held by "a"); 11
    // and 13 are done, 15 was a gap.
    let again = restored.acquire("b", &[batch(10, 14), batch(16, 17)], 100, 0, &s);
    assert_eq!(
        again,
        vec![
            range(10, 10, 2),
            range(12, 12, 2),
            range(14, 14, 2),
            range(16, 17, 2)
        ]
    );
}

#[test]
fn share_keys_and_bad_values_decode_as_they_should() {
    let key = ShareKey {
        group: "g".into(),
        topic_id: [9; 16],
        partition: 4,
    };
    assert_eq!(state::decode_key(&state::encode_key(&key)), Ok(key));
    assert_eq!(state::decode_value(&[]), Err(StateError::Truncated));
    assert_eq!(state::decode_value(&[7]), Err(StateError::Version(7)));
    let mut huge = state::encode_value(&SharePartition::new(0).snapshot(0, 0));
    huge[21..25].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(state::decode_value(&huge), Err(StateError::Truncated));
    // The state epoch survives; version 0 (without it) reads as epoch 0.
    let reset = ShareSnapshot::reset(3, 7, 42);
    let bytes = state::encode_value(&reset);
    assert_eq!(state::decode_value(&bytes), Ok(reset.clone()));
    let mut version_0 = bytes[..9].to_vec();
    version_0[0] = 0;
    version_0.extend_from_slice(&bytes[13..]);
    let read = state::decode_value(&version_0).expect("a version 0 value");
    assert_eq!((read.state_epoch, read.start_offset), (0, 42));
    assert!(reset.holds_state());
    assert!(!ShareSnapshot::reset(3, 8, -5).holds_state());
    let bad = ShareSnapshot {
        leader_epoch: 0,
        sequence: 0,
        state_epoch: 0,
        start_offset: 0,
        runs: vec![state::StateRun {
            first_offset: 0,
            last_offset: 0,
            state: 1,
            delivery_count: 1,
        }],
    };
    assert_eq!(
        SharePartition::restore(&bad),
        Err(StateError::RecordState(1))
    );
}
