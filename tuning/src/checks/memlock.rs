//! `RLIMIT_MEMLOCK` against what glommio pins: each executor registers its DMA
//! buffer pool (`io_memory`) with io_uring, and registered buffers are
//! charged to the locked-memory limit. `rill serve` sizes it at 2 MiB per
//! shard (`rill.io_memory_bytes`) so that the common 8 MiB default limit fits
//! a few shards; larger pools only help big direct-IO reads.

use super::Context;
use crate::check::{Check, Status};
use crate::parse::{self, Limit};

/// rill's default `io_memory` per executor (`rill.io_memory_bytes`).
pub const IO_MEMORY_PER_SHARD_BYTES: u64 = 2 << 20;
/// Headroom per executor for ring memory on kernels that still charge it to memlock.
const RING_HEADROOM_PER_SHARD_BYTES: u64 = 1 << 20;
const WHY: &str = "glommio pins io_memory per shard; below this, executors fail to start";

/// The memlock row.
pub fn checks(context: &Context) -> Vec<Check> {
    let shards = context.shard_count() as u64;
    let needed_bytes = shards * (IO_MEMORY_PER_SHARD_BYTES + RING_HEADROOM_PER_SHARD_BYTES);
    let recommended = format!(
        ">= {} MiB for {shards} shards (or unlimited)",
        needed_bytes >> 20
    );
    let name = "memlock";
    let limit = context
        .host
        .read_raw("/proc/self/limits")
        .and_then(|t| parse::parse_limit(&t, "Max locked memory"));
    let check = match limit {
        None => Check::skip(name, recommended, WHY),
        Some(Limit::Unlimited) => Check::new(name, "unlimited", recommended, WHY, Status::Pass),
        Some(Limit::Value(bytes)) => {
            let status = if bytes >= needed_bytes {
                Status::Pass
            } else {
                Status::Fail
            };
            Check::new(name, format_bytes(bytes), recommended, WHY, status)
        }
    };
    // Not fixable through /proc or /sys: it is a per-process limit, set with
    // `LimitMEMLOCK=infinity` in the systemd unit or `ulimit -l unlimited`.
    vec![check]
}

fn format_bytes(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}
