//! The Debian package installs on a clean machine and starts a broker a
//! client can use: `cargo deb` packs the binaries Cargo built for this
//! test, `dpkg -i` installs the package, the broker runs as the unit runs
//! it (its user, its config, its data dir), a real client produces and
//! consumes, and a purge removes the package but keeps the data.
//!
//! It installs into this machine's `/`, so it needs root, `dpkg` and
//! cargo-deb, and it skips (by reason) where any is missing or where a
//! `rill` package, user or data dir is already there: an operator's
//! install is never touched. CI installs cargo-deb and runs as root.

use rill_tests::kafka::{client_config, produce_all};
use rill_tests::skipped;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const RILL_BENCH: &str = env!("CARGO_BIN_EXE_rill-bench");

/// The shipped broker file's ports (deploy/config/server.properties) and
/// the admin listener's default.
const PORTS: [u16; 3] = [9092, 9093, 9644];

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn assert_ran(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Why this machine cannot take the install, if it cannot.
fn cannot_install() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root: it installs a package".into());
    }
    if !succeeds("dpkg", &["--version"]) {
        return Some("dpkg is not installed".into());
    }
    if !succeeds("cargo", &["deb", "--version"]) {
        return Some("cargo-deb is not installed (CI installs it)".into());
    }
    if succeeds("dpkg", &["-s", "rill"]) {
        return Some("a rill package is installed here; it is left alone".into());
    }
    if succeeds("getent", &["passwd", "rill"]) || Path::new("/var/lib/rill").exists() {
        return Some("a rill user or /var/lib/rill exists here; it is left alone".into());
    }
    if let Some(port) = PORTS
        .iter()
        .find(|p| TcpListener::bind(("0.0.0.0", **p)).is_err())
    {
        return Some(format!(
            "port {port}, which the shipped config uses, is taken"
        ));
    }
    None
}

/// `cargo deb` on the binaries Cargo built for this test, so that the
/// package holds exactly what the suite tested: they are linked into a
/// staging target dir's `release/`, where the manifest's assets
/// (`target/release/...`) are looked for, and `--no-build` packs them as
/// they are. The package's path.
fn build_package(out_dir: &Path) -> std::path::PathBuf {
    let staging = out_dir.join("target");
    let release = staging.join("release");
    std::fs::create_dir_all(&release).expect("staging dir");
    for binary in [RILL, RILL_BENCH] {
        let name = Path::new(binary).file_name().expect("a binary name");
        let staged = release.join(name);
        if std::fs::hard_link(binary, &staged).is_err() {
            std::fs::copy(binary, &staged).expect("stage the binary");
        }
    }
    let deb = out_dir.join("rill.deb");
    let output = Command::new("cargo")
        .args(["deb", "--no-build", "--no-strip", "--fast", "--output"])
        .arg(&deb)
        .env("CARGO_TARGET_DIR", &staging)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo deb");
    assert_ran(&output, "cargo deb");
    deb
}

/// The package's contents as `dpkg-deb --contents` lists them.
fn contents(deb: &Path) -> String {
    let output = run(
        "dpkg-deb",
        &["--contents", deb.to_str().expect("utf-8 path")],
    );
    assert_ran(&output, "dpkg-deb --contents");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The installed package, purged (with the data and the user it made) when
/// the test ends, also when it fails: the checks above made sure none of
/// them was there before.
struct Installed {
    /// The broker started directly, where systemd does not run this machine.
    broker: Option<Child>,
    /// Where that broker logs (its stdout and stderr); shown on a failure.
    log: std::path::PathBuf,
    under_systemd: bool,
}

impl Installed {
    fn install(deb: &Path, log: std::path::PathBuf) -> Installed {
        let install = run("dpkg", &["-i", deb.to_str().expect("utf-8 path")]);
        let installed = Installed {
            broker: None,
            log,
            under_systemd: Path::new("/run/systemd/system").is_dir(),
        };
        assert_ran(&install, "dpkg -i");
        installed
    }

    /// Starts the broker as the unit does, as the `rill` user with the
    /// shipped config: by `systemctl` where systemd runs this machine,
    /// else the unit's `ExecStart` under `setpriv`.
    fn start(&mut self) {
        if self.under_systemd {
            assert_ran(
                &run("systemctl", &["start", "rill"]),
                "systemctl start rill",
            );
            return;
        }
        let log = std::fs::File::create(&self.log).expect("the broker's log");
        let child = Command::new("setpriv")
            .args(["--reuid", "rill", "--regid", "rill", "--init-groups", "--"])
            .args([
                "/usr/bin/rill",
                "serve",
                "--config",
                "/etc/rill/server.properties",
            ])
            .stdout(log.try_clone().expect("the broker's log"))
            .stderr(log)
            .spawn()
            .expect("start the installed broker");
        self.broker = Some(child);
    }

    /// Stops the broker cleanly; true when it exited 0.
    fn stop(&mut self) -> bool {
        if self.under_systemd {
            return succeeds("systemctl", &["stop", "rill"]);
        }
        let Some(mut child) = self.broker.take() else {
            return true;
        };
        // SAFETY: kill(2) on the broker's pid (setpriv execs it), not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().is_ok_and(|status| status.success())
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "the installed broker's log, last lines first:\n{}",
                tail.join("\n")
            );
        }
        if let Some(mut child) = self.broker.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = run("dpkg", &["--purge", "rill"]);
        let _ = std::fs::remove_dir_all("/var/lib/rill");
        let _ = run("deluser", &["--system", "rill"]);
    }
}

/// Produces 100 records acks=all to the installed broker and reads them
/// back.
fn produce_and_consume() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::Message;
    let bootstrap = "127.0.0.1:9092";
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (0..100)
        .map(|i| (None, format!("record {i}").into_bytes()))
        .collect();
    let producer = rill_tests::kafka::producer(bootstrap, &[("acks", "all")]);
    let acked = runtime.block_on(produce_all(&producer, "installed", &records, Some(0)));
    assert_eq!(acked.len(), 100);
    let mut config = client_config(bootstrap);
    config
        .set("group.id", "installed-check")
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = config.create().expect("consumer");
    consumer.subscribe(&["installed"]).expect("subscribe");
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while values.len() < 100 && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            values.push(message.payload().map(<[u8]>::to_vec).unwrap_or_default());
        }
    }
    let expected: Vec<Vec<u8>> = records.into_iter().map(|(_, value)| value).collect();
    assert_eq!(values, expected, "what the installed broker gave back");
}

/// Checks what the package put on the machine: the user, the data dir, the
/// config's owner and mode, the unit, the harness.
fn assert_installed_layout() {
    let user = run("getent", &["passwd", "rill"]);
    assert_ran(&user, "the rill user");
    let uid: u32 = String::from_utf8_lossy(&user.stdout)
        .split(':')
        .nth(2)
        .and_then(|field| field.parse().ok())
        .expect("the rill user's uid");
    let data = std::fs::metadata("/var/lib/rill").expect("/var/lib/rill");
    assert_eq!(data.uid(), uid, "/var/lib/rill belongs to rill");
    let config = std::fs::metadata("/etc/rill/server.properties").expect("the config");
    assert_eq!(
        config.mode() & 0o777,
        0o640,
        "the config is not world-readable"
    );
    assert_eq!(config.uid(), 0);
    assert_eq!(config.gid(), data.gid(), "the config's group is rill's");
    let unit = [
        "/lib/systemd/system/rill.service",
        "/usr/lib/systemd/system/rill.service",
    ];
    assert!(
        unit.iter().any(|path| Path::new(path).is_file()),
        "no unit installed"
    );
    let version = run("/usr/bin/rill-bench", &["--version"]);
    assert_ran(&version, "the installed rill-bench");
}

/// A purge takes the package's files but keeps the data and the user
/// (docs/operations.md says so).
fn assert_purge_keeps_the_data() {
    assert_ran(&run("dpkg", &["--purge", "rill"]), "dpkg --purge rill");
    assert!(
        !Path::new("/usr/bin/rill").exists(),
        "the binary outlived the purge"
    );
    assert!(!Path::new("/etc/rill/server.properties").exists());
    assert!(
        Path::new("/var/lib/rill/data").is_dir(),
        "the purge took the data"
    );
    assert!(
        succeeds("getent", &["passwd", "rill"]),
        "the purge took the user"
    );
}

#[test]
fn the_debian_package_installs_and_serves_a_client() {
    if let Some(reason) = cannot_install() {
        return skipped(&reason);
    }
    let out = rill_tests::data_dir();
    let deb = build_package(out.path());
    let listed = contents(&deb);
    for path in [
        "./usr/bin/rill",
        "./usr/bin/rill-bench",
        "./etc/rill/server.properties",
        "systemd/system/rill.service",
    ] {
        assert!(listed.contains(path), "the package lacks {path}:\n{listed}");
    }
    let mut installed = Installed::install(&deb, out.path().join("broker.log"));
    assert_installed_layout();
    installed.start();
    produce_and_consume();
    assert!(
        installed.stop(),
        "the installed broker did not stop cleanly"
    );
    // The broker wrote where the config says, as the rill user.
    let owner = std::fs::metadata("/var/lib/rill/data")
        .expect("the data dir")
        .uid();
    assert_ne!(owner, 0, "the broker ran as root");
    assert_purge_keeps_the_data();
}
