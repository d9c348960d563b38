//! CPUs: rill runs one pinned shard per core, so it cares how many there are,
//! which NUMA node and physical core each pinned CPU sits on, and whether the
//! frequency governor lets them run at full speed.

use std::collections::BTreeSet;

use super::Context;
use crate::check::{Check, Fix, Status};
use crate::parse;

/// The CPU rows.
pub fn checks(context: &Context) -> Vec<Check> {
    vec![
        count(context),
        numa(context),
        smt(context),
        pinned(context),
        governor(context),
    ]
}

fn count(context: &Context) -> Check {
    let why = "one shard per core: --cores above the online count cannot be pinned";
    let name = "cpu.count";
    let Some(text) = context.host.read("/sys/devices/system/cpu/online") else {
        return Check::skip(name, format!(">= {}", context.shard_count()), why);
    };
    let online = parse::parse_cpu_list(&text).unwrap_or_default();
    let shards = context.shard_count();
    let status = if online.len() >= shards && !online.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    Check::new(
        name,
        format!("{} online ({text})", online.len()),
        format!(">= {shards} (--cores)"),
        why,
        status,
    )
}

/// NUMA node of each CPU, from `/sys/devices/system/node/node*/cpulist`.
fn numa_nodes(context: &Context) -> Vec<(usize, Vec<usize>)> {
    context
        .host
        .list_dir("/sys/devices/system/node")
        .into_iter()
        .filter_map(|entry| {
            let node: usize = entry.strip_prefix("node")?.parse().ok()?;
            let text = context
                .host
                .read(&format!("/sys/devices/system/node/{entry}/cpulist"))?;
            Some((node, parse::parse_cpu_list(&text)?))
        })
        .collect()
}

fn numa(context: &Context) -> Check {
    let why = "shards on several nodes pay remote-memory latency on cross-shard messages";
    let name = "cpu.numa";
    let nodes = numa_nodes(context);
    if nodes.is_empty() {
        return Check::skip(name, "pinned cores on one node", why);
    }
    let pinned = context.pinned_cpus();
    let used: BTreeSet<usize> = nodes
        .iter()
        .filter(|(_, cpus)| cpus.iter().any(|c| pinned.contains(c)))
        .map(|(node, _)| *node)
        .collect();
    let status = if used.len() <= 1 {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(
        name,
        format!("{} node(s); pinned cores on {}", nodes.len(), used.len()),
        "pinned cores on one node",
        why,
        status,
    )
}

fn smt(context: &Context) -> Check {
    let why = "two shards on SMT siblings share one core's pipeline and caches";
    let name = "cpu.smt";
    let pinned = context.pinned_cpus();
    let mut physical_cores: BTreeSet<Vec<usize>> = BTreeSet::new();
    let mut known = 0;
    for cpu in &pinned {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
        if let Some(siblings) = context
            .host
            .read(&path)
            .and_then(|t| parse::parse_cpu_list(&t))
        {
            physical_cores.insert(siblings);
            known += 1;
        }
    }
    if known == 0 {
        return Check::skip(name, "one shard per physical core", why);
    }
    let status = if physical_cores.len() == known {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(
        name,
        format!(
            "{known} pinned CPUs on {} physical cores",
            physical_cores.len()
        ),
        "one shard per physical core",
        why,
        status,
    )
}

fn pinned(context: &Context) -> Check {
    let pinned = context.pinned_cpus();
    Check::new(
        "cpu.pinned",
        parse::format_cpu_list(&pinned),
        "one shard per listed CPU",
        "the CPUs rill's shards will be pinned to (shard i on the i-th online CPU)",
        Status::Pass,
    )
}

fn governor(context: &Context) -> Check {
    let why = "powersave/ondemand add wake-up latency and cap throughput of busy-polling shards";
    let name = "cpu.governor";
    let mut fixes = Vec::new();
    let mut governors = BTreeSet::new();
    for cpu in context.online_cpus() {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
        if let Some(governor) = context.host.read(&path) {
            if governor != "performance" {
                fixes.push(Fix {
                    path,
                    value: "performance".to_string(),
                    previous: governor.clone(),
                });
            }
            governors.insert(governor);
        }
    }
    if governors.is_empty() {
        // VMs usually have no cpufreq: the hypervisor owns the frequency.
        return Check::skip(name, "performance", why);
    }
    let status = if fixes.is_empty() {
        Status::Pass
    } else {
        Status::Warn
    };
    let current = governors.into_iter().collect::<Vec<_>>().join(",");
    Check::new(name, current, "performance", why, status).with_fixes(fixes)
}
