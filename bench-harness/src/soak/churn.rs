//! The soak's two load shapes beside its steady producers: topic churn
//! and bursts of unpaced produce.
//!
//! Churn: every `--churn-every-s` a brand-new topic (`{prefix}-{tag}-churn-{n}`)
//! is created with CreateTopics, its leaders awaited, and one producer
//! (acks=all, `--churn-rate` msg/s) moves to it; the previous topic's
//! producer stops once the new one is ready, so one churn producer runs at
//! a time. This is the load under which rill once corrupted its heap:
//! partitions keep being created (and their first segments allocated)
//! while the rest of the broker is busy.
//!
//! Bursts: every `--burst-every-s`, for `--burst-s`, one more producer
//! sends to the stream topic as fast as its in-flight window allows (rate
//! 0 in [`crate::runner::producer`]), so buffers and queues see sudden
//! peaks rather than only the paced rate.
//!
//! The timing decisions are the pure functions [`churn_slot`],
//! [`until_slot`] and [`burst_active`]; [`run_churn`] and [`run_burst`]
//! are the tasks that follow them.

use super::{layout_of, ProducerKit, Tasks};
use crate::error::{BenchError, Result};
use crate::kafka::client::{
    connect_any, create_topics_with_configs, wait_for_leaders, TopicLayout,
};
use crate::kafka::connection::Connection;
use crate::runner::CONNECT_TIMEOUT;
use crate::stats::Recorder;
use crate::workload::Workload;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long creating one churn topic and seeing its leaders may take; a
/// broker slower than that counts an error and the schedule moves on.
const CHURN_SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest sleep of the churn and burst loops, so that they see the stop
/// flag soon.
const POLL: Duration = Duration::from_millis(100);
/// Producer ids of churn and burst producers: apart from the stream and
/// compacted topics' (which start at 0), since an id seeds the keys and
/// sizes and names the client.
const CHURN_ID_BASE: u32 = 1_000_000;
const BURST_ID_BASE: u32 = 2_000_000;

/// The name of the `n`th churn topic (from 0).
pub fn churn_topic_name(prefix: &str, tag: &str, n: u64) -> String {
    format!("{prefix}-{tag}-churn-{n}")
}

/// The churn schedule's slot at `elapsed`: slot `k` begins at
/// `k * every_s` (slot 0 at the start). `None` when churn is off.
pub fn churn_slot(elapsed: Duration, every_s: u64) -> Option<u64> {
    (every_s > 0).then(|| elapsed.as_secs() / every_s)
}

/// Time from `elapsed` until `slot` begins; zero when it already has.
pub fn until_slot(elapsed: Duration, every_s: u64, slot: u64) -> Duration {
    Duration::from_secs(every_s.saturating_mul(slot)).saturating_sub(elapsed)
}

/// Whether a burst runs at `elapsed`: bursts begin at `every_s`,
/// `2 * every_s`, ... and last `burst_s` (none at the very start, where
/// the paced load is still settling). Off when either is 0.
pub fn burst_active(elapsed: Duration, every_s: u64, burst_s: u64) -> bool {
    if every_s == 0 || burst_s == 0 {
        return false;
    }
    let (elapsed_s, every) = (elapsed.as_secs_f64(), every_s as f64);
    elapsed_s >= every && elapsed_s % every < burst_s as f64
}

/// The churn task's settings and shared counters.
pub(super) struct ChurnSpec {
    pub every_s: u64,
    pub topic_prefix: String,
    pub tag: String,
    /// Partitions, rate and acks (all) of every churn topic's producer.
    pub workload: Arc<Workload>,
    pub kit: ProducerKit,
    /// Acknowledged churn records and churn errors.
    pub recorder: Arc<Recorder>,
    /// Churn topics created so far.
    pub created: Arc<AtomicU64>,
    pub stop: Arc<AtomicBool>,
    /// The soak's start: the schedule is on its clock.
    pub started: Instant,
}

/// Creates a churn topic per slot and moves the churn producer to it,
/// until `stop`.
pub(super) async fn run_churn(spec: ChurnSpec) -> Result<()> {
    let mut current: Option<Tasks> = None;
    let mut connection: Option<Arc<Connection>> = None;
    let (mut next_slot, mut n) = (0u64, 0u64);
    while !spec.stop.load(Ordering::Relaxed) {
        let elapsed = spec.started.elapsed();
        let slot = churn_slot(elapsed, spec.every_s).unwrap_or(0);
        if slot < next_slot {
            let wait = until_slot(elapsed, spec.every_s, next_slot);
            tokio::time::sleep(wait.min(POLL)).await;
            continue;
        }
        // Slots missed while a creation was slow are skipped, not made
        // up: the schedule stays on the clock.
        next_slot = slot + 1;
        let name = churn_topic_name(&spec.topic_prefix, &spec.tag, n);
        n += 1;
        match create_churn_topic(&spec, &mut connection, &name).await {
            Ok(layout) => {
                spec.created.fetch_add(1, Ordering::Relaxed);
                // The old producer stops only now, so produce never
                // pauses while the broker creates the next topic.
                if let Some(old) = current.take() {
                    old.finish(&spec.recorder, "churn producer").await;
                }
                let mut tasks = Tasks::new();
                let id = CHURN_ID_BASE.wrapping_add(n as u32);
                let rate = spec.workload.producer_rate_msgs_per_s as f64;
                spec.kit.spawn(
                    &mut tasks,
                    id,
                    &layout,
                    &spec.workload,
                    rate,
                    &spec.recorder,
                );
                current = Some(tasks);
            }
            Err(error) => {
                spec.recorder
                    .record_error(format!("churn topic {name}: {error}"));
                // A fresh connection next time, in case this one broke.
                connection = None;
            }
        }
    }
    if let Some(old) = current {
        old.finish(&spec.recorder, "churn producer").await;
    }
    Ok(())
}

/// CreateTopics for one churn topic, then its leaders, bounded by
/// [`CHURN_SETUP_TIMEOUT`]. Reconnects when `connection` is gone.
async fn create_churn_topic(
    spec: &ChurnSpec,
    connection: &mut Option<Arc<Connection>>,
    name: &str,
) -> Result<TopicLayout> {
    let open = connection.as_ref().filter(|c| !c.is_closed()).cloned();
    let conn = match open {
        Some(conn) => conn,
        None => {
            let conn =
                connect_any(&spec.kit.bootstrap, &spec.kit.client_id, CONNECT_TIMEOUT).await?;
            *connection = Some(conn.clone());
            conn
        }
    };
    let names = [name.to_string()];
    let work = async {
        create_topics_with_configs(
            &conn,
            &spec.kit.client_id,
            &names,
            spec.workload.partitions_per_topic,
            spec.workload.replication_factor,
            &spec.workload.topic_configs(),
        )
        .await?;
        let metadata = wait_for_leaders(&conn, &names, CHURN_SETUP_TIMEOUT).await?;
        layout_of(&metadata, name)
    };
    tokio::time::timeout(CHURN_SETUP_TIMEOUT + Duration::from_secs(5), work)
        .await
        .map_err(|_| BenchError::Timeout(format!("creating churn topic {name}")))?
}

/// The burst task's settings.
pub(super) struct BurstSpec {
    pub every_s: u64,
    pub burst_s: u64,
    /// The stream topic: burst records are read by its consumers and
    /// counted with its records.
    pub layout: TopicLayout,
    /// The stream's workload with one producer and no rate limit.
    pub workload: Arc<Workload>,
    pub kit: ProducerKit,
    pub recorder: Arc<Recorder>,
    pub stop: Arc<AtomicBool>,
    pub started: Instant,
}

/// Starts an unpaced producer when a burst begins and stops it when the
/// burst ends, until `stop`.
pub(super) async fn run_burst(spec: BurstSpec) -> Result<()> {
    let mut current: Option<Tasks> = None;
    let mut bursts = 0u32;
    while !spec.stop.load(Ordering::Relaxed) {
        let active = burst_active(spec.started.elapsed(), spec.every_s, spec.burst_s);
        match (active, current.take()) {
            (true, None) => {
                let mut tasks = Tasks::new();
                let id = BURST_ID_BASE.wrapping_add(bursts);
                bursts = bursts.wrapping_add(1);
                spec.kit.spawn(
                    &mut tasks,
                    id,
                    &spec.layout,
                    &spec.workload,
                    0.0,
                    &spec.recorder,
                );
                current = Some(tasks);
            }
            (false, Some(tasks)) => tasks.finish(&spec.recorder, "burst producer").await,
            (_, running) => current = running,
        }
        tokio::time::sleep(POLL).await;
    }
    if let Some(tasks) = current {
        tasks.finish(&spec.recorder, "burst producer").await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
    }

    #[test]
    fn churn_topics_are_named_in_sequence() {
        assert_eq!(
            churn_topic_name("soak", "0badf00d", 0),
            "soak-0badf00d-churn-0"
        );
        assert_eq!(
            churn_topic_name("soak", "0badf00d", 12),
            "soak-0badf00d-churn-12"
        );
    }

    #[test]
    fn churn_slots_follow_the_clock() {
        assert_eq!(churn_slot(at(0.0), 5), Some(0));
        assert_eq!(churn_slot(at(4.99), 5), Some(0));
        assert_eq!(churn_slot(at(5.0), 5), Some(1));
        assert_eq!(churn_slot(at(17.0), 5), Some(3));
        assert_eq!(churn_slot(at(17.0), 0), None);
        assert_eq!(until_slot(at(3.0), 5, 1), at(2.0));
        assert_eq!(until_slot(at(7.0), 5, 1), Duration::ZERO);
        assert_eq!(until_slot(at(0.0), 5, 0), Duration::ZERO);
    }

    #[test]
    fn bursts_start_at_each_period_and_last_their_length() {
        assert!(!burst_active(at(0.5), 30, 5));
        assert!(!burst_active(at(29.9), 30, 5));
        assert!(burst_active(at(30.0), 30, 5));
        assert!(burst_active(at(34.9), 30, 5));
        assert!(!burst_active(at(35.0), 30, 5));
        assert!(burst_active(at(61.0), 30, 5));
        assert!(!burst_active(at(61.0), 0, 5));
        assert!(!burst_active(at(61.0), 30, 0));
    }
}
