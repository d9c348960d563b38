//! The nemesis: faults on a local cluster on a schedule. Every
//! `interval_ms` one fault is drawn from the enabled kinds, held for
//! `duration_ms`, then healed. One fault at a time, so a 3-node cluster
//! keeps a majority; each window is recorded with its start and end on the
//! run's clock. The kinds:
//! - `kill`: SIGKILL of a random node or of a random partition's leader,
//!   healed by a restart on the same ports and data dir;
//! - `pause`: SIGSTOP of one (a node that hangs without closing a
//!   socket), healed by SIGCONT;
//! - `partition`: one node (random, or a partition's leader: the leader
//!   isolated) cut off from every other node, the clients still reaching
//!   it (a minority of one, as Jepsen's `partition-random-node`);
//! - `bridge`: two nodes cut from each other while a third sees both
//!   (Jepsen's `partition-majorities-ring` on three nodes);
//! - `disk`: one node's data file system filled to the last block by a
//!   ballast file, healed by deleting it. The broker must stay up, refuse
//!   produce (KAFKA_STORAGE_ERROR) and take it again once space is back;
//! - `slowdisk`: one node's data file system slowed to 256 KiB/s and 10
//!   writes a second (cgroup v1's blkio throttle on its loop device),
//!   healed by lifting the throttle: a disk that answers, slowly;
//! - `clock`: one node's wall clock jumped an hour forward or back
//!   through its clock fault point (a debug build of rill), healed by
//!   jumping it back to the real time: its leases, sessions and timeouts
//!   must not lose or double anything.
//!
//! The two partitions need the cluster in network namespaces (`--netns`),
//! `disk` and `slowdisk` a file system per node (`--disk-mb`).

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
    /// One node cut off from the others (not from the clients).
    Partition,
    /// Two nodes cut from each other, a third seeing both.
    Bridge,
    /// One node's data disk full, then freed.
    Disk,
    /// One node's data disk slowed, then restored.
    SlowDisk,
    /// One node's wall clock jumped, then set right.
    Clock,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Bridge => "bridge",
            FaultKind::Disk => "disk",
            FaultKind::SlowDisk => "slowdisk",
            FaultKind::Clock => "clock",
        }
    }

    /// Whether the fault cuts links, which needs `--netns`.
    pub fn needs_netns(self) -> bool {
        matches!(self, FaultKind::Partition | FaultKind::Bridge)
    }

    /// Whether the fault fills or slows a disk, which needs `--disk-mb`.
    pub fn needs_disk(self) -> bool {
        matches!(self, FaultKind::Disk | FaultKind::SlowDisk)
    }
}

/// Parses `--faults`: a comma list of `kill`, `pause`, `partition`,
/// `bridge`, `disk`, `slowdisk`, `clock`; `none` or empty for no faults.
pub fn parse_faults(list: &str) -> Result<Vec<FaultKind>> {
    let mut kinds = Vec::new();
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match word {
            "kill" => kinds.push(FaultKind::Kill),
            "pause" => kinds.push(FaultKind::Pause),
            "partition" => kinds.push(FaultKind::Partition),
            "bridge" => kinds.push(FaultKind::Bridge),
            "disk" => kinds.push(FaultKind::Disk),
            "slowdisk" => kinds.push(FaultKind::SlowDisk),
            "clock" => kinds.push(FaultKind::Clock),
            "none" => {}
            other => {
                return Err(BenchError::Other(format!(
                    "--faults: unknown fault {other:?} (kill, pause, partition, bridge, disk, slowdisk, clock, none)"
                )))
            }
        }
    }
    Ok(kinds)
}

/// A clock fault's jump.
const HOUR_MS: i64 = 3_600_000;

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
        let kind = draw_kind(&schedule.kinds, rng);
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
        let fault = Fault {
            kind,
            node_id,
            peer: bridge_peer(&cluster.node_ids(), node_id, rng),
            clock_jump_ms: if rng.gen_bool(0.5) { HOUR_MS } else { -HOUR_MS },
        };
        let start_ms = recorder.now_ms();
        let injected = fault.apply(cluster, true);
        tokio::time::sleep(Duration::from_millis(schedule.duration_ms)).await;
        let healed = fault.apply(cluster, false);
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

/// The next fault's kind (the schedule's first draw from the run's seed:
/// a test that needs a kind to happen picks a seed that draws it first).
fn draw_kind(kinds: &[FaultKind], rng: &mut SmallRng) -> FaultKind {
    kinds[rng.gen_range(0..kinds.len())]
}

/// The node a `bridge` fault cuts `node_id` from: another node, leaving at
/// least one that sees both (none with fewer than three nodes).
fn bridge_peer(ids: &[i32], node_id: i32, rng: &mut SmallRng) -> Option<i32> {
    let others: Vec<i32> = ids.iter().copied().filter(|&n| n != node_id).collect();
    (others.len() >= 2).then(|| others[rng.gen_range(0..others.len())])
}

/// One drawn fault.
struct Fault {
    kind: FaultKind,
    node_id: i32,
    /// The far end of a `bridge` cut.
    peer: Option<i32>,
    /// How far a `clock` fault jumps the node's wall clock.
    clock_jump_ms: i64,
}

impl Fault {
    /// Injects the fault (`on`) or heals it.
    fn apply(&self, cluster: &mut LocalCluster, on: bool) -> Result<()> {
        let node_id = self.node_id;
        match (self.kind, on) {
            (FaultKind::Kill, true) => cluster.kill(node_id),
            (FaultKind::Kill, false) => cluster.restart(node_id),
            (FaultKind::Pause, true) => cluster.signal(node_id, libc::SIGSTOP).map(|_| ()),
            (FaultKind::Pause, false) => cluster.signal(node_id, libc::SIGCONT).map(|_| ()),
            (FaultKind::Partition, on) => network(cluster)?.isolate(node_id, on),
            (FaultKind::Bridge, on) => match self.peer {
                Some(peer) => network(cluster)?.cut(node_id, peer, on),
                None => Err(BenchError::Other(
                    "--faults bridge needs at least 3 brokers".into(),
                )),
            },
            (FaultKind::Disk, true) => disk(cluster, node_id)?.fill().map(|_| ()),
            (FaultKind::Disk, false) => disk(cluster, node_id)?.free(),
            (FaultKind::SlowDisk, on) => disk(cluster, node_id)?.slow(on),
            (FaultKind::Clock, true) => cluster.jump_clock(node_id, self.clock_jump_ms),
            (FaultKind::Clock, false) => cluster.jump_clock(node_id, 0),
        }
    }
}

fn disk(cluster: &LocalCluster, node_id: i32) -> Result<&crate::loopfs::LoopFs> {
    cluster.disk(node_id).ok_or_else(|| {
        BenchError::Other("--faults disk and slowdisk need --disk-mb (as root)".into())
    })
}

fn network(cluster: &LocalCluster) -> Result<&crate::netns::Network> {
    cluster.network().ok_or_else(|| {
        BenchError::Other("--faults partition and bridge need --netns (as root)".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn faults_parse_and_reject_unknown_names() {
        assert_eq!(
            parse_faults("kill, pause").unwrap(),
            vec![FaultKind::Kill, FaultKind::Pause]
        );
        assert_eq!(parse_faults("none").unwrap(), vec![]);
        assert_eq!(parse_faults("").unwrap(), vec![]);
        assert_eq!(
            parse_faults("partition,bridge").unwrap(),
            vec![FaultKind::Partition, FaultKind::Bridge]
        );
        assert_eq!(
            parse_faults("kill,disk").unwrap(),
            vec![FaultKind::Kill, FaultKind::Disk]
        );
        assert!(FaultKind::Disk.needs_disk() && !FaultKind::Disk.needs_netns());
        assert_eq!(parse_faults("slowdisk").unwrap(), vec![FaultKind::SlowDisk]);
        assert!(FaultKind::SlowDisk.needs_disk());
        assert_eq!(parse_faults("clock").unwrap(), vec![FaultKind::Clock]);
        assert!(!FaultKind::Clock.needs_disk() && !FaultKind::Clock.needs_netns());
        assert!(!FaultKind::Kill.needs_disk());
        assert!(parse_faults("flood").is_err());
    }

    #[test]
    fn the_verify_smoke_seed_draws_a_disk_first() {
        // tests/bench/verify_rill.rs runs `--faults kill,disk --seed 1`
        // and asserts that a disk was filled: the first fault is.
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(
            draw_kind(&[FaultKind::Kill, FaultKind::Disk], &mut rng),
            FaultKind::Disk
        );
    }

    #[test]
    fn a_bridge_leaves_a_node_that_sees_both_ends() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..50 {
            let peer = bridge_peer(&[1, 2, 3], 2, &mut rng).unwrap();
            assert!(peer == 1 || peer == 3);
        }
        assert_eq!(bridge_peer(&[1, 2], 1, &mut rng), None);
    }
}
