//! The data directory's filesystem, mount options and block device.
//!
//! The data dir is mapped to its mount through `/proc/self/mountinfo`, the mount
//! to its device through `/sys/dev/block/MAJOR:MINOR`, and a partition to its
//! whole disk (whose `queue/` holds the settings) through the parent directory.

use std::path::{Path, PathBuf};

use super::Context;
use crate::check::{Check, Fix, Status};
use crate::parse::{self, MountEntry};

/// The disk rows.
pub fn checks(context: &Context) -> Vec<Check> {
    let mount = data_dir_mount(context);
    let mut checks = vec![filesystem(mount.as_ref()), mount_options(mount.as_ref())];
    let device = mount.as_ref().and_then(|m| BlockDevice::find(context, m));
    checks.extend(match device {
        Some(device) => device_checks(context, &device),
        None => device_skips(),
    });
    checks
}

/// The data dir as an absolute path; on the real host symlinks are resolved
/// through its nearest existing ancestor, since the dir may not exist yet.
pub fn resolve_data_dir(context: &Context) -> PathBuf {
    let absolute = if context.data_dir.is_absolute() {
        context.data_dir.clone()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(&context.data_dir))
            .unwrap_or_else(|_| Path::new("/").join(&context.data_dir))
    };
    if !context.host.is_real() {
        return absolute;
    }
    let mut existing = absolute.as_path();
    let mut missing_tail = Vec::new();
    // Bounded by the number of path components.
    loop {
        if let Ok(mut resolved) = existing.canonicalize() {
            for part in missing_tail.iter().rev() {
                resolved.push(part);
            }
            return resolved;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing_tail.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The mount holding the data dir, from `/proc/self/mountinfo`.
pub fn data_dir_mount(context: &Context) -> Option<MountEntry> {
    let text = context.host.read_raw("/proc/self/mountinfo")?;
    let entries = parse::parse_mountinfo(&text);
    let data_dir = resolve_data_dir(context);
    parse::find_mount(&entries, &data_dir.to_string_lossy()).cloned()
}

fn filesystem(mount: Option<&MountEntry>) -> Check {
    let why = "xfs and ext4 are the filesystems with solid O_DIRECT and fallocate support";
    let name = "disk.filesystem";
    let Some(mount) = mount else {
        return Check::skip(name, "xfs or ext4", why);
    };
    let status = match mount.fstype.as_str() {
        "xfs" | "ext4" => Status::Pass,
        _ => Status::Warn,
    };
    Check::new(
        name,
        format!(
            "{} on {} ({})",
            mount.fstype, mount.mountpoint, mount.source
        ),
        "xfs or ext4",
        why,
        status,
    )
}

fn mount_options(mount: Option<&MountEntry>) -> Check {
    let why = "atime updates add metadata writes to reads; online discard stalls segment deletes";
    let name = "disk.mount_options";
    let recommended = "noatime (or relatime), no discard (use fstrim.timer)";
    let Some(mount) = mount else {
        return Check::skip(name, recommended, why);
    };
    let options: Vec<&str> = mount
        .options
        .split(',')
        .chain(mount.super_options.split(','))
        .collect();
    let atime_ok = options.iter().any(|o| *o == "noatime" || *o == "relatime");
    let online_discard = options.contains(&"discard");
    let status = if atime_ok && !online_discard {
        Status::Pass
    } else {
        Status::Warn
    };
    let current = if online_discard && !mount.options.split(',').any(|o| o == "discard") {
        format!("{} (superblock: discard)", mount.options)
    } else {
        mount.options.clone()
    };
    // Mount options change through /etc/fstab and a remount, not /sys: no fix.
    Check::new(name, current, recommended, why, status)
}

/// The block device behind the data dir.
struct BlockDevice {
    /// Name of the mounted device (`nvme0n1p1`).
    name: String,
    /// Name of the whole disk (`nvme0n1`).
    disk_name: String,
    /// Host path of the whole disk's sysfs directory.
    disk_path: String,
}

impl BlockDevice {
    fn find(context: &Context, mount: &MountEntry) -> Option<BlockDevice> {
        // Major 0 is an anonymous device: tmpfs, overlay, NFS — no queue to tune.
        if mount.major == 0 {
            return None;
        }
        let device_path = format!("/sys/dev/block/{}:{}", mount.major, mount.minor);
        let uevent = context.host.read_raw(&format!("{device_path}/uevent"))?;
        let name = parse::parse_uevent(&uevent, "DEVNAME")?;
        // A partition's queue settings live on its disk: the parent directory.
        let disk_path = if context.host.exists(&format!("{device_path}/partition")) {
            format!("{device_path}/..")
        } else {
            device_path
        };
        let disk_name = context
            .host
            .read_raw(&format!("{disk_path}/uevent"))
            .and_then(|t| parse::parse_uevent(&t, "DEVNAME"))
            .unwrap_or_else(|| name.clone());
        Some(BlockDevice {
            name,
            disk_name,
            disk_path,
        })
    }

    fn queue(&self, attribute: &str) -> String {
        format!("{}/queue/{attribute}", self.disk_path)
    }

    fn is_nvme(&self) -> bool {
        self.disk_name.starts_with("nvme")
    }
}

const DEVICE_ROWS: [(&str, &str, &str); 6] = [
    (
        "disk.device",
        "NVMe",
        "rill's latency and throughput targets assume NVMe",
    ),
    (
        "disk.scheduler",
        "none (NVMe), mq-deadline (rotational)",
        "NVMe does its own queueing; an I/O scheduler only adds CPU per request",
    ),
    (
        "disk.nomerges",
        "2",
        "rill already issues large sequential writes; merge lookups cost CPU per I/O",
    ),
    (
        "disk.read_ahead",
        ">= 128 KiB",
        "fetches of cold segments are sequential page-cache reads (sendfile)",
    ),
    (
        "disk.write_cache",
        "write through (with power-loss protection) or write back",
        "with write back every fdatasync is a cache flush: iotune measures its cost",
    ),
    (
        "disk.block_size",
        "physical <= 4096",
        "rill aligns O_DIRECT writes to 4 KiB; a larger physical block means read-modify-write",
    ),
];

fn device_skips() -> Vec<Check> {
    DEVICE_ROWS
        .iter()
        .map(|(name, recommended, why)| Check::skip(name, *recommended, why))
        .collect()
}

fn device_checks(context: &Context, device: &BlockDevice) -> Vec<Check> {
    let rotational = context
        .host
        .read(&device.queue("rotational"))
        .and_then(|t| parse::parse_u64(&t));
    vec![
        device_kind(device, rotational),
        scheduler(context, device, rotational),
        nomerges(context, device),
        read_ahead(context, device),
        write_cache(context, device),
        block_size(context, device),
    ]
}

/// The row of `DEVICE_ROWS[index]` with its current value and status.
fn row(index: usize, current: String, status: Status) -> Check {
    let (name, recommended, why) = DEVICE_ROWS[index];
    Check::new(name, current, recommended, why, status)
}

/// `disk.device`: the device and its disk, NVMe or not.
fn device_kind(device: &BlockDevice, rotational: Option<u64>) -> Check {
    let kind = if device.is_nvme() { "NVMe" } else { "not NVMe" };
    row(
        0,
        format!(
            "{} (disk {}, {kind}, rotational={})",
            device.name,
            device.disk_name,
            rotational.map_or_else(|| "?".to_string(), |r| r.to_string())
        ),
        if device.is_nvme() {
            Status::Pass
        } else {
            Status::Warn
        },
    )
}

/// `disk.scheduler`: none for NVMe and other non-rotational disks,
/// mq-deadline otherwise; the fix only when the kernel offers it.
fn scheduler(context: &Context, device: &BlockDevice, rotational: Option<u64>) -> Check {
    let Some(text) = context.host.read(&device.queue("scheduler")) else {
        return skip_row(1);
    };
    let current = parse::parse_bracketed(&text).unwrap_or_else(|| text.clone());
    let wanted = if device.is_nvme() || rotational == Some(0) {
        "none"
    } else {
        "mq-deadline"
    };
    let status = if current == wanted {
        Status::Pass
    } else {
        Status::Warn
    };
    let available = parse::parse_choices(&text).iter().any(|c| c == wanted);
    let fixes = if available {
        vec![Fix {
            path: device.queue("scheduler"),
            value: wanted.to_string(),
            previous: current.clone(),
        }]
    } else {
        Vec::new()
    };
    row(1, current, status).with_fixes(fixes)
}

/// `disk.nomerges`: 2 (no merge lookups).
fn nomerges(context: &Context, device: &BlockDevice) -> Check {
    let Some(text) = context.host.read(&device.queue("nomerges")) else {
        return skip_row(2);
    };
    let status = if parse::parse_u64(&text) == Some(2) {
        Status::Pass
    } else {
        Status::Warn
    };
    row(2, text.clone(), status).with_fixes(vec![Fix {
        path: device.queue("nomerges"),
        value: "2".to_string(),
        previous: text,
    }])
}

/// `disk.read_ahead`: at least 128 KiB.
fn read_ahead(context: &Context, device: &BlockDevice) -> Check {
    let Some(text) = context.host.read(&device.queue("read_ahead_kb")) else {
        return skip_row(3);
    };
    match parse::parse_u64(&text) {
        Some(read_ahead_kb) if read_ahead_kb >= 128 => {
            row(3, format!("{read_ahead_kb} KiB"), Status::Pass)
        }
        _ => row(3, format!("{text} KiB"), Status::Warn).with_fixes(vec![Fix {
            path: device.queue("read_ahead_kb"),
            value: "128".to_string(),
            previous: text,
        }]),
    }
}

/// `disk.write_cache`: reported, never warned about.
fn write_cache(context: &Context, device: &BlockDevice) -> Check {
    match context.host.read(&device.queue("write_cache")) {
        None => skip_row(4),
        // Informational: both are correct; which is faster depends on whether
        // the device has power-loss protection, which sysfs cannot tell.
        Some(text) => row(4, text, Status::Pass),
    }
}

/// `disk.block_size`: a physical block of at most 4 KiB that divides it.
fn block_size(context: &Context, device: &BlockDevice) -> Check {
    let host = &context.host;
    let logical = host
        .read(&device.queue("logical_block_size"))
        .and_then(|t| parse::parse_u64(&t));
    let physical = host
        .read(&device.queue("physical_block_size"))
        .and_then(|t| parse::parse_u64(&t));
    match (logical, physical) {
        (Some(logical), Some(physical)) => {
            let status = if physical <= 4096 && 4096 % physical == 0 {
                Status::Pass
            } else {
                Status::Warn
            };
            row(5, format!("logical {logical}, physical {physical}"), status)
        }
        _ => skip_row(5),
    }
}

fn skip_row(index: usize) -> Check {
    let (name, recommended, why) = DEVICE_ROWS[index];
    Check::skip(name, recommended, why)
}
