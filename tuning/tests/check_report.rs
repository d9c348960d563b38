//! `rill tune check`: the report on a fake host, an empty host, odd values and
//! the real machine, round-tripped through JSON like `--json` does.

mod common;

use std::path::Path;

use tuning::cli::{run_tune, TuneArgs, TuneCommand};
use tuning::{check_report, Report, Status};

const EXPECTED_CHECKS: [&str; 25] = [
    "io_uring.disabled",
    "io_uring.seccomp",
    "io_uring.setup",
    "memlock",
    "cpu.count",
    "cpu.numa",
    "cpu.smt",
    "cpu.pinned",
    "cpu.governor",
    "mem.thp",
    "vm.swappiness",
    "fs.aio-max-nr",
    "disk.filesystem",
    "disk.mount_options",
    "disk.device",
    "disk.scheduler",
    "disk.nomerges",
    "disk.read_ahead",
    "disk.write_cache",
    "disk.block_size",
    "net.irq_spread",
    "net.rps_xps",
    "net.somaxconn",
    "net.socket_buffers",
    "clock.source",
];

/// Serializes like `--json`, parses back with serde_json, checks the names.
fn json_round_trip(report: &Report) -> serde_json::Value {
    let text = serde_json::to_string_pretty(report).expect("serialize");
    let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let names: Vec<&str> = value["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    for expected in EXPECTED_CHECKS {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for check in value["checks"].as_array().expect("array") {
        for field in ["current", "recommended", "why", "status"] {
            assert!(check[field].is_string(), "{field} missing in {check}");
        }
    }
    let back: Report = serde_json::from_str(&text).expect("deserialize");
    assert_eq!(&back, report);
    value
}

fn status(report: &Report, name: &str) -> Status {
    report.get(name).expect(name).status
}

#[test]
fn fake_host_report_judges_each_source() {
    let root = common::fakeroot_source();
    let report = check_report(&root, Path::new("/var/lib/rill/data"), 4);
    let json = json_round_trip(&report);

    assert_eq!(status(&report, "memlock"), Status::Fail, "8 MiB < 4 shards");
    assert!(report.has_failures());
    assert_eq!(status(&report, "io_uring.disabled"), Status::Pass);
    assert_eq!(
        status(&report, "io_uring.setup"),
        Status::Skip,
        "never probed on a fake root"
    );
    assert_eq!(
        status(&report, "cpu.smt"),
        Status::Warn,
        "0,2 and 1,3 are siblings"
    );
    assert_eq!(status(&report, "cpu.governor"), Status::Warn);
    assert_eq!(status(&report, "disk.device"), Status::Pass);
    assert_eq!(status(&report, "disk.filesystem"), Status::Pass);
    assert_eq!(status(&report, "disk.scheduler"), Status::Warn);
    assert_eq!(status(&report, "clock.source"), Status::Warn);
    assert_eq!(
        report.get("disk.filesystem").map(|c| c.current.as_str()),
        Some("xfs on /var/lib/rill (/dev/nvme0n1)")
    );
    assert_eq!(
        report.get("vm.swappiness").map(|c| c.current.as_str()),
        Some("60")
    );
    // With 2 shards, the pinned cores 0-1 are on different physical cores.
    let two = check_report(&root, Path::new("/var/lib/rill/data"), 2);
    assert_eq!(status(&two, "cpu.smt"), Status::Pass);
    // Each shard pins 2 MiB of io memory plus 1 MiB of ring headroom: two
    // shards fit the fake host's 8 MiB limit, four do not.
    assert_eq!(status(&two, "memlock"), Status::Pass, "2 x 3 MiB <= 8 MiB");
    let four = check_report(&root, Path::new("/var/lib/rill/data"), 4);
    assert_eq!(status(&four, "memlock"), Status::Fail, "4 x 3 MiB > 8 MiB");
    // JSON carries the statuses as lower-case words.
    let swappiness = json["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "vm.swappiness"))
        .expect("row");
    assert_eq!(swappiness["status"], "warn");
    assert_eq!(swappiness["fixes"][0]["path"], "/proc/sys/vm/swappiness");
    assert_eq!(swappiness["fixes"][0]["value"], "1");
}

#[test]
fn empty_host_skips_instead_of_failing() {
    let empty = tempfile::tempdir().expect("tempdir");
    let report = check_report(empty.path(), Path::new("/data"), 0);
    json_round_trip(&report);
    for check in &report.checks {
        assert!(
            matches!(check.status, Status::Skip | Status::Pass),
            "{} is {:?} on an empty host",
            check.name,
            check.status
        );
        assert!(
            check.fixes.is_empty(),
            "{} proposes fixes for missing files",
            check.name
        );
    }
    assert_eq!(status(&report, "vm.swappiness"), Status::Skip);
    assert_eq!(status(&report, "disk.device"), Status::Skip);
}

#[test]
fn odd_values_warn_without_fixes_or_panics() {
    let dir = common::fakeroot_copy();
    let write = |path: &str, value: &str| {
        std::fs::write(dir.path().join(path), value).expect("write");
    };
    write("proc/sys/vm/swappiness", "lots\n");
    write("sys/kernel/mm/transparent_hugepage/enabled", "\n");
    write("proc/sys/net/ipv4/tcp_rmem", "4096 oops\n");
    write("sys/devices/system/cpu/online", "garbage");
    write("proc/self/mountinfo", "not a mount table\n");
    let report = check_report(dir.path(), Path::new("/var/lib/rill"), 0);
    json_round_trip(&report);
    let swappiness = report.get("vm.swappiness").expect("row");
    assert_eq!(
        (swappiness.status, swappiness.current.as_str()),
        (Status::Warn, "lots")
    );
    assert!(
        swappiness.fixes.is_empty(),
        "no fix from an unparsable previous value"
    );
    assert_eq!(status(&report, "mem.thp"), Status::Warn);
    assert_eq!(status(&report, "disk.filesystem"), Status::Skip);
    assert_eq!(
        report.get("cpu.pinned").map(|c| c.current.as_str()),
        Some("0")
    );
}

#[test]
fn real_host_report_is_complete() {
    let report = check_report(Path::new("/"), Path::new(env!("CARGO_TARGET_TMPDIR")), 0);
    json_round_trip(&report);
    let lines = tuning::startup_warnings(Path::new(env!("CARGO_TARGET_TMPDIR")), 0);
    let warned = report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Warn | Status::Fail))
        .count();
    assert_eq!(lines.len(), warned);
}

#[test]
fn check_exit_code_says_whether_anything_failed() {
    let dir = common::fakeroot_copy();
    let run = |cores| {
        run_tune(TuneArgs {
            root: dir.path().to_path_buf(),
            command: TuneCommand::Check {
                data_dir: "/var/lib/rill".into(),
                cores,
                json: true,
            },
        })
    };
    assert_eq!(run(4), 1, "memlock fails: 8 MiB");
    let limits = include_str!("../testdata/samples/limits.unlimited.txt");
    std::fs::write(dir.path().join("proc/self/limits"), limits).expect("write");
    assert_eq!(run(4), 0, "only warnings left once memlock is unlimited");
    assert_eq!(run(64), 1, "64 shards on 4 CPUs fails cpu.count");
}
