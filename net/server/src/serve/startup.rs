//! When a shard starts answering clients.
//!
//! A shard binds its client listeners first, then answers nothing until
//! two things hold:
//! - its copy of the metadata image holds what the node had committed
//!   before it stopped, so a restarted broker never answers under an older
//!   image (client quotas, credentials or ACLs not yet replayed);
//! - on a node with the broker role, this process's own registration is in
//!   the image and unfenced: the active controller has seen it caught up
//!   with the metadata log.
//!
//! The second is Kafka's rule (its broker enables request processing only
//! once unfenced). Without it a restarted broker answered Metadata at once
//! from the image it had loaded from disk, listing itself and brokers that
//! were long gone as live, and a broker cut off from the quorum answered
//! as if nothing had changed. Meanwhile connections wait in the kernel's
//! accept queue, as they do at a starting Kafka broker; a client's request
//! times out and is retried. The wait has no limit unless
//! `server.max.startup.time.ms` sets one, past which the broker stops (a
//! failed start, so the operator sees it), as Kafka's does.

use api::connection::ShutdownSignal;
use futures::future::{select, Either};
use runtimes::Shard;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a shard waits for before it answers clients, published by the
/// metadata shard once it has opened the metadata log.
#[derive(Debug, Clone, Copy)]
pub(super) struct StartupTarget {
    /// The metadata offset this node had committed before it stopped (`-1`:
    /// none, or an observer, which has no log of its own).
    pub(super) offset: i64,
    /// This process's incarnation id, which its registration carries;
    /// `None` on a controller-only node, which never registers.
    pub(super) incarnation_id: Option<[u8; 16]>,
}

/// How often the wait looks at the image.
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// How often a long wait says what it still waits for.
const PROGRESS_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Waits until `shard` may answer clients (`Ok(true)`), or until the
/// shutdown signal (`Ok(false)`); an error once `server.max.startup.time.ms`
/// has passed.
pub(super) async fn wait_until_ready(
    shard: &Shard,
    target: &OnceLock<StartupTarget>,
    shutdown: ShutdownSignal,
) -> Result<bool, String> {
    let wait = std::pin::pin!(wait_for_target(shard, target));
    match select(wait, shutdown).await {
        Either::Left((outcome, _)) => outcome.map(|()| true),
        Either::Right(_) => Ok(false),
    }
}

/// Polls the image until it meets `target`, logging (on the metadata
/// shard) what is missing every ten seconds.
async fn wait_for_target(shard: &Shard, target: &OnceLock<StartupTarget>) -> Result<(), String> {
    let started = Instant::now();
    let deadline = (shard.config.cluster.max_startup_time_ms)
        .and_then(|limit_ms| started.checked_add(Duration::from_millis(limit_ms)));
    let mut next_log = started + PROGRESS_LOG_INTERVAL;
    loop {
        let missing = match target.get() {
            Some(target) => missing(shard, target),
            None => Some(String::from("the metadata log to be opened")),
        };
        let Some(missing) = missing else {
            return Ok(());
        };
        let now = Instant::now();
        if deadline.is_some_and(|deadline| now >= deadline) {
            return Err(format!(
                "not ready to serve clients within server.max.startup.time.ms: waited {} ms for {missing}",
                started.elapsed().as_millis()
            ));
        }
        if now >= next_log && shard.id == runtimes::cluster_runtime::METADATA_SHARD {
            tracing::warn!(
                waited_s = started.elapsed().as_secs(),
                "not serving clients yet: waiting for {missing}"
            );
            next_log = now + PROGRESS_LOG_INTERVAL;
        }
        glommio::timer::sleep(POLL_INTERVAL).await;
    }
}

/// What the shard's image still lacks to meet `target`, in words; `None`
/// when it meets it.
fn missing(shard: &Shard, target: &StartupTarget) -> Option<String> {
    let image = shard.runtime().view.image();
    let applied = image.last_applied_offset();
    if applied < target.offset {
        return Some(format!(
            "the metadata image to reach offset {} (at {applied})",
            target.offset
        ));
    }
    let incarnation_id = target.incarnation_id?;
    let broker_id = shard.config.broker_id;
    match image.broker(broker_id) {
        Some(registration) if registration.incarnation_id == incarnation_id => {
            registration.fenced.then(|| {
                format!(
                    "the active controller to unfence broker {broker_id} (registered with epoch {}, \
                     caught up once its metadata offset reaches {})",
                    registration.broker_epoch, registration.registered_at_offset
                )
            })
        }
        _ => Some(format!(
            "broker {broker_id} to be registered with the active controller (needs a quorum of \
             the controllers)"
        )),
    }
}
