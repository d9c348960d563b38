//! The broker process's own resource use, for `/metrics` under Prometheus's
//! standard names: `process_cpu_seconds_total` (user + system CPU of every
//! thread, from `getrusage(RUSAGE_SELF)`, microsecond resolution where
//! `/proc/self/stat` has only clock ticks) and
//! `process_resident_memory_bytes` (from `/proc/self/statm`), and rill's
//! `rill_process_context_switches_total` (voluntary and involuntary, every
//! thread's, from the same `getrusage`): a produce path's wake-ups and
//! hand-offs between threads per GB are what its per-request cost is made
//! of (issue #37), and `rill-bench run` divides them by the bytes moved.
//! Per process, read by whichever shard answers the admin request.

use kernel::metrics::prometheus_client::collector::Collector;
use kernel::metrics::prometheus_client::encoding::DescriptorEncoder;
use kernel::metrics::registry::{Declared, Family, Value};

static CPU_SECONDS: Family = Family::counter(
    "process_cpu_seconds_total",
    "Total user and system CPU time spent in seconds.",
    &[],
);
static CONTEXT_SWITCHES: Family = Family::counter(
    "rill_process_context_switches_total",
    "Context switches of every thread of the process: voluntary (the thread \
     waited) or involuntary (the scheduler took the core).",
    &["kind"],
);
static RESIDENT_MEMORY_BYTES: Family = Family::gauge(
    "process_resident_memory_bytes",
    "Resident memory size in bytes.",
    &[],
);

/// What the process has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessStats {
    /// User + system CPU time of all threads, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size in bytes (`None` where `/proc` is unreadable).
    pub resident_memory_bytes: Option<u64>,
    /// Context switches of all threads: (voluntary, involuntary).
    pub context_switches: (u64, u64),
}

impl ProcessStats {
    /// Reads both figures now.
    pub fn read() -> Self {
        let usage = rusage_self();
        ProcessStats {
            cpu_seconds: usage.map_or(0.0, |u| cpu_seconds_of(&u)),
            context_switches: usage.map_or((0, 0), |u| {
                (u.ru_nvcsw.max(0) as u64, u.ru_nivcsw.max(0) as u64)
            }),
            resident_memory_bytes: std::fs::read_to_string("/proc/self/statm")
                .ok()
                .and_then(|statm| resident_bytes_of_statm(&statm, page_size_bytes())),
        }
    }
}

/// The collector of the process figures (a missing RSS is left out rather
/// than shown as zero).
impl Collector for ProcessStats {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // Microseconds, as getrusage gives them.
        let cpu_seconds = (self.cpu_seconds * 1e6).round() / 1e6;
        CPU_SECONDS.encode(&mut encoder, [(Vec::new(), Value::Float(cpu_seconds))])?;
        let (voluntary, involuntary) = self.context_switches;
        CONTEXT_SWITCHES.encode(
            &mut encoder,
            [
                (vec!["voluntary".to_string()], Value::from(voluntary)),
                (vec!["involuntary".to_string()], Value::from(involuntary)),
            ],
        )?;
        if let Some(bytes) = self.resident_memory_bytes {
            RESIDENT_MEMORY_BYTES.encode(&mut encoder, [(Vec::new(), Value::from(bytes))])?;
        }
        Ok(())
    }
}

impl Declared for ProcessStats {
    fn families(&self) -> Vec<&'static Family> {
        vec![&CPU_SECONDS, &CONTEXT_SWITCHES, &RESIDENT_MEMORY_BYTES]
    }
}

/// The whole process's (every thread's) resource use, `None` if the call
/// fails.
fn rusage_self() -> Option<libc::rusage> {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct,
    // and getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to an owned struct.
    (unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0).then_some(usage)
}

/// User + system CPU, in seconds.
fn cpu_seconds_of(usage: &libc::rusage) -> f64 {
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn page_size_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// `/proc/self/statm` is `size resident shared text lib data dt`, in pages.
fn resident_bytes_of_statm(statm: &str, page_size_bytes: u64) -> Option<u64> {
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_resident_pages_times_page_size() {
        assert_eq!(
            resident_bytes_of_statm("1000 250 30 5 0 400 0\n", 4096),
            Some(250 * 4096)
        );
        assert_eq!(resident_bytes_of_statm("1000", 4096), None);
        assert_eq!(resident_bytes_of_statm("", 4096), None);
    }

    #[test]
    fn own_process_figures_are_sane_and_cpu_grows() {
        let before = ProcessStats::read();
        assert!(before.resident_memory_bytes.unwrap_or(0) > 0);
        // Burn CPU until the counter moves (it counts in clock ticks, and a
        // loaded host gives this thread less CPU per second of wall time:
        // the bound is only there to end a counter that never moves).
        let started = std::time::Instant::now();
        let mut x = 0u64;
        let mut after = ProcessStats::read();
        while after.cpu_seconds <= before.cpu_seconds
            && started.elapsed() < std::time::Duration::from_secs(30)
        {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            after = ProcessStats::read();
        }
        assert!(
            after.cpu_seconds > before.cpu_seconds,
            "{before:?} {after:?}"
        );
        let mut registry = kernel::metrics::registry::MetricsRegistry::default();
        registry.register(after);
        let text = registry.render();
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
        assert!(text.contains("# TYPE process_resident_memory_bytes gauge\n"));
        assert!(text.contains("\nprocess_cpu_seconds_total "));
        // Burning CPU for a clock tick has been preempted or has waited at
        // least once on any scheduler.
        let (voluntary, involuntary) = after.context_switches;
        assert!(voluntary + involuntary > 0, "{after:?}");
        assert!(text.contains("rill_process_context_switches_total{kind=\"voluntary\"} "));
    }
}
