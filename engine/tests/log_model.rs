//! Model-based property test of the partition log.
//!
//! Random sequences of appends (small segments, so rolls happen), truncations,
//! DeleteRecords, size-based retention and restarts run against the real log
//! on a real disk and against a plain in-memory model (batches of records and
//! a log start offset). After every operation the log's start, end and high
//! watermark must equal the model's, and reading everything from the log
//! start — through the copy path and the file-slice path — must return
//! exactly the model's records (offsets, keys, values), in whole, valid,
//! contiguous batches. Retention is the one operation whose outcome the model
//! does not predict (it depends on segment sizes): there the model takes the
//! log's new start, after checking that it only moved forward, stayed within
//! the high watermark and landed on a batch boundary. So it does after an
//! append whose roll recycled a file, which runs retention by size first.

mod common;
mod support;

use engine::{EngineConfig, FlushPolicy, LogManager, PartitionLog, TopicConfig, TopicPartition};
use proptest::prelude::*;
use std::path::Path;
use std::rc::Rc;
use support::{read_both, ReadRecord};

type Key = Option<Vec<u8>>;
type Value = Option<Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    /// Append one batch of records.
    Append(Vec<(Key, Value)>),
    /// Truncate to `start + pick % (end - start + 1)`.
    Truncate(u64),
    /// DeleteRecords before `pick % (hw + 1)` (may be below the start: a no-op).
    DeleteRecords(u64),
    /// Apply retention (retention.bytes is set).
    Retention,
    /// Shut the manager down and open it again from the same dir.
    Restart,
}

#[derive(Debug, Clone)]
struct Setup {
    segment_bytes: u64,
    index_interval_bytes: u64,
    retention_bytes: u64,
    /// Whether the batch cache may serve copy reads (else every read hits the disk).
    cache: bool,
}

/// A batch in the model: base offset and records.
#[derive(Debug, Clone)]
struct ModelBatch {
    base: i64,
    records: Vec<(Key, Value)>,
}

impl ModelBatch {
    fn last(&self) -> i64 {
        self.base + self.records.len() as i64 - 1
    }
}

#[derive(Debug, Default)]
struct Model {
    batches: Vec<ModelBatch>,
    start: i64,
    end: i64,
}

impl Model {
    fn records_from(&self, from: i64) -> Vec<ReadRecord> {
        self.batches
            .iter()
            .flat_map(|b| {
                b.records
                    .iter()
                    .enumerate()
                    .map(move |(i, (k, v))| (b.base + i as i64, k.clone(), v.clone()))
            })
            .filter(|(o, _, _)| *o >= from)
            .collect()
    }

    fn is_batch_base(&self, offset: i64) -> bool {
        offset == self.end || self.batches.iter().any(|b| b.base == offset)
    }

    /// Drops batches wholly below the start.
    fn drop_below_start(&mut self) {
        let start = self.start;
        self.batches.retain(|b| b.last() >= start);
    }
}

fn bytes_strategy(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        6 => proptest::collection::vec(any::<u8>(), 0..max).prop_map(Some),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec((bytes_strategy(12), bytes_strategy(160)), 1..20).prop_map(Op::Append),
        1 => any::<u64>().prop_map(Op::Truncate),
        1 => any::<u64>().prop_map(Op::DeleteRecords),
        1 => Just(Op::Retention),
        1 => Just(Op::Restart),
    ]
}

fn setup_strategy() -> impl Strategy<Value = Setup> {
    (
        // 64 KiB segments hold whole blocks, so small appends also take
        // the streamed-write path (the engine tests stream from 4 KiB on).
        prop_oneof![Just(1024u64), Just(2048), Just(4096), Just(65536)],
        prop_oneof![Just(100u64), Just(512), Just(4096)],
        2048u64..12_288,
        any::<bool>(),
    )
        .prop_map(
            |(segment_bytes, index_interval_bytes, retention_bytes, cache)| Setup {
                segment_bytes,
                index_interval_bytes,
                retention_bytes,
                cache,
            },
        )
}

fn engine_config(dir: &Path, setup: &Setup) -> EngineConfig {
    let mut config = common::config(dir, FlushPolicy::Os);
    config.preallocate_bytes = 1 << 20;
    if !setup.cache {
        // Chunks larger than the budget are never cached.
        config.batch_cache_bytes = 0;
    }
    config
}

fn topic_config(setup: &Setup) -> TopicConfig {
    TopicConfig::default()
        .with_overrides([
            ("segment.bytes", setup.segment_bytes.to_string().as_str()),
            (
                "index.interval.bytes",
                setup.index_interval_bytes.to_string().as_str(),
            ),
            (
                "retention.bytes",
                setup.retention_bytes.to_string().as_str(),
            ),
            ("retention.ms", "-1"),
        ])
        .expect("topic config")
}

fn build_batch(records: &[(Key, Value)], timestamp_ms: i64) -> Vec<u8> {
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None);
    for (i, (k, v)) in records.iter().enumerate() {
        builder.push(
            i as i32,
            timestamp_ms + i as i64,
            k.as_deref(),
            v.as_deref(),
            &[],
        );
    }
    builder.build().expect("batch builds")
}

async fn check(log: &PartitionLog, model: &Model, step: usize, op: &Op) {
    let what = format!("after step {step} ({})", op_name(op));
    assert_eq!(log.log_end_offset(), model.end, "log end {what}");
    assert_eq!(log.log_start_offset(), model.start, "log start {what}");
    assert_eq!(log.high_watermark(), model.end, "high watermark {what}");
    let bases = log.segment_base_offsets();
    assert!(!bases.is_empty(), "no segment {what}");
    assert!(
        bases.windows(2).all(|w| w[0] < w[1]),
        "segment bases {bases:?} {what}"
    );
    assert!(
        bases[0] <= model.start.max(bases[0]),
        "segments {bases:?} {what}"
    );
    let got = read_both(log, model.start).await;
    let want = model.records_from(model.start);
    assert_eq!(got.len(), want.len(), "record count {what}");
    assert!(got == want, "records differ {what}");
}

fn op_name(op: &Op) -> String {
    match op {
        Op::Append(r) => format!("append {}", r.len()),
        Op::Truncate(p) => format!("truncate pick {p}"),
        Op::DeleteRecords(p) => format!("delete-records pick {p}"),
        Op::Retention => "retention".into(),
        Op::Restart => "restart".into(),
    }
}

async fn open(config: EngineConfig, topic: TopicConfig) -> (Rc<LogManager>, Rc<PartitionLog>) {
    let manager = LogManager::open(config, 0, 1).await.expect("manager opens");
    let tp = TopicPartition::new("m", 0);
    let log = match manager.get(&tp) {
        Some(log) => log,
        None => manager
            .create_partition(tp, [2; 16], topic)
            .await
            .expect("partition created"),
    };
    (manager, log)
}

/// A roll that recycles a file runs retention by size first (`recycle.rs`):
/// the model takes the start it moved, as after `Op::Retention`, checking that
/// it only went forward, within the high watermark, to a batch boundary.
fn take_retention_at_roll(log: &PartitionLog, model: &mut Model) {
    let start = log.log_start_offset();
    if start == model.start {
        return;
    }
    assert!(
        start > model.start,
        "a roll moved the start back: {} -> {start}",
        model.start
    );
    assert!(
        start <= log.high_watermark(),
        "a roll's retention passed the high watermark"
    );
    assert!(
        model.is_batch_base(start),
        "a roll's retention start {start} is not a batch boundary"
    );
    model.start = start;
    model.drop_below_start();
}

async fn apply(
    op: &Op,
    step: usize,
    model: &mut Model,
    manager: &mut Rc<LogManager>,
    log: &mut Rc<PartitionLog>,
    config: &EngineConfig,
    topic: &TopicConfig,
) {
    match op {
        Op::Append(records) => {
            let mut bytes = build_batch(records, 1_000 + step as i64 * 100);
            let r = log.append(&mut bytes, 0).expect("append");
            assert_eq!(r.base_offset, model.end, "base offset");
            assert_eq!(
                r.last_offset,
                model.end + records.len() as i64 - 1,
                "last offset"
            );
            log.wait_durable(r.last_offset).await.expect("written");
            model.batches.push(ModelBatch {
                base: model.end,
                records: records.clone(),
            });
            model.end += records.len() as i64;
            take_retention_at_roll(log, model);
        }
        Op::Truncate(pick) => {
            let span = (model.end - model.start + 1) as u64;
            let target = model.start + (pick % span) as i64;
            // Kafka cuts at batch boundaries: a target inside a batch drops it.
            let new_end = model
                .batches
                .iter()
                .find(|b| b.base <= target && target <= b.last())
                .map_or(target, |b| b.base);
            log.truncate_to(target).await.expect("truncate");
            model.batches.retain(|b| b.base < new_end);
            model.end = new_end;
            // As Kafka's truncateTo: the start never stays past the end.
            model.start = model.start.min(new_end);
        }
        Op::DeleteRecords(pick) => {
            let target = (pick % (model.end as u64 + 1)) as i64;
            let low = log.delete_records(target).await.expect("delete records");
            model.start = model.start.max(target);
            assert_eq!(low, model.start, "low watermark");
            model.drop_below_start();
        }
        Op::Retention => {
            let before = model.start;
            let deleted = log.apply_retention().expect("retention");
            let start = log.log_start_offset();
            assert!(
                start >= before,
                "retention moved the start back: {before} -> {start}"
            );
            assert!(
                start <= log.high_watermark(),
                "retention passed the high watermark"
            );
            // Segments may go without the start moving: those wholly below
            // it, left by a DeleteRecords that ended in the active segment.
            assert!(
                start == before || deleted > 0,
                "the start moved but no segment was deleted"
            );
            assert!(
                start == before || model.is_batch_base(start),
                "retention start {start} is not a batch boundary"
            );
            model.start = start;
            model.drop_below_start();
        }
        Op::Restart => {
            manager.shutdown().await.expect("shutdown");
            let (m, l) = open(config.clone(), topic.clone()).await;
            *manager = m;
            *log = l;
        }
    }
}

fn run_case(setup: Setup, ops: Vec<Op>) {
    let dir = support::tempdir();
    let config = engine_config(dir.path(), &setup);
    let topic = topic_config(&setup);
    common::run(async move {
        let (mut manager, mut log) = open(config.clone(), topic.clone()).await;
        let mut model = Model::default();
        for (step, op) in ops.iter().enumerate() {
            apply(
                op,
                step,
                &mut model,
                &mut manager,
                &mut log,
                &config,
                &topic,
            )
            .await;
            check(&log, &model, step, op).await;
        }
        manager.shutdown().await.expect("final shutdown");
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(setup in setup_strategy(), ops in proptest::collection::vec(op_strategy(), 1..40)) {
        run_case(setup, ops);
    }
}

/// A DeleteRecords that puts the start inside a batch, then a truncation to an
/// offset in that batch: the whole batch goes (a batch-boundary cut), so the
/// log now ends below the old start. As in Kafka's `truncateTo`, the start
/// must follow the end down (start = min(start, end)); reads at the start and
/// appends must then work, before and after a restart.
#[test]
fn truncate_below_a_start_inside_a_batch_moves_the_start_back() {
    let dir = support::tempdir();
    let setup = Setup {
        segment_bytes: 4096,
        index_interval_bytes: 4096,
        retention_bytes: 1 << 20,
        cache: false,
    };
    let config = engine_config(dir.path(), &setup);
    let topic = topic_config(&setup);
    common::run(async move {
        let (manager, log) = open(config.clone(), topic.clone()).await;
        for first in [0usize, 10] {
            let mut bytes = common::batch(first, 10, 1_000);
            let r = log.append(&mut bytes, 0).expect("append");
            log.wait_durable(r.last_offset).await.expect("written");
        }
        assert_eq!(log.delete_records(13).await.expect("delete records"), 13);
        log.truncate_to(15).await.expect("truncate");
        assert_eq!(log.log_end_offset(), 10, "the batch 10..=19 is cut whole");
        assert!(
            log.log_start_offset() <= log.log_end_offset(),
            "start {} > end {}",
            log.log_start_offset(),
            log.log_end_offset()
        );
        assert_eq!(log.log_start_offset(), 10);
        assert!(read_both(&log, log.log_start_offset()).await.is_empty());
        let mut bytes = common::batch(10, 5, 2_000);
        let r = log.append(&mut bytes, 0).expect("append");
        assert_eq!(r.base_offset, 10);
        log.wait_durable(r.last_offset).await.expect("written");
        assert_eq!(read_both(&log, 10).await.len(), 5);
        manager.shutdown().await.expect("shutdown");
        let (_manager, log) = open(config, topic).await;
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 15));
    });
}
