//! Time-based behaviour of the log driven by a manual clock
//! (`EngineConfig::clock`): `segment.ms` rolls, `retention.ms` deletion and
//! producer-id expiration happen exactly at their boundaries, with no sleep.

mod common;

use common::*;
use engine::batch::{BatchBuilder, Compression};
use engine::{Clock, EngineConfig, FlushPolicy, TopicConfig};

/// A fixed start, far from the system time so a stray system-clock read
/// would show.
const START_MS: i64 = 1_000_000_000_000;

fn tempdir() -> tempfile::TempDir {
    // Not /tmp: tmpfs has no O_DIRECT.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// An engine config for `dir` on `clock`.
fn config_on(dir: &std::path::Path, clock: &Clock) -> EngineConfig {
    let mut config = config(dir, FlushPolicy::Os);
    config.clock = clock.clone();
    config
}

#[test]
fn segment_ms_rolls_exactly_when_the_manual_clock_reaches_it() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let clock = Clock::manual(START_MS);
        let topic = TopicConfig::default()
            .with_overrides([("segment.ms", "60000")])
            .unwrap();
        let (_m, log) = open_log(config_on(&path, &clock), "t", topic).await;
        assert_eq!(log.clock().now_ms(), START_MS);
        append_durable(&log, batch(0, 10, START_MS)).await;
        clock.advance_ms(59_999);
        append_durable(&log, batch(10, 10, START_MS)).await;
        assert_eq!(log.segment_base_offsets(), vec![0]);
        // The segment was created at START_MS: 60 s later the next append rolls.
        clock.advance_ms(1);
        append_durable(&log, batch(20, 10, START_MS)).await;
        assert_eq!(log.segment_base_offsets(), vec![0, 20]);
        // The new segment's age counts from the roll.
        clock.advance_ms(59_999);
        append_durable(&log, batch(30, 10, START_MS)).await;
        assert_eq!(log.segment_base_offsets(), vec![0, 20]);
        clock.advance_ms(1);
        append_durable(&log, batch(40, 10, START_MS)).await;
        assert_eq!(log.segment_base_offsets(), vec![0, 20, 40]);
    });
}

#[test]
fn retention_ms_deletes_sealed_segments_exactly_past_it_by_the_manual_clock() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let clock = Clock::manual(START_MS);
        // 100 records make a batch of about 3 KiB, so each batch rolls a segment.
        let topic = TopicConfig::default()
            .with_overrides([("segment.bytes", "4096"), ("retention.ms", "3600000")])
            .unwrap();
        let (_m, log) = open_log(config_on(&path, &clock), "t", topic).await;
        for first in [0, 100, 200] {
            append_durable(&log, batch(first, 100, START_MS)).await;
        }
        assert_eq!(log.segment_base_offsets(), vec![0, 100, 200]);
        // The newest record of each sealed segment is START_MS + 99; Kafka
        // deletes once the segment is strictly older than retention.ms.
        clock.set_ms(START_MS + 99 + 3_600_000);
        assert_eq!(log.apply_retention().unwrap(), 0);
        assert_eq!(log.log_start_offset(), 0);
        clock.advance_ms(1);
        // The sealed segments go; the active one never does.
        assert_eq!(log.apply_retention().unwrap(), 2);
        assert_eq!(log.segment_base_offsets(), vec![200]);
        assert_eq!(log.log_start_offset(), 200);
        assert_eq!(read_all(&log, 200).await.len(), 100);
    });
}

#[test]
fn idle_producers_expire_on_the_retention_tick_by_the_manual_clock() {
    let dir = tempdir();
    let path = dir.path().to_path_buf();
    run(async move {
        let clock = Clock::manual(START_MS);
        let mut config = config_on(&path, &clock);
        config.producer_id_expiration_ms = 60_000;
        let (_m, log) = open_log(config, "t", TopicConfig::default()).await;
        let mut builder = BatchBuilder::new(0, Compression::None).producer(7, 0, 0, false);
        builder.push(0, START_MS, Some(b"k"), Some(b"v"), &[]);
        append_durable(&log, builder.build().unwrap()).await;
        let entry = log.producer_entry(7).unwrap();
        assert_eq!(entry.last_seen_ms, START_MS);
        clock.advance_ms(59_999);
        log.apply_retention().unwrap();
        assert!(log.producer_entry(7).is_some());
        clock.advance_ms(1);
        log.apply_retention().unwrap();
        assert!(log.producer_entry(7).is_none());
    });
}
