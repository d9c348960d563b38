//! Telling a supervisor when the broker serves: once every shard answers
//! clients (caught up and unfenced, see `startup`), `rill serve` logs it,
//! sets `rill_broker_state` to running and, when systemd started it with
//! `Type=notify`, sends `READY=1` (sd_notify), so `systemctl start` returns
//! only once clients are answered. A clean stop sends `STOPPING=1`.
//!
//! Without `NOTIFY_SOCKET` in the environment the notifications are no-ops.

use kernel::broker_state::{self, BrokerState};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Counts the shards that serve; the last one to start tells the world.
#[derive(Debug)]
pub(super) struct Readiness {
    shards: usize,
    serving: AtomicUsize,
    stopping: AtomicBool,
}

impl Readiness {
    /// Readiness of a broker of `shards` shards, none serving yet.
    pub(super) fn new(shards: usize) -> Self {
        Readiness {
            shards,
            serving: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
        }
    }

    /// A shard answers clients now; the last one notifies READY.
    pub(super) fn shard_serving(&self) {
        if self.serving.fetch_add(1, Ordering::AcqRel) + 1 == self.shards {
            tracing::info!(shards = self.shards, "serving clients");
            broker_state::set(BrokerState::Running);
            notify(&[sd_notify::NotifyState::Ready]);
        }
    }

    /// The broker begins a clean stop (notified once).
    pub(super) fn stopping(&self) {
        if !self.stopping.swap(true, Ordering::AcqRel) {
            broker_state::set(BrokerState::PendingControlledShutdown);
            notify(&[sd_notify::NotifyState::Stopping]);
        }
    }
}

/// Sends `states` to systemd when it asked for them; a failure is logged,
/// never fatal (the broker serves either way, and systemd's start timeout
/// reports a unit that never became ready).
fn notify(states: &[sd_notify::NotifyState]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}
