//! `rill-bench omb`: runs an OpenMessaging Benchmark workload with OMB's
//! Kafka driver settings, and writes OMB's result JSON, so rill-bench's
//! figures can be charted beside results published with OMB.
//!
//! - `workload`: OMB's workload and Kafka-driver YAML files.
//! - `translate`: the two as one rill-bench workload, with what could not
//!   be applied listed.
//! - `result`: a run as OMB's `TestResult` JSON.
//!
//! The standard OMB workloads ship in `bench-harness/workloads/omb/`.

pub mod result;
pub mod translate;
pub mod workload;

#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::runner::{run_workload, RunOptions};
use clap::Args;
use std::path::PathBuf;
use translate::translate;
use workload::{OmbKafkaDriver, OmbWorkload};

/// `rill-bench omb` arguments.
#[derive(Debug, Clone, Args)]
pub struct OmbArgs {
    /// An OMB workload file (OMB's `workloads/*.yaml` format).
    #[arg(long)]
    pub workload: PathBuf,
    /// An OMB Kafka driver file (OMB's `driver-kafka/*.yaml` format).
    #[arg(long)]
    pub driver: PathBuf,
    /// Bootstrap list; default: the driver's `bootstrap.servers`, else
    /// 127.0.0.1:9092.
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// OMB result JSON path.
    #[arg(long, default_value = "omb-result.json")]
    pub out: PathBuf,
    /// Measure this many seconds instead of `testDurationMinutes`.
    #[arg(long)]
    pub test_duration_s: Option<u64>,
    /// Warm up this many seconds instead of `warmupDurationMinutes`.
    #[arg(long)]
    pub warmup_duration_s: Option<u64>,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs the workload and writes the OMB result.
pub async fn main(args: &OmbArgs) -> Result<()> {
    let omb = OmbWorkload::from_file(&args.workload)?;
    let driver = OmbKafkaDriver::from_file(&args.driver)?;
    let workload_dir = args
        .workload
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut translated = translate(&omb, &driver, &workload_dir)?;
    for line in &translated.not_applied {
        eprintln!("omb: not applied by rill-bench: {line}");
    }
    let workload = &mut translated.workload;
    if let Some(seconds) = args.test_duration_s {
        workload.test_duration_s = seconds;
    }
    if let Some(seconds) = args.warmup_duration_s {
        workload.warmup_duration_s = seconds;
    }
    workload.validate()?;
    let bootstrap = (args.bootstrap.clone())
        .or_else(|| driver.bootstrap())
        .unwrap_or_else(|| String::from("127.0.0.1:9092"));
    let options = RunOptions {
        label: Some(driver.name.clone()),
        quiet: args.quiet,
        keep_interval_histograms: true,
        ..RunOptions::default()
    };
    let run = run_workload(&bootstrap, workload, &options).await?;
    let json = result::omb_result(&run, &driver.name);
    std::fs::write(&args.out, serde_json::to_vec_pretty(&json)?)?;
    eprintln!("OMB result: {}", args.out.display());
    println!("{}", crate::report::text::table(std::slice::from_ref(&run)));
    Ok(())
}
