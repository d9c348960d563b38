//! Brokers that reach each other over SASL_PLAINTEXT and over SASL_SSL:
//! three nodes whose only client listener is SASL (SCRAM-SHA-512), in
//! plaintext or over TLS, with the authorizer on and no ACL for anonymous
//! users. Each logs in to the others as the `broker` user of its
//! `ScramLoginModule` JAAS entry (`sasl.mechanism.inter.broker.protocol`),
//! over TLS checked against the listener's truststore and the peer's
//! advertised host: followers fetch (acks=all with `min.insync.replicas=3`
//! needs all three replicas), and transaction markers reach the partitions
//! led elsewhere (read_committed reads the committed transaction). Before,
//! such a first listener stopped the start.

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

/// How clients reach the cluster: its bootstrap, and the CA of a TLS one.
struct Reach {
    bootstrap: String,
    ca: Option<String>,
}

impl Reach {
    /// A librdkafka client logged in as `admin`.
    fn client(&self) -> ClientConfig {
        let mut c = client_config(&self.bootstrap);
        c.set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.username", "admin")
            .set("sasl.password", "admin-secret");
        match &self.ca {
            Some(ca) => c
                .set("security.protocol", "SASL_SSL")
                .set("ssl.ca.location", ca),
            None => c.set("security.protocol", "SASL_PLAINTEXT"),
        };
        c
    }
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
    let listener = "listeners=SASL_PLAINTEXT://127.0.0.1:9\n\
                    listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n";
    replicate_and_write_markers(listener, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_reach_each_other_over_tls_and_log_in() {
    let dir = data_dir();
    let pki = Pki::new(dir.path(), "inter-broker");
    let listener = format!(
        "listeners=SASL_SSL://127.0.0.1:9\n\
         listener.security.protocol.map=SASL_SSL:SASL_SSL\n\
         ssl.keystore.location={}\n\
         ssl.truststore.location={}\n",
        pki.broker_keystore(),
        pki.ca_file()
    );
    replicate_and_write_markers(&listener, Some(pki.ca_file())).await;
}

/// Three nodes with the first listener `listener`, reached by clients
/// trusting `ca` when it is TLS: a topic of three replicas that must all
/// be in sync takes acks=all records, and a transaction over its three
/// leaders commits.
async fn replicate_and_write_markers(listener: &str, ca: Option<String>) {
    let dir = data_dir();
    let config = dir.path().join("server.properties");
    std::fs::write(
        &config,
        // The port is --listen's, which the harness picks per node.
        format!(
            "{listener}\
         sasl.enabled.mechanisms=SCRAM-SHA-512\n\
         sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n\
         sasl.jaas.config=\
         org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"broker\" password=\"broker-secret\";\n\
         rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=broker,password=broker-secret];\
         SCRAM-SHA-512=[name=admin,password=admin-secret]\n\
         authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         super.users=User:broker;User:admin\n"
        ),
    )
    .expect("write server.properties");
    let config = config.to_str().expect("utf-8 path").to_string();
    let cluster = Cluster::start(RILL, 3, &["--config", &config]);
    let reach = Reach {
        bootstrap: cluster.bootstrap(),
        ca,
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
