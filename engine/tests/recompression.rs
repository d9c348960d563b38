//! Broker-side `compression.type` on a real log: a client's batch in another
//! codec is stored rewritten (offsets, producer fields and records kept,
//! CRC valid, the same bytes from the cache, the file and after a restart),
//! a matching one byte for byte; `max.message.bytes` applies to the batch as
//! stored; a follower's copy is never rewritten.

mod common;

use common::*;
use engine::batch::{self, BatchBuilder, BatchHeader, Compression};
use engine::log::ReadMode;
use engine::{FlushPolicy, ReadData, TopicConfig};

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn topic(compression_type: &str, max_message_bytes: &str) -> TopicConfig {
    TopicConfig::default()
        .with_overrides([
            ("compression.type", compression_type),
            ("max.message.bytes", max_message_bytes),
        ])
        .unwrap()
}

/// An idempotent producer's batch of `count` compressible records.
fn producer_batch(codec: Compression, base_sequence: i32, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, codec).producer(77, 0, base_sequence, false);
    for i in 0..count {
        let key = format!("key-{}", base_sequence as usize + i);
        let value = "v".repeat(200);
        builder.push(
            i as i32,
            5_000 + i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[(b"h", Some(b"1"))],
        );
    }
    builder.build().unwrap()
}

/// Every stored batch from offset 0, read from the cache (copy) and the
/// segment file, which must agree.
async fn stored_batches(log: &engine::PartitionLog) -> Vec<Vec<u8>> {
    let copy = log.read(0, 1 << 20, ReadMode::Copy).await.unwrap();
    let slice = log.read(0, 1 << 20, ReadMode::FileSlice).await.unwrap();
    let (ReadData::Bytes(copy), ReadData::File(slice)) = (copy.data, slice.data) else {
        panic!("unexpected read kinds");
    };
    let mut from_file = vec![0u8; slice.length];
    std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut from_file, slice.position)
        .unwrap();
    assert_eq!(copy.as_ref(), &from_file[..], "cache and file agree");
    batch::batches(&copy)
        .map(|item| copy[item.unwrap().1].to_vec())
        .collect()
}

/// Checks `stored` against `sent` under a zstd topic: every batch zstd,
/// offsets from 0, producer fields and records kept.
fn check_stored_as_zstd(stored: &[Vec<u8>], sent: &[Vec<u8>]) {
    assert_eq!(stored.len(), 4);
    for (i, (stored, sent)) in stored.iter().zip(sent).enumerate() {
        let header = batch::validate_batch(stored, usize::MAX).unwrap();
        assert_eq!(header.compression(), Ok(Compression::Zstd), "batch {i}");
        assert_eq!(header.base_offset, i as i64 * 10);
        let before = BatchHeader::parse(sent).unwrap();
        assert_eq!(
            (
                header.producer_id,
                header.base_sequence,
                header.records_count
            ),
            (77, before.base_sequence, 10)
        );
        assert_eq!(
            batch::records(stored).unwrap(),
            batch::records(sent).unwrap()
        );
        if i == 2 {
            // Past base offset and length: epoch, CRC and records as sent.
            assert_eq!(stored[16..], sent[16..], "a zstd batch is kept as sent");
        }
    }
}

#[test]
fn client_batches_are_stored_in_the_topic_codec() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    let engine_config = config(&path, FlushPolicy::Fsync);
    let sent = [
        producer_batch(Compression::Gzip, 0, 10),
        producer_batch(Compression::None, 10, 10),
        producer_batch(Compression::Zstd, 20, 10),
        producer_batch(Compression::Lz4, 30, 10),
    ];
    let sent_again = sent.clone();
    let restart_config = engine_config.clone();
    run(async move {
        let (manager, log) = open_log(engine_config, "t", topic("zstd", "1048588")).await;
        for (i, b) in sent_again.iter().enumerate() {
            let r = append_durable(&log, b.clone()).await;
            assert_eq!(
                (r.base_offset, r.last_offset),
                (i as i64 * 10, i as i64 * 10 + 9)
            );
        }
        // gzip, none and lz4 were rewritten; zstd was not.
        assert_eq!(log.context().recompressed_batches.get(), 3);
        check_stored_as_zstd(&stored_batches(&log).await, &sent_again);
        // A resend of an appended batch is a duplicate, by its sequence.
        let again = log
            .append(&mut producer_batch(Compression::Gzip, 30, 10), 0)
            .unwrap();
        assert!(again.duplicate);
        assert_eq!(again.base_offset, 30);
        manager.shutdown().await.unwrap();
    });
    // Recovery checks every stored CRC; the cache starts empty.
    run(async move {
        let (_manager, log) = open_log(restart_config, "t", TopicConfig::default()).await;
        assert_eq!(log.log_end_offset(), 40);
        assert_eq!(
            log.config().compression_type,
            "zstd",
            "the config persisted"
        );
        check_stored_as_zstd(&stored_batches(&log).await, &sent);
    });
}

#[test]
fn producer_keeps_and_uncompressed_unpacks() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let config = config(&path, FlushPolicy::Fsync);
        let (_manager, log) = open_log(config, "t", topic("producer", "1048588")).await;
        let sent = producer_batch(Compression::Snappy, 0, 5);
        append_durable(&log, sent.clone()).await;
        // A topic changed at run time applies to the next batch.
        log.set_config(topic("uncompressed", "1048588"));
        append_durable(&log, producer_batch(Compression::Snappy, 5, 5)).await;
        let stored = stored_batches(&log).await;
        assert_eq!(stored[0][16..], sent[16..], "producer: bytes kept");
        let codecs: Vec<_> = stored
            .iter()
            .map(|b| BatchHeader::parse(b).unwrap().compression().unwrap())
            .collect();
        assert_eq!(codecs, [Compression::Snappy, Compression::None]);
        assert_eq!(log.context().recompressed_batches.get(), 1);
    });
}

#[test]
fn max_message_bytes_applies_to_the_stored_batch() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let config = config(&path, FlushPolicy::Fsync);
        let (_manager, log) = open_log(config, "t", topic("uncompressed", "4000")).await;
        // 30 records of 200+ bytes: ~1 KiB in gzip, ~7 KiB uncompressed.
        let small = producer_batch(Compression::Gzip, 0, 30);
        assert!(small.len() < 4000);
        let error = log.append(&mut small.clone(), 0).unwrap_err();
        assert_eq!(error.error_code(), engine::ErrorCode::MessageTooLarge);
        assert_eq!(log.log_end_offset(), 0, "nothing appended");
        // Under a zstd topic the same batch fits. A batch too large as
        // sent is refused even if it would fit compressed: Kafka checks the
        // batch as received too.
        log.set_config(topic("zstd", "4000"));
        let r = append_durable(&log, small).await;
        assert_eq!(r.last_offset, 29);
        let too_large_as_sent = producer_batch(Compression::None, 30, 30);
        assert!(too_large_as_sent.len() > 4000);
        let error = log.append(&mut too_large_as_sent.clone(), 0).unwrap_err();
        assert_eq!(error.error_code(), engine::ErrorCode::MessageTooLarge);
    });
}

#[test]
fn transaction_markers_are_never_rewritten() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let config = config(&path, FlushPolicy::Fsync);
        let (_manager, log) = open_log(config, "t", topic("gzip", "1048588")).await;
        let mut builder = BatchBuilder::new(0, Compression::Lz4).producer(9, 0, 0, true);
        builder.push(0, 1, Some(b"k"), Some(b"v"), &[]);
        append_durable(&log, builder.build().unwrap()).await;
        let r = log.append_control(9, 0, true, 5).unwrap();
        log.wait_durable(r.last_offset).await.unwrap();
        let headers: Vec<_> = stored_batches(&log)
            .await
            .iter()
            .map(|b| BatchHeader::parse(b).unwrap())
            .collect();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers[0].compression(), Ok(Compression::Gzip));
        assert!(headers[0].is_transactional());
        assert!(headers[1].is_control());
        assert_eq!(headers[1].compression(), Ok(Compression::None));
    });
}

#[test]
fn replicated_batches_are_never_rewritten() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let config = config(&path, FlushPolicy::Fsync);
        let (_manager, log) = open_log(config, "t", topic("gzip", "1048588")).await;
        // A leader's batch at offset 0, epoch 0, in lz4: copied as it is.
        let mut leaders = producer_batch(Compression::Lz4, 0, 5);
        batch::set_base_offset(&mut leaders, 0);
        batch::set_partition_leader_epoch(&mut leaders, 0);
        let r = log.append_replicated(leaders.clone()).unwrap();
        log.wait_durable(r.last_offset).await.unwrap();
        let stored = stored_batches(&log).await;
        assert_eq!(stored, [leaders]);
        assert_eq!(log.context().recompressed_batches.get(), 0);
    });
}
