//! Crash test: acknowledged appends survive SIGKILL.
//!
//! A child process (this test binary re-executed, running only `crash_child`)
//! appends under the `fsync` policy from several concurrent producers and
//! prints each append once `wait_durable` resolves: `ACK <base> <last>
//! <crc32c of its keys and values> <streamed writes so far>` (the children
//! stream from the first whole block, so kills land in streamed writes
//! too). The parent kills it with SIGKILL at a random moment, many times; each next child recovers the same directory
//! and keeps appending. After every kill the parent opens a copy of the
//! directory (so the next child still recovers the raw crash state itself)
//! and checks that every acknowledged append is there byte for byte, and
//! that everything readable is valid: whole batches that pass the CRC,
//! offsets contiguous from 0, and each record's key and value exactly those
//! the child derived from its offset. At the end the original directory is
//! opened and checked the same way.

mod common;
mod support;

use engine::log::ReadMode;
use engine::{FlushPolicy, TopicConfig};
use rand::Rng;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RILL_CRASH_CHILD_DIR";
const TOPIC: &str = "c";
const PRODUCERS: usize = 3;
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(30);
const ITERATIONS: usize = 8;

fn key_for(offset: i64) -> Vec<u8> {
    format!("k{offset}").into_bytes()
}

/// Values of varying size, so batches straddle device blocks and segments roll.
fn value_for(offset: i64) -> Vec<u8> {
    format!("v{offset}")
        .repeat((offset % 13 + 1) as usize * 7)
        .into_bytes()
}

fn digest(records: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) -> u32 {
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    for (k, v) in records {
        crc.update(&k);
        crc.update(&v);
    }
    crc.finalize() as u32
}

fn topic_config() -> TopicConfig {
    TopicConfig::default()
        .with_overrides([
            ("segment.bytes", "65536"),
            ("index.interval.bytes", "1024"),
            ("retention.ms", "-1"),
        ])
        .expect("topic config")
}

fn engine_config(dir: &Path) -> engine::EngineConfig {
    let mut config = common::config(dir, FlushPolicy::Fsync);
    config.preallocate_bytes = 1 << 20;
    config
}

/// The child: appends until killed (or `CHILD_MAX_RUN`), acknowledging on
/// stdout. Not a test of its own: ignored in a normal run (so it never
/// shows as a pass that checked nothing), run by the crash tests with
/// `--ignored --exact crash_child` in a child process.
#[test]
#[ignore = "the crash tests' child process; they run it"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        panic!("crash_child runs as the crash tests' child, with {CHILD_ENV} set");
    };
    let dir = std::path::PathBuf::from(dir);
    common::run(async move {
        let (_manager, log) = common::open_log(engine_config(&dir), TOPIC, topic_config()).await;
        // A newline first: libtest has printed "test crash_child ... " without one.
        println!("\nREADY {}", log.log_end_offset());
        std::io::stdout().flush().expect("stdout");
        let deadline = Instant::now() + CHILD_MAX_RUN;
        let tasks: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    while Instant::now() < deadline {
                        // No await between reading the end and appending: the
                        // offsets the batch is built for are the ones it gets.
                        let base = log.log_end_offset();
                        let count = base % 7 + 1;
                        let mut builder =
                            engine::batch::BatchBuilder::new(0, engine::batch::Compression::None);
                        for i in 0..count {
                            let o = base + i;
                            builder.push(
                                i as i32,
                                1_000 + o,
                                Some(&key_for(o)),
                                Some(&value_for(o)),
                                &[],
                            );
                        }
                        let mut bytes = builder.build().expect("batch builds");
                        let r = log.append(&mut bytes, 0).expect("append");
                        assert_eq!((r.base_offset, r.last_offset), (base, base + count - 1));
                        log.wait_durable(r.last_offset).await.expect("durable");
                        let crc = digest((base..base + count).map(|o| (key_for(o), value_for(o))));
                        let streamed = log.context().fsync_stats.borrow().streamed_writes;
                        let mut out = std::io::stdout().lock();
                        writeln!(
                            out,
                            "ACK {} {} {crc} {streamed}",
                            r.base_offset, r.last_offset
                        )
                        .expect("stdout");
                        out.flush().expect("stdout");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
    });
}

/// One acknowledged append: last offset and digest.
type Acked = BTreeMap<i64, (i64, u32)>;

/// Opens the log in `data_dir` and checks it against `acked`; returns the log end.
fn verify(data_dir: &Path, acked: &Acked, context: &str) -> i64 {
    let data_dir = data_dir.to_path_buf();
    let acked = acked.clone();
    let context = context.to_string();
    common::run(async move {
        let (manager, log) =
            common::open_log(engine_config(&data_dir), TOPIC, topic_config()).await;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        assert_eq!(start, 0, "{context}: nothing was deleted");
        assert_eq!(
            log.high_watermark(),
            end,
            "{context}: all recovered data is readable"
        );
        let records = support::read_checked(&log, 0, ReadMode::Copy).await;
        let slice = support::read_checked(&log, 0, ReadMode::FileSlice).await;
        assert!(
            records == slice,
            "{context}: copy and file-slice reads differ"
        );
        assert_eq!(
            records.len() as i64,
            end,
            "{context}: offsets 0..{end} all present"
        );
        for (i, (o, k, v)) in records.iter().enumerate() {
            assert_eq!(*o, i as i64, "{context}: offsets contiguous from 0");
            assert!(
                k.as_deref() == Some(&key_for(*o)[..]),
                "{context}: key of {o}"
            );
            assert!(
                v.as_deref() == Some(&value_for(*o)[..]),
                "{context}: value of {o}"
            );
        }
        for (&base, &(last, crc)) in &acked {
            assert!(
                last < end,
                "{context}: acknowledged {base}..={last} lost (log ends at {end})"
            );
            let got = digest(
                records[base as usize..=last as usize]
                    .iter()
                    .map(|(_, k, v)| {
                        (k.clone().unwrap_or_default(), v.clone().unwrap_or_default())
                    }),
            );
            assert_eq!(got, crc, "{context}: acknowledged {base}..={last} differs");
        }
        manager.shutdown().await.expect("shutdown");
        end
    })
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Runs one child until a random kill; returns its complete stdout lines and its stderr.
fn run_child(data_dir: &Path, rng: &mut impl Rng) -> (Vec<String>, String) {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--ignored",
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("child starts");
    let stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let out_reader = std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(stdout);
        let mut lines = Vec::new();
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            // A line cut by the kill has no newline: it was never acknowledged.
            if line.ends_with('\n') {
                if line.contains("READY") {
                    let _ = ready_tx.send(());
                }
                lines.push(line.trim_end().to_string());
            }
            line.clear();
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let ready = ready_rx.recv_timeout(Duration::from_secs(20)).is_ok();
    if ready {
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..=400)));
    }
    let exited_early = child.try_wait().expect("try_wait");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let lines = out_reader.join().expect("stdout reader");
    let err = err_reader.join().expect("stderr reader");
    assert!(ready, "the child never became ready; stderr:\n{err}");
    assert!(
        exited_early.is_none(),
        "the child exited before the kill ({exited_early:?}); stderr:\n{err}"
    );
    (lines, err)
}

#[test]
fn acknowledged_appends_survive_sigkill() {
    let root = support::tempdir();
    let data_dir = root.path().join("data");
    let mut rng = rand::thread_rng();
    let mut acked = Acked::new();
    let started = Instant::now();
    let mut previous_end = 0i64;
    let mut streamed_writes = 0u64;
    for iteration in 0..ITERATIONS {
        let (lines, _stderr) = run_child(&data_dir, &mut rng);
        let mut new_acks = 0usize;
        for line in &lines {
            let marker = line
                .find("READY")
                .or_else(|| line.find("ACK"))
                .unwrap_or(line.len());
            let fields: Vec<&str> = line[marker..].split_whitespace().collect();
            match fields.as_slice() {
                ["READY", end] => {
                    let end: i64 = end.parse().expect("READY offset");
                    // The parent recovered a copy of the same files: the same end.
                    assert_eq!(
                        end, previous_end,
                        "iteration {iteration}: the child recovered another end"
                    );
                }
                ["ACK", base, last, crc, streamed] => {
                    let streamed: u64 = streamed.parse().expect("streamed writes");
                    streamed_writes = streamed_writes.max(streamed);
                    let base: i64 = base.parse().expect("base");
                    let entry = (last.parse().expect("last"), crc.parse().expect("crc"));
                    assert!(
                        acked.insert(base, entry).is_none(),
                        "offset {base} acknowledged twice"
                    );
                    new_acks += 1;
                }
                _ => {}
            }
        }
        let copy = root.path().join(format!("copy-{iteration}"));
        copy_dir(&data_dir, &copy);
        let end = verify(&copy, &acked, &format!("after kill {iteration}"));
        std::fs::remove_dir_all(&copy).expect("remove copy");
        eprintln!(
            "kill {iteration}: {new_acks} new acks, log ends at {end}, {streamed_writes} streamed writes in the busiest child so far"
        );
        previous_end = end;
    }
    let total: i64 = acked
        .values()
        .zip(acked.keys())
        .map(|((last, _), base)| last - base + 1)
        .sum();
    assert!(
        acked.len() >= ITERATIONS,
        "too few appends were acknowledged to mean anything: {}",
        acked.len()
    );
    assert!(streamed_writes > 0, "no child streamed a write");
    let end = verify(&data_dir, &acked, "final");
    eprintln!(
        "{} acknowledged appends ({total} records), log ends at {end}, {:?}",
        acked.len(),
        started.elapsed()
    );
}
