//! The batches rill writes itself carry CRC32Cs that a real client checks:
//! librdkafka with `check.crcs=true` reads records re-stamped with
//! LogAppendTime, records recompressed to the topic's codec, and
//! transactions' commit and abort markers. A batch whose CRC does not
//! match is a consume error, which fails `consume_all`.

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rill_tests::kafka::{client_config, consume_all, create_topic, produce_all, producer};
use rill_tests::{data_dir, Broker};
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const TIMEOUT: Duration = Duration::from_secs(30);
const RECORDS: usize = 300;

fn values(prefix: &str, count: usize) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let value = format!("{prefix}-{i}-").repeat(40).into_bytes();
            (Some(format!("k{}", i % 7).into_bytes()), value)
        })
        .collect()
}

fn checked(isolation: &'static str) -> [(&'static str, &'static str); 2] {
    [("check.crcs", "true"), ("isolation.level", isolation)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewritten_batches_pass_the_clients_crc_check() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let cases = [
        ("stamped", ("message.timestamp.type", "LogAppendTime")),
        ("recompressed", ("compression.type", "gzip")),
    ];
    // The producer sends uncompressed batches with create times: the
    // broker rewrites every one of them, and computes its CRC anew.
    let p = producer(
        &bootstrap,
        &[("acks", "all"), ("compression.codec", "none")],
    );
    for (topic, config) in cases {
        create_topic(&bootstrap, topic, 2, &[config]).await;
        produce_all(&p, topic, &values(topic, RECORDS), None).await;
    }
    for (topic, _) in cases {
        let got = consume_all(
            &bootstrap,
            topic,
            2,
            RECORDS,
            TIMEOUT,
            &checked("read_uncommitted"),
        );
        assert_eq!(
            got.len(),
            RECORDS,
            "{topic}: every record, each batch's CRC checked"
        );
        let mut read: Vec<Vec<u8>> = got.into_iter().filter_map(|r| r.value).collect();
        let mut sent: Vec<Vec<u8>> = values(topic, RECORDS).into_iter().map(|(_, v)| v).collect();
        read.sort();
        sent.sort();
        assert_eq!(read, sent, "{topic}: the values as sent");
    }
}

fn send(p: &BaseProducer, topic: &str, values: &[(Option<Vec<u8>>, Vec<u8>)]) {
    for (i, (key, value)) in values.iter().enumerate() {
        let mut record: BaseRecord<'_, Vec<u8>, Vec<u8>> =
            BaseRecord::to(topic).payload(value).partition(i as i32 % 2);
        if let Some(key) = key {
            record = record.key(key);
        }
        while let Err((e, back)) = p.send(record) {
            assert!(
                e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull),
                "send failed: {e}"
            );
            p.poll(Duration::from_millis(10));
            record = back;
        }
        p.poll(Duration::ZERO);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_markers_pass_the_clients_crc_check() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn", 2, &[]).await;
    let mut c: ClientConfig = client_config(&bootstrap);
    c.set("transactional.id", "crc-markers")
        .set("linger.ms", "5");
    let p: BaseProducer = c.create().expect("transactional producer");
    p.init_transactions(TIMEOUT).expect("init_transactions");
    // Committed, aborted, committed: both kinds of marker on both partitions.
    for (name, count, commit) in [
        ("first", 60, true),
        ("aborted", 40, false),
        ("last", 40, true),
    ] {
        p.begin_transaction().expect("begin");
        send(&p, "txn", &values(name, count));
        // Written before the marker: an abort then covers records in the log.
        p.flush(TIMEOUT).expect("flush");
        if commit {
            p.commit_transaction(TIMEOUT).expect("commit");
        } else {
            p.abort_transaction(TIMEOUT).expect("abort");
        }
    }
    // One plain record after the markers on each partition, so reading
    // it means the consumer fetched (and checked) every marker before it.
    let plain = producer(&bootstrap, &[("acks", "all")]);
    for partition in 0..2 {
        produce_all(&plain, "txn", &values("after", 1), Some(partition)).await;
    }
    let committed = consume_all(
        &bootstrap,
        "txn",
        2,
        102,
        TIMEOUT,
        &checked("read_committed"),
    );
    assert_eq!(committed.len(), 102, "60 + 40 committed, 2 plain");
    assert!(
        committed
            .iter()
            .filter_map(|r| r.value.as_deref())
            .all(|v| !v.starts_with(b"aborted")),
        "read_committed sees no aborted record"
    );
    let everything = consume_all(
        &bootstrap,
        "txn",
        2,
        142,
        TIMEOUT,
        &checked("read_uncommitted"),
    );
    assert_eq!(everything.len(), 142, "every data record, markers skipped");
}
