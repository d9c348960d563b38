//! The log's side of tiered storage (KIP-405) on a real disk: which sealed
//! segment is next to upload, what it carries, local retention held back
//! until a segment is uploaded, reads below the local start sent to the
//! remote copy, and ListOffsets' earliest, earliest-local and
//! earliest-pending-upload.

mod common;

use common::*;
use engine::log::ReadMode;
use engine::{EngineError, FlushPolicy, RemoteSpan, TopicConfig};

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A tiered topic keeping one byte locally: everything uploaded may go.
fn tiered(extra: &[(&str, &str)]) -> TopicConfig {
    let mut overrides = vec![
        ("segment.bytes", "4096"),
        ("remote.storage.enable", "true"),
        ("local.retention.bytes", "1"),
    ];
    overrides.extend_from_slice(extra);
    TopicConfig::default().with_overrides(overrides).unwrap()
}

#[test]
fn sealed_segments_are_offered_in_order_with_their_indexes() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Os), "t", tiered(&[])).await;
        let now_ms = log.clock().now_ms();
        // About 3 KiB per batch of 100: each batch rolls a segment.
        for first in [0, 100, 200] {
            append_durable(&log, batch(first, 100, now_ms)).await;
        }
        assert_eq!(log.segment_base_offsets(), vec![0, 100, 200]);
        let first = log.segment_to_upload(-1).await.unwrap().unwrap();
        assert_eq!((first.base_offset, first.end_offset), (0, 99));
        let on_disk = std::fs::read(&first.log_path).unwrap();
        assert!(first.size_bytes > 0 && first.size_bytes <= on_disk.len() as u64);
        assert!(first.max_timestamp_ms >= now_ms);
        assert_eq!(first.leader_epochs, vec![(0, 0)]);
        // The index is Kafka's format: 8-byte entries.
        assert_eq!(first.offset_index.len() % 8, 0);
        assert_eq!(first.time_index.len() % 12, 0);
        let second = log.segment_to_upload(99).await.unwrap().unwrap();
        assert_eq!((second.base_offset, second.end_offset), (100, 199));
        // The active segment is never offered.
        assert!(log.segment_to_upload(199).await.unwrap().is_none());
    });
}

#[test]
fn local_retention_waits_for_the_upload_and_reads_below_go_remote() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Os), "t", tiered(&[])).await;
        let now_ms = log.clock().now_ms();
        for first in [0, 100, 200, 300] {
            append_durable(&log, batch(first, 100, now_ms)).await;
        }
        // Nothing uploaded: local retention (1 byte) deletes nothing.
        assert_eq!(log.apply_retention().unwrap(), 0);
        assert_eq!(log.offset_for_timestamp(-5).await.unwrap(), Some((0, -1)));
        // Two segments uploaded: they go, the third (not uploaded) stays.
        log.set_remote_span(RemoteSpan {
            start_offset: Some(0),
            end_offset: Some(199),
        });
        assert_eq!(log.apply_retention().unwrap(), 2);
        assert_eq!(log.segment_base_offsets(), vec![200, 300]);
        assert_eq!(log.log_start_offset(), 200);
        assert_eq!(log.earliest_offset(), 0);
        // Earliest is the remote start, earliest-local the local one,
        // earliest-pending-upload the first offset not uploaded.
        assert_eq!(log.offset_for_timestamp(-2).await.unwrap(), Some((0, -1)));
        assert_eq!(log.offset_for_timestamp(-4).await.unwrap(), Some((200, -1)));
        assert_eq!(log.offset_for_timestamp(-5).await.unwrap(), Some((200, -1)));
        match log.read(150, 1 << 20, ReadMode::Copy).await {
            Err(EngineError::OffsetInRemoteStorage {
                offset: 150,
                local_log_start_offset: 200,
            }) => {}
            other => panic!("expected a remote read, got {other:?}"),
        }
        // A read answers the Kafka-visible log start.
        let read = log.read(200, 1 << 20, ReadMode::Copy).await.unwrap();
        assert_eq!(read.log_start_offset, 0);
        // Below the remote start too: out of range, naming the remote start.
        log.set_remote_span(RemoteSpan {
            start_offset: Some(100),
            end_offset: Some(199),
        });
        match log.read(50, 1 << 20, ReadMode::Copy).await {
            Err(EngineError::OffsetOutOfRange {
                log_start_offset: 100,
                ..
            }) => {}
            other => panic!("expected out of range, got {other:?}"),
        }
    });
}

#[test]
fn copy_disabled_or_untiered_topics_keep_kafkas_retention() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let topic = tiered(&[
            ("remote.log.copy.disable", "true"),
            ("retention.bytes", "1"),
        ]);
        let (_m, log) = open_log(config(&path, FlushPolicy::Os), "t", topic).await;
        let now_ms = log.clock().now_ms();
        for first in [0, 100, 200] {
            append_durable(&log, batch(first, 100, now_ms)).await;
        }
        // Copies are off: retention.bytes applies locally, uploaded or not
        // (at the rolls that recycled a file, or now).
        log.apply_retention().unwrap();
        assert_eq!(log.segment_base_offsets(), vec![200]);
        assert_eq!(log.earliest_offset(), 200);
        let plain = TopicConfig::default();
        let (_m2, other) = open_log(config(&path.join("b"), FlushPolicy::Os), "u", plain).await;
        assert_eq!(other.offset_for_timestamp(-5).await.unwrap(), None);
    });
}

#[test]
fn delete_records_hides_the_remote_part_too_and_survives_a_restart() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (manager, log) = open_log(config(&path, FlushPolicy::Os), "t", tiered(&[])).await;
        let now_ms = log.clock().now_ms();
        for first in [0, 100, 200, 300] {
            append_durable(&log, batch(first, 100, now_ms)).await;
        }
        log.set_remote_span(RemoteSpan {
            start_offset: Some(0),
            end_offset: Some(199),
        });
        assert_eq!(log.apply_retention().unwrap(), 2);
        // Below the local start: only the remote part moves.
        assert_eq!(log.delete_records(150).await.unwrap(), 150);
        assert_eq!((log.earliest_offset(), log.log_start_offset()), (150, 200));
        match log.read(120, 1 << 20, ReadMode::Copy).await {
            Err(EngineError::OffsetOutOfRange {
                log_start_offset: 150,
                ..
            }) => {}
            other => panic!("expected out of range, got {other:?}"),
        }
        assert!(matches!(
            log.read(160, 1 << 20, ReadMode::Copy).await,
            Err(EngineError::OffsetInRemoteStorage { offset: 160, .. })
        ));
        drop(log);
        manager.shutdown().await.unwrap();
        drop(manager);
        let (_m, log) = open_log(config(&path, FlushPolicy::Os), "t", tiered(&[])).await;
        assert_eq!(log.deleted_below(), 150);
    });
}

/// A batch of `count` records from idempotent producer `producer_id`
/// (epoch 0), its first sequence `sequence`.
fn producer_batch(producer_id: i64, sequence: i32, count: usize, timestamp_ms: i64) -> Vec<u8> {
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None)
        .producer(producer_id, 0, sequence, false);
    for i in 0..count {
        // About 40 bytes a record: a batch of 100 rolls a 4 KiB segment.
        let value = format!("p{producer_id}-{:036}", sequence as usize + i);
        builder.push(i as i32, timestamp_ms, None, Some(value.as_bytes()), &[]);
    }
    builder.build().unwrap()
}

#[test]
fn a_follower_starts_after_a_remote_segment_with_its_epochs_and_producers() {
    let dir = tempdir();
    let (leader_path, follower_path) = (dir.path().join("leader"), dir.path().join("follower"));
    run(async move {
        let topic = tiered(&[]);
        let (_m, leader) =
            open_log(config(&leader_path, FlushPolicy::Os), "t", topic.clone()).await;
        let now_ms = leader.clock().now_ms();
        // Each batch of 100 rolls a segment: producer 7 writes the first
        // two, producer 8 the third.
        append_durable(&leader, producer_batch(7, 0, 100, now_ms)).await;
        append_durable(&leader, producer_batch(7, 100, 100, now_ms)).await;
        append_durable(&leader, producer_batch(8, 0, 100, now_ms)).await;
        // Nothing uploaded yet: every segment keeps its snapshot, each
        // carried by the segment it ends.
        let first = leader.segment_to_upload(-1).await.unwrap().unwrap();
        assert!(first.producer_snapshot.is_some());
        let second = leader.segment_to_upload(99).await.unwrap().unwrap();
        assert_eq!((second.base_offset, second.end_offset), (100, 199));
        assert_eq!(second.epochs_to_end, vec![(0, 0)]);
        let aux = engine::log::RemoteAuxState {
            epochs: second.epochs_to_end.clone(),
            producer_snapshot: second.producer_snapshot.clone(),
        };

        let (manager, follower) =
            open_log(config(&follower_path, FlushPolicy::Os), "t", topic.clone()).await;
        follower
            .start_after_remote_segment(200, aux.clone())
            .await
            .unwrap();
        assert_eq!(
            (follower.log_start_offset(), follower.log_end_offset()),
            (200, 200)
        );
        let entry = follower
            .producer_entry(7)
            .expect("producer 7 from the snapshot");
        assert_eq!(entry.last_sequence(), 199);
        assert!(
            follower.producer_entry(8).is_none(),
            "8 wrote after the segment"
        );
        let epochs: Vec<_> = (follower.leader_epoch_cache().entries().iter())
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(epochs, vec![(0, 0)]);
        // The state survives a restart.
        drop(follower);
        manager.shutdown().await.unwrap();
        drop(manager);
        let (_m, reopened) =
            open_log(config(&follower_path, FlushPolicy::Os), "t", topic.clone()).await;
        assert_eq!(
            reopened.producer_entry(7).map(|e| e.last_sequence()),
            Some(199)
        );
        // A snapshot of another offset is left out, never misapplied.
        reopened.start_after_remote_segment(300, aux).await.unwrap();
        assert_eq!(reopened.log_start_offset(), 300);
        assert!(reopened.producer_entry(7).is_none());
    });
}
