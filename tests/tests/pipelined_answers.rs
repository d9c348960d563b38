//! Answers to pipelined requests: one connection sends many requests in
//! one write, and the broker, which sends the answers already known
//! together, still answers each request that has an answer, once, in
//! request order, and none for an acks=0 Produce.

use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::kafka::{consume_all, create_topic};
use rill_tests::raw::{one_record_produce, read_response, request_frame};
use rill_tests::{data_dir, Broker};
use std::io::Write;
use std::time::Duration;

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const REQUESTS: i32 = 60;

/// What request `i` of the pipeline is.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    ApiVersions,
    /// A Produce the broker answers (acks=-1 or 1).
    Answered(i16),
    /// acks=0: no answer.
    Unanswered,
}

fn kind(i: i32) -> Kind {
    match i % 5 {
        0 => Kind::ApiVersions,
        1 | 3 => Kind::Answered(-1),
        2 => Kind::Answered(1),
        _ => Kind::Unanswered,
    }
}

fn frame(topic: &str, i: i32) -> Vec<u8> {
    let produce = |acks: i16| {
        let mut data = TopicProduceData::default();
        data.name = TopicName(StrBytes::from_string(topic.to_string()));
        let mut request = one_record_produce(data, format!("value-{i}").as_bytes());
        request.acks = acks;
        request_frame(ApiKey::Produce, 9, i, &request)
    };
    match kind(i) {
        Kind::ApiVersions => {
            request_frame(ApiKey::ApiVersions, 3, i, &ApiVersionsRequest::default())
        }
        Kind::Answered(acks) => produce(acks),
        Kind::Unanswered => produce(0),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_each_answered_once_in_order() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &["--flush-policy", "fsync"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "pipelined-answers", 1, &[]).await;
    let mut socket = rill_tests::raw::connect(&bootstrap, Duration::from_secs(20));
    let frames: Vec<u8> = (0..REQUESTS)
        .flat_map(|i| frame("pipelined-answers", i))
        .collect();
    socket.write_all(&frames).expect("requests sent");

    // `read_response` fails the test on any other correlation id, so an
    // answer out of order, twice, or to an acks=0 Produce is caught.
    let mut offsets = Vec::new();
    for i in (0..REQUESTS).filter(|i| kind(*i) != Kind::Unanswered) {
        if kind(i) == Kind::ApiVersions {
            let answer: ApiVersionsResponse =
                read_response(&mut socket, ApiKey::ApiVersions, 3, i).expect("answered");
            assert_eq!(answer.error_code, 0);
            continue;
        }
        let answer: ProduceResponse =
            read_response(&mut socket, ApiKey::Produce, 9, i).expect("answered");
        let partition = &answer.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, 0, "request {i}");
        offsets.push(partition.base_offset);
    }
    assert!(
        offsets.windows(2).all(|pair| pair[0] < pair[1]),
        "answers follow the appends' order: {offsets:?}"
    );
    // Every Produce, answered or not, was appended in request order.
    let produced = (0..REQUESTS).filter(|i| kind(*i) != Kind::ApiVersions);
    let got = consume_all(
        &bootstrap,
        "pipelined-answers",
        1,
        produced.clone().count(),
        Duration::from_secs(20),
        &[],
    );
    let values: Vec<String> = got
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    let expected: Vec<String> = produced.map(|i| format!("value-{i}")).collect();
    assert_eq!(values, expected);
}
