//! `rill`: the broker binary. A thin CLI: `serve` runs the broker (crate
//! `server`, under `net/`), `tune` and `iotune` inspect and measure the host
//! (crate `tuning`), `admin` administers any Kafka-protocol cluster (crate
//! `admin`).

/// mimalloc: a produce request's record buffers (often just over 1 KiB)
/// miss glibc's per-thread cache and take its slow path; with mimalloc
/// the group-commit bench's CPU between two fdatasyncs fell from 400 to
/// 335 µs per 256 appends.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// rill: a Kafka-API-compatible streaming broker, thread-per-core on io_uring.
#[derive(Parser, Debug)]
#[command(name = "rill", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the broker.
    Serve(kernel::config::ServeArgs),
    /// Inspect (and optionally apply) host tuning for low latency.
    Tune(tuning::cli::TuneArgs),
    /// Measure the disk under the data dir.
    Iotune(tuning::cli::IotuneArgs),
    /// Administer a cluster over the Kafka protocol: topics, groups,
    /// ACLs, users, quotas (docs/admin.md).
    Admin(admin::AdminArgs),
    /// Print a reference generated from the code (`docs/` holds the
    /// committed copies; a test keeps them equal).
    Docs {
        /// Which reference: `config` (every setting) or `metrics` (every
        /// family served on `/metrics`).
        #[arg(value_enum)]
        reference: DocsReference,
    },
}

/// The references `rill docs` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum DocsReference {
    /// `docs/configuration.md`.
    Config,
    /// `docs/metrics.md`.
    Metrics,
}

/// Log output that never fails: a line that cannot be written (stdout on
/// a full disk, a closed pipe) is dropped. tracing-subscriber reports a
/// failed write with `eprintln!`, which panics when stderr fails as well:
/// a broker must not die because its log has no room.
struct LossyStdout;

impl std::io::Write for LossyStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stdout().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stdout().flush();
        Ok(())
    }
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(|| LossyStdout)
        .init();
}

/// The io-properties entry for the data dir (see `kernel::io_setup`): the
/// tuning crate finds and parses the file, the engine gets plain figures.
fn io_properties(
    explicit: Option<&std::path::Path>,
    data_dir: &std::path::Path,
) -> Result<Option<kernel::io_setup::MeasuredDisk>, String> {
    let found = tuning::io_properties::find(explicit, data_dir).map_err(|e| e.to_string())?;
    Ok(found.map(|(file, disk)| kernel::io_setup::MeasuredDisk {
        file,
        mountpoint: disk.mountpoint,
        figures: engine::io_sizing::DiskFigures {
            read_bandwidth: disk.read_bandwidth,
            read_iops: disk.read_iops,
            write_bandwidth: disk.write_bandwidth,
            write_iops: disk.write_iops,
        },
    }))
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Serve(args) => {
            init_logging(&args.log_level);
            server::serve::run_with_checks(args, &tuning::startup_warnings, &io_properties)
        }
        Command::Tune(args) => {
            init_logging("info");
            tuning::cli::run_tune(args)
        }
        Command::Iotune(args) => {
            init_logging("info");
            tuning::cli::run_iotune(args)
        }
        // No log subscriber: the admin tool's output is its tables.
        Command::Admin(args) => admin::run(args),
        Command::Docs { reference } => {
            match reference {
                DocsReference::Config => {
                    print!("{}", server::config_doc::configuration_reference())
                }
                DocsReference::Metrics => print!("{}", server::metrics_doc::metrics_reference()),
            }
            0
        }
    };
    std::process::exit(code);
}
