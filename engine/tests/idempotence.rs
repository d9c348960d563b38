//! Idempotent producers on a real log: in-order sequences, resends answered
//! with the original offsets, gaps and fenced epochs refused — before and
//! after a restart, with and without the producer-state snapshot.

mod common;

use common::*;
use engine::batch::{BatchBuilder, Compression};
use engine::{FlushPolicy, PartitionLog, TopicConfig};
use std::path::Path;

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A batch of `count` records from producer `producer_id` at `epoch`, first sequence `sequence`.
fn producer_batch(producer_id: i64, epoch: i16, sequence: i32, count: usize) -> Vec<u8> {
    let mut builder =
        BatchBuilder::new(0, Compression::None).producer(producer_id, epoch, sequence, false);
    for i in 0..count {
        let key = format!("p{producer_id}-e{epoch}-s{}", sequence as i64 + i as i64);
        builder.push(i as i32, 1_000, Some(key.as_bytes()), Some(b"v"), &[]);
    }
    builder.build().unwrap()
}

fn small_segments() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([("segment.bytes", "1024")])
        .unwrap()
}

fn error_code(log: &PartitionLog, mut batch: Vec<u8>) -> i16 {
    log.append(&mut batch, 0).unwrap_err().error_code().code()
}

fn snapshot_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".snapshot"))
        .collect()
}

/// Producer 7 at epoch 0 writes 20 batches of 3 records (sequences 0..60),
/// then epoch 1 writes one batch at sequence 0. Returns the first offset of
/// every batch.
async fn write_history(log: &PartitionLog) -> Vec<i64> {
    let mut offsets = Vec::new();
    for i in 0..20 {
        let mut b = producer_batch(7, 0, i * 3, 3);
        let r = log.append(&mut b, 0).unwrap();
        assert!(!r.duplicate);
        assert_eq!(
            (r.base_offset, r.last_offset),
            (i64::from(i) * 3, i64::from(i) * 3 + 2)
        );
        offsets.push(r.base_offset);
    }
    // A producer without an id interleaves freely.
    let mut plain = batch(0, 2, 1_000);
    log.append(&mut plain, 0).unwrap();
    // A new epoch starts at sequence 0.
    let mut b = producer_batch(7, 1, 0, 2);
    let r = log.append(&mut b, 0).unwrap();
    assert_eq!(r.base_offset, 62);
    offsets.push(r.base_offset);
    log.flush().await.unwrap();
    offsets
}

/// The rules, checked against the state `write_history` left (epoch 1,
/// last batch sequences 0..=1 at offsets 62..=63). Leaves the log unchanged.
async fn check_rules(log: &PartitionLog) {
    let end = log.log_end_offset();
    // The resend of the last batch: the original offsets, nothing appended.
    let mut resend = producer_batch(7, 1, 0, 2);
    let r = log.append(&mut resend, 0).unwrap();
    assert!(r.duplicate);
    assert_eq!((r.base_offset, r.last_offset, r.record_count), (62, 63, 0));
    assert_eq!(log.log_end_offset(), end, "a duplicate appends nothing");
    // A gap, an old epoch, a new epoch not at 0.
    assert_eq!(error_code(log, producer_batch(7, 1, 5, 1)), 45);
    assert_eq!(error_code(log, producer_batch(7, 0, 60, 1)), 47);
    assert_eq!(error_code(log, producer_batch(7, 2, 3, 1)), 45);
    // The epoch-0 batches are forgotten once the epoch moved on.
    assert_eq!(error_code(log, producer_batch(7, 0, 57, 3)), 47);
    assert_eq!(log.log_end_offset(), end, "refused batches append nothing");
    let entry = log.producer_entry(7).unwrap();
    assert_eq!((entry.producer_epoch, entry.last_sequence()), (1, 1));
}

#[test]
fn sequences_duplicates_gaps_and_epochs() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let (_m, log) = open_log(config(&path, FlushPolicy::Fsync), "t", small_segments()).await;
        // Before the epoch bump: resends of any of the last five batches are duplicates.
        for i in 0..6 {
            let mut b = producer_batch(7, 0, i * 3, 3);
            log.append(&mut b, 0).unwrap();
        }
        for (i, expected_base) in [(1, 3), (5, 15)] {
            let mut resend = producer_batch(7, 0, i * 3, 3);
            let r = log.append(&mut resend, 0).unwrap();
            assert!(r.duplicate);
            assert_eq!(
                (r.base_offset, r.last_offset),
                (expected_base, expected_base + 2)
            );
        }
        // The sixth-last batch is no longer remembered: its resend is out of order.
        assert_eq!(error_code(&log, producer_batch(7, 0, 0, 3)), 45);
        // A payload of two batches where the second has a gap: nothing is appended.
        let mut payload = producer_batch(7, 0, 18, 1);
        payload.extend(producer_batch(7, 0, 25, 1));
        assert_eq!(
            log.append(&mut payload, 0).unwrap_err().error_code().code(),
            45
        );
        assert_eq!(log.log_end_offset(), 18);
        // Two in-order batches in one payload are taken together.
        let mut payload = producer_batch(7, 0, 18, 1);
        payload.extend(producer_batch(7, 0, 19, 2));
        let r = log.append(&mut payload, 0).unwrap();
        assert_eq!((r.base_offset, r.last_offset), (18, 20));
        // A resend of that whole payload is a duplicate; half of it new is refused.
        let mut payload = producer_batch(7, 0, 18, 1);
        payload.extend(producer_batch(7, 0, 19, 2));
        let r = log.append(&mut payload, 0).unwrap();
        assert!(r.duplicate);
        assert_eq!((r.base_offset, r.last_offset), (18, 20));
        let mut payload = producer_batch(7, 0, 19, 2);
        payload.extend(producer_batch(7, 0, 21, 1));
        assert_eq!(
            log.append(&mut payload, 0).unwrap_err().error_code().code(),
            45
        );
        // An unknown producer may start at any sequence (Kafka since 2.5).
        let mut b = producer_batch(8, 3, 1234, 1);
        assert!(!log.append(&mut b, 0).unwrap().duplicate);
        // An idempotent batch without a sequence is not a valid record.
        assert_eq!(error_code(&log, producer_batch(9, 0, -1, 1)), 87);
        // Everything appended once: the keys of producer 7 are unique.
        log.flush().await.unwrap();
        let keys = read_all(&log, 0).await;
        let mut unique: Vec<_> = keys.iter().map(|(_, k)| k.clone()).collect();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), keys.len());
    });
}

#[test]
fn producer_state_survives_restart_with_and_without_snapshot() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        let offsets = write_history(&log).await;
        assert_eq!(offsets.len(), 21);
        assert!(log.segment_count() > 2, "small segments roll");
        check_rules(&log).await;
        // A clean shutdown checkpoints (the roll snapshots exist already).
        log.checkpoint_producer_state().unwrap();
        m.shutdown().await.unwrap();
    });
    let partition_dir = path.join("t-0");
    let snapshots = snapshot_files(&partition_dir);
    assert!(!snapshots.is_empty(), "snapshots are written");
    assert!(
        snapshots.contains(&format!("{:020}.snapshot", 64)),
        "{snapshots:?}"
    );

    // Restart from the snapshot.
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        assert_eq!(log.log_end_offset(), 64);
        check_rules(&log).await;
        m.shutdown().await.unwrap();
    });

    // Restart with every snapshot deleted: rebuilt from the whole log.
    for name in snapshot_files(&partition_dir) {
        std::fs::remove_file(partition_dir.join(name)).unwrap();
    }
    let p = path.clone();
    run(async move {
        let (m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        check_rules(&log).await;
        // And the producer goes on where it was.
        let mut b = producer_batch(7, 1, 2, 1);
        let r = log.append(&mut b, 0).unwrap();
        assert_eq!((r.base_offset, r.duplicate), (64, false));
        log.flush().await.unwrap();
        m.shutdown().await.unwrap();
    });
    assert!(
        !snapshot_files(&partition_dir).is_empty(),
        "the rebuild writes a snapshot"
    );

    // An older snapshot only (the newest deleted): the replay covers the rest.
    let mut snapshots = snapshot_files(&partition_dir);
    snapshots.sort();
    if snapshots.len() > 1 {
        std::fs::remove_file(partition_dir.join(snapshots.last().unwrap())).unwrap();
    }
    let p = path.clone();
    run(async move {
        let (_m, log) = open_log(config(&p, FlushPolicy::Fsync), "t", small_segments()).await;
        let mut resend = producer_batch(7, 1, 2, 1);
        let r = log.append(&mut resend, 0).unwrap();
        assert_eq!((r.base_offset, r.duplicate), (64, true));
        assert_eq!(error_code(&log, producer_batch(7, 1, 4, 1)), 45);
    });
}

#[test]
fn truncation_and_expiry_forget_producer_state() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let mut engine_config = config(&path, FlushPolicy::Fsync);
        engine_config.producer_id_expiration_ms = 60_000;
        let (_m, log) = open_log(engine_config, "t", small_segments()).await;
        write_history(&log).await;
        // Cut the epoch-1 batch (offset 62) and the plain batch: epoch 0 is current again.
        log.truncate_to(60).await.unwrap();
        assert_eq!(log.log_end_offset(), 60);
        let entry = log.producer_entry(7).unwrap();
        assert_eq!((entry.producer_epoch, entry.last_sequence()), (0, 59));
        let mut resend = producer_batch(7, 0, 57, 3);
        let r = log.append(&mut resend, 0).unwrap();
        assert_eq!((r.base_offset, r.duplicate), (57, true));
        let mut next = producer_batch(7, 0, 60, 1);
        assert_eq!(log.append(&mut next, 0).unwrap().base_offset, 60);
        // Not idle long enough: kept. Idle past the expiration: forgotten,
        // and the producer is then unknown (any sequence starts it).
        assert_eq!(log.expire_producers(log.clock().now_ms()), 0);
        assert_eq!(log.expire_producers(log.clock().now_ms() + 60_000), 1);
        assert!(log.producer_entry(7).is_none());
        let mut b = producer_batch(7, 0, 500, 1);
        assert!(!log.append(&mut b, 0).unwrap().duplicate);
    });
}
