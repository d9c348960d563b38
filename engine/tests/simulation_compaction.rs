//! Log compaction on the simulated disk (`engine::disk::sim`): a compacted
//! topic with small segments takes updates of a dozen keys, the cleaner
//! rewrites and swaps segments in (`compaction::compact`), and at random
//! steps the power fails; after every recovery:
//!
//! - every record is one that was written (its value names its key and a
//!   version), in offset order, each at most once;
//! - for every key, the newest version the log holds is at least the
//!   newest one acknowledged as durable: no acknowledged update is lost,
//!   by a crash or by a swap;
//! - a record an earlier recovery read is still there, or a newer version
//!   of its key is (compaction drops only what is superseded).
//!
//! It catches a cleaner that renames its rewrite in without syncing it
//! first (`Bug::UnsyncedCleanedSegment`). More seeds by hand:
//! `RILL_SIM_SEEDS=200 cargo test --release -p rill-engine --test simulation_compaction -- --nocapture`.

mod common;
mod support;

use engine::batch::{self, BatchBuilder, Compression};
use engine::disk::sim::{self, Bug, Rng, SimConfig, SimDisk};
use engine::log::ReadMode;
use engine::{PartitionLog, ReadData, TopicConfig};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use support::sim::engine_config;

const DATA_DIR: &str = "/proc/rill-sim/compaction";
const KEYS: u64 = 12;

/// Key → the newest version acknowledged as durable.
type Acked = Rc<RefCell<BTreeMap<u64, u64>>>;

/// (key, version) → offset, as a recovery read them.
type Seen = BTreeMap<(u64, u64), i64>;

struct World {
    sim: Rc<SimDisk>,
    rng: Rng,
    acked: Acked,
    seen: Seen,
    next_version: u64,
    removed: usize,
    crashes: u64,
}

fn value_of(key: u64, version: u64) -> Vec<u8> {
    let mut value = format!("k{key}-v{version}-").into_bytes();
    value.resize(value.len() + (version as usize * 13) % 200, b'.');
    value
}

/// (key, version) of a record, checking its value is the one written.
fn parse(offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> (u64, u64) {
    let key: u64 = key
        .and_then(|k| std::str::from_utf8(k).ok()?.strip_prefix('k')?.parse().ok())
        .unwrap_or_else(|| panic!("offset {offset}: a key never written"));
    let version = value
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| {
            v.strip_prefix(&format!("k{key}-v"))?
                .split('-')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("offset {offset}: a value never written"));
    assert_eq!(value, Some(&value_of(key, version)[..]), "offset {offset}");
    (key, version)
}

fn topic_config() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([
            ("cleanup.policy", "compact"),
            ("segment.bytes", "4096"),
            ("min.compaction.lag.ms", "0"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ])
        .expect("topic config")
}

/// Every record of the log, in order: (offset, key, version).
async fn read_all(log: &PartitionLog) -> Vec<(i64, u64, u64)> {
    let (mut offset, hw) = (log.log_start_offset(), log.high_watermark());
    let mut out = Vec::new();
    while offset < hw {
        let result = log.read(offset, 65536, ReadMode::Copy).await.expect("read");
        let ReadData::Bytes(bytes) = result.data else {
            break;
        };
        let mut next = offset;
        for item in batch::batches(&bytes) {
            let (header, range) = item.expect("a whole batch");
            // A cleaned batch keeps its offset span with fewer records:
            // its CRC, not the produce path's checks, says it is whole.
            let crc = engine::batch::header::compute_crc(&bytes[range.clone()]);
            assert_eq!(crc, header.crc, "batch at {} corrupt", header.base_offset);
            for record in batch::records(&bytes[range]).expect("records") {
                let at = header.base_offset + i64::from(record.offset_delta);
                if at >= offset {
                    let (key, version) = parse(at, record.key.as_deref(), record.value.as_deref());
                    out.push((at, key, version));
                }
            }
            next = header.last_offset() + 1;
        }
        assert!(next > offset, "a read at {offset} made no progress");
        offset = next;
    }
    out
}

/// The checks of the module docs; the records, as `Seen`.
async fn check_recovered(log: &PartitionLog, world: &World) -> Seen {
    let records = read_all(log).await;
    let mut seen = Seen::new();
    let mut newest: BTreeMap<u64, (u64, i64)> = BTreeMap::new();
    let mut last_offset = -1;
    for &(offset, key, version) in &records {
        assert!(offset > last_offset, "offset {offset} out of order");
        last_offset = offset;
        assert!(
            seen.insert((key, version), offset).is_none(),
            "k{key} v{version} twice"
        );
        let (previous, _) = newest.get(&key).copied().unwrap_or((0, -1));
        assert!(
            version > previous || previous == 0,
            "k{key}: v{version} after v{previous}"
        );
        newest.insert(key, (version, offset));
    }
    for (key, acked) in world.acked.borrow().iter() {
        let held = newest.get(key).map_or(0, |(version, _)| *version);
        assert!(
            held >= *acked,
            "k{key}: acknowledged v{acked} lost (the log holds v{held})"
        );
    }
    for (key, version) in world.seen.keys() {
        let kept = seen.contains_key(&(*key, *version));
        let superseded = newest.get(key).is_some_and(|(v, _)| v > version);
        assert!(
            kept || superseded,
            "k{key} v{version} went without a newer version"
        );
    }
    seen
}

/// One append of 1–3 updates, acknowledged when durable.
fn append(world: &mut World, log: &Rc<PartitionLog>) {
    let count = world.rng.below(3) + 1;
    let mut builder = BatchBuilder::new(0, Compression::None);
    let mut updates = Vec::new();
    for i in 0..count {
        let key = world.rng.below(KEYS);
        world.next_version += 1;
        let version = world.next_version;
        let value = value_of(key, version);
        builder.push(
            i as i32,
            1_000,
            Some(format!("k{key}").as_bytes()),
            Some(&value),
            &[],
        );
        updates.push((key, version));
    }
    let mut bytes = builder.build().expect("batch builds");
    let Ok(result) = log.append(&mut bytes, 0) else {
        return;
    };
    let (log, acked) = (log.clone(), world.acked.clone());
    glommio::spawn_local(async move {
        if log.wait_durable(result.last_offset).await.is_ok() {
            let mut acked = acked.borrow_mut();
            for (key, version) in updates {
                let newest = acked.entry(key).or_default();
                *newest = (*newest).max(version);
            }
        }
    })
    .detach();
}

/// Appends, waits, compaction passes and yields, for `steps`.
async fn drive(world: &mut World, log: &Rc<PartitionLog>, steps: u64) {
    for _ in 0..steps {
        match world.rng.below(20) {
            0..=9 => append(world, log),
            10 => {
                let end = log.log_end_offset();
                if end > 0 {
                    let _ = log.wait_durable(end - 1).await;
                }
            }
            11 | 12 => {
                if let Ok(stats) = engine::compaction::compact(log).await {
                    world.removed += stats.records_removed;
                }
            }
            _ => {
                for _ in 0..world.rng.below(16) {
                    futures_lite::future::yield_now().await;
                }
            }
        }
    }
}

/// Runs `seed` for `steps` steps in lives of random length.
fn run_seed(seed: u64, steps: u64, bug: Bug) -> World {
    let (sim, _installed) = support::sim::install(SimConfig::new(seed), DATA_DIR, bug);
    let mut world = World {
        sim,
        rng: Rng::new(seed ^ 0xC0FFEE),
        acked: Acked::default(),
        seen: Seen::new(),
        next_version: 0,
        removed: 0,
        crashes: 0,
    };
    let mut left = steps + 1;
    while left > 0 {
        let life = (world.rng.below(300) + 1).min(left);
        common::run(async {
            let (manager, log) =
                common::open_log(engine_config(DATA_DIR), "c", topic_config()).await;
            world.seen = check_recovered(&log, &world).await;
            drive(&mut world, &log, life - 1).await;
            drop(manager);
        });
        world.sim.crash();
        world.crashes += 1;
        left -= life;
    }
    sim::set_bug(Bug::None);
    world
}

#[test]
fn compaction_loses_no_acknowledged_update_across_simulated_power_failures() {
    let seeds = support::sim::env_number("RILL_SIM_SEEDS", 8);
    let (mut removed, mut crashes) = (0, 0);
    for seed in 0..seeds {
        let world = std::panic::catch_unwind(|| run_seed(seed, 1_500, Bug::None))
            .unwrap_or_else(|_| panic!("seed {seed} failed"));
        removed += world.removed;
        crashes += world.crashes;
    }
    eprintln!("{seeds} seeds: {removed} records compacted away, {crashes} crashes");
    assert!(removed > 0, "the cleaner removed something");
}

#[test]
fn a_cleaned_segment_swapped_in_unsynced_is_caught() {
    let caught = (0..16).find(|&seed| {
        std::panic::catch_unwind(|| run_seed(seed, 1_500, Bug::UnsyncedCleanedSegment)).is_err()
    });
    sim::set_bug(Bug::None);
    assert!(caught.is_some(), "no seed caught the unsynced rewrite");
}
