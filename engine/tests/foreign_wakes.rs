//! Wakers of shard tasks woken and dropped on other threads: what every
//! cross-shard reply (a `futures::channel::oneshot` sent from another shard)
//! and every stream-writer or cleaner outcome does.
//!
//! glommio 0.9.0 let a foreign thread drop a task's last waker reference
//! and then raise the count again to queue one more wake. A `JoinHandle`
//! dropped on the owner between the two saw no reference left and freed
//! the task; the queued wake then ran on freed memory. That was the
//! broker's heap corruption under an ordinary produce load (issue #29).
//! rill patches glommio (third_party/glommio, marked `rill:`) so a foreign
//! thread never decrements the count: it hands its reference home.
//!
//! These loops run the racing pattern: tasks awaiting replies that
//! several foreign threads (more than the cores, so they are preempted
//! mid-wake) send or drop. The window is a few instructions wide, so a
//! short run rarely hits it; CI runs a short one, and a long one by hand:
//!
//! `RILL_FOREIGN_WAKE_ROUNDS=3000000 cargo test --release -p rill-engine --test foreign_wakes`
//!
//! Against the unpatched crate, that long run failed after 84 s on a
//! 2-core host with glommio's own check, "Waker invariant broken:
//! ... refcount: -1"; under AddressSanitizer (`.ci/asan.sh`) a bad round
//! is reported as a use after free.

use glommio::LocalExecutorBuilder;
use std::sync::mpsc;
use std::thread;

/// Rounds per test by default: short enough for CI (about a second each).
const CI_ROUNDS: u64 = 100_000;
/// Foreign threads replying, round robin: more than a CI host's cores.
const FOREIGN_THREADS: usize = 4;

fn rounds() -> u64 {
    std::env::var("RILL_FOREIGN_WAKE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_ROUNDS)
}

/// Starts the foreign threads; each ends its oneshots as `foreign` says
/// until its channel closes.
fn start_foreign(
    foreign: Foreign,
) -> (
    Vec<mpsc::Sender<futures::channel::oneshot::Sender<u64>>>,
    Vec<thread::JoinHandle<()>>,
) {
    (0..FOREIGN_THREADS)
        .map(|_| {
            let (to_foreign, senders) = mpsc::channel::<futures::channel::oneshot::Sender<u64>>();
            let peer = thread::spawn(move || {
                while let Ok(sender) = senders.recv() {
                    match foreign {
                        Foreign::Send => {
                            let _ = sender.send(1);
                        }
                        Foreign::Drop => drop(sender),
                    }
                }
            });
            (to_foreign, peer)
        })
        .unzip()
}

fn join_all(peers: Vec<thread::JoinHandle<()>>) {
    for peer in peers {
        peer.join().expect("the foreign thread ends");
    }
}

/// How the foreign thread ends its side of a round.
#[derive(Clone, Copy)]
enum Foreign {
    /// Sends the reply (the oneshot wakes the owner's waker by value).
    Send,
    /// Drops the sender unsent (the receiver wakes with `Canceled`).
    Drop,
}

/// The owner spawns a task awaiting a oneshot whose sender goes to a
/// foreign thread, awaits the task's `JoinHandle` and drops it; the
/// foreign thread completes the oneshot. Returns how many replies arrived.
fn race(foreign: Foreign) -> u64 {
    let (to_foreign, peers) = start_foreign(foreign);
    let rounds = rounds();
    let replies = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mut replies = 0u64;
            for round in 0..rounds {
                let (sender, receiver) = futures::channel::oneshot::channel::<u64>();
                if to_foreign[round as usize % FOREIGN_THREADS]
                    .send(sender)
                    .is_err()
                {
                    break;
                }
                // A detached task awaited through its `JoinHandle`, as the
                // broker's connection writer awaits each request's task.
                let task = glommio::spawn_local(async move { receiver.await.ok() }).detach();
                if let Some(Some(reply)) = task.await {
                    replies += reply;
                }
            }
            replies
        })
        .expect("executor starts")
        .join()
        .expect("executor ends");
    join_all(peers);
    replies
}

#[test]
fn replies_woken_from_another_thread_never_touch_a_freed_task() {
    assert_eq!(race(Foreign::Send), rounds());
}

#[test]
fn senders_dropped_on_another_thread_never_touch_a_freed_task() {
    assert_eq!(race(Foreign::Drop), 0);
}

/// Detached tasks: the owner keeps no handle, so the foreign thread's
/// waker is often the task's last reference when it completes.
#[test]
fn detached_tasks_woken_from_another_thread_are_freed_once() {
    let (to_foreign, peers) = start_foreign(Foreign::Send);
    let rounds = rounds();
    let replies = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let (done, mut finished) = futures::channel::mpsc::unbounded::<u64>();
            for round in 0..rounds {
                let (sender, receiver) = futures::channel::oneshot::channel::<u64>();
                if to_foreign[round as usize % FOREIGN_THREADS]
                    .send(sender)
                    .is_err()
                {
                    break;
                }
                let done = done.clone();
                glommio::spawn_local(async move {
                    if let Ok(reply) = receiver.await {
                        let _ = done.unbounded_send(reply);
                    }
                })
                .detach();
            }
            drop(done);
            let mut replies = 0u64;
            while let Some(reply) = futures::StreamExt::next(&mut finished).await {
                replies += reply;
            }
            replies
        })
        .expect("executor starts")
        .join()
        .expect("executor ends");
    join_all(peers);
    assert_eq!(replies, rounds);
}
