//! Several data dirs on one broker (Kafka's `log.dirs=/a,/b`, JBOD), on a
//! real `rill`.
//!
//! What must hold: a topic's partitions are spread over the dirs (the dir
//! with the fewest partitions takes the next one) and found in them again
//! after a restart, with every record; DescribeLogDirs lists every dir with
//! its own partitions; deleting a topic removes its files from every dir;
//! a partition in two dirs refuses the start, naming both copies; a full
//! dir (a small loop-mounted file system: root only, skipped elsewhere)
//! refuses appends to its own partitions with KAFKA_STORAGE_ERROR while
//! the other dir's partitions keep acknowledging; a cordoned dir
//! (KIP-1066) gets no new partition, and a broker with every dir cordoned
//! no new replica; a replica moved to the other dir by AlterReplicaLogDirs
//! while records arrive keeps every one, and is found there after a
//! restart.

use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rill_tests::small_fs::SmallFs;
use rill_tests::Broker;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// `--data-dir`'s comma list of `dirs`.
fn dir_list(dirs: &[&Path]) -> PathBuf {
    let texts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    PathBuf::from(texts.join(","))
}

/// The partitions of `topic` whose directories are in `dir`.
fn partitions_in(dir: &Path, topic: &str) -> BTreeSet<i32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (t, p) = name.rsplit_once('-')?;
            (t == topic).then(|| p.parse().ok()).flatten()
        })
        .collect()
}

/// Every partition directory in `dir` (any topic, not the metadata log).
fn all_partition_dirs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name != "__cluster_metadata-0"
                        && name
                            .rsplit_once('-')
                            .is_some_and(|(_, p)| p.parse::<i32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0)
}

/// Sends one record to each of `partitions` of `topic`, numbered from
/// `first`; (partition, number) of the acknowledged ones, and the errors.
async fn send_each(
    producer: &FutureProducer,
    topic: &str,
    partitions: &[i32],
    first: u32,
) -> (Vec<(i32, u32)>, Vec<(i32, KafkaError)>) {
    let values: Vec<Vec<u8>> = (0..partitions.len())
        .map(|i| format!("{}:", first + i as u32).into_bytes())
        .collect();
    let mut pending = Vec::new();
    for (i, (&partition, value)) in partitions.iter().zip(&values).enumerate() {
        let number = first + i as u32;
        let record: FutureRecord<'_, (), Vec<u8>> =
            FutureRecord::to(topic).payload(value).partition(partition);
        pending.push((
            partition,
            number,
            producer.send(record, Duration::from_secs(15)),
        ));
    }
    let mut acknowledged = Vec::new();
    let mut refused = Vec::new();
    for (partition, number, delivery) in pending {
        match delivery.await {
            Ok(_) => acknowledged.push((partition, number)),
            Err((e, _)) => refused.push((partition, e)),
        }
    }
    (acknowledged, refused)
}

use rill_tests::kafka::producer_without_retries as producer;

/// (partition, number) of every record of `topic` (`partitions` of them).
fn read_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
) -> BTreeSet<(i32, u32)> {
    rill_tests::kafka::consume_all(
        bootstrap,
        topic,
        partitions,
        expected,
        Duration::from_secs(30),
        &[],
    )
    .into_iter()
    .map(|r| {
        let value = String::from_utf8(r.value.expect("a value")).expect("utf-8");
        let number = value
            .split(':')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a numbered value");
        (r.partition, number)
    })
    .collect()
}

/// One dir of a DescribeLogDirs answer: total and usable bytes, and the
/// size of each (topic, partition).
type DescribedDir = (i64, i64, BTreeMap<(String, i32), i64>);

/// DescribeLogDirs v4: dir -> what it says of it.
fn describe_log_dirs(broker: &Broker) -> BTreeMap<String, DescribedDir> {
    // No topics named (null): every partition.
    let mut body = DescribeLogDirsRequest::default();
    body.topics = None;
    let response: DescribeLogDirsResponse =
        rill_tests::raw::request(broker.addr, ApiKey::DescribeLogDirs, 4, &body)
            .expect("DescribeLogDirs answered");
    assert_eq!(response.error_code, 0);
    response
        .results
        .into_iter()
        .map(|r| {
            assert_eq!(r.error_code, 0, "dir {}", r.log_dir.as_str());
            let partitions = r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| ((t.name.0.to_string(), p.partition_index), p.partition_size))
                })
                .collect();
            (
                r.log_dir.to_string(),
                (r.total_bytes, r.usable_bytes, partitions),
            )
        })
        .collect()
}

fn canonical(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .expect("canonical dir")
        .display()
        .to_string()
}

/// kafka-python's `describe_log_dirs()`: the dirs it lists.
fn python_log_dirs(bootstrap: &str) -> String {
    rill_tests::python::require_kafka_python();
    let script = "import sys\n\
        from kafka import KafkaAdminClient\n\
        admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=10000)\n\
        for broker in admin.describe_log_dirs():\n\
        \x20   for result in broker['log_dirs']:\n\
        \x20       print(result['log_dir'], len(result['topics']))\n";
    let output = Command::new("python3")
        .args(["-c", script, bootstrap])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "kafka-python describe_log_dirs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A broker on two data dirs, `a` and `b` under `root`, with one topic.
struct TwoDirs {
    root: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
    broker: Broker,
    runtime: tokio::runtime::Runtime,
}

impl TwoDirs {
    fn with_topic(topic: &str, partitions: i32) -> TwoDirs {
        let root = rill_tests::data_dir();
        let a = root.path().join("a");
        let b = root.path().join("b");
        let broker = Broker::start_logging_to(RILL, &dir_list(&[&a, &b]), root.path(), &[]);
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let bootstrap = broker.bootstrap();
        runtime.block_on(rill_tests::kafka::create_topic(
            &bootstrap,
            topic,
            partitions,
            &[],
        ));
        TwoDirs {
            root,
            a,
            b,
            broker,
            runtime,
        }
    }
}

#[test]
fn partitions_spread_over_two_dirs_and_read_back_after_a_restart() {
    let TwoDirs {
        root: _root,
        a,
        b,
        mut broker,
        runtime,
    } = TwoDirs::with_topic("spread", 6);
    let bootstrap = broker.bootstrap();

    // Each partition is in one dir, both dirs hold some, and the dirs'
    // partition counts differ by one at most (fewest-partitions placement).
    let in_a = partitions_in(&a, "spread");
    let in_b = partitions_in(&b, "spread");
    assert!(in_a.is_disjoint(&in_b), "in both dirs: {in_a:?} {in_b:?}");
    let all: BTreeSet<i32> = in_a.union(&in_b).copied().collect();
    assert_eq!(all, (0..6).collect(), "a: {in_a:?}, b: {in_b:?}");
    assert!(
        !in_a.is_empty() && !in_b.is_empty(),
        "a: {in_a:?}, b: {in_b:?}"
    );
    assert!(
        all_partition_dirs(&a).abs_diff(all_partition_dirs(&b)) <= 1,
        "uneven: a {in_a:?}, b {in_b:?}"
    );
    // The broker-wide files stay in the first dir.
    assert!(!b.join("__cluster_metadata-0").exists());

    // Every record of every partition is acknowledged and read back.
    let producer = producer(&bootstrap);
    let partitions: Vec<i32> = (0..6).cycle().take(60).collect();
    let (sent, refused) = runtime.block_on(send_each(&producer, "spread", &partitions, 0));
    assert!(refused.is_empty(), "refused: {refused:?}");
    let sent: BTreeSet<(i32, u32)> = sent.into_iter().collect();
    assert_eq!(read_all(&bootstrap, "spread", 6, sent.len()), sent);

    // DescribeLogDirs lists both dirs, each with its own partitions.
    let described = describe_log_dirs(&broker);
    assert_eq!(described.len(), 2, "{described:?}");
    for (dir, on_disk) in [(&a, &in_a), (&b, &in_b)] {
        let (total, usable, partitions) = &described[&canonical(dir)];
        assert!(*total > 0 && *usable > 0 && usable <= total, "{dir:?}");
        let listed: BTreeSet<i32> = partitions
            .keys()
            .filter(|(t, _)| t == "spread")
            .map(|(_, p)| *p)
            .collect();
        assert_eq!(&listed, on_disk, "{dir:?}: {described:?}");
        assert!(
            partitions
                .iter()
                .filter(|((t, _), _)| t == "spread")
                .all(|(_, size)| *size > 0),
            "{partitions:?}"
        );
    }
    let listed = python_log_dirs(&bootstrap);
    for dir in [&a, &b] {
        assert!(listed.contains(&canonical(dir)), "{listed}");
    }

    // DescribeConfigs shows the full list.
    let admin: AdminClient<DefaultClientContext> = rill_tests::kafka::client_config(&bootstrap)
        .create()
        .expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let configs = runtime
        .block_on(admin.describe_configs(&[rdkafka::admin::ResourceSpecifier::Broker(0)], &options))
        .expect("describe_configs");
    let entries = configs
        .into_iter()
        .next()
        .expect("one result")
        .expect("described")
        .entries;
    let log_dirs = entries
        .iter()
        .find(|e| e.name == "log.dirs")
        .and_then(|e| e.value.clone());
    assert_eq!(log_dirs, Some(dir_list(&[&a, &b]).display().to_string()));

    // After a restart every partition is found in its dir with every record,
    // and takes new ones.
    assert_eq!(broker.stop(), Some(0));
    broker.restart();
    assert_eq!(partitions_in(&a, "spread"), in_a);
    assert_eq!(partitions_in(&b, "spread"), in_b);
    let producer = self::producer(&bootstrap);
    let (more, refused) = runtime.block_on(send_each(&producer, "spread", &partitions[..6], 1000));
    assert!(refused.is_empty(), "refused after restart: {refused:?}");
    let mut expected = sent.clone();
    expected.extend(more);
    assert_eq!(read_all(&bootstrap, "spread", 6, expected.len()), expected);

    // Deleting the topic removes its files from both dirs.
    let deleted = runtime
        .block_on(admin.delete_topics(&["spread"], &options))
        .expect("delete_topics");
    for r in deleted {
        r.expect("topic deleted");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(partitions_in(&a, "spread").is_empty() && partitions_in(&b, "spread").is_empty()) {
        assert!(
            Instant::now() < deadline,
            "files left: a {:?}, b {:?}",
            partitions_in(&a, "spread"),
            partitions_in(&b, "spread")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `rill serve` on `dirs`, which must refuse to start: what it said.
fn refused_start(dirs: &Path, log_dir: &Path) -> String {
    let log_path = log_dir.join("refused.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let mut child = Command::new(RILL)
        .args(["serve", "--listen"])
        .arg(format!("127.0.0.1:{}", rill_tests::free_port()))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{}", rill_tests::free_port()))
        .arg("--data-dir")
        .arg(dirs)
        .stdout(Stdio::from(log.try_clone().expect("log clone")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("rill starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "rill started on {}:\n{}",
                dirs.display(),
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(!status.success(), "{said}");
    said
}

#[test]
fn a_partition_in_two_dirs_refuses_the_start() {
    let root = rill_tests::data_dir();
    let a = root.path().join("a");
    let b = root.path().join("b");
    let dirs = dir_list(&[&a, &b]);
    let mut broker = Broker::start_logging_to(RILL, &dirs, root.path(), &[]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(
        &broker.bootstrap(),
        "twice",
        2,
        &[],
    ));
    assert_eq!(broker.stop(), Some(0));
    // A copy of a partition of dir a appears in dir b.
    let (from, to) = match partitions_in(&a, "twice").into_iter().next() {
        Some(p) => (a.join(format!("twice-{p}")), b.join(format!("twice-{p}"))),
        None => {
            let p = partitions_in(&b, "twice")
                .into_iter()
                .next()
                .expect("a partition");
            (b.join(format!("twice-{p}")), a.join(format!("twice-{p}")))
        }
    };
    std::fs::create_dir_all(&to).expect("copy dir");
    for entry in std::fs::read_dir(&from).expect("partition dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }

    let said = refused_start(&dirs, root.path());
    assert!(said.contains("two data dirs"), "{said}");
    assert!(said.contains(&from.display().to_string()), "{said}");
    assert!(said.contains(&to.display().to_string()), "{said}");
}

#[test]
fn a_dir_that_cannot_be_created_refuses_the_start_naming_it() {
    let root = rill_tests::data_dir();
    let good = root.path().join("good");
    // A dir under a regular file cannot be created (by root either).
    let blocker = root.path().join("blocker");
    std::fs::write(&blocker, b"not a dir").expect("file");
    let bad = blocker.join("data");
    let said = refused_start(&dir_list(&[&good, &bad]), root.path());
    assert!(
        said.contains(&format!("cannot create data dir {}", bad.display())),
        "{said}"
    );
}

fn is_storage_error(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::KafkaStorageError)
}

/// `rill_disk_low{shard=…,dir="<dir>"}` summed over the shards.
fn disk_low(broker: &Broker, dir: &Path) -> i64 {
    let text = rill_tests::http_get(broker.admin_addr, "/metrics");
    let label = format!("dir=\"{}\"}} ", dir.display());
    text.lines()
        .filter(|l| l.starts_with("rill_disk_low{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

#[test]
fn a_full_dir_refuses_its_partitions_only() {
    let fs = match SmallFs::mount(64) {
        Ok(fs) => fs,
        Err(why) => {
            rill_tests::skipped(&format!("no small file system here ({why})"));
            return;
        }
    };
    let root = rill_tests::data_dir();
    let roomy = root.path().join("roomy");
    let small = fs.dir("data");
    let config = root.path().join("rill.toml");
    std::fs::write(
        &config,
        "\"rill.storage.min.free.bytes\" = 8388608\n\
         \"rill.preallocate_bytes\" = 1048576\n\
         \"log.segment.bytes\" = 2097152\n",
    )
    .expect("config");
    let config = config.to_string_lossy().to_string();
    // The roomy dir is first: it keeps the metadata log.
    let broker = Broker::start_logging_to(
        RILL,
        &dir_list(&[&roomy, &small]),
        root.path(),
        &["--config", &config],
    );
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(rill_tests::kafka::create_topic(&bootstrap, "jbod", 4, &[]));
    let on_small: Vec<i32> = partitions_in(&small, "jbod").into_iter().collect();
    let on_roomy: Vec<i32> = partitions_in(&roomy, "jbod").into_iter().collect();
    assert!(
        !on_small.is_empty() && !on_roomy.is_empty(),
        "small {on_small:?}, roomy {on_roomy:?}"
    );
    let producer = producer(&bootstrap);
    let (_, refused) = runtime.block_on(send_each(&producer, "jbod", &[0, 1, 2, 3], 0));
    assert!(refused.is_empty(), "refused with room: {refused:?}");

    // The small dir fills up (below the 8 MiB reserve).
    let ballast = fs.fill_leaving(4 << 20);
    let started = Instant::now();
    let mut next = 100;
    loop {
        let (_, refused) = runtime.block_on(send_each(&producer, "jbod", &on_small, next));
        next += 100;
        for (partition, e) in &refused {
            assert!(on_small.contains(partition), "{partition} refused");
            assert!(
                is_storage_error(e),
                "refused with {e}, not KAFKA_STORAGE_ERROR"
            );
        }
        // Each shard sees the low space at its own next check: wait until
        // every partition of the full dir is refused.
        if refused.len() == on_small.len() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the full dir's partitions still take writes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        disk_low(&broker, &small) >= 1,
        "rill_disk_low of the full dir"
    );
    assert_eq!(
        disk_low(&broker, &roomy),
        0,
        "rill_disk_low of the roomy dir"
    );

    // The other dir's partitions keep acknowledging, and the full dir's
    // partitions are still refused.
    let (acknowledged, refused) = runtime.block_on(send_each(&producer, "jbod", &on_roomy, next));
    assert!(refused.is_empty(), "the roomy dir refused: {refused:?}");
    assert_eq!(acknowledged.len(), on_roomy.len());
    let (_, refused) = runtime.block_on(send_each(&producer, "jbod", &on_small, next + 50));
    assert_eq!(refused.len(), on_small.len(), "the full dir took writes");
    assert!(refused.iter().all(|(_, e)| is_storage_error(e)));

    // Space returns: the full dir's partitions take writes again.
    std::fs::remove_file(&ballast).expect("ballast removed");
    let resumed = Instant::now();
    loop {
        let (ok, _) = runtime.block_on(send_each(&producer, "jbod", &on_small, next + 200));
        if ok.len() == on_small.len() {
            break;
        }
        assert!(
            resumed.elapsed() < Duration::from_secs(30),
            "writes to the freed dir did not resume"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(broker);
}

/// CreateTopics v7 of `name`, `partitions` × 1 replica: its error code.
fn create_topic_code(addr: std::net::SocketAddr, name: &str, partitions: i32) -> i16 {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.to_owned()));
    topic.num_partitions = partitions;
    topic.replication_factor = 1;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    request.timeout_ms = 10_000;
    let response: CreateTopicsResponse =
        rill_tests::raw::request(addr, ApiKey::CreateTopics, 7, &request)
            .expect("CreateTopics answered");
    response.topics[0].error_code
}

/// IncrementalAlterConfigs SET of `cordoned.log.dirs` on broker
/// `resource` (`""`: every broker): its error code.
fn set_cordoned(addr: std::net::SocketAddr, resource: &str, value: &str) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    let mut config = AlterableConfig::default();
    config.name = StrBytes::from_static_str("cordoned.log.dirs");
    config.value = Some(StrBytes::from_string(value.to_owned()));
    let mut resource_entry = AlterConfigsResource::default();
    resource_entry.resource_type = 4; // BROKER
    resource_entry.resource_name = StrBytes::from_string(resource.to_owned());
    resource_entry.configs = vec![config];
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource_entry];
    let response: IncrementalAlterConfigsResponse =
        rill_tests::raw::request(addr, ApiKey::IncrementalAlterConfigs, 0, &request)
            .expect("IncrementalAlterConfigs answered");
    response.responses[0].error_code
}

/// KIP-1066: a cordoned dir keeps its partitions and gets no new one; with
/// every dir cordoned (dynamically, `*`) the broker gets no new replica and
/// a topic cannot be placed (INVALID_REPLICATION_FACTOR, as with too few
/// brokers); uncordoned, new partitions spread over both dirs again.
#[test]
fn cordoned_dirs_take_no_new_partitions() {
    const INVALID_REPLICATION_FACTOR: i16 = 38;
    let root = tempfile::tempdir().expect("temp dir");
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let file = root.path().join("cordon.properties");
    std::fs::write(&file, format!("cordoned.log.dirs={}\n", a.display())).expect("config");
    let config = file.display().to_string();
    let broker = Broker::start_logging_to(
        RILL,
        &dir_list(&[&a, &b]),
        root.path(),
        &["--config", &config],
    );
    let addr = broker.addr;
    let created = |name: &str, partitions: i32| create_topic_code(addr, name, partitions);
    // The file cordons `a`: every new partition goes to `b`.
    rill_tests::cluster::wait_for("a topic placed", Duration::from_secs(30), || {
        (created("kept-off-a", 4) == 0).then_some(())
    });
    assert!(partitions_in(&a, "kept-off-a").is_empty());
    assert_eq!(partitions_in(&b, "kept-off-a").len(), 4);
    // Every dir cordoned, for every broker: no new replica here at all.
    assert_eq!(set_cordoned(addr, "", "*"), 0);
    // (Until the next heartbeat tells the controller, topics are placed:
    // each try has a name of its own.)
    let mut tries = 0;
    let code =
        rill_tests::cluster::wait_for("the broker cordoned", Duration::from_secs(30), || {
            tries += 1;
            let code = created(&format!("nowhere-{tries}"), 1);
            (code != 0).then_some(code)
        });
    assert_eq!(code, INVALID_REPLICATION_FACTOR, "{}", broker.log());
    // This broker's own empty value wins over every broker's and the
    // file's: nothing is cordoned, and new partitions use both dirs (the
    // tries above left the dirs a few partitions apart at most).
    let (_, ids) = rill_tests::cluster::describe_cluster(&broker).expect("DescribeCluster");
    assert_eq!(set_cordoned(addr, &ids[0].to_string(), ""), 0);
    rill_tests::cluster::wait_for("the broker open again", Duration::from_secs(30), || {
        (created("both-dirs", 20) == 0).then_some(())
    });
    let (in_a, in_b) = (
        partitions_in(&a, "both-dirs").len(),
        partitions_in(&b, "both-dirs").len(),
    );
    assert_eq!(in_a + in_b, 20);
    assert!(in_a > 0 && in_b > 0, "{in_a} in a, {in_b} in b");
    // The first topic's partitions stayed where they were.
    assert_eq!(partitions_in(&b, "kept-off-a").len(), 4);
}

/// AlterReplicaLogDirs v2 of `moves`, each (dir, topic, partition): the
/// (topic, partition, error code) answers.
fn alter_replica_log_dirs(
    addr: std::net::SocketAddr,
    moves: &[(&Path, &str, i32)],
) -> Vec<(String, i32, i16)> {
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    let mut body = AlterReplicaLogDirsRequest::default();
    for &(dir, topic, partition) in moves {
        let mut wanted = AlterReplicaLogDirTopic::default();
        wanted.name = TopicName(StrBytes::from_string(topic.to_string()));
        wanted.partitions = vec![partition];
        let mut entry = AlterReplicaLogDir::default();
        entry.path = StrBytes::from_string(dir.display().to_string());
        entry.topics = vec![wanted];
        body.dirs.push(entry);
    }
    let response: AlterReplicaLogDirsResponse =
        rill_tests::raw::request(addr, ApiKey::AlterReplicaLogDirs, 2, &body)
            .expect("AlterReplicaLogDirs answered");
    response
        .results
        .iter()
        .flat_map(|t| {
            let topic = t.topic_name.0.to_string();
            t.partitions
                .iter()
                .map(move |p| (topic.clone(), p.partition_index, p.error_code))
        })
        .collect()
}

#[test]
fn a_replica_moves_to_another_dir_while_records_arrive_and_keeps_them_all() {
    let TwoDirs {
        root,
        a,
        b,
        mut broker,
        runtime,
    } = TwoDirs::with_topic("moving", 2);
    let bootstrap = broker.bootstrap();
    let partition = *partitions_in(&a, "moving")
        .first()
        .expect("a partition in a");
    let producer = producer(&bootstrap);
    let first: Vec<i32> = vec![partition; 200];
    let (mut sent, refused) = runtime.block_on(send_each(&producer, "moving", &first, 0));
    assert!(refused.is_empty(), "refused: {refused:?}");

    // The move runs while a retrying producer keeps sending to it.
    let mover = {
        let (addr, b) = (broker.addr, b.clone());
        std::thread::spawn(move || alter_replica_log_dirs(addr, &[(&b, "moving", partition)]))
    };
    let retrying = rill_tests::kafka::producer(&bootstrap, &[("message.timeout.ms", "30000")]);
    let during: Vec<i32> = vec![partition; 300];
    let (more, refused) = runtime.block_on(send_each(&retrying, "moving", &during, 1000));
    assert!(refused.is_empty(), "refused during the move: {refused:?}");
    sent.extend(more);
    let answers = mover.join().expect("the move");
    assert_eq!(answers, [("moving".to_string(), partition, 0)]);

    // It is in b only, DescribeLogDirs says so, and nothing is lost.
    assert!(!partitions_in(&a, "moving").contains(&partition));
    assert!(partitions_in(&b, "moving").contains(&partition));
    let described = describe_log_dirs(&broker);
    let (_, _, in_b) = &described[&canonical(&b)];
    assert!(
        in_b.contains_key(&("moving".to_string(), partition)),
        "{described:?}"
    );
    let sent: BTreeSet<(i32, u32)> = sent.into_iter().collect();
    assert_eq!(read_all(&bootstrap, "moving", 2, sent.len()), sent);

    // Kafka's refusals: a dir the broker lacks, a partition it lacks.
    let elsewhere = root.path().join("elsewhere");
    let refusals = alter_replica_log_dirs(
        broker.addr,
        &[
            (&elsewhere, "moving", 0),
            (&a, "moving", 7),
            (&a, "nothing", 0),
        ],
    );
    let codes: Vec<i16> = refusals.iter().map(|(_, _, code)| *code).collect();
    assert_eq!(codes, [57, 3, 3], "{refusals:?}");

    // After a restart it is found in b, with every record.
    assert_eq!(broker.stop(), Some(0));
    broker.restart();
    assert!(partitions_in(&b, "moving").contains(&partition));
    assert!(!partitions_in(&a, "moving").contains(&partition));
    assert_eq!(read_all(&bootstrap, "moving", 2, sent.len()), sent);

    // `rill admin log-dirs` moves it back, and describes where it is.
    let admin = |args: &[&str]| {
        let output = Command::new(RILL)
            .args(["admin", "--brokers", &bootstrap])
            .args(args)
            .output()
            .expect("rill admin runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{args:?}: {stdout}");
        stdout
    };
    let (home, number) = (canonical(&a), partition.to_string());
    let moved = ["log-dirs", "move", "--broker", "0", "--topic", "moving"];
    admin(&[&moved[..], &["--partition", &number, "--dir", &home]].concat());
    assert!(partitions_in(&a, "moving").contains(&partition));
    let described = admin(&["log-dirs", "describe", "--broker", "0", "--format", "json"]);
    let described: serde_json::Value = serde_json::from_str(&described).expect("JSON");
    let dirs = described["dirs"].as_array().expect("dirs");
    let home_dir = dirs
        .iter()
        .find(|d| d["dir"] == home.as_str())
        .expect("dir a");
    let listed = home_dir["partitions"].as_array().expect("partitions");
    assert!(
        listed
            .iter()
            .any(|p| p["topic"] == "moving" && p["partition"] == partition),
        "{described}"
    );
    assert_eq!(read_all(&bootstrap, "moving", 2, sent.len()), sent);
}
