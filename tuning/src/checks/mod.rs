//! The host checks of `rill tune check`, one file per family.
//!
//! Each family reads the host through [`Host`] and returns rows; a missing
//! source gives a "skip" row, never an error. Rows that can be fixed from
//! software carry the exact writes (`Fix`) that `rill tune apply` performs.
//!
//! - [`io_uring`]: `kernel.io_uring_disabled`, seccomp, a real `io_uring_setup`
//! - [`memlock`]: `RLIMIT_MEMLOCK` against glommio's pinned DMA memory
//! - [`cpu`]: CPU count, NUMA, SMT siblings, pinned cores, frequency governor
//! - [`memory`]: transparent huge pages, `vm.swappiness`, `fs.aio-max-nr`
//! - [`disk`]: data dir filesystem, mount options, block device queue settings
//! - [`network`]: NIC IRQ spread, RPS/XPS, `somaxconn`, socket buffer limits
//! - [`clock`]: clock source

pub mod clock;
pub mod cpu;
pub mod disk;
pub mod io_uring;
pub mod memlock;
pub mod memory;
pub mod network;

use std::path::PathBuf;

use crate::check::{Check, Fix, Report, Status};
use crate::host::Host;
use crate::parse;

/// What the checks need to know: the host, and how rill will run on it.
#[derive(Debug, Clone)]
pub struct Context {
    /// The host (root `/`, or a fake tree in tests).
    pub host: Host,
    /// rill's data directory (`--data-dir`).
    pub data_dir: PathBuf,
    /// Shards rill will start (`--cores`); 0 means one per online CPU.
    pub cores: usize,
}

impl Context {
    /// The online CPUs, or `[0]` when the list is unreadable.
    pub fn online_cpus(&self) -> Vec<usize> {
        self.host
            .read("/sys/devices/system/cpu/online")
            .and_then(|t| parse::parse_cpu_list(&t))
            .filter(|cpus| !cpus.is_empty())
            .unwrap_or_else(|| vec![0])
    }

    /// The CPUs rill pins its shards to: shard i on the i-th online CPU, the
    /// same placement rill's `--cores N` uses.
    pub fn pinned_cpus(&self) -> Vec<usize> {
        let online = self.online_cpus();
        let count = if self.cores == 0 {
            online.len()
        } else {
            self.cores.min(online.len())
        };
        online.into_iter().take(count).collect()
    }

    /// Shard count rill will start.
    pub fn shard_count(&self) -> usize {
        if self.cores == 0 {
            self.online_cpus().len()
        } else {
            self.cores
        }
    }
}

/// Runs every check family, in display order.
pub fn run_all(context: &Context) -> Report {
    let mut checks = Vec::new();
    checks.extend(io_uring::checks(context));
    checks.extend(memlock::checks(context));
    checks.extend(cpu::checks(context));
    checks.extend(memory::checks(context));
    checks.extend(disk::checks(context));
    checks.extend(network::checks(context));
    checks.extend(clock::checks(context));
    Report { checks }
}

/// A numeric sysctl that must be at least `minimum`; the fix writes `minimum`.
pub(crate) fn sysctl_at_least(
    context: &Context,
    name: &str,
    path: &str,
    minimum: u64,
    why: &str,
) -> Check {
    let recommended = format!(">= {minimum}");
    match context.host.read(path) {
        None => Check::skip(name, recommended, why),
        Some(text) => match parse::parse_u64(&text) {
            None => Check::new(name, text, recommended, why, Status::Warn),
            Some(value) => {
                let status = if value >= minimum {
                    Status::Pass
                } else {
                    Status::Warn
                };
                Check::new(name, value.to_string(), recommended, why, status).with_fixes(vec![
                    Fix {
                        path: path.to_string(),
                        value: minimum.to_string(),
                        previous: value.to_string(),
                    },
                ])
            }
        },
    }
}
