//! A shard waiting on a timer is woken when the timer is due, whatever the
//! reactor's own preemption timer does meanwhile.
//!
//! rill's glommio keeps the reactor's latency timer armed across polls
//! (third_party/README.md, change four): when the executor parks, the
//! timer armed for the task queue's time slice is kept if it fires no
//! later than the next user timer wants, and no new timer is armed. If
//! the kept timer fired, and its completion was reaped, between that
//! decision and the sleep, the executor slept with no timer at all, and a
//! task sleeping on a timer waited until some other event came: forever,
//! in a quiet test (seen once, `index_cache`, 2026-12-07).
//!
//! The loop below makes that window likely: a short time slice, and a task
//! that busy-waits about one slice before each short sleep, so the slice's
//! timer falls due around the moment the executor parks. Spinner threads
//! beside it (more than the cores) preempt the executor inside the window.
//! Each sleep must end; a watchdog fails the test rather than hang it.
//!
//! The second test covers a woken task instead: the executor polls, which
//! wakes the task, and then checks for preemption before running it. If
//! the kept slice timer fell due in between, the executor parked with the
//! task queued and nothing armed to wake it (seen once more in
//! `index_cache`). A very short slice and an executor that spins before it
//! parks make that window likely.
//!
//! Both run with glommio's 100 ms sleep cap off, which would otherwise
//! turn such a hang into a stall nobody sees.
//!
//! `RILL_TIMER_WAKEUP_ROUNDS=200000 cargo test --release -p rill-engine --test timer_wakeups`
//! runs a long one by hand.

use glommio::LocalExecutorBuilder;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rounds by default: a few seconds (unfixed, the loop stuck within 130-210).
const CI_ROUNDS: u64 = 5_000;

/// The executor's time slice: its latency timer fires this long after each
/// poll that armed it.
const SLICE: Duration = Duration::from_micros(300);

/// Longer than any sleep may take on a loaded host, far shorter than a hang.
const STUCK_AFTER: Duration = Duration::from_secs(20);

/// Turns off glommio's sleep cap (`RILL_GLOMMIO_SLEEP_CAP_MS=0`, read once
/// by the first executor that sleeps): with it, a lost wake-up costs 100 ms
/// and goes unseen; without it, it is the hang the watchdog reports. Set
/// once, before any executor of this binary starts.
fn sleep_cap_off() {
    static OFF: std::sync::Once = std::sync::Once::new();
    OFF.call_once(|| std::env::set_var("RILL_GLOMMIO_SLEEP_CAP_MS", "0"));
}

fn rounds() -> u64 {
    std::env::var("RILL_TIMER_WAKEUP_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_ROUNDS)
}

/// Busy-waits `how_long`.
fn spin(how_long: Duration) {
    let started = Instant::now();
    while started.elapsed() < how_long {
        std::hint::spin_loop();
    }
}

/// Threads that compete with the executor for the CPU until `stop`.
fn start_spinners(stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
    (0..threads)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_micros(500));
                    std::thread::yield_now();
                }
            })
        })
        .collect()
}

/// Runs `rounds()` rounds of `round` on an executor built by `builder`,
/// with spinners beside it, and fails if no round ends for `STUCK_AFTER`.
fn run_watched<F, R>(builder: LocalExecutorBuilder, stuck: &str, round: R)
where
    R: Fn(u64) -> F + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    sleep_cap_off();
    let rounds = rounds();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let spinners = start_spinners(&stop);
    let progress = done.clone();
    let finished = Arc::new(AtomicBool::new(false));
    let finishing = finished.clone();
    let executor = builder
        .spawn(move || async move {
            for n in 0..rounds {
                round(n).await;
                progress.store(n + 1, Ordering::Relaxed);
            }
            finishing.store(true, Ordering::Release);
        })
        .expect("executor");
    let mut last = (0, Instant::now());
    while !finished.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
        let now = done.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        }
        assert!(
            last.1.elapsed() < STUCK_AFTER,
            "{stuck}: stuck after {now} of {rounds} rounds"
        );
    }
    stop.store(true, Ordering::Relaxed);
    executor.join().expect("executor ran");
    for spinner in spinners {
        spinner.join().expect("spinner");
    }
    assert_eq!(done.load(Ordering::Relaxed), rounds);
}

#[test]
fn every_timer_wakes_its_task_while_the_slice_timer_falls_due_at_the_park() {
    let builder = LocalExecutorBuilder::default()
        .preempt_timer(SLICE)
        .name("timer-wakeups");
    run_watched(
        builder,
        "a sleeping task was not woken",
        |round| async move {
            // Around one slice, so the slice's timer falls due at about the
            // moment the task sleeps and the executor parks.
            let busy_us = SLICE.as_micros() as u64 - 40 + round * 7919 % 80;
            spin(Duration::from_micros(busy_us));
            glommio::timer::sleep(Duration::from_micros(200 + round % 5 * 100)).await;
        },
    );
}

/// How long the executor spins looking for work before it parks: long
/// enough that a task's short sleep ends while it spins, so the task is
/// woken without the executor ever parking and the slice's timer armed
/// before is kept.
const SPIN_BEFORE_PARK: Duration = Duration::from_millis(2);

/// A time slice so short that its timer, kept across polls, often falls due
/// between a poll and the task queues' first check for preemption.
const SHORT_SLICE: Duration = Duration::from_micros(10);

#[test]
fn a_task_woken_while_the_executor_spins_runs_when_the_slice_timer_fires_first() {
    let builder = LocalExecutorBuilder::default()
        .preempt_timer(SHORT_SLICE)
        .spin_before_park(SPIN_BEFORE_PARK)
        .name("spin-wakeups");
    run_watched(builder, "a woken task was not run", |round| async move {
        // Zero to two slices, so the slice's timer often falls due just as
        // the executor, having woken the task, comes round to run it.
        let busy_ns = round * 7919 % (2 * SHORT_SLICE.as_nanos() as u64);
        spin(Duration::from_nanos(busy_ns));
        glommio::timer::sleep(Duration::from_micros(2)).await;
    });
}
