//! Replication's storage half on a real disk: a follower log copies a
//! leader log's batches with `append_replicated` and ends up equal to it
//! (bytes, offsets, producer state, transactions, epoch cache), across
//! segment rolls and a restart; a gap or an overlap is refused without a
//! trace; a follower cuts its divergent tail and follows a new leader; and
//! the high watermark's replication cap bounds what readers see and wakes
//! the waiters when it moves.

mod common;

use common::*;
use engine::batch::{self, BatchBuilder, Compression};
use engine::log::ReadMode;
use engine::{EngineError, ErrorCode, FlushPolicy, PartitionLog, ReadData, TopicConfig};
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// 2 KiB segments: the batches below are ~100-200 bytes, so the logs roll
/// every dozen batches or so.
fn small_segments() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([("segment.bytes", "2048")])
        .unwrap()
}

/// A batch of `count` records of a producer, keys from `first`.
fn producer_batch(
    producer_id: i64,
    producer_epoch: i16,
    sequence: i32,
    transactional: bool,
    first: usize,
    count: usize,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None).producer(
        producer_id,
        producer_epoch,
        sequence,
        transactional,
    );
    for i in 0..count {
        let key = format!("key-{}", first + i);
        builder.push(
            i as i32,
            1_000 + i as i64,
            Some(key.as_bytes()),
            Some(b"v"),
            &[],
        );
    }
    builder.build().unwrap()
}

/// Fills a leader over three leader epochs: plain batches, an idempotent
/// producer (7), a committed transaction (producer 9), an aborted one
/// (producer 10) and one left open (producer 11). Waits until durable.
async fn fill_leader(log: &PartitionLog) {
    log.set_leader_epoch(1);
    for i in 0..6 {
        log.append(&mut batch(i * 5, 5, 1_000), 1).unwrap();
    }
    for sequence in 0..4 {
        let mut b = producer_batch(7, 0, sequence * 3, false, 100, 3);
        log.append(&mut b, 1).unwrap();
    }
    log.set_leader_epoch(2);
    for sequence in 0..3 {
        let mut b = producer_batch(9, 2, sequence * 2, true, 200, 2);
        log.append(&mut b, 2).unwrap();
        let mut b = producer_batch(10, 0, sequence * 2, true, 300, 2);
        log.append(&mut b, 2).unwrap();
    }
    log.append_control(9, 2, true, 4).unwrap();
    log.append_control(10, 0, false, 4).unwrap();
    log.set_leader_epoch(5);
    for i in 0..24 {
        log.append(&mut batch(400 + i * 5, 5, 2_000), 5).unwrap();
    }
    let mut b = producer_batch(11, 0, 0, true, 500, 2);
    log.append(&mut b, 5).unwrap();
    for sequence in 4..6 {
        let mut b = producer_batch(7, 0, sequence * 3, false, 600, 3);
        log.append(&mut b, 5).unwrap();
    }
    log.flush().await.unwrap();
}

/// Every byte a reader gets from `from` up to the high watermark, as one
/// buffer of whole batches.
async fn log_bytes(log: &PartitionLog, from: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < log.high_watermark() {
        let result = log.read(offset, 1 << 20, ReadMode::Copy).await.unwrap();
        let ReadData::Bytes(bytes) = result.data else {
            panic!("nothing read at {offset} below hw {}", log.high_watermark());
        };
        offset = last_offset(&bytes) + 1;
        out.extend_from_slice(&bytes);
    }
    out
}

/// Last offset of a buffer of whole batches.
fn last_offset(bytes: &[u8]) -> i64 {
    batch::batches(bytes)
        .map(|item| item.unwrap().0.last_offset())
        .last()
        .unwrap()
}

/// The batches of a buffer, one buffer each.
fn split_batches(bytes: &[u8]) -> Vec<Vec<u8>> {
    batch::batches(bytes)
        .map(|item| bytes[item.unwrap().1].to_vec())
        .collect()
}

/// Copies what the leader has past the follower's log end into the
/// follower, one leader read (several batches) per append, and waits until
/// the follower made it durable, as a fetcher does before acknowledging.
async fn replicate(leader: &PartitionLog, follower: &PartitionLog) {
    let mut last = None;
    loop {
        let offset = follower.log_end_offset();
        let result = leader
            .read_replica(offset, 700, ReadMode::Copy)
            .await
            .unwrap();
        let ReadData::Bytes(bytes) = result.data else {
            break;
        };
        let appended = follower.append_replicated(bytes.to_vec()).unwrap();
        assert_eq!(appended.base_offset, offset);
        assert!(!appended.duplicate);
        last = Some(appended.last_offset);
    }
    if let Some(last) = last {
        follower.wait_durable(last).await.unwrap();
    }
}

fn epoch_pairs(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

/// A producer's state without its last-seen time (each broker's own clock).
fn producer_view(log: &PartitionLog, producer_id: i64) -> Option<String> {
    log.producer_entry(producer_id).map(|mut entry| {
        entry.last_seen_ms = 0;
        format!("{entry:?}")
    })
}

/// Asserts the follower holds what the leader holds.
async fn assert_same_log(leader: &PartitionLog, follower: &PartitionLog) {
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(follower.log_start_offset(), leader.log_start_offset());
    assert_eq!(follower.high_watermark(), leader.high_watermark());
    assert_eq!(log_bytes(follower, 0).await, log_bytes(leader, 0).await);
    for producer_id in [7, 9, 10, 11, 12] {
        assert_eq!(
            producer_view(follower, producer_id),
            producer_view(leader, producer_id),
            "producer {producer_id}"
        );
    }
    assert_eq!(follower.open_transactions(), leader.open_transactions());
    assert_eq!(
        follower.aborted_transactions(),
        leader.aborted_transactions()
    );
    assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
    assert_eq!(epoch_pairs(follower), epoch_pairs(leader));
}

async fn open(path: &Path) -> (Rc<engine::LogManager>, Rc<PartitionLog>) {
    open_log(config(path, FlushPolicy::Fsync), "t", small_segments()).await
}

#[test]
fn follower_copies_the_leader_exactly() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let (_lm, leader) = open(leader_dir.path()).await;
        let (_fm, follower) = open(follower_dir.path()).await;
        fill_leader(&leader).await;
        replicate(&leader, &follower).await;
        assert_same_log(&leader, &follower).await;
        assert!(follower.segment_count() > 2, "the follower rolled");
        assert_eq!(epoch_pairs(&follower).len(), 3, "epochs 1, 2 and 5");
        assert!(
            !follower.aborted_transactions().is_empty(),
            "the abort was replicated"
        );
        assert_eq!(follower.open_transactions().len(), 1);
        // Batches keep the leader's epochs, not the follower's own.
        assert_eq!(follower.leader_epoch(), 0);
        // More on the leader later: the follower catches up again.
        leader.set_leader_epoch(6);
        let last = leader.append_control(11, 0, true, 4).unwrap().last_offset;
        leader.wait_durable(last).await.unwrap();
        replicate(&leader, &follower).await;
        assert_same_log(&leader, &follower).await;
        assert!(follower.open_transactions().is_empty());
        assert_eq!(epoch_pairs(&follower).last(), Some(&(6, last)));
    });
}

#[test]
fn an_overlap_is_refused_without_a_trace() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let (_lm, leader) = open(leader_dir.path()).await;
        let (_fm, follower) = open(follower_dir.path()).await;
        fill_leader(&leader).await;
        let batches = split_batches(&log_bytes(&leader, 0).await);
        // Up to (not into) epoch 2: the next batch would start an epoch.
        let first_of_epoch_2 = batches
            .iter()
            .position(|b| batch::BatchHeader::parse(b).unwrap().partition_leader_epoch == 2)
            .unwrap();
        for b in &batches[..first_of_epoch_2] {
            follower.append_replicated(b.clone()).unwrap();
        }
        let end = follower.log_end_offset();
        follower.wait_durable(end - 1).await.unwrap();
        let epochs_file = follower
            .dir()
            .join(engine::log::LEADER_EPOCH_CHECKPOINT_FILE_NAME);
        let before = (
            epoch_pairs(&follower),
            std::fs::read_to_string(&epochs_file).unwrap(),
            producer_view(&follower, 9),
            follower.open_transactions(),
            follower.size_bytes(),
        );
        let next = &batches[first_of_epoch_2];
        let gap = &batches[first_of_epoch_2 + 1];
        let gap_base = batch::BatchHeader::parse(gap).unwrap().base_offset;
        let overlap = &batches[first_of_epoch_2 - 1];
        let overlap_base = batch::BatchHeader::parse(overlap).unwrap().base_offset;
        let next_base = batch::BatchHeader::parse(next).unwrap().base_offset;
        let next_end = batch::BatchHeader::parse(next).unwrap().last_offset() + 1;
        let attempts: [(Vec<u8>, i64, i64); 2] = [
            // An overlap at the start.
            (overlap.clone(), end, overlap_base),
            // A good first batch (of a new epoch, a new producer's
            // transaction), then the same batch again: an overlap inside
            // the payload.
            ([next.clone(), next.clone()].concat(), next_end, next_base),
        ];
        // A gap is no error (compaction leaves them): see
        // `a_compacted_leader_is_copied_gaps_and_all`.
        let _ = (gap, gap_base);
        for (payload, expected, got) in attempts {
            match follower.append_replicated(payload) {
                Err(e @ EngineError::ReplicaOffsetMismatch { .. }) => {
                    assert_eq!(e.error_code(), ErrorCode::OffsetOutOfRange);
                    let EngineError::ReplicaOffsetMismatch {
                        expected: e_expected,
                        got: e_got,
                    } = e
                    else {
                        unreachable!()
                    };
                    assert_eq!((e_expected, e_got), (expected, got));
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
            assert_eq!(follower.log_end_offset(), end);
            let after = (
                epoch_pairs(&follower),
                std::fs::read_to_string(&epochs_file).unwrap(),
                producer_view(&follower, 9),
                follower.open_transactions(),
                follower.size_bytes(),
            );
            assert_eq!(after, before, "a refused payload leaves no trace");
        }
        // A corrupt batch is refused as a produce would be.
        let mut corrupt = next.clone();
        let last_byte = corrupt.len() - 1;
        corrupt[last_byte] ^= 0xff;
        assert!(matches!(
            follower.append_replicated(corrupt),
            Err(EngineError::Batch(_))
        ));
        assert_eq!(follower.log_end_offset(), end);
        // The follower then catches up normally.
        replicate(&leader, &follower).await;
        assert_same_log(&leader, &follower).await;
    });
}

#[test]
fn a_restarted_follower_keeps_everything() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let (_lm, leader) = open(leader_dir.path()).await;
        fill_leader(&leader).await;
        {
            let (fm, follower) = open(follower_dir.path()).await;
            replicate(&leader, &follower).await;
            assert_same_log(&leader, &follower).await;
            fm.shutdown().await.unwrap();
        }
        let (fm, follower) = open(follower_dir.path()).await;
        assert_same_log(&leader, &follower).await;
        // And it goes on from where it stopped.
        leader.set_leader_epoch(7);
        let mut b = batch(900, 5, 3_000);
        let last = leader.append(&mut b, 7).unwrap().last_offset;
        leader.wait_durable(last).await.unwrap();
        replicate(&leader, &follower).await;
        assert_same_log(&leader, &follower).await;
        // Without a clean shutdown too: what was durable survives a reopen.
        drop(follower);
        drop(fm);
        let (_fm, follower) = open(follower_dir.path()).await;
        assert_same_log(&leader, &follower).await;
    });
}

/// Appends `count` batches of 5 records and waits until they are durable.
async fn append_durable_batches(log: &PartitionLog, count: usize) -> i64 {
    let mut last = 0;
    for _ in 0..count {
        let first = log.log_end_offset() as usize;
        last = log
            .append(&mut batch(first, 5, 1_000), 0)
            .unwrap()
            .last_offset;
    }
    log.wait_durable(last).await.unwrap();
    last
}

#[test]
fn the_replication_limit_caps_what_readers_see() {
    let dir = tempdir();
    run(async {
        let (_m, log) = open(dir.path()).await;
        assert_eq!(log.replication_limit(), None);
        log.set_replication_limit(Some(0));
        append_durable_batches(&log, 4).await;
        assert_eq!(log.durable_offset(), 20);
        assert_eq!(log.published_offset(), 20);
        assert_eq!(log.high_watermark(), 0, "capped at 0");
        let read = log.read(0, 1 << 20, ReadMode::Copy).await.unwrap();
        assert!(matches!(read.data, ReadData::Empty));
        assert_eq!(read.high_watermark, 0);
        // A follower's fetch still gets everything published.
        let replica = log.read_replica(0, 1 << 20, ReadMode::Copy).await.unwrap();
        assert_eq!(replica.high_watermark, 0);
        let ReadData::Bytes(bytes) = replica.data else {
            panic!("a follower reads past the high watermark");
        };
        assert_eq!(last_offset(&bytes), 19);

        // A long poll and an acks=all produce wait on the high watermark.
        let polled = Rc::new(Cell::new(false));
        let poll = glommio::spawn_local({
            let (log, polled) = (log.clone(), polled.clone());
            async move {
                log.wait_for_data(9).await;
                polled.set(true);
            }
        });
        let acked = Rc::new(Cell::new(false));
        let ack = glommio::spawn_local({
            let (log, acked) = (log.clone(), acked.clone());
            async move {
                log.wait_high_watermark_past(14).await.unwrap();
                acked.set(true);
            }
        });
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        assert!(!polled.get() && !acked.get());

        log.set_replication_limit(Some(5));
        assert_eq!(log.high_watermark(), 5);
        assert_eq!(read_all(&log, 0).await.len(), 5, "one batch visible");
        for mode in [ReadMode::FileSlice, ReadMode::CachedPiecesOrCopy] {
            let read = log.read(0, 1 << 20, mode).await.unwrap();
            let first_batch_bytes = split_batches(&bytes)[0].len();
            assert_eq!(
                read.data.len(),
                first_batch_bytes,
                "{mode:?} stops at the cap"
            );
        }
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        assert!(!polled.get(), "hw 5 is not past 9");

        log.set_replication_limit(Some(10));
        poll.await;
        assert!(polled.get(), "moving the cap woke the long poll");
        assert!(!acked.get());
        log.set_replication_limit(Some(15));
        ack.await;
        assert!(acked.get());

        // The cap past what is durable: the durable end bounds, and appends
        // move the high watermark up to the cap.
        log.set_replication_limit(Some(30));
        assert_eq!(log.high_watermark(), 20);
        append_durable_batches(&log, 4).await;
        assert_eq!(log.high_watermark(), 30);
        assert_eq!(read_all(&log, 0).await.len(), 30);

        // A lower cap does not hide what readers saw; it holds the hw.
        log.set_replication_limit(Some(25));
        assert_eq!(log.high_watermark(), 30);
        append_durable_batches(&log, 1).await;
        assert_eq!(log.high_watermark(), 30);

        // No cap: back to what is published.
        log.set_replication_limit(None);
        assert_eq!(log.high_watermark(), 45);
        assert_eq!(log.high_watermark(), log.log_end_offset());
    });
}

#[test]
fn without_a_limit_the_high_watermark_follows_the_flush_policy() {
    for policy in [FlushPolicy::Fsync, FlushPolicy::Os] {
        let dir = tempdir();
        run(async {
            let (_m, log) = open_log(config(dir.path(), policy), "t", small_segments()).await;
            let last = append_durable_batches(&log, 3).await;
            assert_eq!(log.high_watermark(), last + 1, "{policy:?}");
            assert_eq!(log.published_offset(), last + 1);
            log.set_replication_limit(None);
            assert_eq!(log.high_watermark(), last + 1);
            log.wait_high_watermark_past(last).await.unwrap();
            assert_eq!(read_all(&log, 0).await.len() as i64, last + 1);
        });
    }
}

#[test]
fn a_follower_high_watermark_is_the_leaders_capped_by_its_own_end() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let (_lm, leader) = open(leader_dir.path()).await;
        let (_fm, follower) = open(follower_dir.path()).await;
        // The leader's readers see what the follower has.
        leader.set_replication_limit(Some(0));
        follower.set_replication_limit(Some(0));
        append_durable_batches(&leader, 6).await;
        assert_eq!(leader.high_watermark(), 0);
        replicate(&leader, &follower).await;
        assert_eq!(follower.log_end_offset(), 30);
        // The follower reported its end: the leader's hw moves, then the
        // follower learns it with its next fetch.
        leader.set_replication_limit(Some(follower.durable_offset()));
        assert_eq!(leader.high_watermark(), 30);
        follower.set_replication_limit(Some(leader.high_watermark()));
        assert_eq!(follower.high_watermark(), 30);
        // A leader hw past the follower's end: the follower's own end bounds.
        append_durable_batches(&leader, 2).await;
        leader.set_replication_limit(Some(40));
        follower.set_replication_limit(Some(leader.high_watermark()));
        assert_eq!(follower.high_watermark(), 30);
        replicate(&leader, &follower).await;
        assert_eq!(follower.high_watermark(), 40);
    });
}

#[test]
fn waiting_for_the_high_watermark_ends_at_close() {
    let dir = tempdir();
    run(async {
        let (_m, log) = open(dir.path()).await;
        log.set_replication_limit(Some(0));
        let last = append_durable_batches(&log, 1).await;
        let waiter = glommio::spawn_local({
            let log = log.clone();
            async move { log.wait_high_watermark_past(last).await }
        });
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        log.close().await.unwrap();
        assert!(matches!(waiter.await, Err(EngineError::Closed)));
    });
}

#[test]
fn a_follower_truncates_its_divergent_tail_then_follows_the_new_leader() {
    let (a_dir, b_dir, f_dir) = (tempdir(), tempdir(), tempdir());
    run(async {
        let (_am, old_leader) = open(a_dir.path()).await;
        let (_bm, new_leader) = open(b_dir.path()).await;
        let (_fm, follower) = open(f_dir.path()).await;
        old_leader.set_leader_epoch(1);
        append_durable_batches(&old_leader, 6).await;
        // The new leader had copied only 0..20 when it took over in epoch 2.
        let bytes = log_bytes(&old_leader, 0).await;
        for b in split_batches(&bytes).into_iter().take(4) {
            new_leader.append_replicated(b).unwrap();
        }
        new_leader.set_leader_epoch(2);
        append_durable_batches(&new_leader, 3).await;
        assert_eq!(new_leader.log_end_offset(), 35);
        // The follower had all of the old leader's, committed up to 20.
        follower.set_replication_limit(Some(20));
        replicate(&old_leader, &follower).await;
        assert_eq!(
            (follower.log_end_offset(), follower.high_watermark()),
            (30, 20)
        );
        // KIP-101: cut where epoch 1 ends on the new leader, then follow it.
        let cut = new_leader.end_offset_for_epoch(1).end_offset;
        assert_eq!(cut, 20);
        assert!(follower.truncate_to(cut).await.unwrap());
        assert_eq!(follower.high_watermark(), 20);
        replicate(&new_leader, &follower).await;
        assert_eq!(follower.high_watermark(), 20, "held by the cap");
        follower.set_replication_limit(Some(new_leader.high_watermark()));
        assert_same_log(&new_leader, &follower).await;
        assert_eq!(epoch_pairs(&follower), vec![(1, 0), (2, 20)]);
    });
}

#[test]
fn a_compacted_leader_is_copied_gaps_and_all() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let compacted = TopicConfig::default()
            .with_overrides([("segment.bytes", "1024"), ("cleanup.policy", "compact")])
            .unwrap();
        let (lm, leader) = open_log(
            config(leader_dir.path(), FlushPolicy::Fsync),
            "t",
            compacted.clone(),
        )
        .await;
        // 200 records, one per batch, every third one the same key (the
        // others unique), then the cleaner: it drops all but the last of
        // the hot key's batches, leaving gaps between the batches kept.
        for i in 0..200usize {
            let mut builder = BatchBuilder::new(0, Compression::None);
            let key = if i % 3 == 0 {
                "hot".to_owned()
            } else {
                format!("k{i}")
            };
            let value = format!("v{i}");
            builder.push(
                0,
                1_000 + i as i64,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
                &[],
            );
            let mut bytes = builder.build().unwrap();
            leader.append(&mut bytes, 0).unwrap();
        }
        leader.flush().await.unwrap();
        let stats = engine::compaction::compact(&leader).await.unwrap();
        assert!(stats.records_removed > 50, "{stats:?}");
        // Reopened, so that reads come from the compacted files rather than
        // from the batch cache of what was appended.
        lm.shutdown().await.unwrap();
        drop(leader);
        let (_lm, leader) = open_log(
            config(leader_dir.path(), FlushPolicy::Fsync),
            "t",
            compacted.clone(),
        )
        .await;
        let leader_batches = split_batches(&log_bytes(&leader, 0).await);
        let has_gap = leader_batches.windows(2).any(|w| {
            let (a, b) = (
                batch::BatchHeader::parse(&w[0]).unwrap(),
                batch::BatchHeader::parse(&w[1]).unwrap(),
            );
            b.base_offset > a.last_offset() + 1
        });
        let offsets: Vec<(i64, i64)> = leader_batches
            .iter()
            .map(|b| {
                let h = batch::BatchHeader::parse(b).unwrap();
                (h.base_offset, h.last_offset())
            })
            .collect();
        assert!(has_gap, "compaction left gaps between batches: {offsets:?}");

        let (fm, follower) = open_log(
            config(follower_dir.path(), FlushPolicy::Fsync),
            "t",
            compacted.clone(),
        )
        .await;
        let mut last = None;
        loop {
            let offset = follower.log_end_offset();
            let result = leader
                .read_replica(offset, 700, ReadMode::Copy)
                .await
                .unwrap();
            let ReadData::Bytes(bytes) = result.data else {
                break;
            };
            let appended = follower.append_replicated(bytes.to_vec()).unwrap();
            assert!(appended.base_offset >= offset);
            last = Some(appended.last_offset);
        }
        follower.wait_durable(last.unwrap()).await.unwrap();
        assert_eq!(follower.log_end_offset(), leader.log_end_offset());
        assert_eq!(log_bytes(&follower, 0).await, log_bytes(&leader, 0).await);
        // A read inside a gap gets the next batch, on the copy too.
        for offset in [0, 57, 150] {
            let from_leader = leader.read(offset, 64, ReadMode::Copy).await.unwrap();
            let from_follower = follower.read(offset, 64, ReadMode::Copy).await.unwrap();
            let (ReadData::Bytes(a), ReadData::Bytes(b)) = (from_leader.data, from_follower.data)
            else {
                panic!("both read something at {offset}");
            };
            assert_eq!(a, b, "offset {offset}");
        }
        // And the copy opens again as it was.
        let end = follower.log_end_offset();
        fm.shutdown().await.unwrap();
        drop(follower);
        let (_fm, follower) = open_log(
            config(follower_dir.path(), FlushPolicy::Fsync),
            "t",
            compacted,
        )
        .await;
        assert_eq!(follower.log_end_offset(), end);
        assert_eq!(log_bytes(&follower, 0).await, log_bytes(&leader, 0).await);
    });
}

/// A follower's log is written only by its fetcher: with `leading` off, a
/// client append and a marker are refused (NOT_LEADER_OR_FOLLOWER), the
/// fetcher's append still goes in, and leading again takes appends.
#[test]
fn a_log_that_does_not_lead_takes_only_its_fetchers_appends() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let (_lm, leader) = open(leader_dir.path()).await;
        let (_fm, follower) = open(follower_dir.path()).await;
        append_durable_batches(&leader, 2).await;
        follower.set_leading(false);
        assert!(!follower.is_leading());
        let refused = follower.append(&mut batch(0, 5, 1_000), 0).unwrap_err();
        assert!(matches!(refused, EngineError::NotLeader), "{refused:?}");
        assert_eq!(refused.error_code(), ErrorCode::NotLeaderOrFollower);
        let marker = follower.append_control(7, 0, true, 0).unwrap_err();
        assert!(matches!(marker, EngineError::NotLeader), "{marker:?}");
        assert_eq!(follower.log_end_offset(), 0, "nothing refused left a trace");
        replicate(&leader, &follower).await;
        assert_eq!(follower.log_end_offset(), leader.log_end_offset());
        follower.set_leading(true);
        let end = follower.log_end_offset() as usize;
        follower.append(&mut batch(end, 5, 1_000), 0).unwrap();
    });
}

/// Leader epochs never go backwards in a log: once it holds epoch 3 (here
/// copied from its leader), an append stamped with epoch 2 (what a stale
/// leader or coordinator would stamp) is refused without a trace, and one
/// stamped with 3 goes in.
#[test]
fn an_append_stamped_with_an_older_epoch_than_the_log_holds_is_refused() {
    let (leader_dir, follower_dir) = (tempdir(), tempdir());
    run(async {
        let (_lm, leader) = open(leader_dir.path()).await;
        let (_fm, follower) = open(follower_dir.path()).await;
        // The follower wrote offsets 0..5 as the leader of epoch 2; the
        // new leader of epoch 3 has 0..10, whose tail it copies.
        follower.set_leader_epoch(2);
        append_durable_batches(&follower, 1).await;
        leader.set_leader_epoch(3);
        append_durable_batches(&leader, 2).await;
        let end = follower.log_end_offset();
        let tail = leader
            .read_replica(end, 1 << 20, ReadMode::Copy)
            .await
            .unwrap();
        let ReadData::Bytes(bytes) = tail.data else {
            panic!("the leader's tail")
        };
        follower.append_replicated(bytes.to_vec()).unwrap();
        assert_eq!(epoch_pairs(&follower).last(), Some(&(3, end)));
        let before = follower.log_end_offset();
        let stale = follower
            .append(&mut batch(before as usize, 5, 1_000), 2)
            .unwrap_err();
        assert!(
            matches!(
                stale,
                EngineError::StaleLeaderEpoch {
                    stamped: 2,
                    latest: 3
                }
            ),
            "{stale:?}"
        );
        assert_eq!(stale.error_code(), ErrorCode::FencedLeaderEpoch);
        assert_eq!(follower.log_end_offset(), before, "no trace");
        follower
            .append(&mut batch(before as usize, 5, 1_000), 3)
            .unwrap();
    });
}
