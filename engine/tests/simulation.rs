//! The partition log on the simulated disk (`engine::disk::sim`), driven
//! by a seed: several idempotent producers append batches of varying size
//! to a topic with small segments (so they roll), under the `fsync`
//! policy, while the disk delays and reorders completions; at a random
//! step the power fails (`SimDisk::crash`: unsynced writes lost or torn,
//! unsynced directory entries lost), and the log is recovered from what
//! the disk kept. After every recovery:
//!
//! - every append acknowledged as durable is there, byte for byte, at its
//!   offsets;
//! - nothing a recovery saw goes away or changes later (it was durable
//!   then), so nothing cut off ever comes back in its place;
//! - the log reads as whole valid batches, offsets contiguous, and each
//!   record is one a producer sent (its key names its producer and
//!   sequence, its value is derived from them);
//! - the offset and time indexes agree with the log: a read at any offset
//!   starts with the batch holding it, and a time lookup finds the first
//!   record at or after the time;
//! - the producer state agrees with the log: each producer's last sequence
//!   is the last one in the log, and a resend of its last batch is taken
//!   as the duplicate it is, with its original offsets;
//! - truncation (`truncate_to`, a follower's cut) removes what it cut for
//!   good: no record cut off ever comes back (each record's key carries
//!   how many truncations came before its append);
//! - DeleteRecords holds: the log start never goes back below an answered
//!   low watermark (retention by size runs too; it promises no such thing:
//!   a segment whose deletion a crash undid comes back as it was).
//! - Recycling (`engine/src/recycle.rs`) brings nothing back: the files of
//!   segments that retention and DeleteRecords delete are taken over by
//!   new segments, old batches and all, and no old batch is ever read as
//!   part of the log.
//!
//! The cleaner's compaction and swap are `simulation_compaction.rs`'s.
//!
//! A quarter of the seeds also run on a small disk (ENOSPC) that fails now
//! and then with EIO: the partition goes offline or refuses appends, and
//! the promises hold all the same.
//!
//! CI runs a fixed set of seeds. By hand, more:
//! `RILL_SIM_SEEDS=1000 RILL_SIM_STEPS=10000 cargo test --release -p rill-engine --test simulation -- --nocapture`
//! (seeds × steps per seed). Two deliberately broken engines (`Bug`) are
//! caught: acknowledging without the fdatasync, and not syncing the
//! directory of a new segment.

mod common;
mod support;

use engine::batch::{BatchBuilder, Compression};
use engine::disk::sim::{self, Bug, Rng, SimConfig, SimDisk};
use engine::log::ReadMode;
use engine::{PartitionLog, TopicConfig};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use support::sim::engine_config;

const DATA_DIR: &str = "/proc/rill-sim/data";
const PRODUCERS: i64 = 3;

/// An append acknowledged as durable.
#[derive(Debug, Clone, Copy)]
struct Ack {
    base: i64,
    last: i64,
    /// Truncations and DeleteRecords before the append: only later ones
    /// may remove it.
    generation: usize,
    deletions: usize,
}

/// What a record's key says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tag {
    producer: i64,
    sequence: i32,
    /// Truncations before its append.
    generation: usize,
    timestamp_ms: i64,
}

impl Tag {
    fn key(&self) -> Vec<u8> {
        let Tag {
            producer,
            sequence,
            generation,
            timestamp_ms,
        } = self;
        format!("p{producer}-s{sequence}-g{generation}-t{timestamp_ms}").into_bytes()
    }

    fn parse(key: &[u8]) -> Option<Tag> {
        let text = std::str::from_utf8(key).ok()?.strip_prefix('p')?;
        let mut fields = text.split(['-', 's', 'g', 't']).filter(|f| !f.is_empty());
        Some(Tag {
            producer: fields.next()?.parse().ok()?,
            sequence: fields.next()?.parse().ok()?,
            generation: fields.next()?.parse().ok()?,
            timestamp_ms: fields.next()?.parse().ok()?,
        })
    }

    fn value(&self) -> Vec<u8> {
        let seed = self.sequence as usize * 37 + self.producer as usize * 11 + self.generation;
        let (a, b) = (
            self.sequence as u8 ^ self.producer as u8,
            self.generation as u8,
        );
        (0..seed % 700 + 1).map(|i| (i as u8) ^ a ^ b).collect()
    }
}

/// Records by offset: their tags.
type Seen = BTreeMap<i64, Tag>;

/// What outlives a crash: the disk, the seed's choices, and what the
/// checks compare with.
struct World {
    sim: Rc<SimDisk>,
    rng: Rng,
    /// Shared with the tasks that wait for each append's durability.
    acked: Rc<RefCell<Vec<Ack>>>,
    /// The records the last recovery read (or later ones cut them).
    seen: Seen,
    /// Where each truncation cut the log, in order.
    truncations: Vec<i64>,
    /// Each low watermark DeleteRecords answered, in order.
    deletions: Vec<i64>,
    /// The highest low watermark DeleteRecords answered.
    deleted_before: i64,
    next_timestamp_ms: i64,
    appends: u64,
    /// Appends the log refused (offline after EIO, or out of space).
    refused: u64,
    /// Retention passes that deleted segments.
    retentions: u64,
    /// New segments that took a deleted one's file (`recycle.rs`).
    recycled: u64,
    crashes: u64,
}

impl World {
    /// Forgets what a cut at `cut` removed, and counts the truncation.
    fn truncated(&mut self, cut: i64) {
        self.seen.retain(|offset, _| *offset < cut);
        self.truncations.push(cut);
        // A cut below the log start moves it down too, as Kafka's does:
        // new appends then take the offsets from the cut on.
        self.deleted_before = self.deleted_before.min(cut);
    }

    /// Whether `ack`'s records must still be there: no later truncation
    /// cut them and no later DeleteRecords passed them.
    fn requires(&self, ack: &Ack) -> bool {
        let cuts = self.truncations.iter().skip(ack.generation);
        let lows = self.deletions.iter().skip(ack.deletions);
        cuts.clone().all(|cut| ack.last < *cut) && lows.clone().all(|low| ack.base >= *low)
    }

    /// Forgets what lies below a new log start.
    fn deleted(&mut self, low: i64) {
        self.deleted_before = self.deleted_before.max(low);
        self.retained(low);
    }

    /// Forgets what retention deleted below `low` (which, unlike
    /// DeleteRecords, promises nothing: a crash may bring whole segments
    /// back, as they were).
    fn retained(&mut self, low: i64) {
        self.retentions += 1;
        self.deletions.push(low);
        self.seen.retain(|offset, _| *offset >= low);
    }
}

fn topic_config() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([
            ("segment.bytes", "16384"),
            ("index.interval.bytes", "1024"),
            ("retention.ms", "-1"),
            ("retention.bytes", "98304"),
        ])
        .expect("topic config")
}

/// A batch of `count` records of `first`'s producer from its sequence on.
fn batch(first: Tag, count: i32) -> Vec<u8> {
    let mut builder =
        BatchBuilder::new(0, Compression::None).producer(first.producer, 0, first.sequence, false);
    for i in 0..count {
        let tag = Tag {
            sequence: first.sequence + i,
            ..first
        };
        builder.push(
            i,
            tag.timestamp_ms,
            Some(&tag.key()),
            Some(&tag.value()),
            &[],
        );
    }
    builder.build().expect("batch builds")
}

/// Reads the recovered log, checks each record is one a producer sent,
/// and returns them.
async fn read_recovered(log: &PartitionLog, world: &World) -> Seen {
    let records = support::read_checked(log, log.log_start_offset(), ReadMode::Copy).await;
    let mut seen = Seen::new();
    for (offset, key, value) in records {
        let tag = key
            .as_deref()
            .and_then(Tag::parse)
            .unwrap_or_else(|| panic!("offset {offset}: a record no producer sent"));
        assert_eq!(value, Some(tag.value()), "offset {offset}: a wrong value");
        for (k, cut) in world.truncations.iter().enumerate().skip(tag.generation) {
            assert!(
                offset < *cut,
                "offset {offset}: {tag:?} came back after truncation {k} cut at {cut}"
            );
        }
        seen.insert(offset, tag);
    }
    seen
}

/// Runs the checks of the module docs on a recovered log; the records it
/// holds.
async fn check_recovered(log: &PartitionLog, world: &World) -> Seen {
    assert!(
        log.log_start_offset() >= world.deleted_before,
        "the log start {} went back below DeleteRecords' {}",
        log.log_start_offset(),
        world.deleted_before
    );
    let seen = read_recovered(log, world).await;
    for ack in world.acked.borrow().iter().filter(|a| world.requires(a)) {
        for offset in ack.base..=ack.last {
            assert!(
                seen.contains_key(&offset),
                "acknowledged offset {offset} lost (append {}..={}); the disk holds:\n{}",
                ack.base,
                ack.last,
                world.sim.listing()
            );
        }
    }
    for (offset, tag) in &world.seen {
        assert_eq!(
            seen.get(offset),
            Some(tag),
            "offset {offset}, which an earlier recovery read, went or changed"
        );
    }
    check_indexes(log, &seen).await;
    check_times(log, &seen).await;
    check_producers(log, &seen).await;
    seen
}

/// Reads at every offset start with the batch holding it.
async fn check_indexes(log: &PartitionLog, seen: &Seen) {
    for &offset in seen.keys() {
        let result = log.read(offset, 1, ReadMode::Copy).await.expect("read");
        let engine::ReadData::Bytes(bytes) = result.data else {
            panic!("offset {offset}: nothing read");
        };
        let header = engine::batch::BatchHeader::parse(&bytes).expect("a batch header");
        assert!(
            header.base_offset <= offset && offset <= header.last_offset(),
            "a read at {offset} starts with {}..={}",
            header.base_offset,
            header.last_offset()
        );
    }
}

/// A time lookup finds the first record at or after the time (record
/// times grow with offsets).
async fn check_times(log: &PartitionLog, seen: &Seen) {
    let step = (seen.len() / 16).max(1);
    for tag in seen.values().step_by(step) {
        let expected = seen
            .iter()
            .find(|(_, t)| t.timestamp_ms >= tag.timestamp_ms)
            .map(|(offset, _)| *offset);
        let found = log
            .offset_for_timestamp(tag.timestamp_ms)
            .await
            .expect("lookup");
        assert_eq!(
            found.map(|(offset, _)| offset),
            expected,
            "time {}",
            tag.timestamp_ms
        );
    }
}

/// Each producer's state names the last sequence the log holds for it,
/// and a resend of its last batch is a duplicate at its offsets.
async fn check_producers(log: &PartitionLog, seen: &Seen) {
    let mut last: BTreeMap<i64, (i32, i64)> = BTreeMap::new();
    for (offset, tag) in seen {
        last.insert(tag.producer, (tag.sequence, *offset));
    }
    for producer in 0..PRODUCERS {
        let state = log
            .producer_entry(producer)
            .and_then(|e| e.batches.back().cloned());
        let from_state = state.as_ref().map(|b| (b.last_sequence, b.last_offset));
        match last.get(&producer) {
            Some(in_log) => assert_eq!(
                from_state,
                Some(*in_log),
                "producer {producer}: its state and the log disagree"
            ),
            // A producer whose batches DeleteRecords removed may be kept
            // (Kafka keeps it until it expires), but not past the start.
            None => assert!(
                from_state.is_none_or(|(_, offset)| offset < log.log_start_offset()),
                "producer {producer}: a state the log does not hold: {from_state:?}"
            ),
        }
        let Some(b) = state else { continue };
        let Some(first) = seen.get(&b.first_offset) else {
            continue;
        };
        let count = b.last_sequence - b.first_sequence + 1;
        let mut resent = batch(*first, count);
        let result = log.append(&mut resent, 0).expect("a resend is answered");
        assert!(
            result.duplicate,
            "producer {producer}: a resend appended again"
        );
        assert_eq!(result.base_offset, b.first_offset);
    }
}

/// The next sequence of each producer, from the log's producer state.
fn next_sequences(log: &PartitionLog) -> Vec<i32> {
    (0..PRODUCERS)
        .map(|producer| {
            log.producer_entry(producer)
                .and_then(|e| e.batches.back().map(|b| b.last_sequence + 1))
                .unwrap_or(0)
        })
        .collect()
}

/// Prints `what` when `RILL_SIM_TRACE` is set (a failing seed, replayed).
fn trace(what: impl FnOnce() -> String) {
    if std::env::var_os("RILL_SIM_TRACE").is_some() {
        eprintln!("{}", what());
    }
}

/// One life of the log: recover, check, then run until the power fails
/// after `steps` steps at most.
fn incarnation(world: &mut World, steps: u64) {
    common::run(async {
        let (manager, log) = common::open_log(engine_config(DATA_DIR), "sim", topic_config()).await;
        world.seen = check_recovered(&log, world).await;
        trace(|| {
            format!(
                "recovered {}..{}",
                log.log_start_offset(),
                log.log_end_offset()
            )
        });
        drive(world, &log, steps).await;
        world.recycled += log.segments_recycled();
        drop(manager);
    });
    trace(|| format!("crash {}", world.crashes));
    world.sim.crash();
    world.crashes += 1;
}

/// Appends, waits, truncations, DeleteRecords and yields, for `steps`.
async fn drive(world: &mut World, log: &Rc<PartitionLog>, steps: u64) {
    let mut sequences = next_sequences(log);
    for _ in 0..steps {
        match world.rng.below(40) {
            0..=19 => append(world, log, &mut sequences),
            20..=22 => {
                let end = log.log_end_offset();
                if end > 0 && log.wait_durable(end - 1).await.is_ok() {
                    // The spawned waiters record the acknowledgements.
                    futures_lite::future::yield_now().await;
                }
            }
            23 => {
                truncate(world, log).await;
                sequences = next_sequences(log);
            }
            24 => {
                let hw = log.high_watermark();
                let target = hw - world.rng.below(8) as i64;
                if let Ok(low) = log.delete_records(target.max(0)).await {
                    trace(|| format!("deleted below {low}"));
                    world.deleted(low);
                }
            }
            25 => {
                if log.apply_retention().is_ok_and(|deleted| deleted > 0) {
                    trace(|| format!("retention: start {}", log.log_start_offset()));
                    world.retained(log.log_start_offset());
                }
            }
            _ => {
                for _ in 0..world.rng.below(16) {
                    futures_lite::future::yield_now().await;
                }
            }
        }
        notice_retention_at_rolls(world, log);
    }
}

/// A roll that finds no recycled file at hand runs retention by size
/// itself (`recycle.rs`): the log start it moved is retention's, which
/// promises nothing past a crash.
fn notice_retention_at_rolls(world: &mut World, log: &PartitionLog) {
    let start = log.log_start_offset();
    if world.deletions.last().is_none_or(|low| start > *low) {
        trace(|| format!("retention at a roll: start {start}"));
        world.retained(start);
    }
}

/// A follower's cut at a random offset from the log start on.
async fn truncate(world: &mut World, log: &Rc<PartitionLog>) {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let offset = start + world.rng.below((end - start).max(0) as u64 + 1) as i64;
    if log.truncate_to(offset).await.is_ok() {
        trace(|| format!("truncated to {offset}: end {}", log.log_end_offset()));
        world.truncated(log.log_end_offset());
    }
}

/// One append from a random producer, acknowledged when durable.
fn append(world: &mut World, log: &Rc<PartitionLog>, sequences: &mut [i32]) {
    let producer = world.rng.below(PRODUCERS as u64) as i64;
    let count = world.rng.below(4) as i32 + 1;
    let first = Tag {
        producer,
        sequence: sequences[producer as usize],
        generation: world.truncations.len(),
        timestamp_ms: world.next_timestamp_ms,
    };
    world.next_timestamp_ms += 1;
    let Ok(result) = log.append(&mut batch(first, count), 0) else {
        world.refused += 1;
        return;
    };
    sequences[producer as usize] += count;
    world.appends += 1;
    let (log, acked) = (log.clone(), world.acked.clone());
    let (generation, deletions) = (world.truncations.len(), world.deletions.len());
    glommio::spawn_local(async move {
        if log.wait_durable(result.last_offset).await.is_ok() {
            trace(|| format!("acked {}..={}", result.base_offset, result.last_offset));
            acked.borrow_mut().push(Ack {
                base: result.base_offset,
                last: result.last_offset,
                generation,
                deletions,
            });
        }
    })
    .detach();
}

/// The disk of `seed`: a quarter of the seeds get a small, failing one.
fn disk_config(seed: u64) -> SimConfig {
    let config = SimConfig::new(seed);
    if seed % 4 != 3 {
        return config;
    }
    SimConfig {
        capacity_bytes: 384 << 10,
        eio_per_million: 300,
        ..config
    }
}

/// Runs `seed` for `steps` steps in lives of random length; panics on a
/// failed check.
fn run_seed(seed: u64, steps: u64, bug: Bug) -> World {
    let (sim, _installed) = support::sim::install(disk_config(seed), DATA_DIR, bug);
    let mut world = World {
        sim,
        rng: Rng::new(seed ^ 0x5EED),
        acked: Rc::default(),
        seen: Seen::new(),
        truncations: Vec::new(),
        deletions: Vec::new(),
        deleted_before: 0,
        next_timestamp_ms: 1_000,
        appends: 0,
        refused: 0,
        retentions: 0,
        recycled: 0,
        crashes: 0,
    };
    let mut left = steps;
    while left > 0 {
        let life = (world.rng.below(400) + 1).min(left);
        incarnation(&mut world, life);
        left -= life;
    }
    // The last recovery checks the last life.
    common::run(async {
        let (_manager, log) =
            common::open_log(engine_config(DATA_DIR), "sim", topic_config()).await;
        check_recovered(&log, &world).await;
    });
    sim::set_bug(Bug::None);
    world
}

#[test]
fn the_log_keeps_its_promises_across_simulated_power_failures() {
    let seeds = support::sim::env_number("RILL_SIM_SEEDS", 24);
    let steps = support::sim::env_number("RILL_SIM_STEPS", 1_500);
    let first = support::sim::env_number("RILL_SIM_FIRST_SEED", 0);
    let (mut appends, mut refused, mut crashes, mut acked) = (0, 0, 0, 0);
    let (mut retentions, mut recycled) = (0, 0);
    for seed in first..first + seeds {
        let world =
            std::panic::catch_unwind(|| run_seed(seed, steps, Bug::None)).unwrap_or_else(|_| {
                panic!(
                    "seed {seed} failed (RILL_SIM_FIRST_SEED={seed} RILL_SIM_SEEDS=1 replays it)"
                )
            });
        appends += world.appends;
        refused += world.refused;
        retentions += world.retentions;
        recycled += world.recycled;
        crashes += world.crashes;
        acked += world.acked.borrow().len();
    }
    eprintln!(
        "{seeds} seeds × {steps} steps: {appends} appends ({acked} acknowledged, \
         {refused} refused), {crashes} crashes, {recycled} segments recycled"
    );
    assert!(acked > 0 && crashes > seeds, "the simulation did something");
    assert!(refused > 0, "the small, failing disks refused something");
    assert!(retentions > 0, "retention deleted something");
    assert!(recycled > 0, "new segments took deleted segments' files");
}

/// The first seed below `seeds` whose run fails a check with `bug` on.
fn seed_catching(bug: Bug, seeds: u64) -> Option<u64> {
    (0..seeds).find(|&seed| std::panic::catch_unwind(|| run_seed(seed, 1_500, bug)).is_err())
}

#[test]
fn acknowledging_before_the_fdatasync_is_caught() {
    let caught = seed_catching(Bug::AckBeforeSync, 24);
    sim::set_bug(Bug::None);
    assert!(caught.is_some(), "no seed caught the missing fdatasync");
}

#[test]
fn a_new_segment_without_its_directory_sync_is_caught() {
    let caught = seed_catching(Bug::NoDirSyncOnRoll, 24);
    sim::set_bug(Bug::None);
    assert!(
        caught.is_some(),
        "no seed caught the missing directory sync"
    );
}
