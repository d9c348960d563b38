//! `rill iotune` for real: a ~2 s run on a temp dir on the build disk writes a
//! valid io-properties file with non-zero, consistent figures.

use tuning::cli::{iotune_to_file, IotuneArgs};
use tuning::io_properties;
use tuning::iotune::TEST_FILE_NAME;

#[test]
fn short_iotune_writes_consistent_properties() {
    // Under the target dir, not /tmp: /tmp may be tmpfs, which is not the
    // kind of disk this measures (and lacks O_DIRECT on older kernels).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let data_dir = dir.path().join("data");
    let out = dir.path().join("io-properties.yaml");
    let args = IotuneArgs {
        data_dir: data_dir.clone(),
        duration_s: 2.0,
        out: out.clone(),
        file_size_mb: 64,
        quiet: true,
    };
    let written = iotune_to_file(&args).expect("iotune runs");
    let loaded = io_properties::load(&out).expect("file loads");
    assert_eq!(loaded, written);
    assert_eq!(loaded.disks.len(), 1);
    let disk = &loaded.disks[0];
    assert!(disk.read_iops > 0 && disk.write_iops > 0);
    assert!(disk.read_bandwidth > 0 && disk.write_bandwidth > 0);
    // Consistency: large sequential blocks move at least half the bytes of
    // random 4 KiB operations on any disk, and the bandwidth is no less than
    // one 4 KiB block per second.
    assert!(disk.read_bandwidth >= disk.read_iops * 4096 / 2, "{disk:?}");
    assert!(
        disk.write_bandwidth >= disk.write_iops * 4096 / 2,
        "{disk:?}"
    );
    // Below 100 GB/s and 50 M IOPS: anything more is a measuring bug.
    assert!(
        disk.read_bandwidth < 100_000_000_000 && disk.read_iops < 50_000_000,
        "{disk:?}"
    );
    // The mountpoint holds the data dir.
    let canonical = data_dir.canonicalize().expect("data dir created");
    assert!(
        canonical.starts_with(&disk.mountpoint),
        "{disk:?} vs {canonical:?}"
    );
    // The test file is gone.
    assert!(!data_dir.join(TEST_FILE_NAME).exists());
    let text = std::fs::read_to_string(&out).expect("read");
    assert!(text.contains("fdatasync after 4 KiB write: p50"));
}

#[test]
fn iotune_rejects_bad_duration_and_leaves_no_file() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let args = IotuneArgs {
        data_dir: dir.path().to_path_buf(),
        duration_s: 0.0,
        out: dir.path().join("out.yaml"),
        file_size_mb: 16,
        quiet: true,
    };
    assert!(iotune_to_file(&args).is_err());
    assert!(!dir.path().join("out.yaml").exists());
}
