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
use rill_tests::data_dir;
use rill_tests::netns::Network;
use std::net::SocketAddr;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);

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
    // The preferred leader gets its leadership back soon after it returns.
    let config = dirs[0].path().join("cluster.toml");
    std::fs::write(&config, "\"leader.imbalance.check.interval.seconds\" = 1\n").expect("config");
    let config = config.to_string_lossy().into_owned();
    let (mut brokers, all) = network.start_brokers(RILL, &dirs, &["--config", &config]);
    let port = all
        .split(',')
        .next()
        .and_then(|a| a.rsplit(':').next())
        .expect("a port")
        .to_string();
    let bootstrap_of = |n: i32| format!("{}:{port}", network.address(n));
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
    // The replicas agree batch by batch, epochs never going back.
    let paths: Vec<&std::path::Path> = dirs.iter().map(|d| d.path()).collect();
    rill_tests::agreement::assert_replicas_agree(&paths, SETTLE);
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
