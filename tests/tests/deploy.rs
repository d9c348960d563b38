//! What `deploy/` ships holds against the real tools and a real broker:
//! the systemd unit passes `systemd-analyze verify`, `rill serve` tells
//! systemd when it serves (sd_notify), the alert rules pass `promtool check
//! rules`, and every metric the rules and the Grafana dashboard name is one
//! a live broker serves on `/metrics`.

use rill_tests::{data_dir, free_port, http_get, skipped, Broker};
use std::collections::BTreeSet;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn read(relative: &str) -> String {
    let path = repo_file(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `tool` runs here (CI installs it; a bare machine may not have it).
fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// `systemd-analyze verify` of `unit` (its ExecStart pointed at the binary
/// Cargo built, which verify requires to exist): everything it printed.
fn verify_unit(unit: &str) -> String {
    let dir = data_dir();
    let path = dir.path().join("rill.service");
    std::fs::write(&path, unit.replace("/usr/bin/rill", RILL)).expect("write unit");
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("run systemd-analyze");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        text
    } else {
        format!("exit {}: {text}", output.status)
    }
}

#[test]
fn the_systemd_unit_verifies_clean() {
    if !have("systemd-analyze") {
        return skipped("systemd-analyze is not installed");
    }
    let unit = read("deploy/systemd/rill.service");
    for needed in [
        "Type=notify",
        "LimitMEMLOCK=",
        "LimitNOFILE=",
        "ExecStart=/usr/bin/rill serve",
    ] {
        assert!(unit.contains(needed), "the unit lacks {needed}");
    }
    let report = verify_unit(&unit);
    assert!(report.trim().is_empty(), "systemd-analyze verify: {report}");
    // The check bites: a bad value is reported (verify exits 0 on it).
    let broken = verify_unit(&unit.replace("LimitNOFILE=1048576", "LimitNOFILE=lots"));
    assert!(
        broken.contains("LimitNOFILE") || broken.contains("lots"),
        "{broken}"
    );
}

/// Reads one sd_notify datagram, as systemd would.
fn next_notification(socket: &UnixDatagram) -> String {
    let mut buffer = [0u8; 512];
    let length = socket.recv(&mut buffer).expect("an sd_notify datagram");
    String::from_utf8_lossy(&buffer[..length]).into_owned()
}

#[test]
fn rill_tells_systemd_it_is_ready_only_once_it_serves_and_when_it_stops() {
    let dir = data_dir();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(RILL)
        .args([
            "serve",
            "--cores",
            "2",
            "--listen",
            &addr,
            "--log-level",
            "warn",
        ])
        .args(["--admin-listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("NOTIFY_SOCKET", &socket_path)
        .spawn()
        .expect("start rill");
    let ready = next_notification(&socket);
    assert_eq!(ready.trim(), "READY=1");
    // Every shard has bound by now: the port takes a connection at once.
    let connected = std::net::TcpStream::connect(&addr);
    assert!(
        connected.is_ok(),
        "READY=1 came before {addr} served: {connected:?}"
    );
    drop(connected);
    // SAFETY: kill(2) on the child's pid, which it has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(next_notification(&socket).trim(), "STOPPING=1");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "a clean stop");
}

#[test]
fn the_alert_rules_pass_promtool() {
    if !have("promtool") {
        return skipped("promtool (Debian's prometheus package) is not installed");
    }
    let output = Command::new("promtool")
        .args(["check", "rules"])
        .arg(repo_file("deploy/prometheus/rill-alerts.yml"))
        .output()
        .expect("run promtool");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // promtool loaded every rule the file declares.
    let rules = read("deploy/prometheus/rill-alerts.yml");
    let declared = rules.matches("- alert: ").count();
    assert!(declared >= 12, "the file declares its alerts:\n{rules}");
    assert!(
        text.contains(&format!("SUCCESS: {declared} rules found")),
        "{text}"
    );
}

/// The metric names in `text`: identifiers that start with `rill_` or
/// `process_`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for (at, _) in text.match_indices(['r', 'p']) {
        if at > 0 && text[..at].ends_with(is_part) {
            continue;
        }
        let rest = &text[at..];
        if !(rest.starts_with("rill_") || rest.starts_with("process_")) {
            continue;
        }
        let end = rest.find(|c: char| !is_part(c)).unwrap_or(rest.len());
        names.insert(rest[..end].to_string());
    }
    names
}

/// The `expr` of every alert rule (`expr: ...`, folded `>-` ones
/// included) and of every dashboard target.
fn expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let rules = read("deploy/prometheus/rill-alerts.yml");
    let lines: Vec<&str> = rules.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let Some(expr) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let mut expr = expr.trim().to_string();
        if expr == ">-" {
            let indent = line.len() - line.trim_start().len();
            expr = lines[index + 1..]
                .iter()
                .take_while(|l| l.len() - l.trim_start().len() > indent)
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" ");
        }
        out.push((String::from("rill-alerts.yml"), expr));
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/rill.json")).expect("the dashboard is JSON");
    for panel in dashboard["panels"].as_array().expect("panels") {
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if panel["type"] != "row" {
            assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        }
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .expect("a target's expr")
                .to_string();
            out.push((format!("dashboard panel {}", panel["title"]), expr));
        }
    }
    out
}

#[test]
fn every_metric_the_rules_and_dashboard_name_is_served() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let scrape = http_get(broker.admin_addr, "/metrics");
    let served: BTreeSet<String> = scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect();
    assert!(served.contains("rill_produce_latency_seconds"), "{scrape}");
    let expressions = expressions();
    assert!(
        expressions.len() >= 11 + 20,
        "{} expressions",
        expressions.len()
    );
    let mut unknown = Vec::new();
    for (place, expr) in &expressions {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{place}: {expr} names no rill metric");
        for name in names.difference(&served) {
            unknown.push(format!("{place}: {name}"));
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics the broker does not serve: {unknown:?}"
    );
}

#[test]
fn the_name_scan_finds_metrics_and_only_metrics() {
    let names = metric_names(
        "rate(rill_requests_total{api=\"x\"}[1m]) / myrill_x + process_cpu_seconds_total",
    );
    let expected: BTreeSet<String> = ["process_cpu_seconds_total", "rill_requests_total"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, expected);
}

#[test]
fn the_shipped_broker_file_starts_a_broker_with_every_key_known() {
    let dir = data_dir();
    let file = dir.path().join("server.properties");
    let shipped = read("deploy/config/server.properties");
    let controller_port = free_port().to_string();
    std::fs::write(&file, shipped.replace("9093", &controller_port)).expect("write");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let file_arg = file.display().to_string();
    let broker = Broker::start(RILL, &data, &["--config", &file_arg]);
    let scrape = http_get(broker.admin_addr, "/metrics");
    assert!(scrape.contains("rill_partitions"), "{scrape}");
    let log = broker.log();
    assert!(!log.contains("unknown broker setting"), "{log}");
}
