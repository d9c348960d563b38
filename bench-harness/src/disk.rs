//! `disk`: sequential vs random writes on a path with `O_DIRECT` through
//! io_uring (glommio `DmaFile`), over a matrix of block sizes, queue depths
//! and with or without `fdatasync` after each write. Reports MB/s, IOPS,
//! latency percentiles and, per block size, the sequential/random ratio.
//!
//! All of it runs on one glommio executor (one core): a queue depth of N is
//! N concurrent writer tasks on that core, which is how rill's appender
//! drives its disk.

use crate::error::{BenchError, Result};
use crate::results::HostFacts;
use crate::stats::{new_histogram, Percentiles, LATENCY_US_MAX};
use crate::workload::parse_bytes;
use clap::Args;
use glommio::io::{DmaBuffer, DmaFile};
use glommio::LocalExecutorBuilder;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Registered io_uring buffer memory. The default RLIMIT_MEMLOCK is often
/// 8 MiB; larger buffers fall back to ordinary aligned allocations.
const IO_MEMORY_BYTES: usize = 2 << 20;
/// Spin this long before parking: glommio otherwise parks an idle executor
/// and may notice an io-wq completion only on its next timer tick (~4 ms),
/// which would be measured as write latency.
const SPIN_BEFORE_PARK: Duration = Duration::from_millis(50);
/// Block size of the fill pass that writes the whole file before the cells.
const FILL_BLOCK_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Args)]
pub struct DiskArgs {
    /// Directory to write the test file in (must support O_DIRECT: not tmpfs).
    #[arg(long)]
    pub path: PathBuf,
    /// Comma-separated block sizes, 4k to 1m.
    #[arg(long, default_value = "4k,16k,64k,256k,1m")]
    pub block_sizes: String,
    /// Comma-separated queue depths, 1 to 64.
    #[arg(long, default_value = "1,4,16,64")]
    pub queue_depths: String,
    /// none, fdatasync or both.
    #[arg(long, default_value = "both")]
    pub sync: String,
    /// Seconds per cell of the matrix.
    #[arg(long, default_value_t = 1.0)]
    pub duration_s: f64,
    /// Size of the test file; random writes land anywhere in it.
    #[arg(long, default_value = "256m")]
    pub file_size: String,
    #[arg(long, default_value = "rill-bench-disk.json")]
    pub out: PathBuf,
}

/// One configuration of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellConfig {
    pub random: bool,
    pub block_size_bytes: usize,
    pub queue_depth: usize,
    pub fdatasync: bool,
}

/// What one cell measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub pattern: String,
    pub block_size_bytes: usize,
    pub queue_depth: usize,
    pub fdatasync: bool,
    pub writes: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub mb_per_s: f64,
    pub iops: f64,
    pub latency_us: Percentiles,
}

/// Sequential MB/s over random MB/s for one (block size, depth, sync).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub block_size_bytes: usize,
    pub queue_depth: usize,
    pub fdatasync: bool,
    pub sequential_over_random: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskReport {
    pub path: String,
    pub tool_version: String,
    pub host: HostFacts,
    pub file_size_bytes: u64,
    pub cells: Vec<CellResult>,
    pub ratios: Vec<Ratio>,
}

fn parse_list(text: &str, what: &str) -> Result<Vec<u64>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse_bytes(s).map_err(|_| BenchError::Disk(format!("bad {what}: {s:?}"))))
        .collect()
}

/// The matrix of cells the arguments ask for, validated.
pub fn plan(args: &DiskArgs) -> Result<(Vec<CellConfig>, u64)> {
    let block_sizes = parse_list(&args.block_sizes, "block size")?;
    let queue_depths = parse_list(&args.queue_depths, "queue depth")?;
    let syncs: &[bool] = match args.sync.as_str() {
        "none" => &[false],
        "fdatasync" => &[true],
        "both" => &[false, true],
        other => {
            return Err(BenchError::Disk(format!(
                "--sync must be none, fdatasync or both, not {other:?}"
            )))
        }
    };
    let file_size_bytes =
        parse_bytes(&args.file_size).map_err(|e| BenchError::Disk(e.to_string()))?;
    let mut cells = Vec::new();
    for &block in &block_sizes {
        if !(4096..=1 << 20).contains(&block) || block % 4096 != 0 {
            return Err(BenchError::Disk(format!(
                "block size {block} not a multiple of 4 KiB in 4 KiB..=1 MiB"
            )));
        }
        if file_size_bytes < block * 4 {
            return Err(BenchError::Disk(
                "file size must hold at least 4 blocks".into(),
            ));
        }
        for &depth in &queue_depths {
            if !(1..=64).contains(&depth) {
                return Err(BenchError::Disk(format!(
                    "queue depth {depth} not in 1..=64"
                )));
            }
            for &fdatasync in syncs {
                for random in [false, true] {
                    cells.push(CellConfig {
                        random,
                        block_size_bytes: block as usize,
                        queue_depth: depth as usize,
                        fdatasync,
                    });
                }
            }
        }
    }
    Ok((cells, file_size_bytes))
}

/// Runs the whole matrix on a fresh glommio executor thread.
pub fn run(args: &DiskArgs) -> Result<DiskReport> {
    let (cells, file_size_bytes) = plan(args)?;
    std::fs::create_dir_all(&args.path)?;
    let file_path = args
        .path
        .join(format!("rill-bench-disk-{}.tmp", std::process::id()));
    let duration = Duration::from_secs_f64(args.duration_s.max(0.05));
    let task_path = file_path.clone();
    let handle = LocalExecutorBuilder::default()
        .io_memory(IO_MEMORY_BYTES)
        .spin_before_park(SPIN_BEFORE_PARK)
        .name("rill-bench-disk")
        .spawn(
            move || async move { run_cells(&task_path, &cells, file_size_bytes, duration).await },
        )
        .map_err(|e| BenchError::Disk(format!("start glommio executor: {e}")))?;
    let results = handle
        .join()
        .map_err(|e| BenchError::Disk(format!("executor: {e}")));
    let _ = std::fs::remove_file(&file_path);
    let cells = results??;
    Ok(DiskReport {
        path: args.path.display().to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        host: HostFacts::collect(),
        file_size_bytes,
        ratios: ratios(&cells),
        cells,
    })
}

async fn run_cells(
    path: &Path,
    cells: &[CellConfig],
    file_size_bytes: u64,
    duration: Duration,
) -> Result<Vec<CellResult>> {
    let disk_error = |what: &str| {
        let what = what.to_string();
        move |e: glommio::GlommioError<()>| BenchError::Disk(format!("{what}: {e}"))
    };
    let file = Rc::new(
        DmaFile::create(path)
            .await
            .map_err(disk_error("create (O_DIRECT)"))?,
    );
    file.pre_allocate(file_size_bytes, false)
        .await
        .map_err(disk_error("pre-allocate"))?;
    fill_file(&file, file_size_bytes).await?;
    let mut results = Vec::with_capacity(cells.len());
    for cell in cells {
        results.push(run_cell(file.clone(), *cell, file_size_bytes, duration).await?);
    }
    if let Ok(file) = Rc::try_unwrap(file) {
        let _ = file.close().await;
    }
    Ok(results)
}

/// Writes every block once, so that both patterns overwrite written blocks
/// rather than converting unwritten extents (which costs the first writer a
/// metadata update and would favour whichever pattern runs second).
async fn fill_file(file: &DmaFile, file_size_bytes: u64) -> Result<()> {
    let mut buffer = file.alloc_dma_buffer(FILL_BLOCK_BYTES);
    buffer.as_bytes_mut().fill(0xa5);
    let buffer = Rc::new(buffer);
    let mut position = 0;
    while position < file_size_bytes {
        file.write_rc_at(buffer.clone(), position)
            .await
            .map_err(|e| BenchError::Disk(format!("fill: {e}")))?;
        position += FILL_BLOCK_BYTES as u64;
    }
    file.fdatasync()
        .await
        .map_err(|e| BenchError::Disk(format!("fill fdatasync: {e}")))
}

async fn run_cell(
    file: Rc<DmaFile>,
    cell: CellConfig,
    file_size_bytes: u64,
    duration: Duration,
) -> Result<CellResult> {
    let blocks = file_size_bytes / cell.block_size_bytes as u64;
    let next_block = Rc::new(Cell::new(0u64));
    let histogram = Rc::new(RefCell::new(new_histogram()));
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = Vec::with_capacity(cell.queue_depth);
    for worker in 0..cell.queue_depth {
        let file = file.clone();
        let next_block = next_block.clone();
        let histogram = histogram.clone();
        workers.push(glommio::spawn_local(async move {
            let mut buffer: DmaBuffer = file.alloc_dma_buffer(cell.block_size_bytes);
            buffer.as_bytes_mut().fill(0x5a);
            let buffer = Rc::new(buffer);
            let mut rng = SmallRng::seed_from_u64(worker as u64 + 1);
            while Instant::now() < deadline {
                let block = if cell.random {
                    rng.gen_range(0..blocks)
                } else {
                    let block = next_block.get();
                    next_block.set((block + 1) % blocks);
                    block
                };
                let position = block * cell.block_size_bytes as u64;
                let write_started = Instant::now();
                let written = file
                    .write_rc_at(buffer.clone(), position)
                    .await
                    .map_err(|e| BenchError::Disk(format!("write: {e}")))?;
                if written != cell.block_size_bytes {
                    return Err(BenchError::Disk(format!(
                        "short write: {written} of {}",
                        cell.block_size_bytes
                    )));
                }
                if cell.fdatasync {
                    file.fdatasync()
                        .await
                        .map_err(|e| BenchError::Disk(format!("fdatasync: {e}")))?;
                }
                let latency_us =
                    (write_started.elapsed().as_micros() as u64).clamp(1, LATENCY_US_MAX);
                let _ = histogram.borrow_mut().record(latency_us);
            }
            Ok::<(), BenchError>(())
        }));
    }
    for worker in workers {
        worker.await?;
    }
    let duration_s = started.elapsed().as_secs_f64();
    let histogram = histogram.borrow();
    let writes = histogram.len();
    let bytes = writes * cell.block_size_bytes as u64;
    Ok(CellResult {
        pattern: if cell.random { "random" } else { "sequential" }.to_string(),
        block_size_bytes: cell.block_size_bytes,
        queue_depth: cell.queue_depth,
        fdatasync: cell.fdatasync,
        writes,
        bytes,
        duration_s,
        mb_per_s: bytes as f64 / duration_s / 1e6,
        iops: writes as f64 / duration_s,
        latency_us: Percentiles::of(&histogram),
    })
}

/// Pairs each sequential cell with its random twin.
pub fn ratios(cells: &[CellResult]) -> Vec<Ratio> {
    cells
        .iter()
        .filter(|c| c.pattern == "sequential")
        .filter_map(|sequential| {
            let random = cells.iter().find(|c| {
                c.pattern == "random"
                    && c.block_size_bytes == sequential.block_size_bytes
                    && c.queue_depth == sequential.queue_depth
                    && c.fdatasync == sequential.fdatasync
            })?;
            Some(Ratio {
                block_size_bytes: sequential.block_size_bytes,
                queue_depth: sequential.queue_depth,
                fdatasync: sequential.fdatasync,
                sequential_over_random: if random.mb_per_s > 0.0 {
                    sequential.mb_per_s / random.mb_per_s
                } else {
                    0.0
                },
            })
        })
        .collect()
}

/// The terminal table.
pub fn table(report: &DiskReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:>8} {:>4} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "pattern",
        "block",
        "qd",
        "fdatasync",
        "MB/s",
        "IOPS",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us"
    );
    for cell in &report.cells {
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>4} {:>9} {:>10.1} {:>10.0} {:>9} {:>9} {:>9} {:>9}",
            cell.pattern,
            format!("{}k", cell.block_size_bytes / 1024),
            cell.queue_depth,
            cell.fdatasync,
            cell.mb_per_s,
            cell.iops,
            cell.latency_us.p50_us,
            cell.latency_us.p99_us,
            cell.latency_us.p99_9_us,
            cell.latency_us.max_us
        );
    }
    let _ = writeln!(out, "\nsequential / random MB/s:");
    for ratio in &report.ratios {
        let _ = writeln!(
            out,
            "  block {:>5}k qd {:>2} fdatasync {:<5} {:.2}x",
            ratio.block_size_bytes / 1024,
            ratio.queue_depth,
            ratio.fdatasync,
            ratio.sequential_over_random
        );
    }
    out
}

/// `rill-bench disk`: run, print, save.
pub fn main(args: &DiskArgs) -> Result<()> {
    let report = run(args)?;
    print!("{}", table(&report));
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    eprintln!("result: {}", args.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(path: PathBuf) -> DiskArgs {
        DiskArgs {
            path,
            block_sizes: "4k,64k".into(),
            queue_depths: "1,8".into(),
            sync: "both".into(),
            duration_s: 0.1,
            file_size: "16m".into(),
            out: PathBuf::from("unused.json"),
        }
    }

    #[test]
    fn plan_builds_the_matrix_and_validates() {
        let (cells, file_size) = plan(&args(PathBuf::from("/x"))).unwrap();
        assert_eq!(cells.len(), 2 * 2 * 2 * 2);
        assert_eq!(file_size, 16 << 20);
        let mut bad = args(PathBuf::from("/x"));
        bad.block_sizes = "3k".into();
        assert!(plan(&bad).is_err());
        let mut bad = args(PathBuf::from("/x"));
        bad.queue_depths = "128".into();
        assert!(plan(&bad).is_err());
        let mut bad = args(PathBuf::from("/x"));
        bad.sync = "sometimes".into();
        assert!(plan(&bad).is_err());
    }

    #[test]
    fn measures_a_temp_dir() {
        // Under the target dir, not /tmp: /tmp may be tmpfs, which refuses O_DIRECT.
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let mut args = args(dir.path().to_path_buf());
        args.block_sizes = "4k,1m".into();
        args.queue_depths = "1,4".into();
        let report = run(&args).unwrap();
        assert_eq!(report.cells.len(), 16);
        for cell in &report.cells {
            assert!(cell.writes > 0, "{cell:?}");
            assert!(cell.mb_per_s > 0.0 && cell.iops > 0.0, "{cell:?}");
            assert!(
                cell.latency_us.p50_us > 0 && cell.latency_us.p50_us <= cell.latency_us.max_us,
                "{cell:?}"
            );
            assert_eq!(cell.bytes, cell.writes * cell.block_size_bytes as u64);
        }
        assert_eq!(report.ratios.len(), 8);
        assert!(report.ratios.iter().all(|r| r.sequential_over_random > 0.0));
        let json = serde_json::to_string(&report).unwrap();
        let back: DiskReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.cells.len(), report.cells.len());
        assert_eq!(back.cells[0].writes, report.cells[0].writes);
        assert!(table(&report).contains("sequential / random"));
        // The test file is removed afterwards.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
