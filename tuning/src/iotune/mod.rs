//! `rill iotune`: measures the data dir's disk with O_DIRECT io_uring I/O and
//! produces the figures of `io-properties.yaml`.
//!
//! Phases, splitting `--duration-s` by fixed shares:
//!
//! | phase                  | share | what                                         |
//! |------------------------|-------|----------------------------------------------|
//! | sequential write       | 24 %  | 128 KiB at QD 8, then 1 MiB at QD 4; best    |
//! | sequential read        | 24 %  | same sizes, over the bytes just written      |
//! | random 4 KiB read      | 22 %  | QD 1, 2, 4, … 128 until IOPS gain < 5 %      |
//! | random 4 KiB write     | 22 %  | same sweep, overwriting in place             |
//! | fdatasync latency      |  8 %  | 4 KiB write + fdatasync, p50/p99/max         |
//!
//! The test file is preallocated with `fallocate` (so writes never extend the
//! file, which on ext4/xfs would push O_DIRECT through io-wq) and removed at the
//! end, also on error. Reads only touch bytes that were written: reading an
//! unwritten extent returns zeros without touching the device.
//!
//! [`uring`] holds the only io_uring code.

pub mod uring;

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use uring::{AlignedBuffer, Direction, Job, JobResult, Pattern, DIRECT_ALIGNMENT_BYTES};

use crate::io_properties::DiskProperties;
use crate::Error;

/// Name of the scratch file created in the data dir.
pub const TEST_FILE_NAME: &str = ".rill-iotune.tmp";
/// Block size of the random phases, the unit of `read_iops`/`write_iops`.
pub const RANDOM_BLOCK_BYTES: usize = 4096;
/// Sequential block sizes and the queue depth each runs at.
pub const SEQUENTIAL_SHAPES: [(usize, usize); 2] = [(128 << 10, 8), (1 << 20, 4)];
/// Queue depths tried by the random sweeps, in order.
pub const QUEUE_DEPTHS: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
/// The sweep stops when a deeper queue gains less than this fraction.
const FLATTEN_GAIN: f64 = 0.05;
/// Shortest slice any step gets, so a tiny `--duration-s` still measures.
const MIN_STEP: Duration = Duration::from_millis(40);

/// How to run the measurement.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Directory whose disk is measured; the test file goes here.
    pub data_dir: PathBuf,
    /// Total duration, split across the phases.
    pub duration: Duration,
    /// Size of the test file (shrunk to a quarter of the free space if needed).
    pub file_size_bytes: u64,
    /// Print a progress line on stderr.
    pub progress: bool,
}

/// One step of a phase, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Phase label (`random read`).
    pub phase: &'static str,
    /// Bytes per operation.
    pub block_bytes: usize,
    /// Queue depth.
    pub queue_depth: usize,
    /// What it measured.
    pub result: JobResult,
}

/// Everything iotune measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// Best sequential read bandwidth, bytes/s.
    pub read_bandwidth: u64,
    /// Best sequential write bandwidth, bytes/s.
    pub write_bandwidth: u64,
    /// Best random 4 KiB read IOPS.
    pub read_iops: u64,
    /// Best random 4 KiB write IOPS.
    pub write_iops: u64,
    /// Queue depth where random reads peaked.
    pub read_queue_depth: usize,
    /// Queue depth where random writes peaked.
    pub write_queue_depth: usize,
    /// fdatasync latencies after a 4 KiB write: p50, p99, max (µs).
    pub fdatasync_latency_us: [u64; 3],
    /// Bytes of the test file that hold written data (reads stay inside).
    pub written_extent_bytes: u64,
    /// Every step, in order.
    pub steps: Vec<Step>,
}

impl Measurement {
    /// The io-properties entry for `mountpoint`.
    pub fn disk_properties(&self, mountpoint: &str) -> DiskProperties {
        DiskProperties {
            mountpoint: mountpoint.to_string(),
            read_iops: self.read_iops,
            read_bandwidth: self.read_bandwidth,
            write_iops: self.write_iops,
            write_bandwidth: self.write_bandwidth,
        }
    }
}

/// Removes the test file when dropped, on success and on error alike.
struct TestFile {
    file: File,
    path: PathBuf,
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn open_test_file(settings: &Settings) -> Result<(TestFile, u64), Error> {
    let io_error = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { what, path, source }
    };
    std::fs::create_dir_all(&settings.data_dir)
        .map_err(io_error("creating data dir", &settings.data_dir))?;
    let path = settings.data_dir.join(TEST_FILE_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .map_err(io_error("creating test file (O_DIRECT)", &path))?;
    let test_file = TestFile { file, path };
    let size_bytes = file_size_bytes(&settings.data_dir, settings.file_size_bytes);
    preallocate(&test_file.file, size_bytes).map_err(io_error("preallocating", &test_file.path))?;
    Ok((test_file, size_bytes))
}

/// The requested size, capped at a quarter of the free space, at least 16 MiB,
/// rounded down to whole MiB.
fn file_size_bytes(data_dir: &Path, requested_bytes: u64) -> u64 {
    let free_bytes = free_space_bytes(data_dir).unwrap_or(u64::MAX);
    let size = requested_bytes.min(free_bytes / 4).max(16 << 20);
    size & !((1 << 20) - 1)
}

fn free_space_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; zeroed is a valid initial value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is NUL-terminated and stat is a valid out pointer.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}

fn preallocate(file: &File, size_bytes: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a valid fd and in-range lengths; fallocate has no memory effects.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size_bytes as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    // Filesystems without fallocate (tmpfs on old kernels): set the size; the
    // writes that follow still land inside it.
    if error.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return file.set_len(size_bytes);
    }
    Err(error)
}

struct Progress {
    enabled: bool,
    started: Instant,
    total: Duration,
}

impl Progress {
    fn show(&self, label: &str) {
        if !self.enabled {
            return;
        }
        let done = self.started.elapsed().as_secs_f64() / self.total.as_secs_f64().max(1e-9);
        let percent = (done * 100.0).min(99.0) as u32;
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, "\r\x1b[2Kiotune: {percent:>2}% {label}");
        let _ = stderr.flush();
    }

    fn finish(&self) {
        if self.enabled {
            let _ = writeln!(
                std::io::stderr(),
                "\r\x1b[2Kiotune: done in {:.1} s",
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

/// Runs every phase and returns the figures. The test file is removed afterwards.
pub fn measure(settings: &Settings) -> Result<Measurement, Error> {
    let (test_file, file_bytes) = open_test_file(settings)?;
    let file = &test_file.file;
    let total = settings.duration;
    let share = |fraction: f64| total.mul_f64(fraction);
    let progress = Progress {
        enabled: settings.progress,
        started: Instant::now(),
        total,
    };
    let mut steps = Vec::new();

    let (written_bytes, write_bandwidth) = sequential_writes(
        file,
        file_bytes,
        share(0.12).max(MIN_STEP),
        &progress,
        &mut steps,
    )?;
    let written_extent_bytes = written_bytes.min(file_bytes) & !((1 << 20) - 1);
    if written_extent_bytes < (1 << 20) {
        return Err(Error::Measurement(format!(
            "sequential writes covered only {written_bytes} bytes"
        )));
    }
    let read_bandwidth = sequential_reads(
        file,
        written_extent_bytes,
        share(0.12).max(MIN_STEP),
        &progress,
        &mut steps,
    )?;

    let (read_iops, read_queue_depth) = sweep(
        file,
        Direction::Read,
        written_extent_bytes,
        share(0.22),
        &progress,
        &mut steps,
    )?;
    let (write_iops, write_queue_depth) = sweep(
        file,
        Direction::Write,
        written_extent_bytes,
        share(0.22),
        &progress,
        &mut steps,
    )?;

    progress.show("fdatasync latency");
    let fdatasync_latency_us = fdatasync_latency(&test_file, share(0.08).max(MIN_STEP))?;
    progress.finish();

    nonzero(Measurement {
        read_bandwidth: read_bandwidth as u64,
        write_bandwidth: write_bandwidth as u64,
        read_iops: read_iops as u64,
        write_iops: write_iops as u64,
        read_queue_depth,
        write_queue_depth,
        fdatasync_latency_us,
        written_extent_bytes,
        steps,
    })
}

/// The sequential write phase: each of [`SEQUENTIAL_SHAPES`] for
/// `step_duration`. Returns the bytes written and the best bandwidth
/// (bytes/s).
fn sequential_writes(
    file: &File,
    file_bytes: u64,
    step_duration: Duration,
    progress: &Progress,
    steps: &mut Vec<Step>,
) -> Result<(u64, f64), Error> {
    // Sequential writes continue where the previous shape stopped, so the
    // written extent grows; it is what the read phases may touch.
    let mut written_bytes = 0u64;
    let mut next_offset_bytes = 0u64;
    let mut write_bandwidth = 0f64;
    for (block_bytes, queue_depth) in SEQUENTIAL_SHAPES {
        progress.show(&format!(
            "sequential write {} KiB QD {queue_depth}",
            block_bytes >> 10
        ));
        let job = Job {
            direction: Direction::Write,
            pattern: Pattern::Sequential {
                start_block: next_offset_bytes / block_bytes as u64,
            },
            block_bytes,
            queue_depth,
            extent_bytes: file_bytes,
            duration: step_duration,
        };
        let result = uring::run_job(file, &job)?;
        written_bytes = written_bytes.saturating_add(result.bytes);
        next_offset_bytes = result.next_block * block_bytes as u64;
        write_bandwidth = write_bandwidth.max(result.bandwidth_bytes());
        steps.push(step("sequential write", &job, result));
    }
    Ok((written_bytes, write_bandwidth))
}

/// The sequential read phase over the first `extent_bytes` (all written):
/// each of [`SEQUENTIAL_SHAPES`] for `step_duration`. Returns the best
/// bandwidth (bytes/s).
fn sequential_reads(
    file: &File,
    extent_bytes: u64,
    step_duration: Duration,
    progress: &Progress,
    steps: &mut Vec<Step>,
) -> Result<f64, Error> {
    let mut read_bandwidth = 0f64;
    for (block_bytes, queue_depth) in SEQUENTIAL_SHAPES {
        progress.show(&format!(
            "sequential read {} KiB QD {queue_depth}",
            block_bytes >> 10
        ));
        let job = Job {
            direction: Direction::Read,
            pattern: Pattern::Sequential { start_block: 0 },
            block_bytes,
            queue_depth,
            extent_bytes,
            duration: step_duration,
        };
        let result = uring::run_job(file, &job)?;
        read_bandwidth = read_bandwidth.max(result.bandwidth_bytes());
        steps.push(step("sequential read", &job, result));
    }
    Ok(read_bandwidth)
}

/// The measurement, or an error when one of its figures is zero.
fn nonzero(measurement: Measurement) -> Result<Measurement, Error> {
    if measurement.read_bandwidth == 0
        || measurement.write_bandwidth == 0
        || measurement.read_iops == 0
        || measurement.write_iops == 0
    {
        return Err(Error::Measurement(format!(
            "a figure is zero: {measurement:?}"
        )));
    }
    Ok(measurement)
}

fn step(phase: &'static str, job: &Job, result: JobResult) -> Step {
    Step {
        phase,
        block_bytes: job.block_bytes,
        queue_depth: job.queue_depth,
        result,
    }
}

/// Random 4 KiB operations at increasing queue depth until the IOPS curve
/// flattens; returns the best IOPS and the depth that reached it.
fn sweep(
    file: &File,
    direction: Direction,
    extent_bytes: u64,
    budget: Duration,
    progress: &Progress,
    steps: &mut Vec<Step>,
) -> Result<(f64, usize), Error> {
    let label = match direction {
        Direction::Read => "random read",
        Direction::Write => "random write",
    };
    let step_duration = (budget / QUEUE_DEPTHS.len() as u32).max(MIN_STEP);
    let mut best = (0f64, 0usize);
    for (index, queue_depth) in QUEUE_DEPTHS.into_iter().enumerate() {
        progress.show(&format!("{label} 4 KiB QD {queue_depth}"));
        let job = Job {
            direction,
            pattern: Pattern::Random {
                seed: 0x5eed + index as u64,
            },
            block_bytes: RANDOM_BLOCK_BYTES,
            queue_depth,
            extent_bytes,
            duration: step_duration,
        };
        let result = uring::run_job(file, &job)?;
        let iops = result.iops();
        steps.push(step(label, &job, result));
        let flattened = iops < best.0 * (1.0 + FLATTEN_GAIN);
        if iops > best.0 {
            best = (iops, queue_depth);
        }
        if flattened {
            break;
        }
    }
    Ok(best)
}

/// p50/p99/max of `fdatasync` after a 4 KiB O_DIRECT write, in µs: the cost of
/// one group commit when the device's write cache must be flushed.
fn fdatasync_latency(test_file: &TestFile, duration: Duration) -> Result<[u64; 3], Error> {
    let io_error = |source| Error::Io {
        what: "fdatasync test on",
        path: test_file.path.clone(),
        source,
    };
    let mut buffer = AlignedBuffer::new(DIRECT_ALIGNMENT_BYTES)?;
    buffer.as_mut_slice().fill(0xa5);
    let deadline = Instant::now() + duration;
    let mut latencies_us = Vec::new();
    // Bounded: at most 100 000 syncs, and never past the deadline.
    for iteration in 0..100_000u64 {
        if Instant::now() >= deadline && !latencies_us.is_empty() {
            break;
        }
        let offset = (iteration % 256) * DIRECT_ALIGNMENT_BYTES as u64;
        test_file
            .file
            .write_all_at(buffer.as_mut_slice(), offset)
            .map_err(io_error)?;
        let started = Instant::now();
        test_file.file.sync_data().map_err(io_error)?;
        latencies_us.push(started.elapsed().as_micros() as u64);
    }
    latencies_us.sort_unstable();
    let at = |fraction: f64| latencies_us[((latencies_us.len() - 1) as f64 * fraction) as usize];
    Ok([at(0.5), at(0.99), at(1.0)])
}
