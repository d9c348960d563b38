//! A small ext4 file system of its own for each broker of a local cluster
//! (`--disk-mb`), so that the nemesis can fill one broker's disk without
//! touching the host's or the other brokers' (`rill-bench verify --faults
//! disk`).
//!
//! Each file system is an image file beside the cluster's other files
//! (`truncate`, `mkfs.ext4`), loop-mounted on `node-N-fs/`; the broker's
//! data dir is `data/` inside it, so that `lost+found` and the ballast are
//! not in the broker's data dir. Needs root (`mount`). A mount that a killed
//! harness left behind is unmounted first; dropping a [`LoopFs`] unmounts
//! it and removes its image, which the cluster does after its brokers
//! stopped.
//!
//! A full disk is a ballast file: `fallocate`d in large steps, then in
//! smaller ones after each ENOSPC down to one block, so that the file
//! system is really full (not merely below the broker's free-space
//! reserve), which is what a runaway neighbour on a shared disk does.
//! Deleting it gives the space back.
//!
//! A slow disk (`--faults slowdisk`) throttles the writes to its loop
//! device ([`crate::blkio`]); dropping it lifts a throttle left on.

use crate::error::{BenchError, Result};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first fallocate step; larger than any image a run makes, so that
/// the first step fails or fills nearly all at once.
const FILL_STEP_BYTES_FIRST: u64 = 1 << 30;
/// The smallest step: one ext4 block (4 KiB on these sizes).
const FILL_STEP_BYTES_LAST: u64 = 4 << 10;
/// A bound on fallocate calls for one fill: each successful step at least
/// halves what is left of the step sizes, and the broker's own writes can
/// only shrink the free space meanwhile.
const FILL_CALLS_MAX: u32 = 4096;
/// The ballast's name, at the file system's root (outside the data dir).
const BALLAST: &str = "rill-bench-ballast";

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `program` with `args`; an error naming the command when it fails.
fn run(program: &str, args: &[&str]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| BenchError::Other(format!("{program} {}: {e}", args.join(" "))))?;
    if output.status.success() {
        return Ok(());
    }
    Err(BenchError::Other(format!(
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// A mounted ext4 image; unmounted and removed on drop.
#[derive(Debug)]
pub struct LoopFs {
    image: PathBuf,
    mount_point: PathBuf,
    /// Its writes are throttled now ([`LoopFs::slow`]).
    slowed: std::cell::Cell<bool>,
}

impl LoopFs {
    /// Makes an ext4 image of `size_mib` MiB at `image` and mounts it on
    /// `mount_point` (both replaced if a killed run left them). Fails,
    /// saying why, without root or the tools.
    pub fn mount(image: &Path, mount_point: &Path, size_mib: u64) -> Result<LoopFs> {
        if !is_root() {
            return Err(BenchError::Other(
                "--disk-mb needs root (it loop-mounts a file system per broker)".into(),
            ));
        }
        // ext4 needs some room for its own metadata and journal.
        if size_mib < 16 {
            return Err(BenchError::Other("--disk-mb must be at least 16".into()));
        }
        unmount_stale(mount_point)?;
        std::fs::create_dir_all(mount_point)?;
        let _ = std::fs::remove_file(image);
        let image_text = image.to_string_lossy().to_string();
        let mount_text = mount_point.to_string_lossy().to_string();
        run("truncate", &["-s", &format!("{size_mib}M"), &image_text])?;
        run("mkfs.ext4", &["-q", "-F", &image_text])?;
        run("mount", &["-o", "loop", &image_text, &mount_text])?;
        Ok(LoopFs {
            image: image.to_path_buf(),
            mount_point: mount_point.to_path_buf(),
            slowed: std::cell::Cell::new(false),
        })
    }

    /// The broker's data dir on it.
    pub fn data_dir(&self) -> PathBuf {
        self.mount_point.join("data")
    }

    fn ballast(&self) -> PathBuf {
        self.mount_point.join(BALLAST)
    }

    /// Fills the file system with the ballast until fallocate meets ENOSPC
    /// even for one block; the ballast's bytes.
    pub fn fill(&self) -> Result<u64> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(self.ballast())?;
        let mut offset = file.metadata()?.len();
        let start = offset;
        let mut step = FILL_STEP_BYTES_FIRST;
        for _ in 0..FILL_CALLS_MAX {
            if step < FILL_STEP_BYTES_LAST {
                return Ok(offset - start);
            }
            // SAFETY: a valid open descriptor; offset and step are
            // non-negative and far below off_t's range.
            let rc =
                unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as i64, step as libc::off_t) };
            if rc == 0 {
                offset += step;
                continue;
            }
            let error = std::io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::ENOSPC) => step /= 2,
                // A signal (the nemesis's SIGSTOP of another node does
                // not reach us, but a debugger's might): try again.
                Some(libc::EINTR) => {}
                _ => return Err(error.into()),
            }
        }
        Err(BenchError::Other(format!(
            "filling {}: still not full after {FILL_CALLS_MAX} fallocate calls",
            self.mount_point.display()
        )))
    }

    /// Deletes the ballast (nothing if there is none).
    pub fn free(&self) -> Result<()> {
        match std::fs::remove_file(self.ballast()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Throttles its writes to a crawl (`on`) or lifts the throttle: the
    /// slow-disk fault ([`crate::blkio`]).
    pub fn slow(&self, on: bool) -> Result<()> {
        let device = crate::blkio::device_of(&self.mount_point)?;
        let (bps, iops) = match on {
            true => (crate::blkio::SLOW_WRITE_BPS, crate::blkio::SLOW_WRITE_IOPS),
            false => (0, 0),
        };
        crate::blkio::throttle_writes(device, bps, iops)?;
        self.slowed.set(on);
        Ok(())
    }

    /// Bytes free on it now, for root (statvfs's `f_bfree`).
    pub fn free_bytes(&self) -> Result<u64> {
        let path = std::ffi::CString::new(self.mount_point.as_os_str().as_encoded_bytes())
            .map_err(|e| BenchError::Other(format!("{}: {e}", self.mount_point.display())))?;
        // SAFETY: all-zero bytes are a valid `statvfs` (plain integers).
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: path is NUL-terminated and stat a valid out pointer.
        if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(stat.f_bfree * stat.f_frsize)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        // A throttle outlives the device it names: the next loop device of
        // that number would inherit it.
        if self.slowed.get() {
            let _ = self.slow(false);
        }
        let mount_text = self.mount_point.to_string_lossy().to_string();
        // Lazy only when a plain unmount fails: a broker that has just
        // been killed may still hold files open for a moment.
        if run("umount", &[&mount_text]).is_err() {
            let _ = run("umount", &["-l", &mount_text]);
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Whether `path` is a mount point now (listed in /proc/self/mounts,
/// whose paths escape a space as `\040`).
fn is_mounted(path: &Path) -> Result<bool> {
    let Ok(path) = path.canonicalize() else {
        return Ok(false);
    };
    let wanted = path.to_string_lossy().replace(' ', "\\040");
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    Ok(mounts
        .lines()
        .any(|line| line.split(' ').nth(1) == Some(wanted.as_str())))
}

/// Unmounts what a killed run left mounted on `mount_point` (mounts can
/// stack, so a few times at most).
fn unmount_stale(mount_point: &Path) -> Result<()> {
    for _ in 0..4 {
        if !is_mounted(mount_point)? {
            return Ok(());
        }
        let mount_text = mount_point.to_string_lossy().to_string();
        run("umount", &["-l", &mount_text])?;
    }
    Err(BenchError::Other(format!(
        "{} is still mounted after 4 unmounts",
        mount_point.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_dir_is_not_a_mount_point_and_root_is() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mounted(dir.path()).unwrap());
        assert!(!is_mounted(&dir.path().join("absent")).unwrap());
        assert!(is_mounted(Path::new("/")).unwrap());
    }

    /// A real mount, filled and freed (root only; nothing to check
    /// otherwise but the refusal).
    #[test]
    fn a_filled_file_system_has_no_block_left_until_freed() {
        let dir = tempfile::tempdir().unwrap();
        let (image, mount_point) = (dir.path().join("fs.img"), dir.path().join("fs"));
        let fs = match LoopFs::mount(&image, &mount_point, 32) {
            Ok(fs) => fs,
            Err(e) => {
                assert!(!is_root(), "{e}");
                assert!(e.to_string().contains("needs root"), "{e}");
                return;
            }
        };
        assert!(is_mounted(&mount_point).unwrap());
        let before = fs.free_bytes().unwrap();
        let ballast = fs.fill().unwrap();
        assert!(ballast > before / 2, "{ballast} of {before}");
        // statvfs still counts ext4's own reserved pool (2% of it, for
        // its metadata), which no file's data can take: the proof of a
        // full disk is that one block of data no longer fits.
        let write = std::fs::write(mount_point.join("more"), [1u8; 4096]);
        let error = write.expect_err("a 4 KiB write fit on a full disk");
        assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
        fs.free().unwrap();
        assert!(fs.free_bytes().unwrap() > before / 2);
        // Slowed and restored, where cgroup v1's blkio throttle exists.
        let device = crate::blkio::device_of(&mount_point).unwrap();
        match fs.slow(true) {
            Ok(()) => {
                let limit = crate::blkio::write_bps_limit(device).unwrap();
                assert_eq!(limit, Some(crate::blkio::SLOW_WRITE_BPS));
                fs.slow(false).unwrap();
                assert_eq!(crate::blkio::write_bps_limit(device).unwrap(), None);
            }
            Err(e) => assert!(e.to_string().contains("blkio"), "{e}"),
        }
        drop(fs);
        assert!(!is_mounted(&mount_point).unwrap());
        assert!(!image.exists());
    }
}
