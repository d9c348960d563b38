//! The simulated disk keeps exactly what its contract promises across a
//! crash, and fails where it is told to.

use super::sim::*;
use crate::disk::{DataFile, Disk};
use futures::executor::block_on;
use std::collections::BTreeSet;
use std::path::Path;
use std::rc::Rc;

fn disk(seed: u64) -> Rc<SimDisk> {
    let sim = SimDisk::new(SimConfig::new(seed));
    sim.create_dir_all(Path::new("/d")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    sim
}

fn open(sim: &Rc<SimDisk>, path: &str) -> DataFile {
    block_on(sim.open_data(Path::new(path), true)).unwrap()
}

fn write(file: &DataFile, position: u64, byte: u8, len: usize) {
    let mut buf = file.alloc(len);
    buf.as_bytes_mut().fill(byte);
    assert_eq!(block_on(file.write_at(buf, position)).unwrap(), len);
}

#[test]
fn synced_data_and_names_survive_and_the_rest_may_not() {
    let (mut lost, mut kept, mut torn) = (0, 0, 0);
    for seed in 0..200 {
        let sim = disk(seed);
        let file = open(&sim, "/d/a");
        sim.sync_dir(Path::new("/d")).unwrap();
        write(&file, 0, 1, 4096);
        block_on(file.fdatasync()).unwrap();
        write(&file, 4096, 2, 4096);
        sim.crash();
        let after = sim.read(Path::new("/d/a")).unwrap();
        assert!(after.len() >= 4096, "seed {seed}: synced bytes lost");
        assert!(after[..4096].iter().all(|&b| b == 1), "seed {seed}");
        let rest = &after[4096..];
        match rest.iter().filter(|&&b| b == 2).count() {
            0 => lost += 1,
            4096 => kept += 1,
            n => {
                assert_eq!(n % 512, 0, "seed {seed}: torn off a sector boundary");
                torn += 1;
            }
        }
        // The handle from before the crash is dead.
        assert!(block_on(file.read_at(0, 1)).is_err());
    }
    assert!(lost > 0 && kept > 0 && torn > 0, "{lost} {kept} {torn}");
}

#[test]
fn a_sync_covers_only_the_writes_completed_before_it_was_issued() {
    let sim = disk(7);
    let file = open(&sim, "/d/a");
    sim.sync_dir(Path::new("/d")).unwrap();
    let issued = sim.completions();
    write(&file, 0, 9, 512);
    let inode = sim.inode_at(Path::new("/d/a")).unwrap();
    sim.sync_upto(inode, issued);
    assert!(
        sim.durable_bytes(inode).is_empty(),
        "the later write is not covered"
    );
}

#[test]
fn unsynced_renames_may_be_lost_and_synced_ones_are_not() {
    let mut outcomes = BTreeSet::new();
    for seed in 0..50 {
        let sim = disk(seed);
        sim.write(Path::new("/d/old"), b"x", true).unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        sim.rename(Path::new("/d/old"), Path::new("/d/new"))
            .unwrap();
        sim.crash();
        let names = sim.read_dir(Path::new("/d")).unwrap();
        assert_eq!(names.len(), 1, "seed {seed}: {names:?}");
        outcomes.insert(names[0].clone());
        let sim = disk(seed);
        sim.write(Path::new("/d/old"), b"x", true).unwrap();
        sim.rename(Path::new("/d/old"), Path::new("/d/new"))
            .unwrap();
        sim.sync_dir(Path::new("/d")).unwrap();
        sim.crash();
        assert_eq!(sim.read(Path::new("/d/new")).unwrap(), b"x");
    }
    assert_eq!(outcomes.len(), 2, "both outcomes occur: {outcomes:?}");
}

#[test]
fn full_and_failing_disks_answer_enospc_and_eio() {
    let sim = SimDisk::new(SimConfig {
        capacity_bytes: 8192,
        ..SimConfig::new(1)
    });
    sim.create_dir_all(Path::new("/d")).unwrap();
    let file = open(&sim, "/d/a");
    block_on(file.pre_allocate(8192)).unwrap();
    let error = block_on(file.pre_allocate(16384)).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::ENOSPC));
    let failing = SimDisk::new(SimConfig {
        eio_per_million: 1_000_000,
        ..SimConfig::new(1)
    });
    failing.create_dir_all(Path::new("/d")).unwrap();
    let file = open(&failing, "/d/a");
    let error = block_on(file.write_at(file.alloc(512), 0)).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    assert_eq!(
        block_on(file.fdatasync()).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
}

#[test]
fn an_unsynced_directory_takes_its_files_with_it() {
    // "/x" and "/x/y" were never made durable in their parents: a crash
    // that drops them drops the file under them, synced or not.
    let mut gone = 0;
    for seed in 0..20 {
        let sim = SimDisk::new(SimConfig::new(seed));
        sim.create_dir_all(Path::new("/x/y")).unwrap();
        sim.write(Path::new("/x/y/f"), b"data", true).unwrap();
        sim.sync_dir(Path::new("/x/y")).unwrap();
        sim.crash();
        match sim.read(Path::new("/x/y/f")) {
            Ok(bytes) => assert_eq!(bytes, b"data"),
            Err(_) => gone += 1,
        }
    }
    assert!(gone > 0, "some crash loses the unsynced directories");
}
