//! The disk's own CPU per GB: what the kernel spends on a durable broker's
//! writes alone. `BLOCK`-byte `O_DIRECT` writes go round-robin to a few
//! files preallocated with `fallocate` (as rill's segments are), each write
//! followed by an `fdatasync`, one call at a time, on one thread whose CPU
//! (user + system, `RUSAGE_THREAD`) is read before and after. Nothing else
//! runs: no network, no parsing, no checksums. Beside a broker's CPU per
//! GB and a null sink's (`run --against-null-sink --disk-floor-dir`), it
//! says how much of the broker's cost the disk work alone explains. It is
//! `scripts/disk_cpu_floor.py` inside the harness.
//!
//! By default each file is preallocated to what it will be written, 1 GB
//! over 8 files: 128 MiB each, two extents, which ext4 keeps in the inode.
//! `preallocate_bytes` of 1 GiB lays the files out as a broker's 1 GiB
//! segments are: more than the four extents an inode holds (ext4 caps an
//! unwritten extent at 128 MiB), so each fdatasync also writes an
//! extent-tree block (docs/benchmarks/per-request-costs.md).

use crate::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `O_DIRECT` wants buffers, offsets and lengths aligned to the device's
/// logical block; 4 KiB covers every device rill supports.
const ALIGN_BYTES: usize = 4096;

/// What one measurement wrote and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskFloor {
    pub block_bytes: u64,
    pub files: u32,
    /// Each file's `fallocate`d size (at least what is written to it).
    #[serde(default)]
    pub preallocated_bytes: u64,
    pub written_bytes: u64,
    /// User + system CPU of the writing thread.
    pub cpu_s: f64,
    pub wall_s: f64,
    pub cpu_s_per_gb: f64,
}

/// How to measure: where, in what pieces, how much.
#[derive(Debug, Clone)]
pub struct DiskFloorPlan {
    /// A directory on the disk to measure (not tmpfs: `O_DIRECT`); the
    /// files go in a fresh directory under it, removed afterwards.
    pub dir: PathBuf,
    pub block_bytes: usize,
    pub files: usize,
    pub total_bytes: u64,
    /// Each file's preallocation; 0 (or less than a file's share of
    /// `total_bytes`): that share.
    pub preallocate_bytes: u64,
}

/// A zeroed, aligned buffer for `O_DIRECT` writes.
struct AlignedBuffer {
    pointer: *mut u8,
    layout: Layout,
}

impl AlignedBuffer {
    fn new(len: usize) -> Result<AlignedBuffer> {
        let layout = Layout::from_size_align(len, ALIGN_BYTES)
            .map_err(|e| BenchError::Other(format!("disk floor buffer: {e}")))?;
        // SAFETY: `layout` has a non-zero size (checked by the caller).
        let pointer = unsafe { alloc_zeroed(layout) };
        if pointer.is_null() {
            return Err(BenchError::Other("disk floor buffer: out of memory".into()));
        }
        Ok(AlignedBuffer { pointer, layout })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `pointer` holds `layout.size()` initialised (zeroed)
        // bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.pointer, self.layout.size()) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.pointer, self.layout) }
    }
}

/// This thread's user + system CPU seconds.
fn thread_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn open_preallocated(path: &Path, len: u64) -> Result<File> {
    let file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    // SAFETY: fallocate on a descriptor this function owns.
    let done = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if done != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(file)
}

/// Creates `dir` (and its parents) if missing; an error names it.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::Other(format!("cannot create {}: {e}", dir.display())))
}

/// Measures `plan` on a thread of its own (its CPU is that thread's).
pub fn measure(plan: &DiskFloorPlan) -> Result<DiskFloor> {
    // ALIGN_BYTES is a power of two: a multiple of it has no low bits set.
    if plan.block_bytes == 0 || plan.block_bytes & (ALIGN_BYTES - 1) != 0 || plan.files == 0 {
        return Err(BenchError::Other(format!(
            "disk floor: the block must be a positive multiple of {ALIGN_BYTES} bytes \
             and the files at least one (block {}, files {})",
            plan.block_bytes, plan.files
        )));
    }
    let block = plan.block_bytes as u64;
    let per_file = plan.total_bytes / plan.files as u64 / block * block;
    if per_file == 0 {
        return Err(BenchError::Other(
            "disk floor: the total must hold one block per file".into(),
        ));
    }
    prepare_dir(&plan.dir)?;
    let plan = plan.clone();
    std::thread::spawn(move || write_and_sync(&plan, per_file))
        .join()
        .map_err(|_| BenchError::Other("the disk floor thread panicked".into()))?
}

fn write_and_sync(plan: &DiskFloorPlan, per_file: u64) -> Result<DiskFloor> {
    let scratch = tempfile::Builder::new()
        .prefix("disk-floor-")
        .tempdir_in(&plan.dir)?;
    let preallocated_bytes = per_file.max(plan.preallocate_bytes);
    let files = (0..plan.files)
        .map(|i| {
            open_preallocated(
                &scratch.path().join(format!("floor-{i}")),
                preallocated_bytes,
            )
        })
        .collect::<Result<Vec<File>>>()?;
    let buffer = AlignedBuffer::new(plan.block_bytes)?;
    let block = plan.block_bytes as u64;
    let (cpu_before, started) = (thread_cpu_s(), Instant::now());
    let mut written_bytes = 0;
    for offset in (0..per_file).step_by(plan.block_bytes) {
        for file in &files {
            file.write_all_at(buffer.bytes(), offset)?;
            file.sync_data()?;
            written_bytes += block;
        }
    }
    let cpu_s = thread_cpu_s() - cpu_before;
    Ok(DiskFloor {
        block_bytes: block,
        files: plan.files as u32,
        preallocated_bytes,
        written_bytes,
        cpu_s,
        wall_s: started.elapsed().as_secs_f64(),
        cpu_s_per_gb: cpu_s / (written_bytes as f64 / 1e9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch dir on the real disk (the target dir: `/tmp` may be
    /// tmpfs, which refuses `O_DIRECT`).
    fn scratch() -> tempfile::TempDir {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/disk-floor-tests");
        std::fs::create_dir_all(&base).expect("scratch base");
        tempfile::tempdir_in(base).expect("scratch dir")
    }

    #[test]
    fn a_measurement_writes_what_it_says_and_costs_some_cpu() {
        let dir = scratch();
        let plan = DiskFloorPlan {
            dir: dir.path().to_path_buf(),
            block_bytes: 64 << 10,
            files: 2,
            total_bytes: 8 << 20,
            preallocate_bytes: 0,
        };
        let floor = measure(&plan).expect("measure");
        assert_eq!(floor.written_bytes, 8 << 20);
        assert_eq!(floor.preallocated_bytes, 4 << 20);
        assert!(floor.cpu_s > 0.0, "{floor:?}");
        assert!(floor.cpu_s_per_gb.is_finite(), "{floor:?}");
        // Files laid out larger than what is written to them, as a
        // broker's segments are.
        let larger = DiskFloorPlan {
            preallocate_bytes: 16 << 20,
            ..plan
        };
        let floor = measure(&larger).expect("measure");
        assert_eq!(floor.written_bytes, 8 << 20);
        assert_eq!(floor.preallocated_bytes, 16 << 20);
        // Its files are gone with it.
        let left = std::fs::read_dir(dir.path()).expect("list").count();
        assert_eq!(left, 0);
    }

    #[test]
    fn a_directory_not_there_yet_is_made() {
        let dir = scratch();
        let plan = DiskFloorPlan {
            dir: dir.path().join("not/yet"),
            block_bytes: 64 << 10,
            files: 1,
            total_bytes: 1 << 20,
            preallocate_bytes: 0,
        };
        assert_eq!(measure(&plan).expect("measure").written_bytes, 1 << 20);
        assert!(plan.dir.is_dir());
    }

    #[test]
    fn unaligned_blocks_and_empty_plans_are_refused() {
        let dir = scratch();
        let plan = |block_bytes, files, total_bytes| DiskFloorPlan {
            dir: dir.path().to_path_buf(),
            block_bytes,
            files,
            total_bytes,
            preallocate_bytes: 0,
        };
        assert!(measure(&plan(1000, 1, 1 << 20)).is_err());
        assert!(measure(&plan(4096, 0, 1 << 20)).is_err());
        assert!(measure(&plan(1 << 20, 4, 1 << 20)).is_err());
    }
}
