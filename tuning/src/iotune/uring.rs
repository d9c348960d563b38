//! The one narrow io_uring module: a time-bounded job of O_DIRECT reads or
//! writes at a fixed block size and queue depth against one file.
//!
//! Everything above it (phases, queue-depth sweeps) is written against
//! [`Job`] and [`JobResult`] and does no I/O of its own.

use std::alloc::{self, Layout};
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use crate::Error;

/// Alignment of every buffer and offset: O_DIRECT needs the logical block size,
/// and 4 KiB covers every device rill supports (and every physical block size
/// up to it).
pub const DIRECT_ALIGNMENT_BYTES: usize = 4096;

/// A heap buffer aligned for O_DIRECT.
pub struct AlignedBuffer {
    pointer: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuffer {
    /// A zeroed buffer of `len_bytes` (a multiple of the alignment, non-zero).
    pub fn new(len_bytes: usize) -> Result<Self, Error> {
        if len_bytes == 0 || !len_bytes.is_multiple_of(DIRECT_ALIGNMENT_BYTES) {
            return Err(Error::Measurement(format!(
                "buffer of {len_bytes} bytes is not a multiple of {DIRECT_ALIGNMENT_BYTES}"
            )));
        }
        let layout = Layout::from_size_align(len_bytes, DIRECT_ALIGNMENT_BYTES)
            .map_err(|e| Error::Measurement(e.to_string()))?;
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let pointer = NonNull::new(raw)
            .ok_or_else(|| Error::Measurement(format!("cannot allocate {len_bytes} bytes")))?;
        Ok(AlignedBuffer { pointer, layout })
    }

    /// The buffer's bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: pointer is a live allocation of layout.size() bytes, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.layout.size()) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Always false: buffers are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.pointer.as_ptr()
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { alloc::dealloc(self.pointer.as_ptr(), self.layout) }
    }
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// O_DIRECT reads.
    Read,
    /// O_DIRECT writes.
    Write,
}

/// Where successive operations land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// One block after the other from `start_block`, wrapping at the extent.
    Sequential {
        /// First block index.
        start_block: u64,
    },
    /// Uniformly random blocks within the extent.
    Random {
        /// Seed of the generator (non-zero).
        seed: u64,
    },
}

/// One measurement: keep `queue_depth` operations in flight until `duration`
/// has passed, then drain.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Read or write.
    pub direction: Direction,
    /// Offsets.
    pub pattern: Pattern,
    /// Bytes per operation (multiple of 4 KiB).
    pub block_bytes: usize,
    /// Operations kept in flight.
    pub queue_depth: usize,
    /// Operations stay within the first `extent_bytes` of the file.
    pub extent_bytes: u64,
    /// How long to keep submitting.
    pub duration: Duration,
}

/// What a job measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobResult {
    /// Completed operations.
    pub operations: u64,
    /// Completed bytes.
    pub bytes: u64,
    /// From first submission to last completion.
    pub elapsed: Duration,
    /// Next block a sequential job would have used (to continue where it stopped).
    pub next_block: u64,
}

impl JobResult {
    /// Operations per second.
    pub fn iops(&self) -> f64 {
        self.operations as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Bytes per second.
    pub fn bandwidth_bytes(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// xorshift64*: enough randomness for offsets, no dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Upper bound on the queue depth, so buffers stay bounded (128 × 1 MiB).
pub const MAX_QUEUE_DEPTH: usize = 128;

/// Runs one job on `file` (opened with O_DIRECT).
pub fn run_job(file: &File, job: &Job) -> Result<JobResult, Error> {
    let blocks = job.extent_bytes / job.block_bytes as u64;
    if blocks == 0 || job.queue_depth == 0 || job.queue_depth > MAX_QUEUE_DEPTH {
        return Err(Error::Measurement(format!("invalid job {job:?}")));
    }
    let entries = (job.queue_depth as u32).next_power_of_two();
    let mut ring = IoUring::new(entries).map_err(Error::Uring)?;
    let mut buffers = filled_buffers(job)?;

    let fd = types::Fd(file.as_raw_fd());
    let mut offsets = Offsets::new(job, blocks);
    let started = Instant::now();
    let deadline = started + job.duration;
    let mut tally = Tally::default();
    let mut completions: Vec<(u64, i32)> = Vec::with_capacity(job.queue_depth);

    for (slot, buffer) in buffers.iter_mut().enumerate() {
        let offset = offsets.next_offset();
        match push(&mut ring, fd, job, buffer, slot, offset) {
            Ok(()) => tally.in_flight += 1,
            Err(error) => {
                tally.first_error = Some(error);
                break;
            }
        }
    }
    // Every loop turn reaps at least one completion, and after the deadline
    // nothing is resubmitted, so this ends after the in-flight operations drain.
    while tally.in_flight > 0 {
        if let Err(error) = ring.submit_and_wait(1) {
            if error.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // The kernel still owns buffers we cannot wait for: leaking them is
            // the only safe choice.
            std::mem::forget(buffers);
            return Err(Error::Uring(error));
        }
        completions.clear();
        completions.extend(ring.completion().map(|cqe| (cqe.user_data(), cqe.result())));
        let now = Instant::now();
        for &(slot, result) in &completions {
            tally.complete(job, result);
            if now < deadline && tally.first_error.is_none() {
                let offset = offsets.next_offset();
                let slot = slot as usize;
                match push(&mut ring, fd, job, &mut buffers[slot], slot, offset) {
                    Ok(()) => tally.in_flight += 1,
                    Err(error) => {
                        tally.first_error.get_or_insert(error);
                    }
                }
            }
        }
    }
    let elapsed = started.elapsed();
    if let Some(error) = tally.first_error {
        return Err(error);
    }
    Ok(JobResult {
        operations: tally.operations,
        bytes: tally.bytes,
        elapsed,
        next_block: offsets.next_block,
    })
}

/// One buffer per queue slot, each of `job.block_bytes`.
fn filled_buffers(job: &Job) -> Result<Vec<AlignedBuffer>, Error> {
    let mut buffers = (0..job.queue_depth)
        .map(|_| AlignedBuffer::new(job.block_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    // Non-zero, varied data: some virtual disks and SSDs short-cut zero blocks.
    let mut fill_state = 0x9e37_79b9_7f4a_7c15u64;
    for buffer in &mut buffers {
        for chunk in buffer.as_mut_slice().chunks_mut(8) {
            let word = next_random(&mut fill_state).to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
    Ok(buffers)
}

/// The file offsets of a job's operations, in the order of its pattern.
struct Offsets {
    pattern: Pattern,
    /// Blocks in the extent.
    blocks: u64,
    block_bytes: u64,
    /// The next block of a sequential job.
    next_block: u64,
    random_state: u64,
}

impl Offsets {
    fn new(job: &Job, blocks: u64) -> Self {
        let (next_block, random_state) = match job.pattern {
            Pattern::Sequential { start_block } => (start_block % blocks, 0),
            Pattern::Random { seed } => (0, seed | 1),
        };
        Offsets {
            pattern: job.pattern,
            blocks,
            block_bytes: job.block_bytes as u64,
            next_block,
            random_state,
        }
    }

    /// The offset of the next operation.
    fn next_offset(&mut self) -> u64 {
        let block = match self.pattern {
            Pattern::Sequential { .. } => {
                let block = self.next_block;
                self.next_block = (self.next_block + 1) % self.blocks;
                block
            }
            Pattern::Random { .. } => next_random(&mut self.random_state) % self.blocks,
        };
        block * self.block_bytes
    }
}

/// What a job's completions add up to so far.
#[derive(Default)]
struct Tally {
    in_flight: usize,
    operations: u64,
    bytes: u64,
    /// The first failure; the job stops resubmitting once there is one.
    first_error: Option<Error>,
}

impl Tally {
    /// Counts one completion of `result` (bytes, or a negated errno).
    fn complete(&mut self, job: &Job, result: i32) {
        self.in_flight -= 1;
        if result < 0 {
            self.first_error
                .get_or_insert(Error::Uring(std::io::Error::from_raw_os_error(-result)));
        } else if result as usize != job.block_bytes {
            self.first_error.get_or_insert(Error::Measurement(format!(
                "short {:?}: {result} of {} bytes",
                job.direction, job.block_bytes
            )));
        } else {
            self.operations += 1;
            self.bytes += result as u64;
        }
    }
}

fn push(
    ring: &mut IoUring,
    fd: types::Fd,
    job: &Job,
    buffer: &mut AlignedBuffer,
    slot: usize,
    offset: u64,
) -> Result<(), Error> {
    let length = buffer.len() as u32;
    let entry = match job.direction {
        Direction::Read => opcode::Read::new(fd, buffer.as_mut_ptr(), length)
            .offset(offset)
            .build(),
        Direction::Write => opcode::Write::new(fd, buffer.as_mut_ptr(), length)
            .offset(offset)
            .build(),
    }
    .user_data(slot as u64);
    // SAFETY: the buffer lives in `buffers`, which outlives every in-flight
    // operation: run_job drains all completions before dropping it (or leaks
    // it when the ring fails). Each slot has at most one operation in flight.
    let pushed = unsafe { ring.submission().push(&entry) };
    if pushed.is_err() {
        // Cannot happen: the ring has at least queue_depth entries and at
        // most queue_depth operations are outstanding; flush and retry once.
        ring.submit().map_err(Error::Uring)?;
        // SAFETY: as above.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| Error::Measurement("submission queue full".into()))?;
    }
    Ok(())
}
