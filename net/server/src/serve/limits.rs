//! The process limits a broker raises at start (locked memory, open
//! descriptors), transparent huge pages turned off for it, and the
//! connection cap the descriptor limit sets.

use kernel::config::BrokerConfig;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Raises the locked-memory and open-descriptor limits, and caps
/// `max.connections` by the descriptors there are (logged when it bites).
pub(super) fn raise_process_limits(config: &BrokerConfig) {
    raise_memlock_limit();
    disable_transparent_huge_pages();
    let open_files = raise_open_files_limit();
    DESCRIPTOR_CONNECTION_CAP.store(descriptor_connection_cap(open_files), Ordering::Relaxed);
    let cap = effective_max_connections(config.max_connections);
    if cap < config.max_connections {
        tracing::info!(
            max_connections = cap,
            rlimit_nofile = open_files,
            "connections capped by the descriptor limit (2 per connection, a quarter \
             kept for log files): raise `ulimit -n` for more"
        );
    }
}

/// Turns transparent huge pages off for this process, whatever the host's
/// `transparent_hugepage/enabled` says. Request frames are allocated and
/// freed at the produce rate, and a fresh huge page is a fault that zeroes
/// 2 MiB: with one librdkafka producer that zeroing was most of the
/// broker's CPU (docs/benchmarks/per-request-costs.md). mimalloc's
/// `no_thp` only stops it asking for huge pages, which is enough under
/// `madvise` but not under `always`.
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments and touches no
    // memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "could not turn transparent huge pages off for the broker"
        );
    }
}

/// Raises RLIMIT_MEMLOCK as far as allowed: glommio locks its I/O memory, and
/// the 8 MiB default is too small for many shards. Works as root; otherwise
/// the soft limit goes up to the hard one and the small per-shard
/// `rill.io_memory_bytes` keeps us inside it.
fn raise_memlock_limit() {
    let wanted = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit/getrlimit only read/write the struct passed.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &wanted) == 0 {
            return;
        }
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut current) == 0 {
            current.rlim_cur = current.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_MEMLOCK, &current);
            tracing::debug!(
                limit_bytes = current.rlim_max,
                "RLIMIT_MEMLOCK raised to the hard limit"
            );
        }
    }
}

/// Raises the soft limit on open descriptors to the hard one (as Kafka's
/// packaging and Go's runtime do): every connection and every segment file
/// holds one, and the common soft default of 1024 would refuse clients long
/// before `max.connections`.
fn raise_open_files_limit() -> u64 {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut current) != 0 {
            return u64::MAX;
        }
        if current.rlim_cur >= current.rlim_max {
            return current.rlim_cur;
        }
        let soft = current.rlim_cur;
        current.rlim_cur = current.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &current) == 0 {
            tracing::debug!(
                from = soft,
                to = current.rlim_max,
                "RLIMIT_NOFILE raised to the hard limit"
            );
            return current.rlim_max;
        }
        soft
    }
}

/// Connections the descriptor limit allows: a flood of connections must
/// never take the descriptors the logs need (an `EMFILE` on a segment
/// write takes its partition offline). A plaintext connection holds two
/// descriptors (its reader and its writer's duplicate); a quarter of the
/// limit, at least 1,024, stays for segment and index files.
fn descriptor_connection_cap(open_files_limit: u64) -> usize {
    let reserve = (open_files_limit / 4).max(1024);
    let cap = open_files_limit.saturating_sub(reserve) / 2;
    usize::try_from(cap).unwrap_or(usize::MAX).max(16)
}

/// Set once at start from RLIMIT_NOFILE; `usize::MAX` until then.
static DESCRIPTOR_CONNECTION_CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// `max.connections`, or fewer when the descriptor limit says so.
pub(super) fn effective_max_connections(configured: usize) -> usize {
    configured.min(DESCRIPTOR_CONNECTION_CAP.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_limit_caps_connections_and_keeps_a_reserve() {
        // 20,000 descriptors: 5,000 kept, 7,500 connections of two each.
        assert_eq!(descriptor_connection_cap(20_000), 7_500);
        // A small limit still keeps 1,024 for files.
        assert_eq!(descriptor_connection_cap(2_048), 512);
        assert_eq!(descriptor_connection_cap(1_024), 16);
        assert!(descriptor_connection_cap(u64::MAX) > 1 << 40);
    }
}
