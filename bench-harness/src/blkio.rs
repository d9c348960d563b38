//! A slow disk for the nemesis (`rill-bench verify --faults slowdisk`):
//! the writes to one broker's file system throttled through cgroup v1's
//! blkio controller at the root cgroup (`blkio.throttle.write_bps_device`
//! and `write_iops_device`), which holds for every process that writes to
//! that block device, no process moved. Each broker's `--disk-mb` file
//! system is a loop device of its own, so the throttle slows that broker
//! only: its segment writes and fdatasyncs, and its metadata log.
//!
//! Needs root and cgroup v1's blkio hierarchy (cgroup v2 has no throttle
//! at its root); refused with the reason otherwise. 0 lifts a limit.

use crate::error::{BenchError, Result};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// cgroup v1's blkio hierarchy, at its root.
const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";
/// Bytes a second a slowed disk writes: thousands of times slower than
/// a local SSD, yet still moving.
pub const SLOW_WRITE_BPS: u64 = 256 << 10;
/// Writes a second a slowed disk takes (fdatasyncs included).
pub const SLOW_WRITE_IOPS: u64 = 10;

/// The block device (`major:minor`) of the file system holding `path`.
pub fn device_of(path: &Path) -> Result<(u64, u64)> {
    let dev = std::fs::metadata(path)?.dev();
    Ok((libc::major(dev) as u64, libc::minor(dev) as u64))
}

/// Limits writes to `device` to `bps` bytes and `iops` requests a second
/// (0: no limit).
pub fn throttle_writes(device: (u64, u64), bps: u64, iops: u64) -> Result<()> {
    let root = Path::new(BLKIO_ROOT);
    if !root.join("blkio.throttle.write_bps_device").exists() {
        return Err(BenchError::Other(format!(
            "--faults slowdisk needs cgroup v1's blkio throttle ({BLKIO_ROOT}) and root"
        )));
    }
    let (major, minor) = device;
    for (file, limit) in [
        ("blkio.throttle.write_bps_device", bps),
        ("blkio.throttle.write_iops_device", iops),
    ] {
        std::fs::write(root.join(file), format!("{major}:{minor} {limit}\n"))
            .map_err(|e| BenchError::Other(format!("{BLKIO_ROOT}/{file}: {e}")))?;
    }
    Ok(())
}

/// The write-bytes limit set on `device` now (`None`: none).
pub fn write_bps_limit(device: (u64, u64)) -> Result<Option<u64>> {
    let text =
        std::fs::read_to_string(Path::new(BLKIO_ROOT).join("blkio.throttle.write_bps_device"))?;
    let wanted = format!("{}:{}", device.0, device.1);
    Ok(text.lines().find_map(|line| {
        let (dev, limit) = line.split_once(' ')?;
        (dev == wanted).then(|| limit.trim().parse().ok()).flatten()
    }))
}
