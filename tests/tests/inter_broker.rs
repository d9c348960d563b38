//! Brokers that reach each other over SASL_PLAINTEXT, SASL_SSL and mutual
//! TLS: three nodes whose only client listener is that one, with the
//! authorizer on and no ACL for anonymous users. Over SASL each logs in to
//! the others as the `broker` user of its `ScramLoginModule` JAAS entry
//! (`sasl.mechanism.inter.broker.protocol`); over TLS it checks the
//! others' certificates against the listener's truststore and their
//! advertised host, and with `ssl.client.auth=required` shows its own
//! (`User:CN=broker`). In each case followers fetch (acks=all with `min.insync.replicas=3`
//! needs all three replicas), and transaction markers reach the partitions
//! led elsewhere (read_committed reads the committed transaction). Before,
//! such a first listener stopped the start.

use rcgen::{DnType, ExtendedKeyUsagePurpose};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use rill_tests::cluster::Cluster;
use rill_tests::data_dir;
use rill_tests::kafka::client_config;
use rill_tests::pki::Pki;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TOPIC: &str = "ib";

/// How clients reach the cluster: its bootstrap and their settings
/// (security protocol, login or certificate).
struct Reach {
    bootstrap: String,
    settings: Vec<(&'static str, String)>,
}

impl Reach {
    /// A librdkafka client of the cluster's super user `admin`.
    fn client(&self) -> ClientConfig {
        let mut c = client_config(&self.bootstrap);
        for (key, value) in &self.settings {
            c.set(*key, value);
        }
        c
    }
}

/// The brokers' settings of the SASL tests: SCRAM-SHA-512 only, the
/// broker's own login, and `broker` and `admin` as super users.
const SASL_SETTINGS: &str = "sasl.enabled.mechanisms=SCRAM-SHA-512\n\
    sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n\
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username=\"broker\" password=\"broker-secret\";\n\
    rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=broker,password=broker-secret];\
    SCRAM-SHA-512=[name=admin,password=admin-secret]\n\
    super.users=User:broker;User:admin\n";

/// A client's SCRAM login as `admin` over `protocol`.
fn admin_login(protocol: &str) -> Vec<(&'static str, String)> {
    vec![
        ("security.protocol", protocol.to_string()),
        ("sasl.mechanism", String::from("SCRAM-SHA-512")),
        ("sasl.username", String::from("admin")),
        ("sasl.password", String::from("admin-secret")),
    ]
}

async fn create_topic(reach: &Reach) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> =
        reach.client().create().map_err(|e| e.to_string())?;
    let topic = NewTopic::new(TOPIC, 3, TopicReplication::Fixed(3)).set("min.insync.replicas", "3");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .create_topics(&[topic], &options)
        .await
        .map_err(|e| e.to_string())?;
    for result in results {
        result.map_err(|(_, code)| code.to_string())?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_log_in_to_each_other_to_replicate_and_write_markers() {
    let settings = format!(
        "listeners=SASL_PLAINTEXT://127.0.0.1:9\n\
         listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n{SASL_SETTINGS}"
    );
    replicate_and_write_markers(&settings, admin_login("SASL_PLAINTEXT")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_reach_each_other_over_tls_and_log_in() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "inter-broker");
    let (settings, client) = sasl_ssl(&pki, &pki.broker_keystore());
    replicate_and_write_markers(&settings, client).await;
}

/// The brokers' settings of a SASL_SSL first listener with `keystore` and
/// `pki`'s CA, and the settings of an `admin` client trusting that CA.
fn sasl_ssl(pki: &Pki, keystore: &str) -> (String, Vec<(&'static str, String)>) {
    let settings = format!(
        "listeners=SASL_SSL://127.0.0.1:9\n\
         listener.security.protocol.map=SASL_SSL:SASL_SSL\n\
         ssl.keystore.location={keystore}\n\
         ssl.truststore.location={}\n{SASL_SETTINGS}",
        pki.ca_file()
    );
    let mut client = admin_login("SASL_SSL");
    client.push(("ssl.ca.location", pki.ca_file()));
    (settings, client)
}

/// Mutual TLS: with `ssl.client.auth=required` each broker shows its own
/// certificate to the others, and is the principal its subject maps to
/// (`User:CN=broker`, the super user); no SASL at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_reach_each_other_over_mutual_tls_as_their_certificates() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "mutual");
    let (cert, key) = pki.issue(
        "admin",
        &[],
        &[(DnType::CommonName, "admin")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let settings = format!(
        "listeners=SSL://127.0.0.1:9\n\
         listener.security.protocol.map=SSL:SSL\n\
         ssl.keystore.location={}\n\
         ssl.truststore.location={}\n\
         ssl.client.auth=required\n\
         super.users=User:CN=broker;User:CN=admin\n",
        pki.broker_keystore(),
        pki.ca_file()
    );
    let client = vec![
        ("security.protocol", String::from("SSL")),
        ("ssl.ca.location", pki.ca_file()),
        ("ssl.certificate.location", cert),
        ("ssl.key.location", key),
    ];
    replicate_and_write_markers(&settings, client).await;
}

/// Over TLS each broker checks that the others' certificates name their
/// advertised host (127.0.0.1): certificates naming only `localhost` keep
/// followers out (acks=all with three in-sync replicas never completes),
/// until `ssl.endpoint.identification.algorithm` is set empty, which
/// checks the chain alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_not_naming_the_brokers_host_keeps_followers_out() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "names");
    let (settings, mut client) = sasl_ssl(&pki, &pki.keystore("localhost-only", &["localhost"]));
    // The clients do not check names: only the brokers' check is tested.
    client.push((
        "ssl.endpoint.identification.algorithm",
        String::from("none"),
    ));
    let (_cluster, reach) = start_with_topic(&settings, client.clone()).await;
    let producer: FutureProducer = (reach.client().set("acks", "all"))
        .set("message.timeout.ms", "8000")
        .create()
        .expect("producer");
    let record = FutureRecord::<(), _>::to(TOPIC).payload("v").partition(0);
    let sent = producer.send(record, Duration::from_secs(10)).await;
    assert!(sent.is_err(), "followers that cannot connect: {sent:?}");

    let unchecked = format!("{settings}ssl.endpoint.identification.algorithm=\n");
    replicate_and_write_markers(&unchecked, client).await;
}

/// Three nodes with `settings` (the first listener and its security),
/// reached by clients with `client`: a topic of three replicas that must
/// all be in sync takes acks=all records, and a transaction over its
/// three leaders commits, with the authorizer on.
async fn replicate_and_write_markers(settings: &str, client: Vec<(&'static str, String)>) {
    let (_cluster, reach) = start_with_topic(settings, client).await;
    write_and_read_back(&reach).await;
}

/// Three nodes with `settings` and the authorizer on, and the topic of
/// three replicas (`min.insync.replicas=3`) made by a client with
/// `client`.
async fn start_with_topic(settings: &str, client: Vec<(&'static str, String)>) -> (Cluster, Reach) {
    let dir = data_dir();
    let config = dir.path().join("server.properties");
    // The listener's port is --listen's, which the harness picks per node.
    std::fs::write(
        &config,
        format!(
            "{settings}\
             authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        ),
    )
    .expect("write server.properties");
    let config = config.to_str().expect("utf-8 path").to_string();
    let cluster = Cluster::start(RILL, 3, &["--config", &config]);
    let reach = Reach {
        bootstrap: cluster.bootstrap(),
        settings: client,
    };

    // The brokers register and elect leaders first; until then creation
    // fails, and a retry after a creation that did land finds the topic.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match create_topic(&reach).await {
            Ok(()) => break,
            Err(e) if e.contains("TopicAlreadyExists") => break,
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "topic not created: {e}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    (cluster, reach)
}

/// 30 acks=all records and a transaction over the three partitions, read
/// back under read_committed.
async fn write_and_read_back(reach: &Reach) {
    let producer: FutureProducer = reach
        .client()
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for i in 0..30 {
        let value = format!("v{i}");
        let record = FutureRecord::<(), _>::to(TOPIC)
            .payload(&value)
            .partition(i % 3);
        let sent = producer.send(record, Duration::from_secs(30)).await;
        assert!(
            sent.is_ok(),
            "acks=all with three in-sync replicas: {sent:?}"
        );
    }

    let transactional: FutureProducer = reach
        .client()
        .set("transactional.id", "ib-txn")
        .create()
        .expect("transactional producer");
    transactional
        .init_transactions(Duration::from_secs(30))
        .expect("init_transactions");
    transactional.begin_transaction().expect("begin");
    for partition in 0..3 {
        let record = FutureRecord::<(), _>::to(TOPIC)
            .payload("in-txn")
            .partition(partition);
        let sent = transactional.send(record, Duration::from_secs(30)).await;
        assert!(sent.is_ok(), "{sent:?}");
    }
    transactional
        .commit_transaction(Duration::from_secs(30))
        .expect("commit: markers written on every partition's leader");

    let consumer: BaseConsumer = reach
        .client()
        .set("group.id", "ib-reader")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..3 {
        assignment
            .add_partition_offset(TOPIC, partition, Offset::Beginning)
            .expect("assignment");
    }
    consumer.assign(&assignment).expect("assign");
    let mut read = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while read.len() < 33 && std::time::Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            read.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned());
        }
    }
    assert_eq!(
        read.len(),
        33,
        "30 records and the committed transaction: {read:?}"
    );
    assert_eq!(read.iter().filter(|v| *v == "in-txn").count(), 3);
}
