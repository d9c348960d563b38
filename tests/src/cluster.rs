//! Several `rill serve` processes on loopback forming one cluster: each
//! gets `--node-id`, the shared `--controller-quorum-voters` (controller
//! listeners on free ports) and its own data dir and Kafka port. Voters
//! are nodes 1..=n; [`Cluster::add_broker`] adds broker-only nodes
//! (observers of the quorum) with other ids.

use crate::{data_dir, free_port, Broker};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::describe_quorum_request::{
    DescribeQuorumRequest, PartitionData, TopicData,
};
use kafka_protocol::messages::describe_quorum_response::DescribeQuorumResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

/// A cluster of brokers: voters with node ids 1..=n, then any added
/// broker-only nodes.
pub struct Cluster {
    /// The brokers in start order: `brokers[i]` has node id `ids[i]` (the
    /// voters first, so `brokers[i]` is node `i + 1` for them).
    pub brokers: Vec<Broker>,
    /// The node id of each of `brokers`.
    pub ids: Vec<i32>,
    /// `--controller-quorum-voters` of every node.
    pub voters: String,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    /// Starts `n` brokers (one shard each) that form one quorum.
    pub fn start(binary: &str, n: usize, extra_args: &[&str]) -> Cluster {
        Cluster::start_with_env(binary, n, extra_args, &[])
    }

    /// [`Cluster::start`] with environment variables for every broker
    /// process (fault-injection points).
    pub fn start_with_env(
        binary: &str,
        n: usize,
        extra_args: &[&str],
        envs: &[(&str, &str)],
    ) -> Cluster {
        let shared: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
        Cluster::start_each(binary, n, envs, |_| shared.clone())
    }

    /// Starts `n` brokers (one shard each) that form one quorum, node `id`
    /// with the arguments `args_of(id)` (a settings file of its own, say
    /// for its `broker.rack`) and the environment `envs`.
    pub fn start_each(
        binary: &str,
        n: usize,
        envs: &[(&str, &str)],
        args_of: impl Fn(i32) -> Vec<String>,
    ) -> Cluster {
        let voters: Vec<String> = (1..=n)
            .map(|id| format!("{id}@127.0.0.1:{}", free_port()))
            .collect();
        let voters = voters.join(",");
        let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| data_dir()).collect();
        let brokers = dirs
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                let id = (i + 1).to_string();
                let own = args_of(i as i32 + 1);
                let mut args = vec![
                    "--cores",
                    "1",
                    "--node-id",
                    id.as_str(),
                    "--controller-quorum-voters",
                    voters.as_str(),
                ];
                args.extend(own.iter().map(String::as_str));
                Broker::start_with_env(binary, dir.path(), &args, envs)
            })
            .collect();
        Cluster {
            brokers,
            ids: (1..=n as i32).collect(),
            voters,
            _dirs: dirs,
        }
    }

    /// Starts a broker-only node `node_id` (one shard, `--process-roles
    /// broker`) with this cluster's voters and its own data dir; it is
    /// then `cluster.node(node_id)`. Returns once it listens, not once it
    /// is registered.
    pub fn add_broker(&mut self, binary: &str, node_id: i32, extra_args: &[&str]) -> &mut Broker {
        let mut args = vec!["--process-roles", "broker"];
        args.extend_from_slice(extra_args);
        self.add_node(binary, node_id, &args)
    }

    /// Starts a controller-only node `node_id` outside the configured
    /// voters, with a controller listener of its own: it joins the quorum
    /// once AddRaftVoter adds it (KIP-853). Returns its controller
    /// listener, `host:port`.
    pub fn add_controller(&mut self, binary: &str, node_id: i32) -> String {
        let endpoint = format!("127.0.0.1:{}", free_port());
        let args = [
            "--process-roles",
            "controller",
            "--controller-listener",
            &endpoint,
        ];
        self.add_node(binary, node_id, &args);
        endpoint
    }

    /// Starts node `node_id` (one shard, its own data dir, this cluster's
    /// voters, then `args`); it is then `cluster.node(node_id)`.
    fn add_node(&mut self, binary: &str, node_id: i32, args: &[&str]) -> &mut Broker {
        assert!(
            !self.ids.contains(&node_id),
            "node {node_id} is already in the cluster"
        );
        let dir = data_dir();
        let id = node_id.to_string();
        let mut all = vec![
            "--cores",
            "1",
            "--node-id",
            id.as_str(),
            "--controller-quorum-voters",
            self.voters.as_str(),
        ];
        all.extend_from_slice(args);
        let broker = Broker::start(binary, dir.path(), &all);
        self._dirs.push(dir);
        self.brokers.push(broker);
        self.ids.push(node_id);
        self.node(node_id)
    }

    /// Three controller-only voters (1, 2, 3) and the broker-only nodes
    /// `brokers`; the cluster and the brokers' bootstrap list.
    pub fn controllers_and_brokers(binary: &str, brokers: &[i32]) -> (Cluster, String) {
        let mut cluster = Cluster::start(binary, 3, &["--process-roles", "controller"]);
        for &id in brokers {
            cluster.add_broker(binary, id, &[]);
        }
        let addresses: Vec<String> = brokers
            .iter()
            .map(|&id| cluster.node(id).bootstrap())
            .collect();
        (cluster, addresses.join(","))
    }

    /// [`Cluster::start`], then waits (up to `timeout`) until every broker
    /// lists all `n` as live.
    pub fn start_settled(
        binary: &str,
        n: usize,
        extra_args: &[&str],
        timeout: Duration,
    ) -> Cluster {
        let mut cluster = Cluster::start(binary, n, extra_args);
        cluster.wait_settled(timeout);
        cluster
    }

    /// Waits (up to `timeout`) until every voter lists all voters as live
    /// (and no other broker: call it before [`Cluster::add_broker`]).
    pub fn wait_settled(&mut self, timeout: Duration) {
        let voters = self.voters.split(',').count() as i32;
        let all: Vec<i32> = (1..=voters).collect();
        for node in 1..=voters {
            wait_for("every broker to list all of them", timeout, || {
                let (_, brokers) = describe_cluster(self.node(node)).ok()?;
                (brokers == all).then_some(())
            });
        }
    }

    /// The broker with `node_id`.
    pub fn node(&mut self, node_id: i32) -> &mut Broker {
        let Some(index) = self.ids.iter().position(|&id| id == node_id) else {
            panic!("no node {node_id} in the cluster (nodes {:?})", self.ids);
        };
        &mut self.brokers[index]
    }

    /// The data dir of every broker (for [`crate::agreement`]), or of
    /// every broker but those in `except` (killed ones).
    pub fn data_dirs(&self, except: &[i32]) -> Vec<&std::path::Path> {
        self.brokers
            .iter()
            .zip(&self.ids)
            .filter(|(_, id)| !except.contains(id))
            .map(|(broker, _)| broker.data_dir.as_path())
            .collect()
    }

    /// Bootstrap list of every broker.
    pub fn bootstrap(&self) -> String {
        self.brokers
            .iter()
            .map(Broker::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// DescribeCluster v0 from `broker`: (controller id, sorted broker ids).
pub fn describe_cluster(broker: &Broker) -> std::io::Result<(i32, Vec<i32>)> {
    let response: DescribeClusterResponse = crate::raw::request(
        broker.addr,
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    )?;
    let mut ids: Vec<i32> = response.brokers.iter().map(|b| b.broker_id.0).collect();
    ids.sort_unstable();
    Ok((response.controller_id.0, ids))
}

/// DescribeQuorum v1 of `__cluster_metadata`-0 from `broker`.
pub fn describe_quorum(broker: &Broker) -> std::io::Result<DescribeQuorumResponse> {
    let mut partition = PartitionData::default();
    partition.partition_index = 0;
    let mut topic = TopicData::default();
    topic.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
    topic.partitions = vec![partition];
    let mut request = DescribeQuorumRequest::default();
    request.topics = vec![topic];
    crate::raw::request(broker.addr, ApiKey::DescribeQuorum, 1, &request)
}

/// Polls `check` every 100 ms until it returns `Some`, or panics with
/// `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// FindCoordinator v4 of `key` asked of the first broker of `bootstrap`
/// (key type 0: group, 1: transactional id): the coordinator's node id,
/// `None` while it answers an error.
pub fn find_coordinator(bootstrap: &str, key: &str, key_type: i8) -> Option<i32> {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    let address = bootstrap.split(',').next()?.parse().ok()?;
    let mut request = FindCoordinatorRequest::default();
    request.key_type = key_type;
    request.coordinator_keys = vec![StrBytes::from_string(key.to_string())];
    let response: FindCoordinatorResponse =
        crate::raw::request(address, ApiKey::FindCoordinator, 4, &request).ok()?;
    let coordinator = response.coordinators.first()?;
    (coordinator.error_code == 0).then_some(coordinator.node_id.0)
}
