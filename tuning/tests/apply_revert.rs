//! `rill tune apply` / `revert` on a copy of the fake host: the dry run changes
//! nothing, apply writes the fixes and a backup, revert restores the files.

mod common;

use std::path::{Path, PathBuf};

use tuning::cli::{run_tune, TuneArgs, TuneCommand};
use tuning::{apply, check_report, parse, Host, Status};

/// Choice files (`[a] b c`) hold the kernel's list in a real sysfs, but only
/// the selected word can be written back; compare the selection for those.
fn assert_restored(original: &std::collections::BTreeMap<PathBuf, String>, root: &Path) {
    let now = common::snapshot(root);
    let now: std::collections::BTreeMap<_, _> = now
        .into_iter()
        .filter(|(path, _)| !path.starts_with("backup"))
        .collect();
    assert_eq!(
        original.keys().collect::<Vec<_>>(),
        now.keys().collect::<Vec<_>>()
    );
    for (path, before) in original {
        let after = &now[path];
        if before.contains('[') {
            assert_eq!(
                parse::parse_bracketed(before),
                parse::parse_bracketed(after),
                "{path:?}"
            );
        } else {
            assert_eq!(before, after, "{path:?} not restored");
        }
    }
}

fn tune(root: &Path, command: TuneCommand) -> i32 {
    run_tune(TuneArgs {
        root: root.to_path_buf(),
        command,
    })
}

#[test]
fn dry_run_lists_writes_and_changes_nothing() {
    let dir = common::fakeroot_copy();
    let before = common::snapshot(dir.path());
    let report = check_report(dir.path(), Path::new("/var/lib/rill"), 4);
    let backup = dir.path().join("backup/tune-backup.json");
    let outcome =
        apply::apply(&Host::new(dir.path()), &report.fixes(), &backup, true).expect("dry run");

    let planned: Vec<(&str, &str)> = outcome
        .writes
        .iter()
        .map(|w| (w.path.as_str(), w.value.as_str()))
        .collect();
    for expected in [
        ("/proc/sys/vm/swappiness", "1"),
        ("/proc/sys/fs/aio-max-nr", "1048576"),
        ("/proc/sys/net/core/somaxconn", "4096"),
        ("/proc/sys/net/core/rmem_max", "16777216"),
        ("/proc/sys/net/ipv4/tcp_rmem", "4096 131072 16777216"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", "madvise"),
        (
            "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "performance",
        ),
        ("/sys/dev/block/259:0/queue/scheduler", "none"),
        ("/sys/dev/block/259:0/queue/nomerges", "2"),
        ("/proc/irq/130/smp_affinity_list", "0"),
        ("/proc/irq/133/smp_affinity_list", "3"),
        ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "0000000f"),
        ("/sys/class/net/eth0/queues/tx-1/xps_cpus", "00000002"),
        (
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            "tsc",
        ),
    ] {
        assert!(
            planned.contains(&expected),
            "{expected:?} not in {planned:#?}"
        );
    }
    assert!(outcome.failures.is_empty());
    assert_eq!(
        common::snapshot(dir.path()),
        before,
        "dry run changed the host"
    );
    assert!(!backup.exists(), "dry run wrote a backup");

    // The CLI's dry run is the same and also leaves everything alone.
    let code = tune(
        dir.path(),
        TuneCommand::Apply {
            data_dir: "/var/lib/rill".into(),
            cores: 4,
            dry_run: true,
            backup: backup.clone(),
        },
    );
    assert_eq!(code, 0);
    assert_eq!(common::snapshot(dir.path()), before);
}

#[test]
fn apply_then_revert_restores_the_host() {
    let dir = common::fakeroot_copy();
    let root = dir.path();
    let original = common::snapshot(root);
    let backup = root.join("backup/tune-backup.json");
    let apply_command = || TuneCommand::Apply {
        data_dir: "/var/lib/rill".into(),
        cores: 4,
        dry_run: false,
        backup: backup.clone(),
    };

    assert_eq!(tune(root, apply_command()), 0);
    let read = |path: &str| std::fs::read_to_string(root.join(path)).expect("read");
    assert_eq!(read("proc/sys/vm/swappiness"), "1\n");
    assert_eq!(read("sys/dev/block/259:0/queue/scheduler"), "none\n");
    assert_eq!(read("proc/irq/131/smp_affinity_list"), "1\n");
    assert_eq!(read("proc/sys/net/ipv4/tcp_wmem"), "4096 16384 16777216\n");
    assert!(backup.exists());
    let recorded = apply::load_backup(&backup).expect("backup");
    let swappiness = recorded
        .entries
        .iter()
        .find(|e| e.path == "/proc/sys/vm/swappiness")
        .expect("recorded");
    assert_eq!(
        (swappiness.previous.as_str(), swappiness.applied.as_str()),
        ("60", "1")
    );

    // After apply, the fixable rows pass.
    let report = check_report(root, Path::new("/var/lib/rill"), 4);
    for name in [
        "vm.swappiness",
        "fs.aio-max-nr",
        "net.somaxconn",
        "net.socket_buffers",
        "cpu.governor",
        "net.irq_spread",
    ] {
        assert_eq!(
            report.get(name).map(|c| c.status),
            Some(Status::Pass),
            "{name}"
        );
    }
    // A second apply finds less to do and must not lose the original values.
    assert_eq!(tune(root, apply_command()), 0);
    let again = apply::load_backup(&backup).expect("backup");
    assert_eq!(again.entries.len(), recorded.entries.len());
    assert!(again
        .entries
        .iter()
        .any(|e| e.path == "/proc/sys/vm/swappiness" && e.previous == "60"));

    // Revert dry run changes nothing; the real revert restores and removes the backup.
    let applied = common::snapshot(root);
    assert_eq!(
        tune(
            root,
            TuneCommand::Revert {
                dry_run: true,
                backup: backup.clone()
            }
        ),
        0
    );
    assert_eq!(common::snapshot(root), applied);
    assert_eq!(
        tune(
            root,
            TuneCommand::Revert {
                dry_run: false,
                backup: backup.clone()
            }
        ),
        0
    );
    assert!(!backup.exists());
    assert_restored(&original, root);
}

#[test]
fn corrupt_backup_is_an_error_and_touches_nothing() {
    let dir = common::fakeroot_copy();
    let backup = dir.path().join("backup.json");
    std::fs::write(&backup, "{ not json").expect("write");
    let before = common::snapshot(dir.path());
    assert_eq!(
        tune(
            dir.path(),
            TuneCommand::Revert {
                dry_run: false,
                backup: backup.clone()
            }
        ),
        2
    );
    assert!(matches!(
        apply::load_backup(&backup),
        Err(tuning::Error::Backup { .. })
    ));
    assert_eq!(common::snapshot(dir.path()), before);
}

#[test]
fn failed_writes_are_reported_and_the_rest_applied() {
    let dir = common::fakeroot_copy();
    // A directory where a file should be: the write fails, the others go on.
    let swappiness = dir.path().join("proc/sys/vm/swappiness");
    let report = check_report(dir.path(), Path::new("/var/lib/rill"), 4);
    std::fs::remove_file(&swappiness).expect("remove");
    std::fs::create_dir(&swappiness).expect("mkdir");
    let backup = dir.path().join("b.json");
    let outcome =
        apply::apply(&Host::new(dir.path()), &report.fixes(), &backup, false).expect("apply");
    assert_eq!(outcome.failures.len(), 1);
    assert_eq!(outcome.failures[0].0.path, "/proc/sys/vm/swappiness");
    assert_eq!(outcome.writes.len(), report.fixes().len() - 1);
}
