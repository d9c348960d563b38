//! rill host tuning: `rill tune` and `rill iotune`.
//!
//! This crate stands beside the broker: it inspects the host rill runs on,
//! changes what can be changed from software, and measures the data disk.
//! It runs once per node (not per shard) and owns no broker state.
//!
//! - [`host`]: every `/proc` and `/sys` access, through a root dir (fake trees in tests)
//! - [`parse`]: pure parsers of the `/proc` and `/sys` text formats
//! - [`check`]: the report model (rows, statuses, fixes)
//! - [`checks`]: the check families (io_uring, memlock, cpu, memory, disk, network, clock)
//! - [`apply`]: `tune apply` / `tune revert` with a JSON backup of previous values
//! - [`iotune`]: the O_DIRECT io_uring disk measurement
//! - [`io_properties`]: Seastar's `io-properties.yaml`
//! - [`cli`]: the clap arguments and entry points the `rill` binary calls

#![deny(missing_docs)]

pub mod apply;
pub mod check;
pub mod checks;
pub mod cli;
mod error;
pub mod host;
pub mod io_properties;
pub mod iotune;
pub mod parse;

use std::path::Path;

pub use check::{Check, Fix, Report, Status};
pub use error::Error;
pub use host::Host;

/// Runs every check against the host under `root` (`/` in production).
pub fn check_report(root: &Path, data_dir: &Path, cores: usize) -> Report {
    let context = checks::Context {
        host: Host::new(root),
        data_dir: data_dir.to_path_buf(),
        cores,
    };
    checks::run_all(&context)
}

/// Each failing or warning check as (name, one-line detail), for `rill
/// serve` to summarise in one line at start (details at debug level).
pub fn startup_warnings(data_dir: &Path, cores: usize) -> Vec<(String, String)> {
    check_report(Path::new("/"), data_dir, cores)
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Warn | Status::Fail))
        .map(|c| {
            let detail = format!(
                "tune {}: {} is {} (recommended {}): {}",
                c.status.label(),
                c.name,
                c.current,
                c.recommended,
                c.why
            );
            (c.name.to_string(), detail)
        })
        .collect()
}
