//! Client-metrics subscriptions (KIP-714) as an operator configures them on
//! CLIENT_METRICS resources, and what they ask of one client (pure).
//!
//! A resource has three configs, Kafka's names and defaults:
//!
//! - `metrics`: comma list of metric-name prefixes; `*` (or an empty
//!   prefix) is every metric. Default: none.
//! - `interval.ms`: how often a matching client pushes, 100 to 3,600,000.
//!   Default 300,000 (5 minutes).
//! - `match`: comma list of `selector=regex`, selectors
//!   `client_instance_id`, `client_id`, `client_software_name`,
//!   `client_software_version`, `client_source_address`,
//!   `client_source_port`. A client matches when every regex matches its
//!   selector's whole value (Java's `Pattern.matches`, as Kafka). Default:
//!   none, so every client matches.
//!
//! A client gets the union of the metrics of every subscription that
//! matches it, at the shortest of their intervals, under a subscription id
//! derived from exactly that (and its instance id): the id changes when,
//! and only when, what the client must push changes, so a push under an
//! old id is told UNKNOWN_SUBSCRIPTION_ID and the client asks again.

use regex_lite::Regex;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// The config naming the metric prefixes.
pub const METRICS: &str = "metrics";
/// The config naming the push interval.
pub const INTERVAL_MS: &str = "interval.ms";
/// The config naming which clients a subscription is for.
pub const MATCH: &str = "match";
/// Every config of a CLIENT_METRICS resource, in the order DescribeConfigs
/// lists them.
pub const CONFIGS: [&str; 3] = [METRICS, INTERVAL_MS, MATCH];
/// Kafka's default `interval.ms`, also the interval a client with no
/// matching subscription asks again after.
pub const DEFAULT_INTERVAL_MS: i32 = 300_000;
/// Kafka's range of `interval.ms`.
pub const INTERVAL_MS_RANGE: RangeInclusive<i32> = 100..=3_600_000;
/// The `metrics` item that stands for every metric.
pub const ALL_METRICS: &str = "*";

/// A client property a `match` entry selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// `client_instance_id`: the instance id in Kafka's text form.
    InstanceId,
    /// `client_id`: the request header's client id.
    ClientId,
    /// `client_software_name`: from the client's ApiVersions.
    SoftwareName,
    /// `client_software_version`: from the client's ApiVersions.
    SoftwareVersion,
    /// `client_source_address`: the connection's peer address.
    SourceAddress,
    /// `client_source_port`: the connection's peer port.
    SourcePort,
}

impl Selector {
    /// Every selector with its Kafka name.
    pub const ALL: [(&'static str, Selector); 6] = [
        ("client_instance_id", Selector::InstanceId),
        ("client_id", Selector::ClientId),
        ("client_software_name", Selector::SoftwareName),
        ("client_software_version", Selector::SoftwareVersion),
        ("client_source_address", Selector::SourceAddress),
        ("client_source_port", Selector::SourcePort),
    ];

    fn parse(name: &str) -> Option<Selector> {
        Selector::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, selector)| *selector)
    }
}

/// Why a client-metrics config is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    /// Not one of [`CONFIGS`].
    #[error("unknown client-metrics config '{0}' (metrics, interval.ms or match)")]
    UnknownConfig(String),
    /// `interval.ms` out of range or not a number.
    #[error("interval.ms {0:?} is not a whole number of ms from 100 to 3600000")]
    Interval(String),
    /// A `match` entry that is not `selector=regex` with a known selector.
    #[error(
        "match entry {0:?} is not selector=regex with a selector of client_instance_id, \
         client_id, client_software_name, client_software_version, \
         client_source_address, client_source_port"
    )]
    MatchEntry(String),
    /// A `match` regex that does not compile.
    #[error("match entry {entry:?}: {reason}")]
    MatchRegex {
        /// The entry.
        entry: String,
        /// The regex parser's complaint.
        reason: String,
    },
}

/// The items of a comma list (trimmed, empty items dropped).
pub fn list_items(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Checks one config's value as IncrementalAlterConfigs sets it.
pub fn check(key: &str, value: &str) -> Result<(), SubscriptionError> {
    match key {
        METRICS => Ok(()),
        INTERVAL_MS => parse_interval(value).map(|_| ()),
        MATCH => list_items(value)
            .iter()
            .try_for_each(|entry| parse_match(entry).map(|_| ())),
        other => Err(SubscriptionError::UnknownConfig(other.to_owned())),
    }
}

fn parse_interval(value: &str) -> Result<i32, SubscriptionError> {
    value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|ms| INTERVAL_MS_RANGE.contains(ms))
        .ok_or_else(|| SubscriptionError::Interval(value.to_owned()))
}

fn parse_match(entry: &str) -> Result<(Selector, Regex), SubscriptionError> {
    let (name, pattern) = entry
        .split_once('=')
        .ok_or_else(|| SubscriptionError::MatchEntry(entry.to_owned()))?;
    let selector = Selector::parse(name.trim())
        .ok_or_else(|| SubscriptionError::MatchEntry(entry.to_owned()))?;
    // Anchored: Kafka matches the whole value (Java's `Pattern.matches`).
    let regex = Regex::new(&format!("^(?:{})$", pattern.trim())).map_err(|e| {
        SubscriptionError::MatchRegex {
            entry: entry.to_owned(),
            reason: e.to_string(),
        }
    })?;
    Ok((selector, regex))
}

/// One subscription, parsed.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// The resource's name.
    pub name: String,
    /// Metric-name prefixes (`""`: every metric).
    pub metrics: Vec<String>,
    /// Push interval.
    pub interval_ms: i32,
    matchers: Vec<(Selector, Regex)>,
}

impl Subscription {
    /// Parses a resource's configs (those not set take Kafka's defaults).
    pub fn parse(
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<Subscription, SubscriptionError> {
        if let Some(unknown) = configs.keys().find(|k| !CONFIGS.contains(&k.as_str())) {
            return Err(SubscriptionError::UnknownConfig(unknown.clone()));
        }
        let metrics = configs
            .get(METRICS)
            .map(|value| list_items(value))
            .unwrap_or_default()
            .into_iter()
            .map(|m| if m == ALL_METRICS { String::new() } else { m })
            .collect();
        let interval_ms = match configs.get(INTERVAL_MS) {
            Some(value) => parse_interval(value)?,
            None => DEFAULT_INTERVAL_MS,
        };
        let matchers = match configs.get(MATCH) {
            Some(value) => list_items(value)
                .iter()
                .map(|entry| parse_match(entry))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Subscription {
            name: name.to_owned(),
            metrics,
            interval_ms,
            matchers,
        })
    }

    /// Whether every `match` regex matches the client.
    pub fn matches(&self, client: &ClientMetadata) -> bool {
        self.matchers
            .iter()
            .all(|(selector, regex)| regex.is_match(client.get(*selector)))
    }
}

/// What a subscription can select a client by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientMetadata {
    /// Kafka's text form of the instance id.
    pub instance_id: String,
    /// The request header's client id.
    pub client_id: String,
    /// From ApiVersions (empty when the client did not say).
    pub software_name: String,
    /// From ApiVersions (empty when the client did not say).
    pub software_version: String,
    /// The connection's peer address (empty when unknown).
    pub source_address: String,
    /// The connection's peer port (empty when unknown).
    pub source_port: String,
}

impl ClientMetadata {
    fn get(&self, selector: Selector) -> &str {
        match selector {
            Selector::InstanceId => &self.instance_id,
            Selector::ClientId => &self.client_id,
            Selector::SoftwareName => &self.software_name,
            Selector::SoftwareVersion => &self.software_version,
            Selector::SourceAddress => &self.source_address,
            Selector::SourcePort => &self.source_port,
        }
    }
}

/// What the subscriptions ask of one client instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Changes exactly when the rest does (or the instance).
    pub subscription_id: i32,
    /// The shortest interval of the matching subscriptions
    /// ([`DEFAULT_INTERVAL_MS`] when none matches).
    pub interval_ms: i32,
    /// Sorted prefixes; `[""]` for every metric; empty when nothing is
    /// asked (the client then does not push).
    pub metrics: Vec<String>,
}

impl Resolved {
    /// Whether a pushed metric's (OTLP) name is one the client was asked for.
    pub fn wants(&self, metric_name: &str) -> bool {
        self.metrics
            .iter()
            .any(|p| metric_name.starts_with(p.as_str()))
    }
}

/// What `subscriptions` ask of the client with `metadata` and instance id
/// `instance_id`.
pub fn resolve(
    subscriptions: &[Subscription],
    metadata: &ClientMetadata,
    instance_id: [u8; 16],
) -> Resolved {
    let matched: Vec<&Subscription> = subscriptions
        .iter()
        .filter(|s| s.matches(metadata))
        .collect();
    let interval_ms = matched
        .iter()
        .map(|s| s.interval_ms)
        .min()
        .unwrap_or(DEFAULT_INTERVAL_MS);
    let mut metrics: Vec<String> = matched.iter().flat_map(|s| s.metrics.clone()).collect();
    if metrics.iter().any(String::is_empty) {
        metrics = vec![String::new()];
    }
    metrics.sort();
    metrics.dedup();
    Resolved {
        subscription_id: subscription_id(&metrics, interval_ms, instance_id),
        interval_ms,
        metrics,
    }
}

/// A CRC32C of what is asked, mixed with the instance id (as Kafka's
/// `computeSubscriptionId`): two instances with the same subscription get
/// different ids, and an unchanged subscription keeps its id across
/// restarts and shards.
fn subscription_id(metrics: &[String], interval_ms: i32, instance_id: [u8; 16]) -> i32 {
    let asked = format!("{}|{interval_ms}", metrics.join(","));
    let asked_crc = crc_fast::crc32_iscsi(asked.as_bytes());
    let instance_crc = crc_fast::crc32_iscsi(&instance_id);
    i32::from_be_bytes((asked_crc ^ instance_crc).to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn client(client_id: &str, software: &str) -> ClientMetadata {
        ClientMetadata {
            instance_id: String::from("AAAAAAAAAAAAAAAAAAAAAA"),
            client_id: client_id.to_owned(),
            software_name: software.to_owned(),
            software_version: String::from("2.12.1"),
            source_address: String::from("127.0.0.1"),
            source_port: String::from("53000"),
        }
    }

    #[test]
    fn configs_are_checked_as_kafka_checks_them() {
        assert!(check(METRICS, "org.apache.kafka.producer., *").is_ok());
        assert!(check(INTERVAL_MS, "100").is_ok());
        assert!(check(INTERVAL_MS, "99").is_err());
        assert!(check(INTERVAL_MS, "3600001").is_err());
        assert!(check(INTERVAL_MS, "soon").is_err());
        assert!(check(MATCH, "client_id=app-.*,client_software_name=librdkafka").is_ok());
        assert!(matches!(
            check(MATCH, "client_colour=red"),
            Err(SubscriptionError::MatchEntry(_))
        ));
        assert!(matches!(
            check(MATCH, "client_id"),
            Err(SubscriptionError::MatchEntry(_))
        ));
        assert!(matches!(
            check(MATCH, "client_id=app-(("),
            Err(SubscriptionError::MatchRegex { .. })
        ));
        assert!(matches!(
            check("push.interval", "1"),
            Err(SubscriptionError::UnknownConfig(_))
        ));
    }

    #[test]
    fn a_client_matches_when_every_regex_matches_the_whole_value() {
        let s = Subscription::parse(
            "s",
            &configs(&[(MATCH, "client_id=app-.*, client_software_name=librdkafka")]),
        )
        .unwrap();
        assert!(s.matches(&client("app-1", "librdkafka")));
        assert!(!s.matches(&client("app-1", "apache-kafka-java")));
        // Anchored both ends: "my-app-1" is not "app-.*".
        assert!(!s.matches(&client("my-app-1", "librdkafka")));
        let everyone = Subscription::parse("all", &configs(&[])).unwrap();
        assert!(everyone.matches(&client("", "")));
        assert_eq!(everyone.interval_ms, DEFAULT_INTERVAL_MS);
        assert!(everyone.metrics.is_empty());
    }

    #[test]
    fn matching_subscriptions_are_merged_with_the_shortest_interval() {
        let producers = Subscription::parse(
            "producers",
            &configs(&[
                (METRICS, "org.apache.kafka.producer."),
                (INTERVAL_MS, "1000"),
                (MATCH, "client_id=p.*"),
            ]),
        )
        .unwrap();
        let latency = Subscription::parse(
            "latency",
            &configs(&[
                (
                    METRICS,
                    "org.apache.kafka.producer.node.request.latency, org.apache.kafka.consumer.",
                ),
                (INTERVAL_MS, "5000"),
            ]),
        )
        .unwrap();
        let subs = [producers, latency];
        let id = [7; 16];
        let resolved = resolve(&subs, &client("p1", "librdkafka"), id);
        assert_eq!(resolved.interval_ms, 1000);
        assert_eq!(
            resolved.metrics,
            [
                "org.apache.kafka.consumer.",
                "org.apache.kafka.producer.",
                "org.apache.kafka.producer.node.request.latency"
            ]
        );
        assert!(resolved.wants("org.apache.kafka.producer.record.queue.time.avg"));
        assert!(!resolved.wants("org.apache.kafka.admin.x"));
        // A client the first does not match gets only the second.
        let other = resolve(&subs, &client("c1", "librdkafka"), id);
        assert_eq!(other.interval_ms, 5000);
        assert_ne!(other.subscription_id, resolved.subscription_id);
        // Nothing matches: nothing asked, the default interval.
        let none = resolve(&[], &client("c1", "x"), id);
        assert!(none.metrics.is_empty());
        assert_eq!(none.interval_ms, DEFAULT_INTERVAL_MS);
    }

    #[test]
    fn the_subscription_id_follows_what_is_asked_and_the_instance() {
        let all =
            Subscription::parse("all", &configs(&[(METRICS, "*"), (INTERVAL_MS, "500")])).unwrap();
        let c = client("x", "y");
        let a = resolve(std::slice::from_ref(&all), &c, [1; 16]);
        assert_eq!(a.metrics, [""]);
        assert!(a.wants("anything"));
        // Stable: the same inputs give the same id (any shard, any restart).
        assert_eq!(a, resolve(std::slice::from_ref(&all), &c, [1; 16]));
        // Another instance, another id.
        let b = resolve(std::slice::from_ref(&all), &c, [2; 16]);
        assert_ne!(a.subscription_id, b.subscription_id);
        // Another interval, another id.
        let faster =
            Subscription::parse("all", &configs(&[(METRICS, "*"), (INTERVAL_MS, "400")])).unwrap();
        let c2 = resolve(&[faster], &c, [1; 16]);
        assert_ne!(a.subscription_id, c2.subscription_id);
    }
}
