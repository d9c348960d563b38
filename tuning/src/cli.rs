//! Command-line arguments and entry points for `rill tune` and `rill iotune`.
//! The `rill` binary embeds these with `#[command(flatten)]`/subcommands and
//! exits with the code the `run_*` functions return.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::apply::{self, Outcome, DEFAULT_BACKUP_PATH};
use crate::checks::{self, disk};
use crate::host::Host;
use crate::io_properties::{self, IoProperties};
use crate::iotune::{self, Settings};
use crate::{check_report, Error};

/// Exit code when a check failed or a write failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code for errors that stopped the command (bad backup, not root, I/O).
pub const EXIT_ERROR: i32 = 2;

/// `rill tune`.
#[derive(clap::Args, Debug)]
pub struct TuneArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TuneCommand,
    /// Root of the host's /proc and /sys (tests point it at a fake tree).
    #[arg(long, global = true, hide = true, default_value = "/")]
    pub root: PathBuf,
}

/// `rill tune` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum TuneCommand {
    /// Inspect the host and print a table of checks; exits 1 if any failed.
    Check {
        /// rill's data directory (its filesystem and disk are checked).
        #[arg(long, default_value = "./rill-data")]
        data_dir: PathBuf,
        /// Shards rill will run (0: one per online CPU).
        #[arg(long, default_value_t = 0)]
        cores: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Set what can be set (sysctls, disk queue, governor, THP, IRQ affinity); needs root.
    Apply {
        /// rill's data directory.
        #[arg(long, default_value = "./rill-data")]
        data_dir: PathBuf,
        /// Shards rill will run (0: one per online CPU).
        #[arg(long, default_value_t = 0)]
        cores: usize,
        /// Print the writes (path and value) without doing them.
        #[arg(long)]
        dry_run: bool,
        /// Where previous values are recorded for `revert`.
        #[arg(long, default_value = DEFAULT_BACKUP_PATH)]
        backup: PathBuf,
    },
    /// Restore the values recorded by `apply`.
    Revert {
        /// Print the writes without doing them.
        #[arg(long)]
        dry_run: bool,
        /// The backup written by `apply`.
        #[arg(long, default_value = DEFAULT_BACKUP_PATH)]
        backup: PathBuf,
    },
}

/// `rill iotune`.
#[derive(clap::Args, Debug, Clone)]
pub struct IotuneArgs {
    /// Directory on the disk to measure; a test file is created (and removed) there.
    #[arg(long, default_value = "./rill-data")]
    pub data_dir: PathBuf,
    /// Total measurement time in seconds, split across the phases.
    #[arg(long, default_value_t = 30.0)]
    pub duration_s: f64,
    /// Where to write the io-properties file.
    #[arg(long, default_value = "io-properties.yaml")]
    pub out: PathBuf,
    /// Size of the test file in MiB (capped at a quarter of the free space).
    #[arg(long, default_value_t = 1024)]
    pub file_size_mb: u64,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `rill tune …`; returns the process exit code.
pub fn run_tune(args: TuneArgs) -> i32 {
    match args.command {
        TuneCommand::Check {
            data_dir,
            cores,
            json,
        } => {
            let report = check_report(&args.root, &data_dir, cores);
            if json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(error) => {
                        eprintln!("rill tune check: {error}");
                        return EXIT_ERROR;
                    }
                }
            } else {
                print!("{}", report.to_table());
            }
            if report.has_failures() {
                EXIT_FAILED
            } else {
                0
            }
        }
        TuneCommand::Apply {
            data_dir,
            cores,
            dry_run,
            backup,
        } => {
            let result = require_root(&args.root, dry_run).and_then(|()| {
                let report = check_report(&args.root, &data_dir, cores);
                apply::apply(&Host::new(&args.root), &report.fixes(), &backup, dry_run)
            });
            finish("apply", result, dry_run)
        }
        TuneCommand::Revert { dry_run, backup } => {
            let result = require_root(&args.root, dry_run)
                .and_then(|()| apply::revert(&Host::new(&args.root), &backup, dry_run));
            finish("revert", result, dry_run)
        }
    }
}

/// Changing the real host needs root; a fake root (tests) or a dry run does not.
fn require_root(root: &Path, dry_run: bool) -> Result<(), Error> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let is_root = unsafe { libc::geteuid() } == 0;
    if dry_run || is_root || root != Path::new("/") {
        Ok(())
    } else {
        Err(Error::NotRoot)
    }
}

fn finish(verb: &str, result: Result<Outcome, Error>, dry_run: bool) -> i32 {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("rill tune {verb}: {error}");
            return EXIT_ERROR;
        }
    };
    let prefix = if dry_run { "would write" } else { "wrote" };
    if outcome.writes.is_empty() && outcome.failures.is_empty() {
        println!("rill tune {verb}: nothing to change");
    }
    for write in &outcome.writes {
        println!(
            "{prefix} {:?} to {} (was {:?})",
            write.value, write.path, write.previous
        );
    }
    for (write, error) in &outcome.failures {
        eprintln!("failed: {:?} to {}: {error}", write.value, write.path);
    }
    if outcome.failures.is_empty() {
        0
    } else {
        EXIT_FAILED
    }
}

/// Runs `rill iotune`; returns the process exit code.
pub fn run_iotune(args: IotuneArgs) -> i32 {
    match iotune_to_file(&args) {
        Ok(_) => 0,
        Err(error) => {
            eprintln!("rill iotune: {error}");
            EXIT_ERROR
        }
    }
}

/// Measures, writes `args.out` and prints a summary; returns what was written.
pub fn iotune_to_file(args: &IotuneArgs) -> Result<IoProperties, Error> {
    if !(args.duration_s.is_finite() && args.duration_s > 0.0) {
        return Err(Error::Measurement(format!(
            "--duration-s must be positive, got {}",
            args.duration_s
        )));
    }
    let settings = Settings {
        data_dir: args.data_dir.clone(),
        duration: Duration::from_secs_f64(args.duration_s),
        file_size_bytes: args.file_size_mb.saturating_mul(1 << 20),
        progress: !args.quiet,
    };
    let measurement = iotune::measure(&settings)?;
    let context = checks::Context {
        host: Host::new("/"),
        data_dir: args.data_dir.clone(),
        cores: 0,
    };
    let mountpoint = disk::data_dir_mount(&context)
        .map(|m| m.mountpoint)
        .unwrap_or_else(|| {
            disk::resolve_data_dir(&context)
                .to_string_lossy()
                .into_owned()
        });
    let properties = IoProperties {
        disks: vec![measurement.disk_properties(&mountpoint)],
    };
    let [p50_us, p99_us, max_us] = measurement.fdatasync_latency_us;
    let comments = vec![
        format!(
            "rill iotune on {} ({} s)",
            args.data_dir.display(),
            args.duration_s
        ),
        format!(
            "random read peak at QD {}, random write peak at QD {}",
            measurement.read_queue_depth, measurement.write_queue_depth
        ),
        format!("fdatasync after 4 KiB write: p50 {p50_us} us, p99 {p99_us} us, max {max_us} us"),
    ];
    io_properties::save(&args.out, &properties, &comments)?;

    println!(
        "{:<18} {:>7} {:>4} {:>12} {:>10}",
        "phase", "block", "QD", "MiB/s", "IOPS"
    );
    for step in &measurement.steps {
        println!(
            "{:<18} {:>6}K {:>4} {:>12.1} {:>10.0}",
            step.phase,
            step.block_bytes >> 10,
            step.queue_depth,
            step.result.bandwidth_bytes() / (1 << 20) as f64,
            step.result.iops()
        );
    }
    for comment in &comments[1..] {
        println!("{comment}");
    }
    println!("wrote {}", args.out.display());
    Ok(properties)
}
