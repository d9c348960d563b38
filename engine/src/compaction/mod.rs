//! Log compaction for `cleanup.policy=compact`, as Kafka's log cleaner does
//! it: keep the newest record per key.
//!
//! - Which logs: each tick, every compacted log whose *cleanable section*
//!   (the sealed segments below the last stable offset and older than
//!   `min.compaction.lag.ms`) has a dirty ratio (bytes not yet cleaned over
//!   the section's bytes) of at least `min.cleanable.dirty.ratio`, or whose
//!   oldest dirty data is past `max.compaction.lag.ms`; dirtiest first
//!   ([`candidate`], used by the manager's tick).
//! - The *first dirty offset* is kept per partition in
//!   `cleaner-offset-checkpoint` (Kafka's cleaner-offset-checkpoint), so the
//!   key map is built over the new data only, never over what a previous
//!   pass already took in.
//! - The key map ([`offset_map`]) lives in a fixed buffer of
//!   `log.cleaner.dedupe.buffer.size` bytes (key hash and offset per key);
//!   when the dirty section has more keys, the pass cleans up to the offset
//!   the map covers and leaves the rest dirty for the next pass.
//! - The files are read batch by batch and the survivors written through
//!   buffered files on a cleaner thread ([`rewrite`]); see [`run_pass`] for
//!   why a thread.
//! - A rewritten batch keeps its base offset and each record its offset, as
//!   in Kafka. Tombstones and transaction markers stay for
//!   `delete.retention.ms` after a pass first saw them; aborted transactional
//!   data goes in the first pass (the transaction index says which), its
//!   marker once no data of its transaction is left before it.
//! - Rewritten segments are swapped in crash-safely ([`swap`]).

pub mod offset_map;
pub mod rewrite;
// The swap lives beside the segments (the log's open recovers it, and
// `log` must not depend on `compaction`); re-exported under its old name.
pub use crate::segment_swap as swap;

use crate::error::EngineError;
pub use crate::log::CleanerStats;
use crate::log::PartitionLog;
use crate::segment::Segment;
use std::path::Path;
use std::rc::Rc;

/// The file holding a partition's first dirty offset.
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// What one compaction pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactionStats {
    /// Segments rewritten.
    pub segments_rewritten: usize,
    /// Records dropped.
    pub records_removed: usize,
    /// The first dirty offset after the pass.
    pub end_offset: i64,
}

/// A log worth a pass, and what the pass covers.
pub struct Candidate {
    /// Dirty bytes over the cleanable section's bytes.
    pub dirty_ratio: f64,
    /// The oldest dirty data is past `max.compaction.lag.ms`.
    pub overdue: bool,
    first_dirty: i64,
    section: Vec<Rc<Segment>>,
}

/// Whether `log` is due for a pass (`force`: whatever its dirty ratio, as
/// long as something is dirty).
pub fn candidate(log: &PartitionLog, force: bool) -> Option<Candidate> {
    let log = log.maintenance();
    let config = log.topic_config();
    if !config.cleanup_policy.compact {
        return None;
    }
    let now = log.now_ms();
    // Complete transactions only (their commit or abort is known), and
    // nothing younger than min.compaction.lag.ms (a prefix, as in Kafka:
    // the first too-young segment ends the section).
    let bound = log.last_stable_offset().min(log.high_watermark());
    let section: Vec<Rc<Segment>> = log
        .sealed_segments()
        .into_iter()
        .take_while(|s| {
            let m = s.meta.borrow();
            m.next_offset <= bound
                && now.saturating_sub(m.max_timestamp_ms.max(0)) >= config.min_compaction_lag_ms
        })
        .collect();
    let first = section.first()?.base_offset;
    let end = section.last()?.meta.borrow().next_offset;
    let first_dirty = read_checkpoint(log.dir())
        .unwrap_or(first)
        .max(first)
        .max(log.log_start_offset().min(end));
    if first_dirty >= end {
        return None;
    }
    let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
    let mut first_dirty_segment = None;
    for s in &section {
        let m = s.meta.borrow();
        if m.next_offset <= first_dirty {
            clean_bytes += m.size_bytes;
        } else {
            dirty_bytes += m.size_bytes;
            first_dirty_segment.get_or_insert(m.max_timestamp_ms);
        }
    }
    let total = clean_bytes + dirty_bytes;
    let dirty_ratio = if total == 0 {
        0.0
    } else {
        dirty_bytes as f64 / total as f64
    };
    // Kafka measures the lag from the first dirty segment's earliest
    // timestamp; the segment keeps its largest only, so this may be late by
    // up to one segment's time span, never early.
    let overdue = first_dirty_segment
        .is_some_and(|ts| now.saturating_sub(ts.max(0)) > config.max_compaction_lag_ms);
    if !force && !overdue && dirty_ratio < config.min_cleanable_dirty_ratio {
        return None;
    }
    Some(Candidate {
        dirty_ratio,
        overdue,
        first_dirty,
        section,
    })
}

/// Compacts `log` once if anything in it is dirty, whatever the ratio.
pub async fn compact(log: &Rc<PartitionLog>) -> Result<CompactionStats, EngineError> {
    match candidate(log, true) {
        Some(c) => clean(log, c).await,
        None => Ok(CompactionStats::default()),
    }
}

/// Runs one pass over `candidate`'s section and swaps the rewritten
/// segments in.
pub async fn clean(
    log: &Rc<PartitionLog>,
    candidate: Candidate,
) -> Result<CompactionStats, EngineError> {
    let started = std::time::Instant::now();
    let job = pass_job(log, &candidate);
    if !room_for_pass(log, &job) {
        return Ok(CompactionStats::default());
    }
    let mut outcome = run_pass(job).await?;
    // No await from here on: the checks and the swaps see one state of the log.
    let pairs = pair_with_section(&candidate.section, std::mem::take(&mut outcome.cleaned));
    let unchanged = {
        let log = log.maintenance();
        candidate.section.iter().all(|s| {
            let next = s.meta.borrow().next_offset;
            log.holds_sealed(s, next)
        })
    };
    if !unchanged {
        // Retention or a truncation changed the section meanwhile: the
        // rewrites may hold data that is gone; the next tick starts over.
        for (_, c) in &pairs {
            swap::discard(&c.log_path);
        }
        return Ok(CompactionStats::default());
    }
    let stats = CompactionStats {
        segments_rewritten: swap_all(log, &pairs)?,
        end_offset: outcome.end_offset,
        records_removed: outcome.records_removed,
    };
    let log = log.maintenance();
    write_checkpoint(log.dir(), outcome.end_offset)?;
    count_pass(&log.context().cleaner, &outcome, started);
    if stats.segments_rewritten > 0 {
        // The renames made durable, off the shard.
        let dir = log.dir().to_path_buf();
        on_cleaner_thread(move || crate::segment::sync_dir(&dir)).await?;
    }
    Ok(stats)
}

/// Whether the data dir has room for the pass's rewrites above the topic's
/// floor (the free-space reserve; half of it for the internal topics, as
/// their appends). A pass writes at most what it reads before the swap
/// frees the old segments, so that worst case is charged against the
/// shard's estimate now, as appends and preallocations are; without room
/// the pass waits for a later tick rather than take the reserve that keeps
/// offset commits and the metadata writable.
fn room_for_pass(log: &PartitionLog, job: &rewrite::Job) -> bool {
    let worst_case_bytes: u64 = job.segments.iter().map(|s| s.size_bytes).sum();
    let allowance = crate::disk_space::Allowance::of_topic(&log.topic_partition().topic);
    let space = log.context().space_of(log.log_dir_index());
    if space.admits(worst_case_bytes, allowance) {
        return true;
    }
    tracing::warn!(
        partition = %log.topic_partition(),
        worst_case_bytes,
        free_bytes = space.free_bytes(),
        reserve_bytes = space.reserve_bytes(),
        "compaction pass put off: its rewrites would take the free-space reserve"
    );
    false
}

/// The cleaner thread's job for a pass over `candidate`'s section.
fn pass_job(log: &PartitionLog, candidate: &Candidate) -> rewrite::Job {
    let log = log.maintenance();
    let config = log.topic_config();
    rewrite::Job {
        segments: candidate
            .section
            .iter()
            .map(|s| {
                let m = s.meta.borrow();
                rewrite::SegmentFile {
                    base_offset: s.base_offset,
                    path: s.log_path(),
                    size_bytes: s.readable_bytes.get().min(m.size_bytes),
                    next_offset: m.next_offset,
                    max_timestamp_ms: m.max_timestamp_ms,
                }
            })
            .collect(),
        first_dirty: candidate.first_dirty,
        map_bytes: log.context().config.cleaner_dedupe_buffer_bytes,
        throttle: rewrite::Throttle::new(log.context().config.cleaner_io_max_bytes_per_second),
        aborted: log.aborted_transactions(),
        now_ms: log.now_ms(),
        delete_retention_ms: config.delete_retention_ms,
        index_interval_bytes: config.index_interval_bytes,
    }
}

/// Each rewritten segment with the section's segment it replaces (one
/// with no match in the section is left out).
fn pair_with_section(
    section: &[Rc<Segment>],
    cleaned: Vec<rewrite::Cleaned>,
) -> Vec<(Rc<Segment>, rewrite::Cleaned)> {
    cleaned
        .into_iter()
        .filter_map(|c| {
            let old = section.iter().find(|s| s.base_offset == c.base_offset)?;
            Some((old.clone(), c))
        })
        .collect()
}

/// Swaps each rewritten segment in, in order, and returns how many were.
/// On a failed swap, that rewrite and the ones after it are discarded.
fn swap_all(
    log: &PartitionLog,
    pairs: &[(Rc<Segment>, rewrite::Cleaned)],
) -> Result<usize, EngineError> {
    let log = log.maintenance();
    let mut segments_rewritten = 0;
    for (i, (old, cleaned)) in pairs.iter().enumerate() {
        if let Err(e) = swap::swap_in(&old.log_path()) {
            for (_, c) in &pairs[i..] {
                swap::discard(&c.log_path);
            }
            return Err(e);
        }
        let size = cleaned.meta.size_bytes;
        let replacement = Rc::new(Segment::new(
            log.dir(),
            old.base_offset,
            cleaned.meta.clone(),
            size,
        ));
        log.replace_segment(old, replacement);
        segments_rewritten += 1;
    }
    Ok(segments_rewritten)
}

/// Adds a finished pass, begun at `started`, to the shard's cleaner
/// counters.
fn count_pass(
    cleaner: &std::cell::RefCell<CleanerStats>,
    outcome: &rewrite::Outcome,
    started: std::time::Instant,
) {
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let mut counters = cleaner.borrow_mut();
    counters.passes += 1;
    counters.bytes_read += outcome.bytes_read;
    counters.bytes_removed += outcome.bytes_before.saturating_sub(outcome.bytes_after);
    counters.records_removed += outcome.records_removed as u64;
    counters.last_pass_ms = elapsed_ms;
    counters.pass_ms_total += elapsed_ms;
}

/// Runs the file work of a pass on a cleaner thread and waits for it
/// without blocking the shard.
///
/// Why a thread and not glommio files with `yield_if_needed`: the pass is
/// mostly sequential reads and writes of whole segments plus an fsync of
/// each rewrite; on the shard those would take the reactor's io_uring
/// slots and, for the fsyncs and the rescans of `scan_segment` (plain
/// `std::fs`), stall every partition of the core. On its own thread the
/// pass touches no shard state (it gets paths, sizes and the aborted
/// transactions, and hands back the `.cleaned` files with their bookkeeping
/// over a oneshot channel); the shard only renames them in (no fsync on
/// the shard: the directory sync after the renames is the thread's too).
/// One thread per pass: passes are minutes apart, and a spawn costs
/// microseconds.
async fn run_pass(job: rewrite::Job) -> Result<rewrite::Outcome, EngineError> {
    on_cleaner_thread(move || rewrite::run(&job)).await
}

/// Runs `work` on a new cleaner thread and awaits its answer.
async fn on_cleaner_thread<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, EngineError> + Send + 'static,
) -> Result<T, EngineError> {
    // A simulated disk lives on the shard's thread: the pass runs there.
    if crate::disk::is_simulated() {
        return work();
    }
    let (done, outcome) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name("rill-cleaner".into())
        .spawn(move || {
            step_aside_from_the_shards();
            let _ = done.send(work());
        })
        .map_err(|e| EngineError::io("rill-cleaner thread", e))?;
    outcome.await.map_err(|_| {
        EngineError::io(
            "rill-cleaner thread",
            std::io::Error::other("the cleaner thread ended without an answer"),
        )
    })?
}

/// Lets the cleaner thread run on any core, below the shards.
///
/// Why: a thread inherits its creator's CPU affinity, and the shard that
/// starts a pass is pinned to one core, so the pass (seconds of parsing
/// and copying at full speed) shared that core with the very shard whose
/// produce requests it should not delay: measured with one shard, produce
/// p99 on other partitions rose 3-7x and a one-second window reached 2 s
/// during a 1.3 GB pass. On the process's CPUs and at nice 10, the scheduler gives the
/// shards' cores to the shards and the cleaner what is left, as Kafka's
/// cleaner threads compete with its request handlers only for idle CPU.
/// Both calls may fail (a seccomp policy, a container's cpuset): the pass
/// then runs as before.
fn step_aside_from_the_shards() {
    // SAFETY: plain syscalls with a cpu set that lives across both calls.
    unsafe {
        // The process's own set, as the main thread keeps it (the shards
        // are pinned threads; the main thread is not): a `taskset` the
        // operator gave the broker still holds for the cleaner.
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(libc::getpid(), size, &mut allowed) == 0
            && libc::sched_setaffinity(0, size, &allowed) != 0
        {
            tracing::debug!(error = %std::io::Error::last_os_error(), "cleaner thread keeps the shard's CPU affinity");
        }
        // On Linux the nice value is per thread: `who = 0` is this thread.
        if libc::setpriority(libc::PRIO_PROCESS, 0, CLEANER_NICE) != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "cleaner thread keeps the shard's priority");
        }
    }
}

/// The cleaner thread's nice value (the shards run at the process's, 0 by default).
const CLEANER_NICE: libc::c_int = 10;

/// The stored first dirty offset; `None` when absent or unreadable (the
/// pass then starts from the log start, which is only slower).
pub fn read_checkpoint(dir: &Path) -> Option<i64> {
    crate::disk::read_to_string(&dir.join(CHECKPOINT_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Stores the first dirty offset. Through a temporary file and a rename
/// (a crash leaves the old or the new value) but not synced: a lost update
/// only makes the next pass read more.
fn write_checkpoint(dir: &Path, offset: i64) -> Result<(), EngineError> {
    let path = dir.join(CHECKPOINT_FILE);
    let tmp = dir.join(format!("{CHECKPOINT_FILE}.tmp"));
    crate::disk::write(&tmp, format!("{offset}\n").as_bytes(), false)
        .map_err(|e| EngineError::io(&tmp, e))?;
    crate::disk::rename(&tmp, &path).map_err(|e| EngineError::io(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affinity(pid: libc::pid_t) -> Vec<usize> {
        // SAFETY: a zeroed set filled by the kernel.
        let set = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            set
        };
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: CPU_ISSET reads a bit of a set we own; `cpu` is
            // below CPU_SETSIZE.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect()
    }

    /// A thread started by a pinned shard leaves the shard's core (to the
    /// process's CPUs) and runs below the shards' priority.
    #[test]
    fn a_cleaner_thread_leaves_the_shards_core_and_priority() {
        // SAFETY: getpid(2) takes nothing and cannot fail.
        let process = affinity(unsafe { libc::getpid() });
        let (nice, cpus) = std::thread::spawn(move || {
            // Pinned to one of the process's CPUs, as a shard is.
            // SAFETY: a zeroed set (plain bits) with one CPU set, passed
            // with its own size to sched_setaffinity for this thread.
            unsafe {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(process[0], &mut one);
                assert_eq!(
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one),
                    0
                );
            }
            assert_eq!(affinity(0).len(), 1);
            let (result, cpus) = std::thread::spawn(|| {
                step_aside_from_the_shards();
                // SAFETY: reads this thread's nice value.
                let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
                (nice, affinity(0))
            })
            .join()
            .expect("cleaner-like thread");
            (result, cpus)
        })
        .join()
        .expect("shard-like thread");
        // SAFETY: as above.
        assert_eq!(cpus, affinity(unsafe { libc::getpid() }));
        assert!(nice >= CLEANER_NICE, "nice {nice}");
    }
}
