//! Helpers for `rill-bench`'s tests against the real rill broker (targets
//! of the root package, so Cargo builds both binaries for them): the
//! `rill` binary, start `rill serve` on free ports with a scratch data dir
//! (killed and removed on drop), scratch dirs under the target dir, and run
//! the real `rill-bench` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `rill-bench` binary Cargo built for these tests.
pub const BENCH_BIN: &str = env!("CARGO_BIN_EXE_rill-bench");

/// The target profile dir (`<target>/debug`), where both binaries live.
fn profile_dir() -> PathBuf {
    Path::new(BENCH_BIN)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/debug"))
}

/// `$RILL_BIN`, else the `rill` Cargo built for these tests.
pub fn rill_bin() -> PathBuf {
    let bin = std::env::var_os("RILL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rill")));
    assert!(bin.is_file(), "no rill broker binary at {}", bin.display());
    bin
}

/// A scratch dir under the target dir (not /tmp), removed on drop.
pub fn scratch_dir() -> tempfile::TempDir {
    let base = profile_dir().join("rill-bench-tests");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(&base).unwrap()
}

/// A running `rill serve`; killed and its data dir removed on drop.
pub struct Rill {
    child: Child,
    pub addr: String,
    /// The admin listener (`/metrics`).
    pub admin: String,
    _data_dir: tempfile::TempDir,
}

impl Rill {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The broker's `--data-dir`.
    pub fn data_dir(&self) -> &Path {
        self._data_dir.path()
    }
}

impl Drop for Rill {
    fn drop(&mut self) {
        // A broker that died mid-test shows up to the client only as closed
        // connections; say how it ended.
        if let Ok(Some(status)) = self.child.try_wait() {
            eprintln!("rill on {} exited during the test: {status}", self.addr);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts rill on free ports and waits until it accepts connections.
/// Its log level is `warn`, or `$RILL_TEST_LOG_LEVEL` (e.g. `debug`) when set.
pub fn start_rill() -> Rill {
    start_rill_with(&[])
}

/// [`start_rill`] with more `rill serve` arguments (e.g. `--config FILE`
/// adding listeners beside the PLAINTEXT one this waits on).
pub fn start_rill_with(extra_args: &[&str]) -> Rill {
    let bin = rill_bin();
    let data_dir = scratch_dir();
    // Probed by sockets that never listen (see `bench_harness::ports`).
    let ports = bench_harness::ports::free_ports(2).unwrap();
    let addr = format!("127.0.0.1:{}", ports[0]);
    let admin = format!("127.0.0.1:{}", ports[1]);
    let child = Command::new(&bin)
        .args([
            "serve",
            "--listen",
            &addr,
            "--admin-listen",
            &admin,
            "--log-level",
            &std::env::var("RILL_TEST_LOG_LEVEL").unwrap_or_else(|_| "warn".into()),
            "--data-dir",
        ])
        .arg(data_dir.path())
        .args(extra_args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let mut rill = Rill {
        child,
        addr,
        admin,
        _data_dir: data_dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&rill.addr).is_err() {
        if let Ok(Some(status)) = rill.child.try_wait() {
            panic!("rill exited before listening: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "rill did not listen on {}",
            rill.addr
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rill
}

/// Runs `rill-bench ARGS`, asserts it succeeded, returns its output.
pub fn bench<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output = Command::new(BENCH_BIN)
        .args(args)
        .output()
        .expect("run rill-bench");
    assert!(
        output.status.success(),
        "rill-bench failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Reads a JSON file the binary wrote.
pub fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}
