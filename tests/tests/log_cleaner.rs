//! The log cleaner through a real broker and rdkafka: a compacted topic with
//! small segments, a dedupe buffer smaller than its keys (so a pass covers
//! part of the dirty data only) and a fast cleaner tick. Keyed updates and
//! tombstones are produced, the cleaner's `rill_cleaner_*` metrics show the
//! passes, and a consumer from the start sees only the newest value of each
//! key (tombstones kept, `delete.retention.ms` being a day); a keyless
//! record is refused with INVALID_RECORD.

use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rill_tests::kafka::{consume_all, create_topic, produce_all, producer};
use rill_tests::{data_dir, Broker};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const KEYS: usize = 200;
const ROUNDS: usize = 5;
const TOMBSTONES: usize = 10;
const FILLERS: usize = 60;

#[test]
fn compaction_keeps_the_newest_value_per_key() {
    let dir = data_dir();
    let props = dir.path().join("server.properties");
    // 100 slots: 90 keys a pass, for 200 keys.
    std::fs::write(
        &props,
        "log.retention.check.interval.ms=200\nlog.cleaner.dedupe.buffer.size=2400\n",
    )
    .expect("server.properties");
    let broker = Broker::start(
        RILL,
        dir.path(),
        &["--cores", "1", "--config", props.to_str().expect("utf-8")],
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let bootstrap = broker.bootstrap();
    runtime.block_on(create_topic(
        &bootstrap,
        "kv",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "4096"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    ));
    let p = producer(&bootstrap, &[("linger.ms", "0")]);
    let mut newest: BTreeMap<String, Option<String>> = BTreeMap::new();
    for round in 0..ROUNDS {
        let records: Vec<_> = (0..KEYS)
            .map(|k| {
                let value = format!("k{k}-r{round}");
                newest.insert(format!("k{k}"), Some(value.clone()));
                (Some(format!("k{k}").into_bytes()), value.into_bytes())
            })
            .collect();
        runtime.block_on(produce_all(&p, "kv", &records, Some(0)));
    }
    for k in 0..TOMBSTONES {
        let key = format!("k{k}");
        let record: FutureRecord<'_, String, [u8]> = FutureRecord::to("kv").key(&key).partition(0);
        runtime
            .block_on(p.send(record, Duration::from_secs(20)))
            .map_err(|(e, _)| e)
            .expect("tombstone delivered");
        newest.insert(key, None);
    }
    // Fillers, so that every update above lies in sealed (cleanable) segments.
    let fillers: Vec<_> = (0..FILLERS)
        .map(|i| (Some(format!("f{i}").into_bytes()), vec![b'x'; 200]))
        .collect();
    runtime.block_on(produce_all(&p, "kv", &fillers, Some(0)));

    // A keyless record: INVALID_RECORD, as Kafka answers on a compacted topic.
    let keyless: FutureRecord<'_, [u8], [u8]> =
        FutureRecord::to("kv").payload(&b"v"[..]).partition(0);
    let refused = runtime
        .block_on(p.send(keyless, Duration::from_secs(20)))
        .expect_err("a keyless record is refused");
    assert_eq!(
        refused.0.rdkafka_error_code(),
        Some(RDKafkaErrorCode::InvalidRecord),
        "{:?}",
        refused.0
    );

    let produced = KEYS * ROUNDS + TOMBSTONES + FILLERS;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let passes = broker.metric_sum("rill_cleaner_passes_total");
        let records = consume_all(&bootstrap, "kv", 1, produced, Duration::from_secs(3), &[]);
        let mut seen: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
        for r in &records {
            let key = String::from_utf8(r.key.clone().expect("keyed")).expect("utf-8");
            let value = r
                .value
                .clone()
                .map(|v| String::from_utf8(v).expect("utf-8"));
            seen.entry(key).or_default().push(value);
        }
        // The newest value of every key is there, whatever the progress.
        for (key, value) in &newest {
            assert_eq!(
                seen.get(key).and_then(|v| v.last()),
                Some(value),
                "key {key}"
            );
        }
        let duplicated = newest
            .keys()
            .filter(|k| seen.get(*k).is_some_and(|v| v.len() > 1))
            .count();
        if duplicated == 0 && passes >= 3 {
            assert_eq!(records.len(), KEYS + FILLERS, "one record per key");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not compacted in time: {passes} passes, {duplicated} keys still duplicated, {} records",
            records.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(broker.metric_sum("rill_cleaner_cleaned_bytes_total") > 0);
    assert!(broker.metric_sum("rill_cleaner_removed_bytes_total") > 0);
    assert!(
        broker.metric_sum("rill_cleaner_removed_records_total") >= (KEYS * (ROUNDS - 1)) as i64,
        "every superseded record went"
    );
}
