//! `rill admin`: an rpk-like command line for any Kafka-protocol broker
//! (rill, Kafka, Redpanda). It speaks only the wire protocol, through
//! rill-bench's client (`bench_harness::kafka`: connection, version
//! negotiation, TLS, SASL, record batches), with the same security flags.
//! Each command prints an aligned table, or JSON with `--format json`; a
//! broker's refusal prints one line on stderr and exits 1.
//!
//! Modules, one per command group:
//! - [`cluster`]: `cluster info`, `quorum describe`.
//! - [`topic`]: `topic create / list / describe / alter-config /
//!   add-partitions / delete`.
//! - [`records`]: `topic produce / consume`.
//! - [`group`]: `group list / describe / reset-offsets / delete`.
//! - [`acl`]: `acl create / list / delete`.
//! - [`user`]: `user create / delete / list` (SCRAM credentials).
//! - [`quota`]: `quota describe / alter` (client quotas).
//! - [`reassign`]: `reassign alter / list`, `elect-leaders`.
//! - [`decommission`]: move every replica off a broker; unregister it once
//!   stopped.
//! - [`cordon`]: `cordon / uncordon`, KIP-1066's `cordoned.log.dirs`.
//! - [`feature`]: `feature describe / upgrade / downgrade` (KIP-584).
//! - [`log_dirs`]: `log-dirs describe / move` (a broker's data dirs).
//! - [`client`]: connections, the coordinator, the API version table.
//! - [`output`]: tables and JSON.
//! - [`error`]: the crate's error type.
//! - [`voters`]: `quorum add-voter / remove-voter` (KIP-853).

pub mod acl;
pub mod client;
pub mod cluster;
pub mod cordon;
pub mod decommission;
pub mod error;
pub mod feature;
pub mod group;
pub mod log_dirs;
pub mod output;
pub mod quota;
pub mod reassign;
pub mod records;
pub mod topic;
pub mod user;
pub mod voters;

use bench_harness::kafka::security::SecurityArgs;
use error::Result;
use output::{Format, Report};
use std::io::Write;
use std::time::Duration;

/// `rill admin`: the flags every command takes, and the command.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// Brokers to bootstrap from, `host:port[,host:port...]`; the first
    /// that answers is used.
    #[arg(
        long,
        global = true,
        default_value = "localhost:9092",
        env = "RILL_BROKERS"
    )]
    pub brokers: String,
    /// Output: aligned `table` columns or one `json` document.
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// How long to wait for a connection or an answer.
    #[arg(long, global = true, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// TLS and SASL, as rill-bench takes them.
    #[command(flatten)]
    pub security: SecurityArgs,
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// The command groups.
#[derive(Debug, clap::Subcommand)]
pub enum AdminCommand {
    /// The cluster: id, controller, brokers.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// The metadata quorum.
    #[command(subcommand)]
    Quorum(cluster::QuorumCommand),
    /// Topics, their configs and their records.
    #[command(subcommand)]
    Topic(topic::TopicCommand),
    /// Consumer groups.
    #[command(subcommand)]
    Group(group::GroupCommand),
    /// ACLs (the broker needs an authorizer configured).
    #[command(subcommand)]
    Acl(acl::AclCommand),
    /// SCRAM users.
    #[command(subcommand)]
    User(user::UserCommand),
    /// Client quotas.
    #[command(subcommand)]
    Quota(quota::QuotaCommand),
    /// Partition reassignments.
    #[command(subcommand)]
    Reassign(reassign::ReassignCommand),
    /// Elect partition leaders (preferred or unclean).
    ElectLeaders(reassign::ElectArgs),
    /// Retire a broker: move its replicas away while it runs; once it is
    /// stopped, unregister it.
    Decommission(decommission::DecommissionArgs),
    /// Keep new partitions off a broker (or some of its dirs).
    Cordon(cordon::CordonArgs),
    /// Let a cordoned broker take new partitions again.
    Uncordon {
        /// A broker id, or `all`.
        broker: String,
    },
    /// Feature levels (KIP-584).
    #[command(subcommand)]
    Feature(feature::FeatureCommand),
    /// A broker's data dirs, and moving a replica between them.
    #[command(subcommand)]
    LogDirs(log_dirs::LogDirsCommand),
}

/// Runs one admin command and returns the process's exit code: 0 when it
/// succeeded, 1 when it or any item of it failed (the reason on stderr),
/// 2 for flags that cannot work together.
pub fn run(args: AdminArgs) -> i32 {
    if let Err(failure) = bench_harness::kafka::security::configure(&args.security) {
        report_error(&failure);
        return 2;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(failure) => {
            report_error(&format!("cannot start the runtime: {failure}"));
            return 1;
        }
    };
    let format = args.format;
    let outcome = runtime.block_on(dispatch(args));
    match outcome.and_then(|report| Ok((report.render(format)?, report.failures))) {
        Ok((text, failures)) => {
            // A closed stdout (`rill admin ... | head`) is the reader's
            // choice, not a failure worth a panic, which `print!` would be.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            for failure in &failures {
                report_error(failure);
            }
            i32::from(!failures.is_empty())
        }
        Err(failure) => {
            report_error(&failure);
            match failure {
                error::AdminError::Usage(_) => 2,
                _ => 1,
            }
        }
    }
}

/// One `error: ...` line on stderr; a stderr that cannot be written to
/// loses it rather than panicking as `eprintln!` would.
fn report_error(failure: &dyn std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "error: {failure}");
}

async fn dispatch(args: AdminArgs) -> Result<Report> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut admin = client::Admin::connect(&args.brokers, timeout).await?;
    match args.command {
        AdminCommand::Cluster(command) => cluster::run_cluster(&mut admin, command).await,
        AdminCommand::Quorum(command) => cluster::run_quorum(&mut admin, command).await,
        AdminCommand::Topic(command) => topic::run(&mut admin, command).await,
        AdminCommand::Group(command) => group::run(&mut admin, command).await,
        AdminCommand::Acl(command) => acl::run(&mut admin, command).await,
        AdminCommand::User(command) => user::run(&mut admin, command).await,
        AdminCommand::Quota(command) => quota::run(&mut admin, command).await,
        AdminCommand::Reassign(command) => reassign::run(&mut admin, command).await,
        AdminCommand::ElectLeaders(elect) => reassign::elect_leaders(&mut admin, elect).await,
        AdminCommand::Decommission(args) => decommission::run(&mut admin, args).await,
        AdminCommand::Cordon(args) => cordon::cordon(&mut admin, &args).await,
        AdminCommand::Uncordon { broker } => cordon::uncordon(&mut admin, &broker).await,
        AdminCommand::Feature(command) => feature::run(&mut admin, command).await,
        AdminCommand::LogDirs(command) => log_dirs::run(&mut admin, command).await,
    }
}
