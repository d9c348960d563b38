//! OMB files in and out: the shipped workloads round-trip and translate,
//! what cannot be honoured is refused or listed, and a result carries
//! every field of OMB's `TestResult`.

use super::result::omb_result;
use super::translate::translate;
use super::workload::{OmbKafkaDriver, OmbWorkload};
use crate::results::RunResult;
use crate::stats::{new_histogram, HistogramData, IntervalHistograms, SecondSample};
use crate::workload::{KeyDistribution, MessageSize, StartOffset, Workload};
use std::path::{Path, PathBuf};

fn shipped(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/omb")
        .join(file)
}

const WORKLOADS: [&str; 3] = [
    "1-topic-100-partitions-1kb.yaml",
    "max-rate-1-topic-100-partitions-1kb-4p-4c.yaml",
    "1-topic-100-partitions-1kb-4p-4c-500k-backlog.yaml",
];

fn driver() -> OmbKafkaDriver {
    OmbKafkaDriver::from_file(&shipped("driver-rill.yaml")).unwrap()
}

#[test]
fn the_shipped_workloads_round_trip_and_translate() {
    for file in WORKLOADS {
        let omb = OmbWorkload::from_file(&shipped(file)).unwrap();
        let again: OmbWorkload = serde_yaml::from_str(&omb.to_yaml().unwrap()).unwrap();
        assert_eq!(again, omb, "{file}");
        let translated = translate(&omb, &driver(), Path::new(".")).unwrap();
        let workload = &translated.workload;
        assert_eq!(workload.partitions_per_topic, 100, "{file}");
        assert_eq!(workload.message_size, MessageSize::Fixed(1024), "{file}");
        assert_eq!(
            workload.producer_rate_msgs_per_s, omb.producer_rate,
            "{file}"
        );
        assert_eq!(workload.test_duration_s, omb.test_duration_minutes * 60);
        assert_eq!(workload.acks, -1);
        assert_eq!(workload.batch_size_bytes, 1_048_576);
        assert_eq!(workload.consumer_start, StartOffset::Earliest);
        assert_eq!(workload.consumer_group.as_deref(), Some("sub-000"));
    }
    let backlog = OmbWorkload::from_file(&shipped(WORKLOADS[2])).unwrap();
    let workload = translate(&backlog, &driver(), Path::new("."))
        .unwrap()
        .workload;
    assert_eq!(workload.consumer_backlog_size_mb, 512 * 1024);
    assert_eq!(workload.consumers_per_topic, 4);
}

fn omb(extra: &str) -> OmbWorkload {
    let text = format!(
        "name: w\ntopics: 2\npartitionsPerTopic: 3\nmessageSize: 100\n\
         subscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 1\n\
         producerRate: 1000\ntestDurationMinutes: 1\n{extra}"
    );
    serde_yaml::from_str(&text).unwrap()
}

#[test]
fn keys_defaults_and_payload_files_follow_omb() {
    let plain = omb("");
    assert_eq!(plain.warmup_duration_minutes, 1);
    assert_eq!(plain.backlog_drain_ratio, 1.0);
    let keyed = translate(
        &omb("keyDistributor: KEY_ROUND_ROBIN\n"),
        &driver(),
        Path::new("."),
    )
    .unwrap()
    .workload;
    assert_eq!(keyed.key_distribution, KeyDistribution::RoundRobin);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.data"), vec![7u8; 2048]).unwrap();
    let sized = translate(&omb("payloadFile: p.data\n"), &driver(), dir.path()).unwrap();
    assert_eq!(sized.workload.message_size, MessageSize::Fixed(2048));
    assert!(translate(&omb("payloadFile: missing.data\n"), &driver(), dir.path()).is_err());
}

#[test]
fn what_cannot_be_honoured_is_refused_or_listed() {
    let two = OmbWorkload {
        subscriptions_per_topic: 2,
        ..omb("")
    };
    let error = translate(&two, &driver(), Path::new(".")).unwrap_err();
    assert!(error.to_string().contains("one subscription"), "{error}");
    let translated = translate(&omb(""), &driver(), Path::new(".")).unwrap();
    assert!(
        (translated.not_applied.iter()).any(|l| l == "consumerConfig: enable.auto.commit=false"),
        "{:?}",
        translated.not_applied
    );
    let bad = OmbKafkaDriver {
        producer_config: String::from("acks=2\n"),
        ..driver()
    };
    assert!(translate(&omb(""), &bad, Path::new(".")).is_err());
}

/// Every field of OMB's `TestResult`.
const TEST_RESULT_FIELDS: &[&str] = &[
    "workload",
    "driver",
    "messageSize",
    "topics",
    "partitions",
    "producersPerTopic",
    "consumersPerTopic",
    "publishRate",
    "publishErrorRate",
    "consumeRate",
    "backlog",
    "aggregatedPublishLatencyQuantiles",
    "aggregatedPublishDelayLatencyQuantiles",
    "aggregatedEndToEndLatencyQuantiles",
];
const LATENCY_PREFIXES: &[&str] = &[
    "publishLatency",
    "publishDelayLatency",
    "endToEndLatency",
    "aggregatedPublishLatency",
    "aggregatedPublishDelayLatency",
    "aggregatedEndToEndLatency",
];
const LATENCY_SUFFIXES: &[&str] = &[
    "Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max",
];

/// Every field name OMB's `TestResult` has.
pub(crate) fn omb_field_names() -> Vec<String> {
    let mut names: Vec<String> = TEST_RESULT_FIELDS.iter().map(|f| f.to_string()).collect();
    for prefix in LATENCY_PREFIXES {
        names.extend(LATENCY_SUFFIXES.iter().map(|s| format!("{prefix}{s}")));
    }
    names
}

fn histogram_of(values_us: &[u64]) -> HistogramData {
    let mut histogram = new_histogram();
    for &value in values_us {
        histogram.record(value).unwrap();
    }
    HistogramData::of(&histogram)
}

fn second(elapsed_s: f64, publish_us: u64) -> SecondSample {
    SecondSample {
        elapsed_s,
        produce_msgs_per_s: 100.0,
        consume_msgs_per_s: 90.0,
        backlog_messages: elapsed_s as i64,
        interval: Some(IntervalHistograms {
            publish: histogram_of(&[publish_us]),
            end_to_end: histogram_of(&[publish_us * 2]),
            publish_delay: histogram_of(&[5]),
        }),
        ..SecondSample::default()
    }
}

#[test]
fn a_result_has_every_omb_field_in_omb_units_and_windows() {
    let run = RunResult {
        workload: Workload {
            name: "w".into(),
            ..Workload::default()
        },
        series: (1..=15)
            .map(|s| second(f64::from(s), 2_000 * s as u64))
            .collect(),
        publish_latency_histogram: histogram_of(&(1..=1000).map(|v| v * 100).collect::<Vec<_>>()),
        end_to_end_latency_histogram: histogram_of(&[4_000]),
        ..RunResult::default()
    };
    let json = omb_result(&run, "rill");
    for field in omb_field_names() {
        assert!(json.get(&field).is_some(), "no {field} in {json}");
    }
    // 15 seconds are two windows: 1-10 s and 11-15 s.
    assert_eq!(json["publishRate"].as_array().unwrap().len(), 2);
    assert_eq!(json["backlog"][0], 10);
    // Milliseconds: the first window's slowest publish took 20 ms.
    let max_ms = json["publishLatencyMax"][0].as_f64().unwrap();
    assert!((19.9..=20.1).contains(&max_ms), "{max_ms}");
    assert_eq!(
        json["publishDelayLatency50pct"][0], 5,
        "microseconds, whole"
    );
    let quantiles = json["aggregatedPublishLatencyQuantiles"]
        .as_object()
        .unwrap();
    assert!(
        quantiles.len() > 2 && quantiles.contains_key("100.0"),
        "{quantiles:?}"
    );
    assert_eq!(json["driver"], "rill");
}
