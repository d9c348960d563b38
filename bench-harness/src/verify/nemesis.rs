//! The nemesis: faults on a local cluster on a schedule. Every
//! `interval_ms` one fault is drawn from the enabled kinds (SIGKILL or
//! SIGSTOP, of a random node or of a random partition's leader), held for
//! `duration_ms`, then healed (the killed node restarted on its ports and
//! data dir, the stopped one sent SIGCONT). One fault at a time, so a
//! 3-node cluster keeps a majority; each window is recorded with its start
//! and end on the run's clock.

use super::history::FaultWindow;
use super::recorder::Recorder;
use crate::cluster::LocalCluster;
use crate::error::{BenchError, Result};
use crate::kafka::client::topic_layout_from_any;
use rand::rngs::SmallRng;
use rand::Rng;
use std::time::Duration;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL, then a restart.
    Kill,
    /// SIGSTOP, then SIGCONT: a node that hangs without closing a socket.
    Pause,
}

impl FaultKind {
    fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
        }
    }
}

/// Parses `--faults`: a comma list of `kill`, `pause`; `none` or empty
/// for no faults.
pub fn parse_faults(list: &str) -> Result<Vec<FaultKind>> {
    let mut kinds = Vec::new();
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match word {
            "kill" => kinds.push(FaultKind::Kill),
            "pause" => kinds.push(FaultKind::Pause),
            "none" => {}
            other => {
                return Err(BenchError::Other(format!(
                    "--faults: unknown fault {other:?} (kill, pause, none)"
                )))
            }
        }
    }
    Ok(kinds)
}

/// The schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub kinds: Vec<FaultKind>,
    pub interval_ms: u64,
    pub duration_ms: u64,
    /// Faults start only before this time on the run's clock.
    pub until_ms: u64,
}

/// The leader of a random partition of `topic`, from any live broker;
/// `None` when no broker answers or the partition has no leader.
async fn random_leader(
    cluster: &LocalCluster,
    topic: &str,
    rng: &mut SmallRng,
) -> Option<(i32, i32)> {
    let layout =
        topic_layout_from_any(&cluster.bootstrap(), "rill-bench-verify-nemesis", topic).await?;
    if layout.leaders.is_empty() {
        return None;
    }
    let partition = rng.gen_range(0..layout.leaders.len());
    let leader = layout.leaders[partition];
    cluster
        .is_running(leader)
        .then_some((leader, partition as i32))
}

/// No faults: waits out the schedule's time.
pub async fn run_without_cluster(schedule: &Schedule, recorder: &Recorder) -> Vec<FaultWindow> {
    let left_ms = schedule.until_ms.saturating_sub(recorder.now_ms());
    tokio::time::sleep(Duration::from_millis(left_ms)).await;
    Vec::new()
}

/// Runs the schedule; each fault is healed before the next begins, and
/// before this returns (also on an error).
pub async fn run(
    cluster: &mut LocalCluster,
    topic: &str,
    schedule: &Schedule,
    recorder: &Recorder,
    rng: &mut SmallRng,
) -> Result<Vec<FaultWindow>> {
    let mut windows = Vec::new();
    if schedule.kinds.is_empty() {
        return Ok(run_without_cluster(schedule, recorder).await);
    }
    loop {
        let left_ms = schedule.until_ms.saturating_sub(recorder.now_ms());
        tokio::time::sleep(Duration::from_millis(schedule.interval_ms.min(left_ms))).await;
        if recorder.now_ms() >= schedule.until_ms {
            return Ok(windows);
        }
        let kind = schedule.kinds[rng.gen_range(0..schedule.kinds.len())];
        let at_leader = rng.gen_bool(0.5);
        let leader = match at_leader {
            true => random_leader(cluster, topic, rng).await,
            false => None,
        };
        let (target, node_id, partition) = match leader {
            Some((node_id, partition)) => ("leader", node_id, Some(partition)),
            None => {
                let ids = cluster.node_ids();
                ("random", ids[rng.gen_range(0..ids.len())], None)
            }
        };
        let start_ms = recorder.now_ms();
        let injected = inject(cluster, kind, node_id);
        tokio::time::sleep(Duration::from_millis(schedule.duration_ms)).await;
        let healed = heal(cluster, kind, node_id);
        let end_ms = recorder.now_ms();
        injected?;
        healed?;
        // A restarted broker rejoins before the next fault is drawn, so
        // one fault at a time stays true for the brokers' recovery too.
        cluster.wait_ready().await?;
        windows.push(FaultWindow {
            kind: kind.name().into(),
            target: target.into(),
            node_id,
            partition,
            start_ms,
            end_ms,
        });
    }
}

fn inject(cluster: &mut LocalCluster, kind: FaultKind, node_id: i32) -> Result<()> {
    match kind {
        FaultKind::Kill => cluster.kill(node_id),
        FaultKind::Pause => cluster.signal(node_id, libc::SIGSTOP).map(|_| ()),
    }
}

fn heal(cluster: &mut LocalCluster, kind: FaultKind, node_id: i32) -> Result<()> {
    match kind {
        FaultKind::Kill => cluster.restart(node_id),
        FaultKind::Pause => cluster.signal(node_id, libc::SIGCONT).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_reject_unknown_names() {
        assert_eq!(
            parse_faults("kill, pause").unwrap(),
            vec![FaultKind::Kill, FaultKind::Pause]
        );
        assert_eq!(parse_faults("none").unwrap(), vec![]);
        assert_eq!(parse_faults("").unwrap(), vec![]);
        assert!(parse_faults("partition").is_err());
    }
}
