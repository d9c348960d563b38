//! A rolling upgrade of a 3-broker cluster under acks=all idempotent
//! load, one broker at a time (SIGTERM, the new binary, restart).
//!
//! What must hold:
//! - no acknowledged record is lost and none is written twice, and the
//!   producer sees no error it does not retry;
//! - a feature new in the release (`share.version`, share groups, and
//!   `transaction.version` 2, transactions v2) stays
//!   off while any broker runs the previous release, and comes on by
//!   itself once the last one has the new binary;
//! - no metadata record the previous release cannot read is written while
//!   it runs anywhere: group configs (`metadata.version` 2) are refused
//!   with UNSUPPORTED_VERSION until the roll is done, then accepted;
//! - the produce latency during the roll (p99, the longest stall) is
//!   printed.
//!
//! The previous release is either the real binary of an earlier commit,
//! named by `RILL_PREVIOUS_BINARY` (by hand: see `docs/operations.md`,
//! "Upgrade"), or, in CI, this binary registering as the previous release
//! did (`RILL_TEST_SUPPORTED_FEATURES`, debug builds only).

use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::FutureRecord;
use rill_tests::cluster::{find_coordinator, wait_for, Cluster};
use rill_tests::raw;
use rill_tests::replicated::idempotent_producer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const SETTLE: Duration = Duration::from_secs(60);
const UNSUPPORTED_VERSION: i16 = 35;
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
const RETRIED: [i16; 3] = [14, 15, 16];
/// Kafka's GROUP config resource type.
const GROUP_RESOURCE: i8 = 32;

/// The features the previous release (4d1c808) registered with: no
/// `share.version`, `metadata.version` 1 only.
const PREVIOUS_RELEASE_FEATURES: &str = "metadata.version=1-1,group.version=0-1,\
     eligible.leader.replicas.version=1-1,transaction.version=0-0,kraft.version=0-0";

/// The variable that makes this binary register as the previous release.
const TEST_FEATURES_VARIABLE: &str = "RILL_TEST_SUPPORTED_FEATURES";

/// Where the previous release comes from.
enum Previous {
    /// The real binary of an earlier commit.
    Binary(PathBuf),
    /// This binary, registering as the previous release did.
    Features,
}

#[test]
fn a_rolling_upgrade_keeps_every_record_and_turns_new_features_on_at_the_end() {
    roll(Previous::Features);
}

#[test]
fn a_rolling_upgrade_from_the_previous_release_binary() {
    let Some(binary) = std::env::var_os("RILL_PREVIOUS_BINARY").filter(|b| !b.is_empty()) else {
        rill_tests::skipped(
            "RILL_PREVIOUS_BINARY is not set: a by-hand run (docs/operations.md, \"Upgrade\")",
        );
        return;
    };
    roll(Previous::Binary(PathBuf::from(binary)));
}

/// Starts the cluster on the previous release, rolls it to this one under
/// load and checks everything the module note lists.
fn roll(previous: Previous) {
    let mut cluster = match &previous {
        Previous::Binary(path) => Cluster::start(path.to_str().expect("utf-8 path"), 3, &[]),
        Previous::Features => Cluster::start_with_env(
            RILL,
            3,
            &[],
            &[(TEST_FEATURES_VARIABLE, PREVIOUS_RELEASE_FEATURES)],
        ),
    };
    cluster.wait_settled(SETTLE);
    let bootstrap = cluster.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic_replicated(
        &bootstrap,
        "upgrade",
        3,
        3,
        &[("min.insync.replicas", "2")],
    ));
    wait_for_whole_isrs(&bootstrap);

    let load = Load::start(&bootstrap);
    std::thread::sleep(Duration::from_secs(2));
    for node in 1..=3 {
        let broker = cluster.node(node);
        broker.stop();
        broker.set_binary(std::path::Path::new(RILL));
        broker.clear_env();
        broker.restart();
        wait_for_whole_isrs(&bootstrap);
        let rolled = cluster.node(1).addr;
        if node < 3 {
            // A newer broker beside older ones: nothing new yet.
            assert_eq!(finalized(rolled, "share.version"), 0);
            assert_eq!(finalized(rolled, "metadata.version"), 1);
            assert_eq!(finalized(rolled, "transaction.version"), 0);
            assert_eq!(share_heartbeat(rolled), UNSUPPORTED_VERSION);
            assert_eq!(set_group_config(rolled), UNSUPPORTED_VERSION);
        }
    }
    // Every broker has the new binary: the new features are on, on each.
    for node in 1..=3 {
        let addr = cluster.node(node).addr;
        wait_for("share.version 1 on every broker", SETTLE, || {
            (finalized(addr, "share.version") == 1).then_some(())
        });
        assert_eq!(finalized(addr, "metadata.version"), 2);
        assert_eq!(finalized(addr, "transaction.version"), 2);
    }
    assert_eq!(set_group_config(cluster.node(2).addr), 0);
    // The coordinator may still be loading its partition after the roll
    // (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR): a client retries.
    let code = wait_for(
        "a share group heartbeat that is not retried",
        SETTLE,
        || {
            let coordinator = find_coordinator(&bootstrap, "upgraded", 0)?;
            let code = share_heartbeat(cluster.node(coordinator).addr);
            (!RETRIED.contains(&code)).then_some(code)
        },
    );
    assert_eq!(code, 0);
    std::thread::sleep(Duration::from_secs(2));
    load.finish_and_check(&bootstrap);
}

/// Waits until every partition of "upgrade" has all three in its ISR.
fn wait_for_whole_isrs(bootstrap: &str) {
    wait_for("every partition's ISR whole", SETTLE, || {
        let isrs = rill_tests::replicated::all_isrs(bootstrap, "upgrade")?;
        (isrs.len() == 3 && isrs.iter().all(|isr| *isr == vec![1, 2, 3])).then_some(())
    });
}

/// The acks=all idempotent producer thread and what it saw.
struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: std::thread::JoinHandle<()>,
}

/// Acknowledged values, failures, and each acknowledgement's latency.
#[derive(Default)]
struct Seen {
    acknowledged: Vec<u32>,
    failures: Vec<String>,
    latencies_us: Vec<u64>,
    longest_stall: Duration,
}

impl Load {
    fn start(bootstrap: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let thread = {
            let (stop, seen, bootstrap) = (stop.clone(), seen.clone(), bootstrap.to_owned());
            std::thread::spawn(move || produce_until(&bootstrap, &stop, &seen))
        };
        Load { stop, seen, thread }
    }

    /// Stops producing, prints the latency figures and checks that every
    /// acknowledged value reads back once, with no failure on the way.
    fn finish_and_check(self, bootstrap: &str) {
        self.stop.store(true, Ordering::Release);
        self.thread.join().expect("producer thread");
        let mut seen = self.seen.lock().expect("lock");
        assert!(
            seen.failures.is_empty(),
            "the producer saw errors: {:?}",
            seen.failures
        );
        assert!(
            seen.acknowledged.len() > 20,
            "the producer made progress through the roll: {}",
            seen.acknowledged.len()
        );
        seen.latencies_us.sort_unstable();
        let p99 = seen.latencies_us[seen.latencies_us.len() * 99 / 100];
        eprintln!(
            "rolling upgrade: {} records acknowledged, produce p99 {:.1} ms, longest stall {:.0} ms",
            seen.acknowledged.len(),
            p99 as f64 / 1000.0,
            seen.longest_stall.as_secs_f64() * 1000.0
        );
        let read = rill_tests::kafka::consume_all(
            bootstrap,
            "upgrade",
            3,
            seen.acknowledged.len(),
            SETTLE,
            &[],
        );
        let mut values: Vec<u32> = read
            .iter()
            .filter_map(|r| String::from_utf8(r.value.clone()?).ok()?.parse().ok())
            .collect();
        let total = values.len();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), total, "no record twice");
        let lost: Vec<u32> = (seen.acknowledged.iter())
            .filter(|v| values.binary_search(v).is_err())
            .copied()
            .collect();
        assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
    }
}

/// Produces 0, 1, 2, ... one at a time until `stop`, recording each
/// outcome and the longest time between two acknowledgements.
fn produce_until(bootstrap: &str, stop: &AtomicBool, seen: &Mutex<Seen>) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let producer = idempotent_producer(bootstrap);
    let mut last_ack = Instant::now();
    let mut next = 0u32;
    while !stop.load(Ordering::Acquire) {
        let payload = next.to_string();
        let key = (next % 7).to_string();
        let record: FutureRecord<'_, String, String> =
            FutureRecord::to("upgrade").payload(&payload).key(&key);
        let sent = Instant::now();
        let outcome = runtime.block_on(producer.send(record, Duration::from_secs(60)));
        let mut seen = seen.lock().expect("lock");
        match outcome {
            Ok(_) => {
                seen.acknowledged.push(next);
                seen.latencies_us.push(sent.elapsed().as_micros() as u64);
                seen.longest_stall = seen.longest_stall.max(last_ack.elapsed());
                last_ack = Instant::now();
            }
            Err((error, _)) => seen.failures.push(format!("{next}: {error}")),
        }
        next += 1;
    }
}

/// The level ApiVersions v3 of `addr` reports `feature` finalized at (0
/// when it is not listed).
fn finalized(addr: SocketAddr, feature: &str) -> i16 {
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = StrBytes::from_static_str("rill-tests");
    request.client_software_version = StrBytes::from_static_str("1");
    let response: ApiVersionsResponse =
        raw::request(addr, ApiKey::ApiVersions, 3, &request).expect("ApiVersions answered");
    response
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == feature)
        .map_or(0, |f| f.max_version_level)
}

/// A share consumer's first ShareGroupHeartbeat to `addr`: its code.
fn share_heartbeat(addr: SocketAddr) -> i16 {
    rill_tests::share::heartbeat(addr, "upgraded", "member-1", 0, &[])
}

/// IncrementalAlterConfigs v1 of group "upgraded"'s
/// `share.auto.offset.reset` to `earliest` at `addr`: the resource's code.
fn set_group_config(addr: SocketAddr) -> i16 {
    let mut config = AlterableConfig::default();
    config.name = StrBytes::from_static_str("share.auto.offset.reset");
    config.config_operation = 0;
    config.value = Some(StrBytes::from_static_str("earliest"));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = GROUP_RESOURCE;
    resource.resource_name = StrBytes::from_static_str("upgraded");
    resource.configs = vec![config];
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    let response: IncrementalAlterConfigsResponse =
        raw::request(addr, ApiKey::IncrementalAlterConfigs, 1, &request)
            .expect("IncrementalAlterConfigs answered");
    response.responses[0].error_code
}
