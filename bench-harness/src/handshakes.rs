//! `handshakes`: how fast a broker admits new connections with the
//! security flags in force — TCP connect, the TLS handshake (SSL,
//! SASL_SSL), ApiVersions, and the SASL exchange (SASL_PLAINTEXT,
//! SASL_SSL) — each connection then closed. Reports connections per
//! second and the setup time's percentiles, so PLAINTEXT, SSL, SASL and
//! SCRAM can be compared on one broker (SCRAM's salted-password work and
//! TLS's key exchange are what a reconnect storm costs a broker).

use crate::error::{BenchError, Result};
use crate::kafka::connection::Connection;
use crate::stats::{new_histogram, Percentiles};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug, Clone, clap::Args)]
pub struct HandshakesArgs {
    /// The broker (one listener: the security flags say how to speak it).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Connections to open in all.
    #[arg(long, default_value_t = 500)]
    pub connections: u64,
    /// Connections being set up at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u64,
    #[arg(long)]
    pub label: Option<String>,
    #[arg(long, default_value = "rill-bench-handshakes.json")]
    pub out: PathBuf,
}

/// What one `handshakes` run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandshakesReport {
    pub label: String,
    pub security_protocol: String,
    pub connections: u64,
    pub concurrency: u64,
    pub elapsed_s: f64,
    pub connections_per_s: f64,
    /// From TCP connect to authenticated and ready.
    pub setup_latency_us: Percentiles,
}

impl fmt::Display for HandshakesReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.setup_latency_us;
        write!(
            f,
            "{} ({}): {} connections, {} at once: {:.0} connections/s; setup p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.label,
            self.security_protocol,
            self.connections,
            self.concurrency,
            self.connections_per_s,
            l.p50_us as f64 / 1000.0,
            l.p99_us as f64 / 1000.0,
            l.max_us as f64 / 1000.0
        )
    }
}

/// Opens `args.connections` connections, `args.concurrency` at a time;
/// any failure fails the run (a refused login is an error, not a figure).
pub async fn run(args: &HandshakesArgs, security_protocol: &str) -> Result<HandshakesReport> {
    if args.connections == 0 || args.concurrency == 0 {
        return Err(BenchError::Other(String::from(
            "--connections and --concurrency must be at least 1",
        )));
    }
    let next = Arc::new(AtomicU64::new(0));
    let histogram = Arc::new(Mutex::new(new_histogram()));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency.min(args.connections) {
        let (next, histogram) = (next.clone(), histogram.clone());
        let (addr, total) = (args.bootstrap.clone(), args.connections);
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let begun = Instant::now();
                let connection = Connection::connect(&addr, "rill-bench-handshakes").await?;
                let micros = begun.elapsed().as_micros().max(1);
                drop(connection);
                if let Ok(mut histogram) = histogram.lock() {
                    histogram.saturating_record(u64::try_from(micros).unwrap_or(u64::MAX));
                }
            }
            Ok::<(), BenchError>(())
        }));
    }
    for worker in workers {
        worker
            .await
            .map_err(|e| BenchError::Other(format!("handshake task: {e}")))??;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let setup_latency_us = histogram
        .lock()
        .map(|histogram| Percentiles::of(&histogram))
        .map_err(|_| BenchError::Other(String::from("histogram lock poisoned")))?;
    let report = HandshakesReport {
        label: args
            .label
            .clone()
            .unwrap_or_else(|| security_protocol.to_ascii_uppercase()),
        security_protocol: security_protocol.to_ascii_uppercase(),
        connections: args.connections,
        concurrency: args.concurrency,
        elapsed_s,
        connections_per_s: args.connections as f64 / elapsed_s.max(1e-9),
        setup_latency_us,
    };
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    Ok(report)
}
