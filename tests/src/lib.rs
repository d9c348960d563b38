//! Helpers for rill's black-box tests: start a real `rill serve` process on a
//! free port with its own data dir, wait until it answers, stop it with
//! SIGTERM or SIGKILL, restart it on the same data; and small rdkafka helpers.
//!
//! The tests themselves are in `tests/tests/*.rs` and `tests/bench/*.rs`:
//! modules of the root package's one `blackbox` test binary
//! (`tests/tests/main.rs`), so Cargo builds the binaries and passes
//! `CARGO_BIN_EXE_rill`. Run one file's tests with `cargo test --test
//! blackbox sasl::`. Tests of different files run side by side in one
//! process, so anything process-wide (a port, a namespace's name) must be
//! unique per test, not per process.
//!
//! # Writing a test that can fail
//!
//! A test passes only if the behaviour it names holds. Four rules keep it
//! so; every new test follows them.
//!
//! - **A fault lands mid-work, provably.** A kill, a stop or a move that
//!   comes after the writes are done proves nothing about writes in flight.
//!   Write with [`paced::PacedWrites`], wait for some acknowledgements,
//!   assert the writer is not done ([`paced::PacedWrites::sent`] below the
//!   total) when the fault lands, then check every acknowledged record
//!   survived. Where the window is narrow (between a transaction's prepare
//!   and its markers), use a fault point in the broker
//!   (`RILL_FAULT_*`) rather than a sleep that races it.
//! - **A close is a close, not a timeout.** Read with
//!   [`raw::answer_or_close`] or assert with
//!   [`raw::assert_closed_by_broker`]: end of stream or a reset is a close,
//!   a read timeout is a hang and fails the test. Check the broker's own
//!   count too (`rill_connections_open`) where it matters.
//! - **Exact checks.** Offsets acknowledged are compared with those
//!   consumed ([`kafka::assert_delivered_as_consumed`],
//!   [`kafka::assert_offsets_contiguous`]), never `>= 0`; a kill is
//!   [`Broker::kill`] (it asserts the process died of the signal, and that
//!   it was running); a read after a fault reads to the high watermark
//!   ([`kafka::consume_to_end`]), not to a count that unacknowledged
//!   records can fill.
//! - **No timing asserts.** A shared 2-core CI host makes every upper bound
//!   on wall time flaky, and figures belong to `rill-bench`. Assert the
//!   mechanism (a throttle's computed pause, `throttle_time_ms`, a metric),
//!   or only a lower bound a slow host cannot break.
//!
//! A test that cannot run here (no root, an old kernel) calls [`skipped`]
//! and returns: CI's summary counts skips by reason, so none is silent.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Ports handed to brokers come from below the kernel's ephemeral range
/// (32768–60999 by default), so no client socket's local port and no other
/// `bind(0)` lands on them.
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A free TCP port on 127.0.0.1, never the same one twice in this process.
///
/// `bind(0)` and release was racy in a way that hid itself: two tests
/// running side by side could be given the same port, and because glommio
/// binds with SO_REUSEPORT both brokers then listened on it and the kernel
/// split one test's connections between them (a CreateAcls answered with a
/// connection reset by the other broker). Each process walks its own stretch
/// of `TEST_PORTS` (offset by its pid) and skips any port it cannot bind.
///
/// The probe binds without listening (see [`port_is_free`]).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(TEST_PORTS.end - TEST_PORTS.start);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(2_654_435_761) % span,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    for _ in 0..span {
        let step = NEXT.fetch_add(1, Ordering::AcqRel) % span;
        let port = TEST_PORTS.start + step as u16;
        if port_is_free(port) {
            return port;
        }
    }
    panic!("no free port in {TEST_PORTS:?}");
}

/// Whether 127.0.0.1:`port` can be bound: a socket bound there for an
/// instant, never listening, with SO_REUSEADDR (as the broker's own check).
///
/// A listening probe (`TcpListener::bind`) reset connections: a test thread
/// spawning a broker at that instant forks a child that holds a copy of the
/// probe until its exec (slow with a cold page cache), so the probe went on
/// listening after it was dropped. Another test's broker meant for that
/// port waited for it, but that test's readiness connect and its first
/// request landed in the probe's queue, and were reset when the child
/// exec'd (CI's acls tests, the first to run after the build). A socket
/// that never listens accepts nothing, and a copy of it does not keep the
/// broker off the port.
fn port_is_free(port: u16) -> bool {
    use socket2::{Domain, SockAddr, Socket, Type};
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    Socket::new(Domain::IPV4, Type::STREAM, None)
        .and_then(|socket| {
            socket.set_reuse_address(true)?;
            socket.bind(&SockAddr::from(address))
        })
        .is_ok()
}

/// A temp dir on the disk under `target/` (not tmpfs: rill uses O_DIRECT).
pub fn data_dir() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-data");
    std::fs::create_dir_all(&root).expect("test data root");
    tempfile::tempdir_in(root).expect("temp dir")
}

/// A command for one of the host's own programs (Debian's kcat, a shell
/// running the user docs), with the library path a user's shell gives it.
///
/// `cargo test` puts the build dirs of the crates' native libraries on
/// `LD_LIBRARY_PATH`, and rdkafka-sys builds a `librdkafka.so.1` there: a
/// kcat started with that path loads it (2.12) instead of its own (Debian
/// 12's 2.0.2), and a test of the old client would pass for the new one.
/// The entries under this test binary's profile dir are left out.
pub fn host_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    let Some(inherited) = std::env::var_os("LD_LIBRARY_PATH") else {
        return command;
    };
    // target/<profile>/deps/<test binary>
    let exe = std::env::current_exe().unwrap_or_default();
    let Some(profile_dir) = exe.parent().and_then(Path::parent) else {
        return command;
    };
    let kept: Vec<PathBuf> = std::env::split_paths(&inherited)
        .filter(|entry| !entry.starts_with(profile_dir))
        .collect();
    match std::env::join_paths(&kept) {
        Ok(path) if !kept.is_empty() => command.env("LD_LIBRARY_PATH", path),
        _ => command.env_remove("LD_LIBRARY_PATH"),
    };
    command
}

/// Where skipped tests are recorded, one `test<TAB>reason` line each;
/// `.ci/run` empties it first and counts it by reason after the run.
pub const SKIP_LEDGER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/test-skips.log");

/// Records that the calling test skips its checks, and why (printed, and
/// appended to [`SKIP_LEDGER`] so that CI's summary counts it: a skip is
/// never silent). The caller returns right after. (The crates' own unit
/// tests cannot depend on this crate; the one that skips, the kernel's
/// page-cache test, writes the same line to the same file itself.)
pub fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    eprintln!("skipped: {test}: {reason}");
    let line = format!("{test}\t{reason}\n");
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(SKIP_LEDGER)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(e) = appended {
        eprintln!("cannot record the skip in {SKIP_LEDGER}: {e}");
    }
}

/// The broker binary to run: `RILL_TEST_BINARY` when set (the sanitizer
/// script, `.ci/asan.sh`, runs the black-box tests against a broker built
/// with AddressSanitizer while the tests themselves stay a normal build),
/// else the one Cargo built for the test.
fn broker_binary(built: &str) -> PathBuf {
    match std::env::var_os("RILL_TEST_BINARY") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(built),
    }
}

/// A running broker process.
pub struct Broker {
    binary: PathBuf,
    child: Option<Child>,
    /// Kafka listener.
    pub addr: SocketAddr,
    /// Admin HTTP listener (/metrics).
    pub admin_addr: SocketAddr,
    /// Data directory.
    pub data_dir: PathBuf,
    extra_args: Vec<String>,
    /// Environment variables of the process (fault-injection points).
    envs: Vec<(String, String)>,
    log_path: PathBuf,
}

impl Broker {
    /// Starts `binary serve` on a free port with `data_dir` and extra args.
    pub fn start(binary: &str, data_dir: &Path, extra_args: &[&str]) -> Broker {
        Broker::start_with_env(binary, data_dir, extra_args, &[])
    }

    /// [`Broker::start`] with environment variables for the process, such
    /// as a fault-injection point; they stay for restarts until
    /// [`Broker::clear_env`]. Set per process, not on the test process, so
    /// tests running in parallel do not see each other's.
    pub fn start_with_env(
        binary: &str,
        data_dir: &Path,
        extra_args: &[&str],
        envs: &[(&str, &str)],
    ) -> Broker {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        Broker::start_listening(binary, data_dir, addr, extra_args, envs)
    }

    /// [`Broker::start`] with the broker's output kept in `log_dir` rather
    /// than its data dir (a data dir on a file system a test fills).
    pub fn start_logging_to(
        binary: &str,
        data_dir: &Path,
        log_dir: &Path,
        extra_args: &[&str],
    ) -> Broker {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        Broker::launch(binary, data_dir, addr, extra_args, &[], log_dir)
    }

    /// Starts `binary serve` listening on `addr` (an address of another
    /// network namespace, say).
    pub fn start_listening(
        binary: &str,
        data_dir: &Path,
        addr: SocketAddr,
        extra_args: &[&str],
        envs: &[(&str, &str)],
    ) -> Broker {
        Broker::launch(binary, data_dir, addr, extra_args, envs, data_dir)
    }

    fn launch(
        binary: &str,
        data_dir: &Path,
        addr: SocketAddr,
        extra_args: &[&str],
        envs: &[(&str, &str)],
        log_dir: &Path,
    ) -> Broker {
        let admin_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let mut broker = Broker {
            binary: broker_binary(binary),
            child: None,
            addr,
            admin_addr,
            data_dir: data_dir.to_path_buf(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            envs: envs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            log_path: log_dir.join("broker.log"),
        };
        broker.spawn();
        broker
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("broker log file");
        let log_err = log.try_clone().expect("log clone");
        let child = Command::new(&self.binary)
            .arg("serve")
            .arg("--listen")
            .arg(self.addr.to_string())
            .arg("--admin-listen")
            .arg(self.admin_addr.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.extra_args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
            .expect("rill starts");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Waits until the Kafka listener and the admin listener (`/metrics`,
    /// which shard 0 opens a little after the first Kafka listener) both
    /// take connections. The admin listener is looked at only where the
    /// broker listens on loopback: one in a network namespace has its
    /// admin listener on the namespace's own loopback.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let takes = |addr: &SocketAddr| {
            TcpStream::connect_timeout(addr, Duration::from_millis(200)).is_ok()
        };
        let admin_reachable = self.addr.ip().is_loopback();
        while Instant::now() < deadline {
            if takes(&self.addr) && (!admin_reachable || takes(&self.admin_addr)) {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("rill exited at start with {status}:\n{}", self.log());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("rill did not listen within 30 s:\n{}", self.log());
    }

    /// `host:port` for clients.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// The broker's log output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Sends a signal and waits for the process to exit; returns its exit
    /// code (`None`: it died of a signal).
    ///
    /// # Panics
    /// When the broker is not running, or had already exited before the
    /// signal: a stop of a dead broker proves nothing, and the test that
    /// sent it must not pass as if its fault had landed.
    pub fn stop_with(&mut self, signal: i32) -> Option<i32> {
        self.signal_and_wait(signal).code()
    }

    /// SIGKILL, asserting the broker died of it (and not by itself before).
    pub fn kill(&mut self) {
        use std::os::unix::process::ExitStatusExt;
        let status = self.signal_and_wait(libc::SIGKILL);
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "rill exited by itself ({status}) rather than by SIGKILL:\n{}",
            self.log()
        );
    }

    fn signal_and_wait(&mut self, signal: i32) -> std::process::ExitStatus {
        let Some(mut child) = self.child.take() else {
            panic!("signal {signal} for a broker that is not running");
        };
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "rill had exited ({status}) before signal {signal}:\n{}",
                self.log()
            );
        }
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "rill did not exit within 30 s of signal {signal}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `timeout` for the process to end by itself (a fatal
    /// stop); returns its exit code (`None`: ended by a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let mut child = self.child.take().expect("a running broker");
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("rill did not exit within {timeout:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Graceful stop (SIGTERM); returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        self.stop_with(libc::SIGTERM)
    }

    /// The binary the next [`Broker::restart`] runs: a rolling upgrade's
    /// new (or old) release.
    pub fn set_binary(&mut self, binary: &Path) {
        self.binary = binary.to_path_buf();
    }

    /// Drops the environment variables given at start, for the next restart.
    pub fn clear_env(&mut self) {
        self.envs.clear();
    }

    /// Starts the process again on the same port and data dir.
    ///
    /// First it waits until nothing accepts on the port: a process that
    /// just exited can hold its listening sockets a moment longer (io_uring
    /// tears its ring down after the exit), and a connection they take is
    /// never served, then reset. Seen once: the readiness check below
    /// connected to such a socket, and the test's next request was reset.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok()
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.spawn();
    }

    /// A counter or gauge of `/metrics` summed over its label sets (the
    /// shards, say).
    pub fn metric_sum(&self, name: &str) -> i64 {
        http_get(self.admin_addr, "/metrics")
            .lines()
            .filter(|line| {
                line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<i64>().ok())
            .sum()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // A broker that died by itself (a crash leaves no line in its log:
        // SIGSEGV prints nothing) is named, so a failing test's connection
        // reset is not mistaken for a network fault.
        let mut died = None;
        if let Some(mut child) = self.child.take() {
            died = exited_by_itself(&mut child);
            let _ = child.kill();
            let _ = child.wait();
        }
        // A failing test shows what the broker said (its last lines).
        if std::thread::panicking() {
            if let Some(status) = died {
                eprintln!("--- rill had exited by itself before the test ended: {status} ---");
            }
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- last lines of the rill log ---");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// The exit status of a broker that ended without being asked to, looked
/// for only while a test fails: a process that crashes closes its sockets
/// (the client's reset) a moment before it can be reaped, so it is given
/// half a second.
fn exited_by_itself(child: &mut Child) -> Option<std::process::ExitStatus> {
    if !std::thread::panicking() {
        return None;
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks that a `rill` run refused to start (exit code 2) and said each of
/// `reasons`; returns what it printed.
pub fn assert_refused_start(output: &std::process::Output, reasons: &[&str]) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(2), "{text}");
    for reason in reasons {
        assert!(text.contains(reason), "wanted {reason:?} in:\n{text}");
    }
    text
}

/// Runs `binary serve` with `properties` as its settings file (its data
/// under `dir`); it must refuse to start ([`assert_refused_start`]) with
/// each of `reasons`, and without a panic. Returns what it printed.
pub fn assert_settings_refused(
    binary: &str,
    dir: &Path,
    properties: &str,
    reasons: &[&str],
) -> String {
    let file = dir.join("server.properties");
    std::fs::write(&file, properties).expect("write server.properties");
    let output = Command::new(binary)
        .args([
            "serve",
            "--admin-listen",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--config")
        .arg(&file)
        .output()
        .expect("rill runs");
    let text = assert_refused_start(&output, reasons);
    assert!(!text.contains("panicked"), "{text}");
    text
}

/// Fetches `/metrics` from the admin port.
pub fn http_get(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("admin connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

pub mod acl;
pub mod agreement;
pub mod cluster;
pub mod kafka;
pub mod kerberos;
pub mod layering;
pub mod limits;
pub mod netns;
pub mod paced;
pub mod pki;
pub mod python;
pub mod raw;
pub mod replicated;
pub mod s3;
pub mod sasl;
pub mod share;
pub mod small_fs;
