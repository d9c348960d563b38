//! Jumps of a broker's wall clock (issue #31 point 5's clock nemesis),
//! injected through the broker's clock seam (`RILL_FAULT_CLOCK`, debug
//! builds: the file `rill-fault-clock-offset-ms` in its data dir sets the
//! offset from the system clock; monotonic time does not move, as with a
//! real jump).
//!
//! What must hold, with the active controller's clock jumped: an hour
//! forward fences no live broker, and an hour back keeps no hung one
//! (broker sessions run on the monotonic clock, as KRaft's do); records
//! produced across the jumps are all read back.

use rill_tests::cluster::{describe_cluster, wait_for, Cluster};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
const HOUR_MS: i64 = 3_600_000;

#[test]
fn the_controllers_clock_jumping_fences_no_live_broker_and_keeps_no_hung_one() {
    let mut cluster = Cluster::start_with_env(RILL, 3, &[], &[("RILL_FAULT_CLOCK", "1")]);
    cluster.wait_settled(SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "jumps",
        3,
        3,
        &[("min.insync.replicas", "2")],
    ));
    let producer = rill_tests::replicated::idempotent_producer(&bootstrap);
    let produce = |range: std::ops::Range<u32>| {
        let records: Vec<(Option<Vec<u8>>, Vec<u8>)> = (range.map(|v| v.to_string().into_bytes()))
            .map(|v| (Some(v.clone()), v))
            .collect();
        runtime.block_on(rill_tests::kafka::produce_all(
            &producer, "jumps", &records, None,
        ));
    };
    produce(0..50);
    let (controller, _) = describe_cluster(cluster.node(1)).expect("DescribeCluster");

    // An hour forward: every broker's last heartbeat looks an hour old on
    // the wall clock; none may be fenced.
    jump(&mut cluster, controller, HOUR_MS);
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(4) {
        let (_, live) = describe_cluster(cluster.node(controller)).expect("DescribeCluster");
        assert_eq!(
            live,
            [1, 2, 3],
            "a live broker was fenced after a forward jump"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(50..100);

    // An hour back: a broker that hangs now (SIGSTOP: its port still
    // takes connections, so only its session's end can fence it) must be
    // fenced within its session, not an hour later.
    jump(&mut cluster, controller, -HOUR_MS);
    let victim = (1..=3)
        .find(|&id| id != controller)
        .expect("another broker");
    rill_tests::replicated::signal(cluster.node(victim), libc::SIGSTOP);
    let stopped = Instant::now();
    wait_for("the hung broker fenced", SETTLE, || {
        let (_, live) = describe_cluster(cluster.node(controller)).ok()?;
        (!live.contains(&victim)).then_some(())
    });
    eprintln!(
        "broker {victim} fenced {} ms after it hung, the controller's clock an hour back",
        stopped.elapsed().as_millis()
    );
    produce(100..150);
    rill_tests::replicated::signal(cluster.node(victim), libc::SIGCONT);
    jump(&mut cluster, controller, 0);
    let read = rill_tests::kafka::consume_all(&bootstrap, "jumps", 3, 150, SETTLE, &[]);
    let mut values: Vec<u32> = (read.iter())
        .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..150).collect::<Vec<u32>>());
}

/// Sets node `node_id`'s wall clock `offset_ms` away from the system's
/// (0: back to it), and gives the broker time to read it (every 50 ms).
fn jump(cluster: &mut Cluster, node_id: i32, offset_ms: i64) {
    let file = cluster
        .node(node_id)
        .data_dir
        .join("rill-fault-clock-offset-ms");
    std::fs::write(&file, offset_ms.to_string()).expect("clock offset written");
    std::thread::sleep(Duration::from_millis(300));
}
