//! The table against the parser: nothing the parser reads is missing from
//! it, nothing in it is stale, and its defaults are the broker's.

use super::super::{AppliedListeners, BrokerConfig, KeyOutcome, TimeUnits};
use super::{broker_key, KeyDefault, BROKER_KEYS, IGNORED_KAFKA_KEYS};
use engine::config::kafka_topic_configs::spec_of_broker_name;
use std::collections::BTreeMap;

/// The parser's sources: every key it matches by name is a string literal
/// in a match arm of one of these.
const PARSER_SOURCES: &[(&str, &str)] = &[
    ("config.rs", include_str!("../../config.rs")),
    ("config/sasl.rs", include_str!("../sasl.rs")),
    ("config/oauth.rs", include_str!("../oauth.rs")),
    ("config/tls.rs", include_str!("../tls.rs")),
    ("config/authorizer.rs", include_str!("../authorizer.rs")),
    ("config/tiered.rs", include_str!("../tiered.rs")),
    ("conn_limits.rs", include_str!("../../conn_limits.rs")),
];

/// Whether `text` looks like a dotted config key (`log.retention.ms`).
fn is_key_like(text: &str) -> bool {
    text.contains('.')
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_')
}

/// The dotted string literals of `source` that stand in a match arm's
/// pattern: followed by `=>` or `|`, or preceded by `|`.
fn match_arm_keys(source: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut rest = source;
    while let Some(open) = rest.find('"') {
        let before = rest[..open].trim_end();
        let after_open = &rest[open + 1..];
        let Some(close) = after_open.find('"') else {
            break;
        };
        let literal = &after_open[..close];
        let after = after_open[close + 1..].trim_start();
        let in_pattern = after.starts_with("=>")
            || (after.starts_with('|') && !after.starts_with("||"))
            || (before.ends_with('|') && !before.ends_with("||"));
        if in_pattern && is_key_like(literal) {
            keys.push(literal.to_string());
        }
        rest = &after_open[close + 1..];
    }
    keys
}

#[test]
fn the_scan_finds_keys_in_match_arms_only() {
    let source =
        r#"match name { "a.b" => 1, "c.d" | "e.f" => 2, "PLAIN" => 3, _ => { f("g.h") } }"#;
    assert_eq!(match_arm_keys(source), ["a.b", "c.d", "e.f"]);
}

#[test]
fn every_key_the_parser_names_is_in_the_table() {
    let mut missing = Vec::new();
    for (file, source) in PARSER_SOURCES {
        for key in match_arm_keys(source) {
            let documented = broker_key(&key).is_some()
                || spec_of_broker_name(&key).is_some()
                || IGNORED_KAFKA_KEYS.contains(&key.as_str());
            if !documented {
                missing.push(format!("{key} ({file})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys the parser reads but config/keys.rs does not list: {missing:?}"
    );
}

#[test]
fn every_tls_key_read_is_in_the_table() {
    for key in super::super::tls::READ_KEYS {
        assert!(broker_key(key).is_some(), "{key} is read but not listed");
    }
}

/// `name = value` applied to a default broker: the outcome and the broker.
fn apply(name: &str, value: &str) -> (KeyOutcome, BrokerConfig) {
    let mut config = BrokerConfig::defaults();
    let mut applied = AppliedListeners::default();
    let mut units = TimeUnits::default();
    let outcome = config
        .apply_one(name, value, &mut applied, &mut units)
        .unwrap_or_else(|e| panic!("{name}={value}: {e}"));
    config
        .apply_time_units(&units)
        .unwrap_or_else(|e| panic!("{name}={value}: {e}"));
    (outcome, config)
}

/// A concrete name for a table entry (`<listener>` and `<mechanism>`
/// filled in).
fn concrete(name: &str) -> String {
    name.replace("<listener>", "sasl_plaintext")
        .replace("<mechanism>", "plain")
}

#[test]
fn every_key_in_the_table_is_read_with_its_example() {
    for key in BROKER_KEYS {
        let (outcome, _) = apply(&concrete(key.name), key.example);
        assert_eq!(
            outcome,
            KeyOutcome::Applied,
            "{} is listed but not read",
            key.name
        );
    }
}

#[test]
fn a_default_given_as_a_value_is_the_brokers_own() {
    let defaults = format!("{:?}", BrokerConfig::defaults());
    for key in BROKER_KEYS {
        if let KeyDefault::Value(value) = key.default {
            let (_, config) = apply(&concrete(key.name), value);
            assert!(
                format!("{config:?}") == defaults,
                "{}={value} changes a default broker: the listed default is stale",
                key.name
            );
        }
    }
}

#[test]
fn a_changed_value_is_seen_by_the_default_check() {
    let defaults = format!("{:?}", BrokerConfig::defaults());
    let (_, config) = apply("num.partitions", "7");
    assert_ne!(format!("{config:?}"), defaults);
}

#[test]
fn keys_are_listed_once_and_not_beside_their_topic_default() {
    let mut seen = BTreeMap::new();
    for key in BROKER_KEYS {
        assert!(
            seen.insert(key.name, ()).is_none(),
            "{} listed twice",
            key.name
        );
        assert!(
            spec_of_broker_name(key.name).is_none(),
            "{} is a topic default; the topic-config table documents it",
            key.name
        );
        assert!(
            !IGNORED_KAFKA_KEYS.contains(&key.name),
            "{} is read and ignored",
            key.name
        );
    }
}

#[test]
fn ignored_kafka_keys_are_accepted_and_not_applied() {
    for name in IGNORED_KAFKA_KEYS {
        assert_eq!(apply(name, "1").0, KeyOutcome::IgnoredKafkaKey, "{name}");
    }
    assert_eq!(apply("no.such.key", "1").0, KeyOutcome::Unknown);
}

#[test]
fn listener_patterns_match_one_segment() {
    let name = "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config";
    assert!(broker_key(name).is_some());
    assert!(broker_key("listener.name.sasl.jaas.config").is_none());
}
