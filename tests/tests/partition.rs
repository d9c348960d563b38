//! A network partition between brokers (issue #18): three `rill`
//! processes, each in a network namespace of its own, joined by veth pairs
//! to a bridge the test process (the clients) sits on. The partition
//! leader is cut off from the other two brokers — not from the clients — by
//! blackhole routes both ways. It must not acknowledge acks=all writes it
//! cannot replicate; the other two elect a new leader and go on; once the
//! network heals, the old leader truncates the tail it wrote alone and
//! catches up.
//!
//! Needs root and network namespaces (`ip netns`); without them the test
//! says so and passes without running.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rill_tests::cluster::wait_for;
use rill_tests::{data_dir, free_port, Broker};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);

/// Runs `ip` with `args`; whether it succeeded.
fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Runs `ip` inside namespace `ns`.
fn ip_in(ns: &str, args: &[&str]) -> bool {
    let mut all = vec!["netns", "exec", ns, "ip"];
    all.extend_from_slice(args);
    ip(&all)
}

/// Three namespaces on a bridge; removed on drop.
struct Network {
    tag: String,
    subnet: String,
}

impl Network {
    /// `None` (with the reason printed) where namespaces cannot be made.
    fn create() -> Option<Network> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: network namespaces need root");
            return None;
        }
        let id = std::process::id() % 200;
        let network = Network {
            tag: format!("rp{id}"),
            subnet: format!("10.77.{id}"),
        };
        let bridge = network.bridge();
        let gateway = format!("{}.254/24", network.subnet);
        let made = ip(&["link", "add", &bridge, "type", "bridge"])
            && ip(&["addr", "add", &gateway, "dev", &bridge])
            && ip(&["link", "set", &bridge, "up"])
            && (1..=3).all(|i| network.add_node(i));
        if !made {
            eprintln!("skipped: cannot create network namespaces and veth pairs here");
            return None;
        }
        Some(network)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    fn ns(&self, node: i32) -> String {
        format!("{}n{node}", self.tag)
    }

    fn address(&self, node: i32) -> String {
        format!("{}.{node}", self.subnet)
    }

    fn add_node(&self, node: i32) -> bool {
        let (ns, host, inner) = (
            self.ns(node),
            format!("{}h{node}", self.tag),
            format!("{}i{node}", self.tag),
        );
        let address = format!("{}/24", self.address(node));
        ip(&["netns", "add", &ns])
            && ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])
            && ip(&["link", "set", &inner, "netns", &ns])
            && ip(&["link", "set", &host, "master", &self.bridge(), "up"])
            && ip_in(&ns, &["addr", "add", &address, "dev", &inner])
            && ip_in(&ns, &["link", "set", &inner, "up"])
            && ip_in(&ns, &["link", "set", "lo", "up"])
    }

    /// Cuts (or heals) `node` off from the other nodes, both ways.
    fn isolate(&self, node: i32, cut: bool) {
        let verb = if cut { "add" } else { "del" };
        for other in (1..=3).filter(|&o| o != node) {
            let to_other = format!("{}/32", self.address(other));
            let to_node = format!("{}/32", self.address(node));
            assert!(ip_in(
                &self.ns(node),
                &["route", verb, "blackhole", &to_other]
            ));
            assert!(ip_in(
                &self.ns(other),
                &["route", verb, "blackhole", &to_node]
            ));
        }
    }

    /// A script that runs rill inside `node`'s namespace.
    fn launcher(&self, dir: &std::path::Path, node: i32) -> String {
        let path = dir.join(format!("rill-in-{}.sh", self.ns(node)));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nexec ip netns exec {} {RILL} \"$@\"\n",
                self.ns(node)
            ),
        )
        .expect("launcher");
        // SAFETY: chmod on a path we just wrote.
        let c_path = std::ffi::CString::new(path.to_string_lossy().as_bytes()).expect("path");
        unsafe {
            libc::chmod(c_path.as_ptr(), 0o755);
        }
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for node in 1..=3 {
            ip(&["netns", "del", &self.ns(node)]);
        }
        ip(&["link", "del", &self.bridge()]);
    }
}

fn producer(bootstrap: &str, settings: &[(&str, &str)]) -> FutureProducer {
    rill_tests::kafka::producer(bootstrap, settings)
}

/// Partition 0's (leader, sorted ISR) as `bootstrap` reports it.
fn state(bootstrap: &str) -> Option<(i32, Vec<i32>)> {
    let consumer: BaseConsumer = rill_tests::kafka::client_config(bootstrap).create().ok()?;
    let metadata = consumer
        .fetch_metadata(Some("split"), Duration::from_secs(5))
        .ok()?;
    let partition = metadata.topics().first()?.partitions().first()?;
    let mut isr = partition.isr().to_vec();
    isr.sort_unstable();
    Some((partition.leader(), isr))
}

#[test]
fn a_partitioned_leader_acknowledges_nothing_and_truncates_its_tail_after_healing() {
    let Some(network) = Network::create() else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| data_dir()).collect();
    let port = free_port();
    let controller_port = free_port();
    let voters: Vec<String> = (1..=3)
        .map(|n| format!("{n}@{}:{controller_port}", network.address(n)))
        .collect();
    let voters = voters.join(",");
    // The preferred leader gets its leadership back soon after it returns.
    let config = dirs[0].path().join("cluster.toml");
    std::fs::write(&config, "\"leader.imbalance.check.interval.seconds\" = 1\n").expect("config");
    let config = config.to_string_lossy().into_owned();
    let mut brokers: Vec<Broker> = (1..=3)
        .map(|n| {
            let addr: SocketAddr = format!("{}:{port}", network.address(n))
                .parse()
                .expect("addr");
            let launcher = network.launcher(dirs[(n - 1) as usize].path(), n);
            let id = n.to_string();
            Broker::start_listening(
                &launcher,
                dirs[(n - 1) as usize].path(),
                addr,
                &[
                    "--cores",
                    "1",
                    "--node-id",
                    &id,
                    "--controller-quorum-voters",
                    &voters,
                    "--config",
                    &config,
                ],
                &[],
            )
        })
        .collect();
    let bootstrap_of = |n: i32| format!("{}:{port}", network.address(n));
    let all = (1..=3).map(bootstrap_of).collect::<Vec<_>>().join(",");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for broker in &brokers {
        wait_for("every broker to list all three", SETTLE, || {
            let (_, ids) = rill_tests::cluster::describe_cluster(broker).ok()?;
            (ids == vec![1, 2, 3]).then_some(())
        });
    }
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &all,
        "split",
        1,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let (leader, _) = wait_for("all three in the ISR", SETTLE, || {
        let s = state(&all)?;
        (s.1 == vec![1, 2, 3]).then_some(s)
    });
    let send = |producer: &FutureProducer, payload: String| {
        let record: FutureRecord<'_, (), String> =
            FutureRecord::to("split").payload(&payload).partition(0);
        runtime
            .block_on(producer.send(record, Duration::from_secs(30)))
            .is_ok()
    };
    let steady = producer(&all, &[("acks", "all"), ("message.timeout.ms", "60000")]);
    for i in 0..20 {
        assert!(
            send(&steady, format!("a{i}")),
            "acknowledged before the split"
        );
    }

    network.isolate(leader, true);
    // A write sent to the isolated leader itself (a client that can reach
    // only it) is appended there but never acknowledged: nobody can fetch it.
    for i in 0..3 {
        let outcome = produce_to(&bootstrap_of(leader), &format!("lost{i}"));
        assert!(
            outcome.is_none(),
            "the cut-off leader acknowledged an acks=all write it could not replicate: {outcome:?}"
        );
    }
    // The other two elect a new leader and go on.
    let others: Vec<i32> = (1..=3).filter(|&n| n != leader).collect();
    let majority = others
        .iter()
        .map(|&n| bootstrap_of(n))
        .collect::<Vec<_>>()
        .join(",");
    let new_leader = wait_for("a new leader among the two", SETTLE, || {
        let s = state(&majority)?;
        (s.0 != leader && others.contains(&s.0)).then_some(s.0)
    });
    let after = producer(
        &majority,
        &[("acks", "all"), ("message.timeout.ms", "60000")],
    );
    for i in 20..40 {
        assert!(
            send(&after, format!("a{i}")),
            "acknowledged by the majority"
        );
    }

    network.isolate(leader, false);
    // The old leader returns as a follower, truncates what it wrote alone,
    // catches up, and (preferred replica) leads again.
    wait_for(
        "the old leader back, in the ISR and leading",
        SETTLE,
        || {
            let s = state(&all)?;
            (s.0 == leader && s.1 == vec![1, 2, 3]).then_some(())
        },
    );
    let read = rill_tests::kafka::consume_all(&all, "split", 1, 40, SETTLE, &[]);
    let values: Vec<String> = read
        .iter()
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok())
        .collect();
    let expected: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
    assert_eq!(
        values, expected,
        "every acknowledged write, once, in order, and nothing the cut-off leader wrote alone"
    );
    let _ = new_leader;
    let old_leader_log = brokers[(leader - 1) as usize].log();
    // On its first fetch's diverging epoch (or, when the leader cannot
    // place its epoch, after OffsetForLeaderEpoch).
    assert!(
        old_leader_log.contains("the leader's log diverges from ours: truncating")
            || old_leader_log.contains("truncating to the leader's log"),
        "the old leader cut the tail it wrote alone"
    );
    for broker in &mut brokers {
        assert!(broker.is_running());
    }
}

/// One acks=all Produce of `value` to partition 0 of `split` at `address`,
/// over a plain socket: `Some(0)` when it is acknowledged; `None` when the
/// answer is an error or none comes within 5 s (the leader holds an acks=all
/// write it cannot replicate).
fn produce_to(address: &str, value: &str) -> Option<i16> {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None);
    builder.push(0, 0, None, Some(value.as_bytes()), &[]);
    let batch = builder.build().expect("batch");
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(bytes::Bytes::from(batch));
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str("split"));
    topic.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 3_000;
    request.topic_data = vec![topic];
    let address: SocketAddr = address.parse().expect("address");
    let mut socket =
        std::net::TcpStream::connect_timeout(&address, Duration::from_secs(5)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let response: std::io::Result<ProduceResponse> =
        rill_tests::raw::exchange(&mut socket, ApiKey::Produce, 8, 1, &request);
    let response = response.ok()?;
    let code = response.responses[0].partition_responses[0].error_code;
    Some(code).filter(|&c| c == 0)
}
