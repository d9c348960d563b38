//! The fatal stop: the one way out of a broker that cannot go on. Per
//! process (every thread of it), not per shard.
//!
//! Every reason goes through [`stop`]: a panic in any thread (a shard, the
//! cleaner, a stream writer, the signal thread; a failed `assert!` is a
//! panic), the metadata log that cannot be written, an operator's second
//! SIGINT/SIGTERM. The first reason wins one atomic; it is logged once, and
//! the process ends with `_exit(2)` and that reason's exit code
//! ([`Reason::exit_code`]). Every later caller, on any thread, logs nothing,
//! signals nothing and waits for that exit. A watchdog thread bounds the
//! path: if writing the log line blocks (stdout a pipe nobody reads), the
//! process still exits within [`EXIT_GRACE`].
//!
//! Why no clean shutdown first: nothing acknowledged needs one. An append
//! is acknowledged only once written (and, under the `fsync` policy,
//! fdatasynced), so it is in the kernel or on the disk, and a process exit
//! keeps it; recovery at the next start cuts any torn tail. A clean
//! shutdown would need every shard, and a panicked shard never drains:
//! the others would wait out the 30 s drain timeout with calls routed to
//! it unanswered, while a fast exit closes the controller port at once, so
//! the other voters fence this node within a Raft heartbeat and its
//! partitions fail over in about a second.
//!
//! Why `_exit` and not `std::process::exit`: `exit` runs the C and Rust
//! at-exit handlers while the shards, their io_uring rings and the
//! allocator's threads still run, and tears down state they use; the old
//! self-SIGTERM path reached it through "second signal" and died of SIGSEGV
//! in one of three runs. `_exit` ends every thread at once, in the kernel.
//!
//! Why a panic hook ([`install_panic_hook`]) and not `panic = "abort"`:
//! - a distinct exit code (70) rather than SIGABRT, which glibc's heap
//!   checks, a double panic and the transaction crash fault point raise too:
//!   a supervisor or a test can tell a rill bug from memory corruption;
//! - the reason goes into the broker's log once, in its format, and stdout
//!   is flushed before the exit;
//! - the hook is installed by `rill serve` only: tests, the quorum
//!   simulator's and the fuzz corpus's `catch_unwind`, and every other
//!   binary of the workspace keep unwinding, which a profile setting would
//!   take from all of them;
//! - like `abort`, it stops the process before any unwinding, so no
//!   destructor runs on a half-broken glommio executor whose tasks other
//!   threads may still wake.
//!
//! What is given up: a core dump (`abort` writes one where `ulimit -c`
//! allows). The default hook still prints the message, the location and,
//! with `RUST_BACKTRACE=1`, the backtrace before the exit.
//!
//! The clean stop stays in `serve` (SIGINT/SIGTERM drain the connections
//! and checkpoint the logs); [`request_clean_stop`] is how the broker asks
//! for it itself (a shard that could not start), at most once.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// Longest time from the first fatal reason to the process's exit, when
/// logging it blocks. A judgement, not a measurement: room for the default
/// hook to symbolize a backtrace (`RUST_BACKTRACE=1`), short enough that a
/// supervisor restarts the broker promptly.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Why the broker stops without a clean shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A panic in any thread (a failed assertion among them): a bug.
    Panic,
    /// The metadata log could not be written: this node cannot keep its
    /// promises to the quorum any more.
    MetadataLog,
    /// An operator's second SIGINT/SIGTERM during a clean shutdown.
    SecondSignal,
}

impl Reason {
    /// The process's exit code. 70 and 74 are sysexits(3)'s `EX_SOFTWARE`
    /// and `EX_IOERR`; 130 is the shell's code for a process ended by
    /// SIGINT, as an interrupted clean shutdown has always exited. None of
    /// them is 0 (a clean stop), 1 (a start that failed) or 2 (a bad
    /// setting).
    pub const fn exit_code(self) -> i32 {
        match self {
            Reason::Panic => 70,
            Reason::MetadataLog => 74,
            Reason::SecondSignal => 130,
        }
    }
}

/// The first reason's exit code; 0 while the broker runs.
struct Latch(AtomicI32);

impl Latch {
    const fn new() -> Latch {
        Latch(AtomicI32::new(0))
    }

    /// `Ok` for the first claim in the process; every later one gets the
    /// exit code the first chose.
    fn claim(&self, reason: Reason) -> Result<(), i32> {
        self.0
            .compare_exchange(0, reason.exit_code(), Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }
}

static LATCH: Latch = Latch::new();

/// Stops the process: logs `detail` once and exits with `reason`'s code.
/// A caller after the first (another thread, or the same failure reported
/// again) only waits for that exit.
pub fn stop(reason: Reason, detail: &str) -> ! {
    if let Err(code) = LATCH.claim(reason) {
        wait_for_exit(code);
    }
    start_watchdog(reason.exit_code());
    announce_and_exit(reason, detail)
}

/// Makes every panic, on any thread, a fatal stop: installed once by `rill
/// serve` before any thread starts.
pub fn install_panic_hook() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Claimed before the default hook prints, so that panics on two
        // threads at once leave one message, the first.
        if let Err(code) = LATCH.claim(Reason::Panic) {
            wait_for_exit(code);
        }
        start_watchdog(Reason::Panic.exit_code());
        default_hook(info);
        let thread = std::thread::current();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let location = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        let detail = format!(
            "panic in thread {}{location}: {message}",
            thread.name().unwrap_or("(unnamed)")
        );
        announce_and_exit(Reason::Panic, &detail)
    }));
}

/// Asks for the clean stop an operator's SIGTERM starts (see `serve`), at
/// most once per process: a second self-signal would read as the
/// operator's second signal and end the clean stop it asked for.
pub fn request_clean_stop(reason: &str) {
    static REQUESTED: AtomicBool = AtomicBool::new(false);
    if REQUESTED.swap(true, Ordering::AcqRel) {
        tracing::error!("{reason} (a stop is already under way)");
        return;
    }
    tracing::error!("{reason}; stopping the broker");
    // SAFETY: raise(2) only sends a signal to this process.
    unsafe {
        libc::raise(libc::SIGTERM);
    }
}

fn announce_and_exit(reason: Reason, detail: &str) -> ! {
    let code = reason.exit_code();
    tracing::error!(
        exit_code = code,
        "fatal: {detail}; exiting without a clean shutdown"
    );
    let _ = std::io::stdout().flush();
    exit_now(code)
}

/// Exits with `code` after [`EXIT_GRACE`] whatever the path is doing; a
/// thread that cannot be started leaves the path unbounded only if logging
/// also blocks.
fn start_watchdog(code: i32) {
    let _ = std::thread::Builder::new()
        .name(String::from("rill-fatal-watchdog"))
        .spawn(move || {
            std::thread::sleep(EXIT_GRACE);
            exit_now(code)
        });
}

/// What a caller after the first does: nothing more, until the first
/// caller's exit; bounded as that one is, should its watchdog be missing.
fn wait_for_exit(code: i32) -> ! {
    std::thread::sleep(EXIT_GRACE);
    exit_now(code)
}

fn exit_now(code: i32) -> ! {
    // SAFETY: _exit(2) ends the process without running any handler or
    // destructor, which is the point (see the module's overview); nothing
    // of this process is used after it.
    unsafe { libc::_exit(code) }
}

/// `RILL_FAULT_PANIC_SHARD=<shard>`, in debug builds only: shard `<shard>`
/// panics once the file [`FAULT_PANIC_TRIGGER`] appears in the data dir,
/// so that a test can produce first and pick the moment of the panic.
pub const FAULT_PANIC_SHARD: &str = "RILL_FAULT_PANIC_SHARD";

/// The file in the data dir that fires [`FAULT_PANIC_SHARD`] (a file, so
/// the partition scan skips it).
pub const FAULT_PANIC_TRIGGER: &str = "rill-fault-panic";

/// Arms the [`FAULT_PANIC_SHARD`] point on this shard when the variable
/// names it. A release build has no such point: it never reads the
/// variable.
pub fn arm_panic_point(shard_id: usize, data_dir: &std::path::Path) {
    #[cfg(debug_assertions)]
    {
        let armed = std::env::var(FAULT_PANIC_SHARD).ok();
        if armed.and_then(|s| s.trim().parse::<usize>().ok()) != Some(shard_id) {
            return;
        }
        let trigger = data_dir.join(FAULT_PANIC_TRIGGER);
        tracing::warn!(shard = shard_id, trigger = %trigger.display(), "fault injection: panic point armed");
        glommio::spawn_local(async move {
            while !trigger.exists() {
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            panic!("fault injection: {FAULT_PANIC_SHARD} on shard {shard_id}");
        })
        .detach();
    }
    #[cfg(not(debug_assertions))]
    let _ = (shard_id, data_dir);
}

/// `RILL_FAULT_METADATA_LOG=1`, in debug builds only: every ready cycle
/// of the metadata quorum fails as a failed write of its log would, so a
/// test sees that path reach [`stop`] once.
pub const FAULT_METADATA_LOG: &str = "RILL_FAULT_METADATA_LOG";

/// `ready` (the outcome of a ready cycle), or an EIO when the
/// [`FAULT_METADATA_LOG`] point is armed. A release build has no such
/// point.
pub fn metadata_log_fault<T>(
    ready: Result<T, cluster::quorum::QuorumError>,
) -> Result<T, cluster::quorum::QuorumError> {
    #[cfg(debug_assertions)]
    if std::env::var(FAULT_METADATA_LOG).as_deref() == Ok("1") {
        return Err(cluster::quorum::QuorumError::Io {
            op: "write (fault injection)",
            path: std::path::PathBuf::from(FAULT_METADATA_LOG),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        });
    }
    ready
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_first_reason_wins_and_every_later_claim_is_refused() {
        let latch = Latch::new();
        assert_eq!(latch.claim(Reason::MetadataLog), Ok(()));
        // The metadata log failing again on the next ready cycle, a panic
        // on another thread, an operator's signal: none claims again.
        assert_eq!(latch.claim(Reason::MetadataLog), Err(74));
        assert_eq!(latch.claim(Reason::Panic), Err(74));
        assert_eq!(latch.claim(Reason::SecondSignal), Err(74));
    }

    #[test]
    fn of_threads_racing_exactly_one_claims() {
        let latch = Arc::new(Latch::new());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let latch = latch.clone();
                let reason = if i % 2 == 0 {
                    Reason::Panic
                } else {
                    Reason::MetadataLog
                };
                std::thread::spawn(move || latch.claim(reason).is_ok())
            })
            .collect();
        let winners = threads
            .into_iter()
            .map(std::thread::JoinHandle::join)
            .filter(|claimed| matches!(claimed, Ok(true)))
            .count();
        assert_eq!(winners, 1);
    }

    #[test]
    fn exit_codes_are_distinct_and_none_is_a_start_code() {
        let codes = [
            Reason::Panic.exit_code(),
            Reason::MetadataLog.exit_code(),
            Reason::SecondSignal.exit_code(),
        ];
        for (i, code) in codes.iter().enumerate() {
            assert!(![0, 1, 2].contains(code), "{code}");
            assert!(!codes[i + 1..].contains(code), "{code} twice");
        }
    }
}
