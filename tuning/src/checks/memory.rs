//! Memory knobs: transparent huge pages, swappiness and the AIO limit.

use super::{sysctl_at_least, Context};
use crate::check::{Check, Fix, Status};
use crate::parse;

const THP_PATH: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
const SWAPPINESS_PATH: &str = "/proc/sys/vm/swappiness";

/// The memory rows.
pub fn checks(context: &Context) -> Vec<Check> {
    vec![
        transparent_huge_pages(context),
        swappiness(context),
        sysctl_at_least(
            context,
            "fs.aio-max-nr",
            "/proc/sys/fs/aio-max-nr",
            1_048_576,
            "libaio fallbacks and other Seastar-lineage tools on the host share this limit",
        ),
    ]
}

fn transparent_huge_pages(context: &Context) -> Check {
    // Same choice as Redpanda's tuner: rill's memory is long-lived shard arenas
    // and DMA pools, where huge pages cut TLB misses and compaction stalls are rare.
    let why = "huge pages cut TLB misses on the shards' large, long-lived buffers";
    let name = "mem.thp";
    let Some(text) = context.host.read(THP_PATH) else {
        return Check::skip(name, "always", why);
    };
    let Some(current) = parse::parse_bracketed(&text) else {
        return Check::new(name, text, "always", why, Status::Warn);
    };
    let status = if current == "always" {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(name, current.clone(), "always", why, status).with_fixes(vec![Fix {
        path: THP_PATH.to_string(),
        value: "always".to_string(),
        previous: current,
    }])
}

fn swappiness(context: &Context) -> Check {
    let why = "a swapped-out shard page stalls the whole core for a disk read";
    let name = "vm.swappiness";
    let Some(text) = context.host.read(SWAPPINESS_PATH) else {
        return Check::skip(name, "1", why);
    };
    let Some(value) = parse::parse_u64(&text) else {
        return Check::new(name, text, "1", why, Status::Warn);
    };
    let status = if value <= 10 {
        Status::Pass
    } else {
        Status::Warn
    };
    Check::new(name, value.to_string(), "1", why, status).with_fixes(vec![Fix {
        path: SWAPPINESS_PATH.to_string(),
        value: "1".to_string(),
        previous: value.to_string(),
    }])
}
