//! `rill-bench`'s command line: argument parsing and dispatch to the
//! modules. It lives in the library so that the root package's
//! `rill-bench` binary (`src/bin/rill-bench.rs`) is one call, and
//! `cargo install --path .` installs it beside `rill`.

use crate::broker_cpu::CpuSource;
use crate::cli::WorkloadArgs;
use crate::compare::{compare, parse_target, CompareReport};
use crate::disk_floor::DiskFloorPlan;
use crate::report::{html, report_files, text};
use crate::runner::{run_workload, RunOptions};
use crate::workload::Workload;
use crate::{
    cluster, disk, failover, fetch_path, floor, handshakes, null_sink, omb, soak, txn_cost, verify,
    Result,
};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "rill-bench",
    version,
    about = "Throughput and latency harness for any Kafka-protocol broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    security: crate::kafka::security::SecurityArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run a workload against a broker or a cluster.
    Run(RunArgs),
    /// Compare result JSON files: text table on stdout, HTML report.
    Report {
        inputs: Vec<PathBuf>,
        #[arg(long, default_value = "rill-bench-report.html")]
        html: PathBuf,
    },
    /// One workload against several brokers, interleaved A, B, A, B.
    Compare(CompareArgs),
    /// Start N local rill brokers as one cluster, print the bootstrap list,
    /// stop them on Ctrl-C / SIGTERM (`bootstrap`, `pids`, `admin` files in
    /// --dir for scripts).
    Cluster(cluster::ClusterArgs),
    /// Leader failover on a local cluster: SIGKILL the partition leader K
    /// times, measure kill to the next acknowledged acks=all produce, check
    /// nothing acknowledged is lost.
    Failover(failover::FailoverArgs),
    /// Sequential vs random O_DIRECT writes through io_uring.
    Disk(disk::DiskArgs),
    /// rill's fetch send paths (copy, sendfile, splice) side by side.
    FetchPath(fetch_path::FetchPathArgs),
    /// Connection setup rate with the security flags in force (TCP, TLS
    /// handshake, ApiVersions, SASL), each connection then closed.
    Handshakes(handshakes::HandshakesArgs),
    /// A long mixed workload (producers, consumers, keyed updates on a
    /// compacted topic) sampled over time: broker RSS and CPU, produce
    /// p50/p99, records moved, consumer lag, disk use; JSON and SVG.
    Soak(soak::SoakArgs),
    /// An OpenMessaging Benchmark workload with OMB's Kafka driver file;
    /// writes OMB's result JSON (for OMB's chart script).
    Omb(omb::OmbArgs),
    /// Jepsen-style check of the Kafka queue workload (idempotent
    /// producers, assign and group consumers on librdkafka) with SIGKILL /
    /// SIGSTOP faults on a local cluster; JSON result, exit 1 on an anomaly.
    Verify(verify::VerifyArgs),
    /// The cost of one committed transaction, transactions v1 against v2
    /// (KIP-890), interleaved on one broker: transactions per second,
    /// commit latency, the broker's CPU per transaction.
    TxnCost(txn_cost::TxnCostArgs),
    /// A Kafka-protocol server that acknowledges and discards everything:
    /// the harness's own ceiling is measured against it.
    NullSink(null_sink::NullSinkArgs),
}

/// `rill-bench run` options.
#[derive(Args)]
struct RunArgs {
    /// Bootstrap list `host:port[,host:port...]`; any broker that
    /// answers gives the metadata, and each partition's traffic goes
    /// to its leader.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Result JSON path.
    #[arg(long, default_value = "rill-bench-result.json")]
    out: PathBuf,
    /// HTML report path (optional).
    #[arg(long)]
    html: Option<PathBuf>,
    #[arg(long)]
    label: Option<String>,
    #[arg(long)]
    quiet: bool,
    /// Broker CPU per GB from /proc/PID/stat of this local process.
    #[arg(long, conflicts_with = "broker_metrics")]
    broker_pid: Option<u32>,
    /// Broker CPU per GB from `process_cpu_seconds_total` at
    /// http://ADDR/metrics (rill: its --admin-listen address).
    #[arg(long, value_name = "ADDR")]
    broker_metrics: Option<String>,
    /// Then the same workload against a null-sink child process, and
    /// the broker's ratio to it (CPU/GB, publish p50/p99/p99.9).
    #[arg(long)]
    against_null_sink: bool,
    /// With --against-null-sink: a durable sink, which writes and
    /// fdatasyncs every produce (in a fresh directory under DIR,
    /// removed afterwards) before it answers: the simplest durable
    /// server, beside a broker under the fsync policy.
    #[arg(long, value_name = "DIR", requires = "against_null_sink")]
    sink_sync_dir: Option<PathBuf>,
    /// With --against-null-sink: then measure the disk's own CPU per GB
    /// in DIR (O_DIRECT writes of --disk-floor-block, each followed by an
    /// fdatasync; the files are removed) and print the broker's CPU per
    /// GB over the sum of the two floors.
    #[arg(long, value_name = "DIR", requires = "against_null_sink")]
    disk_floor_dir: Option<PathBuf>,
    /// The disk floor's write size (rill's group commit writes up to its
    /// stream chunk, 256 KiB by default).
    #[arg(long, default_value = "256k", value_parser = bench_harness_bytes)]
    disk_floor_block: u64,
    /// How much the disk floor writes.
    #[arg(long, default_value = "1g", value_parser = bench_harness_bytes)]
    disk_floor_total: u64,
    /// Each disk-floor file's preallocation (default: its share of the
    /// total). 1g lays the files out as a broker's 1 GiB segments are, with
    /// an extent-tree block for each fdatasync to write.
    #[arg(long, default_value = "0", value_parser = bench_harness_bytes)]
    disk_floor_preallocate: u64,
    /// Use this existing (or new) topic instead of a fresh random
    /// name; repeat for several (sets the workload's topic count).
    #[arg(long = "topic", value_name = "NAME")]
    topic: Vec<String>,
}

/// `rill-bench compare` options.
#[derive(Args)]
struct CompareArgs {
    /// `label=host:port` (or `host:port`), two or more.
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[arg(long, default_value = "rill-bench-compare.json")]
    out: PathBuf,
    #[arg(long, default_value = "rill-bench-compare.html")]
    html: PathBuf,
    #[arg(long)]
    quiet: bool,
}

/// Parses the command line and runs it; exits 1 with the error on failure.
pub fn main() {
    let cli = Cli::parse();
    let outcome = crate::kafka::security::configure(&cli.security)
        .and_then(|()| dispatch(cli.command, &cli.security.security_protocol));
    if let Err(error) = outcome {
        eprintln!("rill-bench: {error}");
        std::process::exit(1);
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn dispatch(command: Command, security_protocol: &str) -> Result<()> {
    match command {
        Command::Run(args) => run_command(&args, security_protocol)?,
        Command::Report {
            inputs,
            html: html_out,
        } => {
            println!("{}", report_files(&inputs, &html_out)?);
            eprintln!("HTML report: {}", html_out.display());
        }
        Command::Compare(args) => compare_command(&args)?,
        Command::Cluster(args) => runtime()?.block_on(cluster::serve(&args))?,
        Command::Failover(args) => failover_command(&args)?,
        Command::Disk(args) => disk::main(&args)?,
        Command::FetchPath(args) => {
            let report = runtime()?.block_on(fetch_path::run(&args))?;
            println!("{report}");
        }
        Command::TxnCost(args) => {
            let report = runtime()?.block_on(txn_cost::run(&args))?;
            print!("{report}");
        }
        Command::Handshakes(args) => {
            let report = runtime()?.block_on(handshakes::run(&args, security_protocol))?;
            println!("{report}");
        }
        Command::Soak(args) => {
            runtime()?.block_on(soak::main(&args))?;
        }
        Command::Omb(args) => runtime()?.block_on(omb::main(&args))?,
        Command::NullSink(args) => runtime()?.block_on(null_sink::main(&args))?,
        Command::Verify(args) => verify_command(&args)?,
    }
    Ok(())
}

/// `rill-bench run`: the workload against the broker, then (with
/// `--against-null-sink`) against a null sink as well.
fn run_command(args: &RunArgs, security_protocol: &str) -> Result<()> {
    let mut workload = args.workload.resolve()?;
    if !args.topic.is_empty() {
        workload.topics = args.topic.len() as u32;
    }
    let options = RunOptions {
        label: args.label.clone(),
        topics: (!args.topic.is_empty()).then(|| args.topic.clone()),
        quiet: args.quiet,
        broker_cpu: args
            .broker_pid
            .map(CpuSource::Pid)
            .or(args.broker_metrics.clone().map(CpuSource::Metrics)),
        ..RunOptions::default()
    };
    if args.against_null_sink {
        return run_against_null_sink(args, &workload, &options, security_protocol);
    }
    let result = runtime()?.block_on(run_workload(&args.bootstrap, &workload, &options))?;
    result.save(&args.out)?;
    println!("{}", text::table(std::slice::from_ref(&result)));
    if let Some(line) = text::broker_cpu_line(&result) {
        println!("{line}");
    }
    if let Some(path) = &args.html {
        std::fs::write(
            path,
            html::render(&format!("rill-bench: {}", workload.name), &[result]),
        )?;
        eprintln!("HTML report: {}", path.display());
    }
    eprintln!("result: {}", args.out.display());
    Ok(())
}

/// `rill-bench run --against-null-sink`: the broker's run and the null
/// sink's, with their ratios.
fn run_against_null_sink(
    args: &RunArgs,
    workload: &Workload,
    options: &RunOptions,
    security_protocol: &str,
) -> Result<()> {
    // The sink child speaks PLAINTEXT only, and every connection
    // of this process speaks the chosen protocol.
    if !security_protocol.eq_ignore_ascii_case("PLAINTEXT") {
        return Err(crate::BenchError::Other(format!(
            "--against-null-sink needs --security-protocol PLAINTEXT, not {security_protocol}"
        )));
    }
    let disk_floor = args.disk_floor_dir.as_ref().map(|dir| DiskFloorPlan {
        dir: dir.clone(),
        block_bytes: args.disk_floor_block as usize,
        files: 8,
        total_bytes: args.disk_floor_total,
        preallocate_bytes: args.disk_floor_preallocate,
    });
    let report = runtime()?.block_on(floor::run_against_null_sink(
        &args.bootstrap,
        workload,
        options,
        args.sink_sync_dir.as_deref(),
        disk_floor.as_ref(),
    ))?;
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    println!("{}", text::table(&report.runs));
    println!("{}", floor::summary(&report));
    eprintln!("result: {}", args.out.display());
    Ok(())
}

/// `rill-bench compare`: the workload against every target, interleaved.
fn compare_command(args: &CompareArgs) -> Result<()> {
    let workload = args.workload.resolve()?;
    let targets: Vec<_> = args.targets.iter().map(|t| parse_target(t)).collect();
    let results = runtime()?.block_on(compare(&targets, &workload, args.rounds, args.quiet))?;
    let report = CompareReport::new(&workload, args.rounds, results.clone());
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(
        &args.html,
        html::render(&format!("rill-bench compare: {}", workload.name), &results),
    )?;
    println!("{}", text::table(&results));
    eprintln!(
        "results: {}, HTML report: {}",
        args.out.display(),
        args.html.display()
    );
    Ok(())
}

/// `rill-bench failover`: the measurement, its JSON and summary; fails when
/// an acknowledged record was lost.
fn failover_command(args: &failover::FailoverArgs) -> Result<()> {
    let report = runtime()?.block_on(failover::run(args))?;
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    println!("{}", failover::summary(&report));
    eprintln!("result: {}", args.out.display());
    if report.lost_records > 0 {
        return Err(crate::BenchError::Other(format!(
            "{} acknowledged records lost",
            report.lost_records
        )));
    }
    Ok(())
}

/// `rill-bench verify`: the summary on stdout, the result in `--out`; an
/// error (exit 1) when the checker found an anomaly.
fn verify_command(args: &verify::VerifyArgs) -> Result<()> {
    let result = runtime()?.block_on(verify::main(args))?;
    println!(
        "verify: {} ops {:?}, {} faults, availability {:.3}, longest gap {} ms, {} anomalies; result in {}",
        result.ops.values().sum::<u64>(),
        result.ops,
        result.faults_injected,
        result.availability,
        result.longest_gap_ms,
        result.anomaly_count,
        args.out.display()
    );
    if !result.valid {
        for (class, found) in result.anomalies.iter().filter(|(_, c)| c.count > 0) {
            eprintln!("{class}: {}", found.count);
            for example in &found.examples {
                eprintln!("  partition {}: {}", example.partition, example.detail);
            }
        }
        return Err(crate::BenchError::Other(format!(
            "{} anomalies (see {})",
            result.anomaly_count,
            args.out.display()
        )));
    }
    Ok(())
}

/// A byte size as the workload files write it (`256k`, `1g`).
fn bench_harness_bytes(text: &str) -> std::result::Result<u64, String> {
    crate::workload::parse_bytes(text).map_err(|e| e.to_string())
}
