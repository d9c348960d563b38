//! Local rill clusters for measurements: `N` `rill serve` processes on
//! loopback, node ids `1..=N`, each a broker and a metadata voter with one
//! shard, on free ports, with its data dir and log under one directory.
//! A node can be SIGKILLed and restarted on the same ports and data dir,
//! which is what the failover measurement needs. With `--disk-mb` each
//! node's data dir is on a small file system of its own ([`crate::loopfs`]),
//! which the verify nemesis can fill.
//!
//! Children get `PR_SET_PDEATHSIG` = SIGKILL, so a harness that dies (or is
//! interrupted) does not leave brokers behind; they are spawned only from
//! the thread that runs `main` (the future given to `block_on`), because
//! the signal fires when the *spawning thread* exits.

use crate::error::{BenchError, Result};
use crate::kafka::client::fetch_metadata;
use crate::kafka::connection::Connection;
use crate::loopfs::LoopFs;
use crate::netns::Network;
use clap::Args;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The broker's clock fault point (`kernel::fault_clock` in rill).
const FAULT_CLOCK: &str = "RILL_FAULT_CLOCK";
/// How long a graceful stop (SIGTERM) may take before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long brokers may take to form the cluster at start.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the brokers come from and how they are configured.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Number of brokers (each also a metadata voter).
    #[arg(long, default_value_t = 3)]
    pub brokers: u32,
    /// The rill binary.
    #[arg(long, default_value = "target/release/rill")]
    pub rill: PathBuf,
    /// Data dirs (`node-N/`), logs (`node-N.log`), the settings files
    /// (`rill-node-N.toml`) and the `bootstrap`/`pids`/`admin` files go
    /// here. A start removes the `node-N/` dirs an earlier run left: each
    /// start picks fresh ports, which an earlier quorum's state would not
    /// match.
    #[arg(long, default_value = "/tmp/rill-bench-cluster")]
    pub dir: PathBuf,
    /// broker.session.timeout.ms: how long a silent broker keeps its
    /// leaderships (rill's default is 2500).
    #[arg(long)]
    pub session_timeout_ms: Option<u32>,
    /// broker.heartbeat.interval.ms (rill's default is 500).
    #[arg(long)]
    pub heartbeat_interval_ms: Option<u32>,
    /// Runs each broker in a network namespace of its own (root only), so
    /// that the nemesis can cut brokers off from each other
    /// ([`crate::netns`]).
    #[arg(long)]
    pub netns: bool,
    /// Puts each broker's data dir on a loop-mounted ext4 file system of
    /// this many MiB (root only), so that the nemesis can fill one broker's
    /// disk (`rill-bench verify --faults disk`).
    #[arg(long)]
    pub disk_mb: Option<u64>,
    /// Puts node N in rack `rack-N`, with Kafka's rack-aware replica
    /// selector: a consumer with a `client.rack` reads from the follower
    /// in its rack (KIP-392).
    #[arg(long)]
    pub racks: bool,
    /// Starts the brokers with `RILL_FAULT_CLOCK=1`, so that the nemesis
    /// can jump their wall clocks (`rill-bench verify --faults clock`; a
    /// debug build of rill, which alone has the point). Set by `verify`.
    #[arg(skip)]
    pub fault_clock: bool,
}

/// One node's addresses and paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub node_id: i32,
    pub kafka_addr: String,
    pub admin_addr: String,
    pub controller_addr: String,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
}

struct Node {
    spec: NodeSpec,
    child: Option<Child>,
}

/// A running local cluster; dropping it stops every broker (then removes
/// its namespaces and unmounts its file systems, if any: the fields drop
/// after [`LocalCluster::stop`] has run).
pub struct LocalCluster {
    rill: PathBuf,
    voters: String,
    /// Each node's settings file, if it has one, by node id.
    configs: BTreeMap<i32, PathBuf>,
    nodes: Vec<Node>,
    network: Option<Network>,
    /// Each node's own file system (`--disk-mb`), by node id.
    disks: Vec<(i32, LoopFs)>,
    /// The brokers run with `RILL_FAULT_CLOCK=1`.
    fault_clock: bool,
}

/// `1@host:port,2@host:port,...`, the `--controller-quorum-voters` value.
pub fn voters_list(nodes: &[NodeSpec]) -> String {
    nodes
        .iter()
        .map(|n| format!("{}@{}", n.node_id, n.controller_addr))
        .collect::<Vec<_>>()
        .join(",")
}

/// The rill TOML config carrying the timing settings, or `None` when none
/// is set (rill's defaults apply).
pub fn config_toml(
    session_timeout_ms: Option<u32>,
    heartbeat_interval_ms: Option<u32>,
) -> Option<String> {
    let mut text = String::new();
    if let Some(ms) = session_timeout_ms {
        text.push_str(&format!("\"broker.session.timeout.ms\" = {ms}\n"));
    }
    if let Some(ms) = heartbeat_interval_ms {
        text.push_str(&format!("\"broker.heartbeat.interval.ms\" = {ms}\n"));
    }
    (!text.is_empty()).then_some(text)
}

/// What `--racks` adds to node `node_id`'s settings.
pub fn rack_toml(node_id: i32) -> String {
    format!(
        "\"broker.rack\" = \"rack-{node_id}\"\n\
         \"replica.selector.class\" = \"org.apache.kafka.common.replica.RackAwareReplicaSelector\"\n"
    )
}

/// Writes each node's settings file (the timings, and its rack with
/// `--racks`) into `dir`; nodes with nothing to set get none.
fn write_configs(args: &ClusterArgs, ids: &[i32]) -> Result<BTreeMap<i32, PathBuf>> {
    let shared = config_toml(args.session_timeout_ms, args.heartbeat_interval_ms);
    let mut configs = BTreeMap::new();
    for &id in ids {
        let mut text = shared.clone().unwrap_or_default();
        if args.racks {
            text.push_str(&rack_toml(id));
        }
        if !text.is_empty() {
            let path = args.dir.join(format!("rill-node-{id}.toml"));
            std::fs::write(&path, text)?;
            configs.insert(id, path);
        }
    }
    Ok(configs)
}

/// Each node's addresses and paths: on loopback, on free ports; or in its
/// namespace, on its own address with the same ports for every node.
fn node_specs(dir: &Path, ids: &[i32], network: Option<&Network>) -> Result<Vec<NodeSpec>> {
    let ports = crate::ports::free_ports(3 * ids.len())?;
    Ok(ids
        .iter()
        .enumerate()
        .map(|(i, &node_id)| {
            let (host, ports) = match network {
                Some(network) => (network.address(node_id), [9092, 9093, 9094]),
                None => (
                    "127.0.0.1".to_string(),
                    [ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]],
                ),
            };
            NodeSpec {
                node_id,
                kafka_addr: format!("{host}:{}", ports[0]),
                admin_addr: format!("{host}:{}", ports[1]),
                controller_addr: format!("{host}:{}", ports[2]),
                data_dir: dir.join(format!("node-{node_id}")),
                log_path: dir.join(format!("node-{node_id}.log")),
            }
        })
        .collect())
}

/// Removes the data dirs an earlier run left in the cluster's dir. Each
/// start picks fresh ports, and an earlier quorum's state (its voters'
/// addresses, the brokers it registered) does not match them: reused, the
/// nodes came up without a leader, or with a controller that knew no live
/// broker, and the run failed at its first CreateTopics.
fn clear_earlier_runs(specs: &[NodeSpec]) -> Result<()> {
    for spec in specs.iter().filter(|spec| spec.data_dir.exists()) {
        eprintln!(
            "rill-bench: removing an earlier run's data in {}",
            spec.data_dir.display()
        );
        std::fs::remove_dir_all(&spec.data_dir).map_err(|e| {
            BenchError::Other(format!("cannot remove {}: {e}", spec.data_dir.display()))
        })?;
    }
    Ok(())
}

/// A file system for each node, `node-N.img` mounted on `node-N-fs/`, and
/// each spec's data dir moved onto its own.
fn mount_disks(dir: &Path, specs: &mut [NodeSpec], size_mib: u64) -> Result<Vec<(i32, LoopFs)>> {
    let mut disks = Vec::with_capacity(specs.len());
    for spec in specs.iter_mut() {
        let image = dir.join(format!("node-{}.img", spec.node_id));
        let mount_point = dir.join(format!("node-{}-fs", spec.node_id));
        let disk = LoopFs::mount(&image, &mount_point, size_mib)?;
        spec.data_dir = disk.data_dir();
        disks.push((spec.node_id, disk));
    }
    Ok(disks)
}

impl LocalCluster {
    /// Chooses ports, writes the config and starts every broker; see
    /// [`LocalCluster::wait_ready`] for when they form a cluster.
    pub fn start(args: &ClusterArgs) -> Result<LocalCluster> {
        if args.brokers == 0 {
            return Err(BenchError::Other("--brokers must be at least 1".into()));
        }
        if !args.rill.is_file() {
            return Err(BenchError::Other(format!(
                "rill binary {} not found (cargo build --release --bin rill)",
                args.rill.display()
            )));
        }
        std::fs::create_dir_all(&args.dir)?;
        let ids: Vec<i32> = (1..=args.brokers as i32).collect();
        let network = match args.netns {
            true => Some(Network::create(&ids)?),
            false => None,
        };
        let mut specs = node_specs(&args.dir, &ids, network.as_ref())?;
        clear_earlier_runs(&specs)?;
        let disks = match args.disk_mb {
            Some(size_mib) => mount_disks(&args.dir, &mut specs, size_mib)?,
            None => Vec::new(),
        };
        let configs = write_configs(args, &ids)?;
        let mut cluster = LocalCluster {
            rill: args.rill.clone(),
            voters: voters_list(&specs),
            configs,
            nodes: specs
                .into_iter()
                .map(|spec| Node { spec, child: None })
                .collect(),
            network,
            disks,
            fault_clock: args.fault_clock,
        };
        for node_id in cluster.node_ids() {
            cluster.spawn(node_id)?;
        }
        cluster.write_files(&args.dir)?;
        Ok(cluster)
    }

    /// Node ids, `1..=N`.
    pub fn node_ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.spec.node_id).collect()
    }

    /// Jumps node `node_id`'s wall clock `offset_ms` away from the
    /// system's (0: back to it), through its clock fault point: the file
    /// `rill-fault-clock-offset-ms` in its data dir, which the broker reads
    /// every 50 ms. Refused unless the cluster started with `fault_clock`
    /// and the broker said it follows the file (a release build does not).
    pub fn jump_clock(&self, node_id: i32, offset_ms: i64) -> Result<()> {
        let node = self.node(node_id)?;
        let log = std::fs::read_to_string(&node.spec.log_path).unwrap_or_default();
        if !self.fault_clock || !log.contains("the wall clock follows") {
            return Err(BenchError::Other(format!(
                "--faults clock: broker {node_id} does not follow a clock fault file: it needs a debug build of rill (--rill target/debug/rill)"
            )));
        }
        let file = node.spec.data_dir.join("rill-fault-clock-offset-ms");
        match offset_ms {
            0 => match std::fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            },
            _ => Ok(std::fs::write(&file, offset_ms.to_string())?),
        }
    }

    /// Every node's spec.
    pub fn specs(&self) -> Vec<NodeSpec> {
        self.nodes.iter().map(|n| n.spec.clone()).collect()
    }

    /// The bootstrap list of every broker.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.spec.kafka_addr.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Process ids of the running brokers.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter_map(|n| n.child.as_ref().map(Child::id))
            .collect()
    }

    /// `bootstrap`, `pids` and `admin` files in `dir`, for scripts.
    fn write_files(&self, dir: &Path) -> Result<()> {
        std::fs::write(dir.join("bootstrap"), format!("{}\n", self.bootstrap()))?;
        let pids: Vec<String> = self.pids().iter().map(u32::to_string).collect();
        std::fs::write(dir.join("pids"), format!("{}\n", pids.join(" ")))?;
        let admin: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.spec.admin_addr.clone())
            .collect();
        std::fs::write(dir.join("admin"), format!("{}\n", admin.join(" ")))?;
        Ok(())
    }

    fn node(&self, node_id: i32) -> Result<&Node> {
        self.nodes
            .iter()
            .find(|n| n.spec.node_id == node_id)
            .ok_or_else(|| BenchError::Other(format!("no node {node_id} in this cluster")))
    }

    fn node_mut(&mut self, node_id: i32) -> Result<&mut Node> {
        self.nodes
            .iter_mut()
            .find(|n| n.spec.node_id == node_id)
            .ok_or_else(|| BenchError::Other(format!("no node {node_id} in this cluster")))
    }

    /// `node_id`'s own file system, when the cluster has them
    /// (`--disk-mb`).
    pub fn disk(&self, node_id: i32) -> Option<&LoopFs> {
        self.disks
            .iter()
            .find(|(id, _)| *id == node_id)
            .map(|(_, disk)| disk)
    }

    /// The cluster's namespaces, when it runs in them (`--netns`).
    pub fn network(&self) -> Option<&Network> {
        self.network.as_ref()
    }

    /// The command that runs rill for `node_id`: the binary itself, or
    /// `ip netns exec` of it (which execs it in place: the child's pid is
    /// rill's, for signals and the parent-death signal alike).
    fn rill_command(&self, node_id: i32) -> Command {
        match &self.network {
            Some(network) => {
                let mut command = Command::new("ip");
                command
                    .args(["netns", "exec", &network.ns(node_id)])
                    .arg(&self.rill);
                command
            }
            None => Command::new(&self.rill),
        }
    }

    fn spawn(&mut self, node_id: i32) -> Result<()> {
        let voters = self.voters.clone();
        let config = self.configs.get(&node_id).cloned();
        let fault_clock = self.fault_clock;
        let mut command = self.rill_command(node_id);
        let node = self.node_mut(node_id)?;
        std::fs::create_dir_all(&node.spec.data_dir)?;
        let log: File = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.spec.log_path)?;
        command
            .arg("serve")
            .arg("--node-id")
            .arg(node_id.to_string())
            .arg("--controller-quorum-voters")
            .arg(&voters)
            .arg("--listen")
            .arg(&node.spec.kafka_addr)
            .arg("--admin-listen")
            .arg(&node.spec.admin_addr)
            .arg("--data-dir")
            .arg(&node.spec.data_dir)
            .arg("--cores")
            .arg("1");
        if let Some(config) = &config {
            command.arg("--config").arg(config);
        }
        if fault_clock {
            command.env(FAULT_CLOCK, "1");
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        // SAFETY: prctl is async-signal-safe and touches no memory of ours;
        // it runs in the forked child before exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        node.child = Some(command.spawn()?);
        Ok(())
    }

    /// Waits until every running broker answers Metadata listing `expected`
    /// brokers.
    pub async fn wait_brokers(&mut self, expected: usize, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let addrs: Vec<(i32, String)> = self
            .nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| (n.spec.node_id, n.spec.kafka_addr.clone()))
            .collect();
        for (node_id, addr) in addrs {
            loop {
                if let Some(status) = self.exited(node_id)? {
                    return Err(BenchError::Other(format!(
                        "broker {node_id} exited ({status}) while starting; see its log"
                    )));
                }
                if brokers_listed(&addr).await == Some(expected) {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(BenchError::Timeout(format!(
                        "broker {node_id} at {addr} listing {expected} brokers"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// Waits until every broker lists all of them.
    pub async fn wait_ready(&mut self) -> Result<()> {
        self.wait_brokers(self.nodes.len(), READY_TIMEOUT).await
    }

    /// The exit status of `node_id` if its process has ended.
    fn exited(&mut self, node_id: i32) -> Result<Option<std::process::ExitStatus>> {
        let node = self.node_mut(node_id)?;
        match node.child.as_mut() {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    /// SIGKILLs `node_id` and reaps it.
    pub fn kill(&mut self, node_id: i32) -> Result<()> {
        let node = self.node_mut(node_id)?;
        if let Some(mut child) = node.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to `node_id` if it is running;
    /// `false` when it is not.
    pub fn signal(&mut self, node_id: i32, signal: libc::c_int) -> Result<bool> {
        let node = self.node_mut(node_id)?;
        let Some(child) = &node.child else {
            return Ok(false);
        };
        // SAFETY: kill(2) on our own child's pid, which we have not reaped.
        if unsafe { libc::kill(child.id() as libc::pid_t, signal) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(true)
    }

    /// Whether `node_id` has a process (started and not killed).
    pub fn is_running(&self, node_id: i32) -> bool {
        self.nodes
            .iter()
            .any(|n| n.spec.node_id == node_id && n.child.is_some())
    }

    /// Starts `node_id` again, same ports and data dir.
    pub fn restart(&mut self, node_id: i32) -> Result<()> {
        self.kill(node_id)?;
        self.spawn(node_id)
    }

    /// SIGTERM to every broker, SIGKILL to any still running after
    /// [`STOP_GRACE`].
    pub fn stop(&mut self) {
        for node in &self.nodes {
            if let Some(child) = &node.child {
                // SAFETY: kill(2) on our own child's pid.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                while Instant::now() < deadline {
                    if matches!(child.try_wait(), Ok(Some(_))) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                if !matches!(child.try_wait(), Ok(Some(_))) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How many brokers `addr` lists in Metadata, `None` if it does not answer.
async fn brokers_listed(addr: &str) -> Option<usize> {
    let connect = Connection::connect(addr, "rill-bench-cluster");
    let connection = tokio::time::timeout(Duration::from_secs(2), connect)
        .await
        .ok()?
        .ok()?;
    let metadata = tokio::time::timeout(Duration::from_secs(2), fetch_metadata(&connection, &[]))
        .await
        .ok()?
        .ok()?;
    Some(metadata.brokers.len())
}

/// Set from the SIGINT/SIGTERM handler of `rill-bench cluster`.
static STOP_REQUESTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_REQUESTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// `rill-bench cluster`: starts the brokers, prints the bootstrap list once
/// they form a cluster, and stops them on SIGINT/SIGTERM.
pub async fn serve(args: &ClusterArgs) -> Result<()> {
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let mut cluster = LocalCluster::start(args)?;
    cluster.wait_ready().await?;
    println!("{}", cluster.bootstrap());
    eprintln!(
        "{} brokers up (pids {:?}); logs and data in {}; Ctrl-C stops them",
        args.brokers,
        cluster.pids(),
        args.dir.display()
    );
    std::fs::write(args.dir.join("ready"), "")?;
    while !STOP_REQUESTED.load(std::sync::atomic::Ordering::SeqCst) {
        for node_id in cluster.node_ids() {
            if let Some(status) = cluster.exited(node_id)? {
                return Err(BenchError::Other(format!(
                    "broker {node_id} exited ({status}); see its log"
                )));
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.stop();
    let _ = std::fs::remove_file(args.dir.join("ready"));
    eprintln!("brokers stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(node_id: i32, controller_port: u16) -> NodeSpec {
        NodeSpec {
            node_id,
            kafka_addr: String::new(),
            admin_addr: String::new(),
            controller_addr: format!("127.0.0.1:{controller_port}"),
            data_dir: PathBuf::new(),
            log_path: PathBuf::new(),
        }
    }

    #[test]
    fn voters_name_each_controller_listener() {
        let nodes = [spec(1, 9093), spec(2, 9193), spec(3, 9293)];
        assert_eq!(
            voters_list(&nodes),
            "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"
        );
    }

    #[test]
    fn config_carries_only_what_is_set() {
        assert_eq!(config_toml(None, None), None);
        assert_eq!(
            config_toml(Some(1500), Some(300)).as_deref(),
            Some("\"broker.session.timeout.ms\" = 1500\n\"broker.heartbeat.interval.ms\" = 300\n")
        );
        let text = config_toml(Some(1500), None).unwrap_or_default();
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["broker.session.timeout.ms"].as_integer(), Some(1500));
    }

    #[test]
    fn a_rack_is_a_setting_of_its_node() {
        let parsed: toml::Table = toml::from_str(&rack_toml(2)).unwrap();
        assert_eq!(parsed["broker.rack"].as_str(), Some("rack-2"));
        assert_eq!(
            parsed["replica.selector.class"].as_str(),
            Some("org.apache.kafka.common.replica.RackAwareReplicaSelector")
        );
    }

    #[test]
    fn an_earlier_runs_node_dirs_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("node-1/__cluster_metadata-0")).unwrap();
        std::fs::write(dir.path().join("node-1/meta.properties"), "old").unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let specs = node_specs(dir.path(), &[1, 2], None).unwrap();
        clear_earlier_runs(&specs).unwrap();
        assert!(!dir.path().join("node-1").exists());
        assert!(!dir.path().join("node-2").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn missing_binary_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let args = ClusterArgs {
            brokers: 3,
            rill: dir.path().join("no-such-rill"),
            dir: dir.path().join("c"),
            session_timeout_ms: None,
            heartbeat_interval_ms: None,
            netns: false,
            disk_mb: None,
            racks: false,
            fault_clock: false,
        };
        assert!(LocalCluster::start(&args).is_err());
    }
}
