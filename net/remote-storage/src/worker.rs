//! The remote thread: one OS thread named `rill-remote`, running a
//! current-thread tokio runtime, fed jobs over a bounded channel.
//!
//! Why one thread and a current-thread runtime rather than a pool: the
//! shards own one core each, and every extra busy thread takes time from
//! them. The work here is mostly waiting on the network; its CPU is TLS
//! (AES-GCM, GB/s a core with AES-NI) and SigV4's SHA-256 of each payload
//! (some hundreds of MB/s to about 2 GB/s a core, as the CPU has SHA
//! extensions or not), so one core keeps up with a few hundred MB/s of
//! uploads at least: a broker tiers at its produce rate, which its NIC
//! already bounds.
//! A current-thread runtime also lets the chunk cache sit in a `RefCell`
//! with no lock. The local store's and `tokio::fs`'s blocking calls run on
//! a small blocking pool (`BLOCKING_THREADS`), at nice 10 (`BLOCKING_NICE`):
//! reading sealed segments for upload yields to the shards. The rates above are
//! order-of-magnitude figures for these algorithms, not measured on rill.
//!
//! Bounds: at most `JOB_QUEUE_DEPTH` jobs wait in the channel (a caller's
//! send waits beyond that: backpressure up to the shard), at most
//! `JOBS_ACCEPTED` are taken from it at once, and of those at most
//! `UPLOADS_IN_FLIGHT` file uploads and `REQUESTS_IN_FLIGHT` other
//! operations run. Uploads have slots of their own so that a burst of
//! segment uploads can neither hold more than 4 × 24 MiB of parts nor
//! starve the remote reads that consumers wait on.
//!
//! The thread ends when every `RemoteStore` handle is dropped: the channel
//! closes, the jobs in flight finish (each bounded by the operation
//! timeout), and the runtime is dropped.

use crate::backend;
use crate::cache::ChunkCache;
use crate::config::RemoteStorageConfig;
use crate::context::Context;
use crate::error::RemoteError;
use crate::job::{Job, Reply};
use crate::listing;
use crate::location::Location;
use crate::read;
use crate::stats::{ErrorKind, Stats};
use crate::upload;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::task::LocalSet;

/// The thread's name, as `top -H` and `/proc` show it.
pub(crate) const THREAD_NAME: &str = "rill-remote";

/// Jobs waiting for the thread, beyond which a caller's send waits.
const JOB_QUEUE_DEPTH: usize = 256;

/// Jobs taken from the channel at once, running or waiting for a slot.
const JOBS_ACCEPTED: usize = 256;

/// File uploads at once: each holds up to 3 parts (24 MiB by default) and
/// streams at the link's speed, so a few fill the link.
pub(crate) const UPLOADS_IN_FLIGHT: usize = 4;

/// Other operations at once (reads, lists, deletes, small puts): enough for
/// a burst of consumers' remote reads to overlap, few enough to bound the
/// connections to the store.
pub(crate) const REQUESTS_IN_FLIGHT: usize = 32;

/// Threads for blocking file I/O (the local store, reading upload files).
const BLOCKING_THREADS: usize = 4;

/// The blocking threads' nice value (the shards run at the process's, 0 by
/// default). Their work is mostly reading sealed segments for upload, bulk
/// work with no client waiting on it: at nice 10 the scheduler gives a
/// shard's core to the shard first, as the log cleaner's thread does
/// (engine `compaction`, where the same step took produce p99 back from
/// 3-7x to within noise during a pass). Remote reads from S3, GCS or Azure
/// do not use these threads, so consumers keep the normal priority.
const BLOCKING_NICE: libc::c_int = 10;

/// The remote thread's answer to startup: ready, or why not.
type Ready = Result<(), RemoteError>;

/// Starts the thread and waits until its store is built; returns the
/// channel to send jobs on.
pub(crate) fn start(
    location: Location,
    config: RemoteStorageConfig,
    stats: Arc<Stats>,
) -> Result<async_channel::Sender<Job>, RemoteError> {
    let (jobs, queue) = async_channel::bounded(JOB_QUEUE_DEPTH);
    let (ready_sender, ready) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(THREAD_NAME.to_string())
        .spawn(move || run(location, config, stats, queue, ready_sender))
        .map_err(RemoteError::io("open"))?;
    match ready.recv() {
        Ok(Ok(())) => Ok(jobs),
        Ok(Err(error)) => Err(error),
        Err(_thread_ended) => Err(RemoteError::Closed),
    }
}

/// The blocking pool's threads' name.
pub(crate) const BLOCKING_THREAD_NAME: &str = "rill-remote-io";

/// Lowers the calling thread's priority to [`BLOCKING_NICE`]. On Linux the
/// nice value is per thread: `who = 0` is this thread. A refusal (a
/// seccomp policy) leaves it at the shards' priority, as before.
fn below_the_shards() {
    // SAFETY: a plain syscall on this thread.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, BLOCKING_NICE) } != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "remote I/O thread keeps the shards' priority");
    }
}

/// The thread's body: build the runtime and the store, report, serve.
fn run(
    location: Location,
    config: RemoteStorageConfig,
    stats: Arc<Stats>,
    queue: async_channel::Receiver<Job>,
    ready: SyncSender<Ready>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name(BLOCKING_THREAD_NAME)
        .on_thread_start(below_the_shards)
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = ready.send(Err(RemoteError::io("open")(error)));
            return;
        }
    };
    let store = {
        // Some HTTP clients look for a runtime when they are built.
        let _entered = runtime.enter();
        backend::build(&location, &config)
    };
    let store = match store {
        Ok(store) => store,
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    let context = Context {
        store,
        cache: RefCell::new(ChunkCache::new(config.cache_bytes)),
        stats,
        chunk_bytes: config.chunk_bytes,
        part_bytes: config.part_bytes,
        op_timeout: config.op_timeout(),
        upload_slots: Semaphore::new(UPLOADS_IN_FLIGHT),
        request_slots: Semaphore::new(REQUESTS_IN_FLIGHT),
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    LocalSet::new().block_on(&runtime, serve(Rc::new(context), queue));
}

/// Takes jobs until every handle is gone, up to `JOBS_ACCEPTED` at once,
/// then waits for those still running.
async fn serve(context: Rc<Context>, queue: async_channel::Receiver<Job>) {
    let accepted = Arc::new(Semaphore::new(JOBS_ACCEPTED));
    while let Ok(job) = queue.recv().await {
        let Ok(acceptance) = accepted.clone().acquire_owned().await else {
            break;
        };
        let context = context.clone();
        tokio::task::spawn_local(async move {
            let slots = match job {
                Job::PutFile { .. } => &context.upload_slots,
                _ => &context.request_slots,
            };
            // The semaphores are never closed; were one, the job's caller
            // would see `Closed` as its reply is dropped.
            if let Ok(_slot) = slots.acquire().await {
                dispatch(&context, job).await;
            }
            drop(acceptance);
        });
    }
    let _all_done = accepted.acquire_many(JOBS_ACCEPTED as u32).await;
}

/// Runs one job and sends its answer. Reads whose caller has gone are
/// skipped; writes run regardless (the caller may have given up waiting,
/// not wanting).
async fn dispatch(ctx: &Context, job: Job) {
    match job {
        Job::PutFile {
            local,
            length,
            key,
            reply,
        } => {
            let answer = upload::put_file(ctx, &local, length, &key).await;
            send(ctx, ErrorKind::Put, reply, answer);
        }
        Job::PutBytes { key, bytes, reply } => {
            let answer = upload::put_bytes(ctx, &key, bytes).await;
            send(ctx, ErrorKind::Put, reply, answer);
        }
        Job::Get { key, reply } if !reply.is_canceled() => {
            let answer = read::get(ctx, &key).await;
            send(ctx, ErrorKind::Get, reply, answer);
        }
        Job::GetRange { key, range, reply } if !reply.is_canceled() => {
            let answer = read::get_range(ctx, &key, range).await;
            send(ctx, ErrorKind::Get, reply, answer);
        }
        Job::List { prefix, reply } if !reply.is_canceled() => {
            let answer = listing::list(ctx, &prefix).await;
            send(ctx, ErrorKind::List, reply, answer);
        }
        Job::Delete { keys, reply } => {
            let answer = listing::delete(ctx, &keys).await;
            send(ctx, ErrorKind::Delete, reply, answer);
        }
        Job::DeletePrefix { prefix, reply } => {
            let answer = listing::delete_prefix(ctx, &prefix).await;
            send(ctx, ErrorKind::Delete, reply, answer);
        }
        Job::Get { .. } | Job::GetRange { .. } | Job::List { .. } => {}
    }
}

/// Counts a failure and answers; a caller that has gone misses nothing.
/// Only the store's and the node's failures count: a missing object, a bad
/// key or a range past the end is an answer about the request, and would
/// only blur a metric that alerts on the store.
fn send<T>(ctx: &Context, kind: ErrorKind, reply: Reply<T>, answer: Result<T, RemoteError>) {
    if let Err(error) = &answer {
        let about_the_request = matches!(
            error,
            RemoteError::NotFound { .. }
                | RemoteError::InvalidKey { .. }
                | RemoteError::InvalidRange { .. }
        );
        if !about_the_request {
            ctx.stats.record_error(kind);
            tracing::debug!(?kind, %error, "remote storage operation failed");
        }
    }
    let _caller_gone = reply.send(answer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RemoteStorageConfig, RemoteStore};
    use futures::executor::block_on;

    /// The nice value of each of this process's threads named `name`.
    fn nice_of_threads(name: &str) -> Vec<i64> {
        let mut nices = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let task = task.unwrap().path();
            let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
                continue; // the thread ended meanwhile
            };
            if comm.trim() != name {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(task.join("stat")) else {
                continue;
            };
            // Fields after the `(comm)`: state is field 3, nice field 19.
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            nices.push(after.split(' ').nth(19 - 3).unwrap().parse().unwrap());
        }
        nices
    }

    #[test]
    fn upload_io_runs_below_the_shards_priority() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        let store = RemoteStore::open(RemoteStorageConfig::from_url(&url)).unwrap();
        let local = dir.path().join("segment.log");
        std::fs::write(&local, vec![7u8; 100_000]).unwrap();
        // The upload reads the file on the blocking pool, which keeps its
        // threads for a while after.
        assert_eq!(
            block_on(store.put_file(local, "p-0/0.log".into())).unwrap(),
            100_000
        );
        let nices = nice_of_threads(BLOCKING_THREAD_NAME);
        assert!(!nices.is_empty(), "no {BLOCKING_THREAD_NAME} thread");
        // At least BLOCKING_NICE: a test run under `nice` starts higher.
        assert!(
            nices.iter().all(|&nice| nice >= i64::from(BLOCKING_NICE)),
            "{nices:?}"
        );
        // The store's own thread, which serves remote reads over the
        // network, keeps the priority it was started with (this thread's).
        // SAFETY: reads this thread's nice value.
        let ours = i64::from(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) });
        // (Other tests' stores may run beside this one: all are checked.)
        let store_threads = nice_of_threads(THREAD_NAME);
        assert!(!store_threads.is_empty());
        assert!(
            store_threads.iter().all(|&nice| nice == ours),
            "{store_threads:?}"
        );
    }
}
