//! What the simulations on the simulated disk share: the disk installed
//! on the test's thread with its data dir made durable, the engine's
//! settings, and the knobs read from the environment.

use engine::disk::sim::{self, Bug, SimConfig, SimDisk};
use engine::{EngineConfig, FlushPolicy};
use std::path::Path;
use std::rc::Rc;

/// Under /proc, where nothing can be made: a file operation that went
/// around the simulated disk to the real one fails instead of hiding.
pub const ROOT: &str = "/proc/rill-sim";

/// A simulated disk of `config`, installed on this thread (until the
/// guard drops) with `bug` switched on and `data_dir` (under [`ROOT`])
/// made and synced.
pub fn install(
    config: SimConfig,
    data_dir: &str,
    bug: Bug,
) -> (Rc<SimDisk>, engine::disk::Installed) {
    raise_open_files_limit();
    let disk = SimDisk::new(config);
    let installed = engine::disk::install(Rc::new(disk.clone()));
    sim::set_bug(bug);
    engine::disk::create_dir_all(Path::new(data_dir)).expect("data dir");
    for dir in ["/", "/proc", ROOT, data_dir] {
        engine::disk::sync_dir(Path::new(dir)).expect("dir synced");
    }
    (disk, installed)
}

/// The engine on `data_dir` under the `fsync` policy, streaming from the
/// first whole block on (so the bytes a round counts as written before
/// they are, see `Appender::stream`, are crashed in too).
pub fn engine_config(data_dir: &str) -> EngineConfig {
    let mut config = EngineConfig::new(Path::new(data_dir));
    config.flush_policy = FlushPolicy::Fsync;
    config.retention_check_interval_ms = 3_600_000;
    config.stream_min_bytes = 4096;
    config
}

/// Each life runs on a glommio executor of its own (its end drops every
/// task, as a power failure does), and glommio keeps one eventfd per
/// executor it ever made: a long run needs more than the default 1,024.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a struct that lives across both.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// A number from the environment, or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
