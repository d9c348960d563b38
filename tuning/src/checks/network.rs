//! Network: NIC interrupt and queue spread, listen backlog and socket buffers.
//!
//! With `SO_REUSEPORT` every shard accepts connections, but packet processing
//! still lands on the CPUs the NIC's IRQs (or RPS/XPS) point at; with one busy
//! core taking every interrupt, the others wait on it.

use super::{sysctl_at_least, Context};
use crate::check::{Check, Fix, Status};
use crate::parse;

/// Socket buffer ceiling rill wants: enough for a 10 Gbit/s link at ~10 ms RTT.
const SOCKET_BUFFER_BYTES: u64 = 16 << 20;

/// The network rows.
pub fn checks(context: &Context) -> Vec<Check> {
    let nics = physical_nics(context);
    vec![
        irq_spread(context, &nics),
        rps_xps(context, &nics),
        sysctl_at_least(
            context,
            "net.somaxconn",
            "/proc/sys/net/core/somaxconn",
            4096,
            "a burst of client connects overflows a short accept backlog into SYN retries",
        ),
        socket_buffers(context),
    ]
}

/// Interfaces backed by a device (physical or virtio), `lo` and purely
/// virtual ones (bridges, ifb, veth without a device link) left out.
pub fn physical_nics(context: &Context) -> Vec<String> {
    context
        .host
        .list_dir("/sys/class/net")
        .into_iter()
        .filter(|name| {
            name != "lo"
                && context
                    .host
                    .exists(&format!("/sys/class/net/{name}/device"))
        })
        .collect()
}

/// The queue IRQs of a NIC, matched by name in `/proc/interrupts`: drivers
/// name them `<iface>-TxRx-N` (Intel, Broadcom) or `<device>-input.N` (virtio).
/// The `-config` IRQ carries no traffic and is left out.
fn nic_irqs(context: &Context, nic: &str, interrupts: &[parse::IrqLine]) -> Vec<u32> {
    let device = context
        .host
        .read_link(&format!("/sys/class/net/{nic}/device"))
        .and_then(|target| target.rsplit('/').next().map(str::to_string))
        .unwrap_or_else(|| nic.to_string());
    let prefixes = [format!("{nic}-"), format!("{device}-")];
    interrupts
        .iter()
        .filter(|line| prefixes.iter().any(|p| line.name.starts_with(p.as_str())))
        .filter(|line| !line.name.ends_with("-config"))
        .map(|line| line.irq)
        .collect()
}

fn irq_spread(context: &Context, nics: &[String]) -> Check {
    let why = "queue IRQs spread one per CPU so no single core does all packet processing";
    let name = "net.irq_spread";
    let recommended = "each queue IRQ on its own CPU";
    let Some(text) = context.host.read_raw("/proc/interrupts") else {
        return Check::skip(name, recommended, why);
    };
    let interrupts = parse::parse_interrupts(&text);
    let online = context.online_cpus();
    let mut fixes = Vec::new();
    let mut summary = Vec::new();
    let mut all_spread = true;
    let mut any_irq = false;
    for nic in nics {
        let irqs = nic_irqs(context, nic, &interrupts);
        let mut used_cpus = Vec::new();
        let mut nic_summary = Vec::new();
        let mut pinned_one_each = true;
        for (index, irq) in irqs.iter().enumerate() {
            let path = format!("/proc/irq/{irq}/smp_affinity_list");
            let Some(current) = context.host.read(&path) else {
                continue;
            };
            any_irq = true;
            let cpus = parse::parse_cpu_list(&current).unwrap_or_default();
            if cpus.len() != 1 {
                pinned_one_each = false;
            }
            used_cpus.extend(cpus);
            nic_summary.push(format!("{irq}:{current}"));
            fixes.push(Fix {
                path,
                value: online[index % online.len()].to_string(),
                previous: current,
            });
        }
        used_cpus.sort_unstable();
        used_cpus.dedup();
        let wanted_distinct = irqs.len().min(online.len());
        if !pinned_one_each || used_cpus.len() < wanted_distinct {
            all_spread = false;
        }
        if !nic_summary.is_empty() {
            summary.push(format!("{nic} [{}]", nic_summary.join(" ")));
        }
    }
    if !any_irq {
        return Check::skip(name, recommended, why);
    }
    let status = if all_spread {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(name, summary.join("; "), recommended, why, status).with_fixes(fixes)
}

fn rps_xps(context: &Context, nics: &[String]) -> Check {
    let why = "with fewer queues than CPUs, RPS/XPS spread the rest of the packet work";
    let name = "net.rps_xps";
    let recommended = "RPS on all CPUs when rx queues < CPUs; XPS per tx queue";
    let online = context.online_cpus();
    let all_cpus_mask = parse::format_cpu_mask(&online);
    let mut fixes = Vec::new();
    let mut summary = Vec::new();
    for nic in nics {
        let queues_path = format!("/sys/class/net/{nic}/queues");
        let queues = context.host.list_dir(&queues_path);
        let rx: Vec<&String> = queues.iter().filter(|q| q.starts_with("rx-")).collect();
        let tx: Vec<&String> = queues.iter().filter(|q| q.starts_with("tx-")).collect();
        let mut rps_masks = Vec::new();
        for queue in &rx {
            let path = format!("{queues_path}/{queue}/rps_cpus");
            if let Some(mask) = context.host.read(&path) {
                rps_masks.push((path, mask));
            }
        }
        let rps_off = rps_masks
            .iter()
            .all(|(_, mask)| parse::parse_cpu_mask(mask).is_some_and(|c| c.is_empty()));
        if !rps_masks.is_empty() && rx.len() < online.len() && rps_off {
            fixes.extend(rps_masks.iter().map(|(path, mask)| Fix {
                path: path.clone(),
                value: all_cpus_mask.clone(),
                previous: mask.clone(),
            }));
        }
        let mut xps_masks = Vec::new();
        for queue in &tx {
            let path = format!("{queues_path}/{queue}/xps_cpus");
            if let Some(mask) = context.host.read(&path) {
                xps_masks.push((path, mask));
            }
        }
        let xps_off = xps_masks
            .iter()
            .all(|(_, mask)| parse::parse_cpu_mask(mask).is_some_and(|c| c.is_empty()));
        // XPS only means something with several tx queues to choose between.
        if xps_masks.len() > 1 && xps_off {
            fixes.extend(
                xps_masks
                    .iter()
                    .enumerate()
                    .map(|(index, (path, mask))| Fix {
                        path: path.clone(),
                        value: parse::format_cpu_mask(&[online[index % online.len()]]),
                        previous: mask.clone(),
                    }),
            );
        }
        summary.push(format!(
            "{nic}: {} rx/{} tx queues, rps {}, xps {}",
            rx.len(),
            tx.len(),
            if rps_off { "off" } else { "on" },
            if xps_masks.is_empty() {
                "n/a"
            } else if xps_off {
                "off"
            } else {
                "on"
            }
        ));
    }
    if summary.is_empty() {
        return Check::skip(name, recommended, why);
    }
    let status = if fixes.is_empty() {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(name, summary.join("; "), recommended, why, status).with_fixes(fixes)
}

fn socket_buffers(context: &Context) -> Check {
    let why =
        "autotuned TCP windows stop at these ceilings; small ones cap per-connection throughput";
    let name = "net.socket_buffers";
    let recommended = format!(
        ">= {} MiB max for rmem/wmem and tcp_rmem/tcp_wmem",
        SOCKET_BUFFER_BYTES >> 20
    );
    let mut fixes = Vec::new();
    let mut current = Vec::new();
    let mut seen = false;
    for (label, path) in [
        ("rmem_max", "/proc/sys/net/core/rmem_max"),
        ("wmem_max", "/proc/sys/net/core/wmem_max"),
    ] {
        let Some(text) = context.host.read(path) else {
            continue;
        };
        seen = true;
        current.push(format!("{label}={text}"));
        if parse::parse_u64(&text).is_none_or(|v| v < SOCKET_BUFFER_BYTES) {
            fixes.push(Fix {
                path: path.to_string(),
                value: SOCKET_BUFFER_BYTES.to_string(),
                previous: text,
            });
        }
    }
    for (label, path) in [
        ("tcp_rmem", "/proc/sys/net/ipv4/tcp_rmem"),
        ("tcp_wmem", "/proc/sys/net/ipv4/tcp_wmem"),
    ] {
        let Some(text) = context.host.read(path) else {
            continue;
        };
        seen = true;
        let Some([minimum, default, maximum]) = parse::parse_triple(&text) else {
            current.push(format!("{label}=?"));
            continue;
        };
        current.push(format!("{label} max={maximum}"));
        if maximum < SOCKET_BUFFER_BYTES {
            // Keep the kernel's min and default; only raise the ceiling.
            fixes.push(Fix {
                path: path.to_string(),
                value: format!("{minimum} {default} {SOCKET_BUFFER_BYTES}"),
                // The kernel's own text (tab-separated), so revert writes it back verbatim.
                previous: text.clone(),
            });
        }
    }
    if !seen {
        return Check::skip(name, recommended, why);
    }
    let status = if fixes.is_empty() {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(name, current.join(" "), recommended, why, status).with_fixes(fixes)
}
