//! Checks [`engine::ErrorCode`] against kafka-protocol's `ResponseError`, so
//! rill's table of Kafka error codes cannot drift from Kafka's: every variant
//! must have Kafka's number and Kafka's name.
//!
//! The check lives in net because the engine does not depend on the wire
//! codec (see the `engine::error_code` module doc).

use engine::ErrorCode;
use kafka_protocol::ResponseError;

/// `UnknownTopicOrPartition` → `UNKNOWN_TOPIC_OR_PARTITION`.
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (index, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && index > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[test]
fn every_code_has_kafkas_number_and_name() {
    for &ours in ErrorCode::ALL {
        let Some(theirs) = ResponseError::try_from_code(ours.code()) else {
            // kafka-protocol has no variant for success.
            assert_eq!(ours, ErrorCode::None, "code 0 must be NONE");
            assert_eq!(ours.to_string(), "NONE");
            continue;
        };
        assert!(
            !matches!(theirs, ResponseError::Unknown(_)),
            "{ours:?} = {} is not a Kafka error code",
            ours.code()
        );
        assert_eq!(theirs.code(), ours.code());
        let name = format!("{theirs:?}");
        assert_eq!(format!("{ours:?}"), name, "code {}", ours.code());
        assert_eq!(ours.to_string(), upper_snake(&name), "code {}", ours.code());
    }
}

#[test]
fn upper_snake_matches_kafkas_spelling() {
    assert_eq!(
        upper_snake("UnknownTopicOrPartition"),
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(upper_snake("InvalidTxnState"), "INVALID_TXN_STATE");
}
