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
    // rill turns huge pages off for itself (PR_SET_THP_DISABLE): request
    // buffers are allocated and freed at the produce rate, and each fresh
    // huge page is a 2 MiB zeroing fault (docs/benchmarks/per-request-costs.md).
    // `always` still costs the shards' cores: khugepaged compacts the other
    // processes' memory on them.
    let why = "rill's heap takes no huge pages; `always` runs khugepaged's compaction on the shards' cores";
    let name = "mem.thp";
    let Some(text) = context.host.read(THP_PATH) else {
        return Check::skip(name, "madvise", why);
    };
    let Some(current) = parse::parse_bracketed(&text) else {
        return Check::new(name, text, "madvise", why, Status::Warn);
    };
    let status = if current == "always" {
        Status::Warn
    } else {
        Status::Pass
    };
    Check::new(name, current.clone(), "madvise", why, status).with_fixes(vec![Fix {
        path: THP_PATH.to_string(),
        value: "madvise".to_string(),
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
