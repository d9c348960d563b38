//! Pure parsers for the text formats of `/proc` and `/sys`.
//!
//! Each function takes the file's text and returns `None` (or an empty list)
//! for anything it does not understand, so an odd kernel or a VM never turns
//! into an error; the checks report such values as "unknown". Every parser is
//! tested on captured samples under `tuning/testdata/samples/`.

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Device major number (0 for virtual filesystems).
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Where it is mounted, with `\040`-style escapes decoded.
    pub mountpoint: String,
    /// Per-mount options (`rw,noatime`).
    pub options: String,
    /// Filesystem type (`xfs`, `ext4`, `overlay`).
    pub fstype: String,
    /// Mount source (`/dev/nvme0n1p1`).
    pub source: String,
    /// Per-superblock options.
    pub super_options: String,
}

/// A resource limit as `/proc/<pid>/limits` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No limit.
    Unlimited,
    /// A limit in the unit of the row (bytes for memlock).
    Value(u64),
}

/// One IRQ line of `/proc/interrupts`: its number and the action name (last column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    /// IRQ number.
    pub irq: u32,
    /// Handler name, e.g. `virtio2-input.0` or `eth0-TxRx-3`.
    pub name: String,
}

/// A single unsigned integer (sysctl or sysfs attribute).
pub fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The selected word of a sysfs choice list: `always [madvise] never` gives
/// `madvise`. A file holding a single bare word (some schedulers files on old
/// kernels, `none`) gives that word.
pub fn parse_bracketed(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(start) = text.find('[') {
        let end = text[start..].find(']')? + start;
        let word = text[start + 1..end].trim();
        return (!word.is_empty()).then(|| word.to_string());
    }
    let mut words = text.split_whitespace();
    match (words.next(), words.next()) {
        (Some(only), None) => Some(only.to_string()),
        _ => None,
    }
}

/// All the words of a sysfs choice list, brackets removed.
pub fn parse_choices(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A CPU list such as `0-3,8,10-11`; sorted, without duplicates. An empty
/// string is an empty list.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((low, high)) => {
                let low: usize = low.trim().parse().ok()?;
                let high: usize = high.trim().parse().ok()?;
                // A bound on the range: no machine has a million CPUs, and a
                // corrupt file must not make us allocate forever.
                if high < low || high - low > 1 << 20 {
                    return None;
                }
                cpus.extend(low..=high);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Formats CPUs as a compact list (`0-3,8`), the inverse of [`parse_cpu_list`].
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut index = 0;
    while index < sorted.len() {
        let start = sorted[index];
        let mut end = start;
        while index + 1 < sorted.len() && sorted[index + 1] == end + 1 {
            index += 1;
            end += 1;
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        index += 1;
    }
    parts.join(",")
}

/// A hexadecimal CPU mask as in `rps_cpus`/`smp_affinity`
/// (`00000000,0000000f`): the CPUs whose bit is set.
pub fn parse_cpu_mask(text: &str) -> Option<Vec<usize>> {
    let digits: String = text.trim().chars().filter(|c| *c != ',').collect();
    if digits.is_empty() {
        return None;
    }
    let mut cpus = Vec::new();
    for (position, digit) in digits.chars().rev().enumerate() {
        let nibble = digit.to_digit(16)? as usize;
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                cpus.push(position * 4 + bit);
            }
        }
    }
    Some(cpus)
}

/// Formats CPUs as a hex mask in 32-bit comma-separated groups, as the kernel
/// prints and accepts it.
pub fn format_cpu_mask(cpus: &[usize]) -> String {
    let groups_count = cpus.iter().max().map_or(1, |max| max / 32 + 1);
    let mut groups = vec![0u32; groups_count];
    for cpu in cpus {
        groups[cpu / 32] |= 1 << (cpu % 32);
    }
    groups
        .iter()
        .rev()
        .map(|g| format!("{g:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The soft limit of the row whose name starts with `row_name` in
/// `/proc/<pid>/limits` (e.g. `Max locked memory`).
pub fn parse_limit(text: &str, row_name: &str) -> Option<Limit> {
    let line = text.lines().find(|l| l.starts_with(row_name))?;
    let soft = line[row_name.len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        Some(Limit::Unlimited)
    } else {
        soft.parse().ok().map(Limit::Value)
    }
}

/// A `Key:\tvalue` field of `/proc/<pid>/status` (e.g. `Seccomp`).
pub fn parse_status_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name == key).then(|| value.trim().to_string())
    })
}

/// Decodes the octal escapes (`\040` for space) the kernel uses in mount tables.
fn unescape_mount_field(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'\\' && index + 4 <= bytes.len() {
            let octal = std::str::from_utf8(&bytes[index + 1..index + 4]).ok();
            if let Some(value) = octal.and_then(|o| u8::from_str_radix(o, 8).ok()) {
                out.push(value);
                index += 4;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// All entries of `/proc/self/mountinfo`; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    // Fields: id parent major:minor root mountpoint options [optional...] - fstype source superopts
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split_whitespace().collect();
    let right: Vec<&str> = right.split_whitespace().collect();
    if left.len() < 6 || right.is_empty() {
        return None;
    }
    let (major, minor) = left[2].split_once(':')?;
    Some(MountEntry {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        mountpoint: unescape_mount_field(left[4]),
        options: left[5].to_string(),
        fstype: right[0].to_string(),
        source: right
            .get(1)
            .map_or_else(String::new, |s| unescape_mount_field(s)),
        super_options: right.get(2).map_or_else(String::new, |s| s.to_string()),
    })
}

/// The mount that holds `path` (an absolute, normalized path): the entry with
/// the longest mountpoint that is a path prefix of it. Later entries win ties,
/// because a later mount over the same point hides the earlier one.
pub fn find_mount<'a>(entries: &'a [MountEntry], path: &str) -> Option<&'a MountEntry> {
    let mut best: Option<&MountEntry> = None;
    for entry in entries {
        let point = entry.mountpoint.trim_end_matches('/');
        let contains = point.is_empty()
            || path == point
            || (path.starts_with(point) && path.as_bytes().get(point.len()) == Some(&b'/'));
        if contains && best.is_none_or(|b| b.mountpoint.trim_end_matches('/').len() <= point.len())
        {
            best = Some(entry);
        }
    }
    best
}

/// The numbered IRQ lines of `/proc/interrupts` (NMI, LOC and friends skipped).
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    text.lines()
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let irq = number.trim().parse().ok()?;
            let name = rest.split_whitespace().last()?.to_string();
            Some(IrqLine { irq, name })
        })
        .collect()
}

/// The value of `KEY=value` in a sysfs `uevent` file.
pub fn parse_uevent(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once('=')?;
        (name == key).then(|| value.trim().to_string())
    })
}

/// The three numbers of `net.ipv4.tcp_rmem`-style sysctls (min, default, max).
pub fn parse_triple(text: &str) -> Option<[u64; 3]> {
    let mut numbers = text.split_whitespace().map(|n| n.parse::<u64>());
    let triple = [
        numbers.next()?.ok()?,
        numbers.next()?.ok()?,
        numbers.next()?.ok()?,
    ];
    numbers.next().is_none().then_some(triple)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_VM: &str = include_str!("../testdata/samples/mountinfo.vm.txt");
    const MOUNTINFO_ODD: &str = include_str!("../testdata/samples/mountinfo.odd.txt");
    const INTERRUPTS_VM: &str = include_str!("../testdata/samples/interrupts.vm.txt");
    const INTERRUPTS_NVME: &str = include_str!("../testdata/samples/interrupts.metal.txt");
    const LIMITS_VM: &str = include_str!("../testdata/samples/limits.vm.txt");
    const LIMITS_UNLIMITED: &str = include_str!("../testdata/samples/limits.unlimited.txt");
    const STATUS_VM: &str = include_str!("../testdata/samples/status.vm.txt");
    const SCHEDULER_VM: &str = include_str!("../testdata/samples/scheduler.vm.txt");

    #[test]
    fn integers_and_odd_values() {
        assert_eq!(parse_u64("60\n"), Some(60));
        assert_eq!(parse_u64(""), None);
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("abc"), None);
    }

    #[test]
    fn bracketed_choice() {
        assert_eq!(
            parse_bracketed(SCHEDULER_VM).as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(
            parse_bracketed("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(parse_bracketed("none").as_deref(), Some("none"));
        assert_eq!(parse_bracketed("a b c"), None);
        assert_eq!(parse_bracketed("[unterminated"), None);
        assert_eq!(parse_bracketed("[]"), None);
        assert_eq!(
            parse_choices(SCHEDULER_VM),
            vec!["none", "mq-deadline", "kyber", "bfq"]
        );
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn cpu_masks_round_trip() {
        assert_eq!(parse_cpu_mask("0"), Some(vec![]));
        assert_eq!(parse_cpu_mask("f"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_mask("00000001,00000002"), Some(vec![1, 32]));
        assert_eq!(parse_cpu_mask("zz"), None);
        assert_eq!(parse_cpu_mask(""), None);
        assert_eq!(format_cpu_mask(&[0, 1]), "00000003");
        assert_eq!(format_cpu_mask(&[1, 32]), "00000001,00000002");
        assert_eq!(format_cpu_mask(&[]), "00000000");
    }

    #[test]
    fn memlock_limits() {
        assert_eq!(
            parse_limit(LIMITS_VM, "Max locked memory"),
            Some(Limit::Value(8 << 20))
        );
        assert_eq!(
            parse_limit(LIMITS_UNLIMITED, "Max locked memory"),
            Some(Limit::Unlimited)
        );
        assert_eq!(parse_limit("garbage", "Max locked memory"), None);
    }

    #[test]
    fn seccomp_field() {
        assert_eq!(
            parse_status_field(STATUS_VM, "Seccomp").as_deref(),
            Some("0")
        );
        assert_eq!(parse_status_field("Name:\tx\n", "Seccomp"), None);
    }

    #[test]
    fn mountinfo_vm_sample() {
        let entries = parse_mountinfo(MOUNTINFO_VM);
        assert!(entries.len() >= 10);
        let root = find_mount(&entries, "/work/main/rill-data").expect("root mount");
        assert_eq!(root.mountpoint, "/");
        assert_eq!(root.fstype, "ext4");
        assert_eq!((root.major, root.minor), (254, 0));
        let cgroup = find_mount(&entries, "/sys/fs/cgroup/cpu/x").expect("cgroup mount");
        assert_eq!(cgroup.mountpoint, "/sys/fs/cgroup/cpu");
        // A prefix that is not a path component boundary must not match.
        let proc_like = find_mount(&entries, "/procfoo").expect("mount");
        assert_eq!(proc_like.mountpoint, "/");
    }

    #[test]
    fn mountinfo_odd_sample() {
        let entries = parse_mountinfo(MOUNTINFO_ODD);
        // The malformed line is skipped, the others parse.
        assert_eq!(entries.len(), 3);
        let data = find_mount(&entries, "/var/lib/rill data/x").expect("escaped mount");
        assert_eq!(data.mountpoint, "/var/lib/rill data");
        assert_eq!(data.fstype, "xfs");
        assert_eq!(data.options, "rw,noatime");
        assert_eq!(data.source, "/dev/nvme0n1p1");
        assert_eq!((data.major, data.minor), (259, 1));
    }

    #[test]
    fn interrupts_samples() {
        let vm = parse_interrupts(INTERRUPTS_VM);
        assert!(vm
            .iter()
            .any(|l| l.irq == 38 && l.name == "virtio2-input.0"));
        assert!(vm.iter().all(|l| l.name != "NMI"));
        let metal = parse_interrupts(INTERRUPTS_NVME);
        let eth: Vec<_> = metal
            .iter()
            .filter(|l| l.name.starts_with("eth0-"))
            .collect();
        assert_eq!(eth.len(), 4);
    }

    #[test]
    fn uevent_and_triples() {
        let uevent = "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n";
        assert_eq!(parse_uevent(uevent, "DEVNAME").as_deref(), Some("vda"));
        assert_eq!(parse_uevent(uevent, "PARTN"), None);
        assert_eq!(
            parse_triple("4096\t131072\t33554432"),
            Some([4096, 131072, 33554432])
        );
        assert_eq!(parse_triple("4096 131072"), None);
        assert_eq!(parse_triple("1 2 3 4"), None);
    }
}
