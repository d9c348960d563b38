//! Is a file range in the page cache? `cachestat(2)` (Linux 6.5) answers
//! without reading it, so the splice path can send a cached range with a
//! plain `sendfile(2)` on the shard's thread instead of handing two splices
//! to io_uring's io-wq workers.
//!
//! Why: io_uring runs every splice on a worker thread; each one costs a
//! hand-off, a wake-up of the worker and one of the shard. Measured on a
//! 2-core VM (consumers reading 5 GB from the page cache): splice 0.51–0.61
//! broker CPU-s per GB consumed, sendfile 0.34, the same throughput. A range
//! that is not (all) cached still goes by splice: a cold `sendfile` would
//! read the disk on the shard's thread. A page evicted between the check and
//! the send costs that one read; nothing else changes.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// `cachestat(2)`'s number: 451 on every architecture (new system calls
/// share one table since 5.x); the libc crate names it only for some.
const SYS_CACHESTAT: libc::c_long = 451;
/// The page size cachestat counts in.
const PAGE_BYTES: u64 = 4096;

/// Cleared the first time the kernel lacks the call (ENOSYS) or refuses it
/// for this kind of file: every later check answers "not cached" at once.
static SUPPORTED: AtomicBool = AtomicBool::new(true);

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Whether every page of `[position, position + length)` of `file` is in
/// the page cache. `false` when unknown (old kernel, any error).
pub(super) fn fully_cached(file: RawFd, position: u64, length: usize) -> bool {
    if length == 0 || !SUPPORTED.load(Ordering::Relaxed) {
        return length == 0;
    }
    let first_page = position / PAGE_BYTES;
    let end_page = (position + length as u64).div_ceil(PAGE_BYTES);
    let range = CachestatRange {
        off: first_page * PAGE_BYTES,
        len: (end_page - first_page) * PAGE_BYTES,
    };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers are to live, properly laid out structs that the
    // call reads (`range`) and writes (`stat`) only during the call.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        let error = std::io::Error::last_os_error();
        if matches!(
            error.raw_os_error(),
            Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) | Some(libc::EPERM)
        ) {
            SUPPORTED.store(false, Ordering::Relaxed);
        }
        return false;
    }
    stat.nr_cache >= end_page - first_page
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// Records the skip in the workspace's skip ledger (see
    /// `rill_tests::SKIP_LEDGER`), which CI's summary counts.
    fn record_skip(reason: &str) {
        let ledger = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/test-skips.log");
        let test = std::thread::current().name().unwrap_or("?").to_string();
        eprintln!("skipped: {test}: {reason}");
        let line = format!("{test}\t{reason}\n");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ledger)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = appended {
            eprintln!("cannot record the skip in {ledger}: {e}");
        }
    }

    #[test]
    fn a_range_just_written_through_the_cache_is_cached_and_a_dropped_one_is_not() {
        // On the disk under target/, not /tmp: tmpfs pages cannot be dropped.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        std::fs::create_dir_all(&root).expect("target dir");
        let dir = tempfile::tempdir_in(root).expect("temp dir");
        let path = dir.path().join("segment");
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(&vec![7u8; 64 << 10]).expect("write");
        file.sync_all().expect("sync");
        let fd = file.as_raw_fd();
        if !fully_cached(fd, 0, 64 << 10) {
            // A kernel without cachestat (before 6.5) answers "not cached"
            // for everything, and splice then does all the sends.
            assert!(
                !SUPPORTED.load(Ordering::Relaxed),
                "written pages are cached"
            );
            record_skip("no cachestat(2) on this kernel (before 6.5)");
            return;
        }
        assert!(fully_cached(fd, 100, 5000));
        // Dropped from the cache (clean pages after the sync): not cached.
        // SAFETY: plain advice call on an open descriptor.
        let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        assert!(!fully_cached(fd, 0, 64 << 10));
        // Past the end of the file there are no pages.
        assert!(!fully_cached(fd, 1 << 20, 4096));
        assert!(fully_cached(fd, 0, 0));
    }
}
