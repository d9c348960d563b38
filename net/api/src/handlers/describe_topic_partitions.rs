//! DescribeTopicPartitions (key 75, KIP-966): the partitions of the asked
//! topics (every topic when the list is empty), one page at a time, as Kafka
//! 3.8's `DescribeTopicPartitionsRequestHandler` serves them.
//!
//! Topics are taken in name order from the cursor's topic on (its partitions
//! from the cursor's index), until `response_partition_limit` partitions
//! (at most [`MAX_PARTITIONS_PER_RESPONSE`], at least 1) are listed; the
//! response's `next_cursor` names the first partition left out. Placement
//! comes from the committed metadata image, as for Metadata, with each
//! partition's eligible leader replicas and last known ELR (KIP-966: the
//! replicas out of the ISR that may still lead cleanly; see
//! `rill-cluster`'s `controller::elr`).

use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kernel::topics::TopicEntry;
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::collections::BTreeSet;
use std::ops::Range;
use std::rc::Rc;

/// v0 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeTopicPartitions,
    min_version: 0,
    max_version: 0,
    handle,
};

/// Kafka's `max.request.partition.size.limit` default: the most partitions
/// one response lists, whatever the request asks.
pub const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeTopicPartitionsRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let response = match describe(&shard, &body, &authz) {
            Ok(response) => response,
            Err(code) => refused(&body, code),
        };
        request.respond(&response)
    })
}

/// The whole request refused with `code` (an invalid cursor): each asked
/// topic answered with it, as Kafka's error response does.
fn refused(
    body: &DescribeTopicPartitionsRequest,
    code: ErrorCode,
) -> DescribeTopicPartitionsResponse {
    let mut response = DescribeTopicPartitionsResponse::default();
    response.topics = body
        .topics
        .iter()
        .map(|t| error_topic(t.name.0.to_string(), code))
        .collect();
    response
}

fn describe(
    shard: &Shard,
    body: &DescribeTopicPartitionsRequest,
    authz: &Authz,
) -> Result<DescribeTopicPartitionsResponse, ErrorCode> {
    let all_topics = body.topics.is_empty();
    let cursor = body
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let cursor_topic = cursor.as_ref().map(|(t, _)| t.as_str()).unwrap_or("");
    // Names from the cursor's topic on, sorted and once each.
    let names: BTreeSet<String> = if all_topics {
        shard
            .topics
            .borrow()
            .iter()
            .map(|e| e.name.clone())
            .collect()
    } else {
        body.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    let names: Vec<String> = names
        .into_iter()
        .filter(|n| n.as_str() >= cursor_topic)
        .collect();
    if let Some((topic, partition)) = &cursor {
        // Kafka: the cursor's topic must be one of the asked ones, and its
        // partition a valid index.
        if *partition < 0 || (!all_topics && !names.contains(topic)) {
            return Err(ErrorCode::InvalidRequest);
        }
    }
    let mut unauthorized = Vec::new();
    let mut listed = Vec::new();
    for name in names {
        if authz.allows_topic(Operation::Describe, &name) {
            let entry = shard.topics.borrow().get(&name).cloned();
            listed.push((name, entry));
        } else if !all_topics {
            // Refused without saying whether it exists, as Kafka does.
            unauthorized.push(error_topic(name, ErrorCode::TopicAuthorizationFailed));
        }
        // Listing every topic leaves out those the caller may not describe.
    }
    let counts: Vec<(&str, Option<i32>)> = listed
        .iter()
        .map(|(n, e)| (n.as_str(), e.as_ref().map(|e| e.partitions)))
        .collect();
    let start = |topic: &str| match &cursor {
        Some((t, p)) if t == topic => *p,
        _ => 0,
    };
    let limit = body
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE);
    let (pages, next) = paginate(&counts, start, limit, all_topics);
    let mut response = DescribeTopicPartitionsResponse::default();
    for (index, range) in pages {
        let (name, entry) = &listed[index];
        let topic = match (entry, range) {
            (Some(entry), Some(range)) => topic_partitions(shard, entry, range, authz),
            _ => error_topic(name.clone(), ErrorCode::UnknownTopicOrPartition),
        };
        response.topics.push(topic);
    }
    response.next_cursor = next.map(|(topic, partition_index)| {
        let mut cursor = Cursor::default();
        cursor.topic_name = TopicName(str_bytes(topic));
        cursor.partition_index = partition_index;
        cursor
    });
    response.topics.extend(unauthorized);
    Ok(response)
}

/// The topics of a page, by index, with the partitions listed (`None`: an
/// unknown topic).
type Listed = Vec<(usize, Option<Range<i32>>)>;

/// The (topic, partition) a next page starts at.
type NextCursor = Option<(String, i32)>;

/// One page of `topics` (name, partition count or `None` when unknown, in
/// name order): the topics it lists by index into `topics`, each with the
/// range of its partitions listed (`None`: unknown), and the cursor of the
/// first partition left out. `start` gives a topic's first partition (the
/// cursor's); at most `limit` partitions are listed. Unknown topics take no
/// room and, when `skip_unknown` (every topic asked), are not listed.
/// Kafka's `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`.
fn paginate(
    topics: &[(&str, Option<i32>)],
    start: impl Fn(&str) -> i32,
    limit: i32,
    skip_unknown: bool,
) -> (Listed, NextCursor) {
    let mut remaining = limit;
    let mut pages = Vec::new();
    for (index, &(name, count)) in topics.iter().enumerate() {
        if remaining == 0 {
            // The page is full: the next one starts at this topic.
            return (pages, Some((name.to_string(), 0)));
        }
        let Some(count) = count else {
            if !skip_unknown {
                pages.push((index, None));
            }
            continue;
        };
        let first = start(name).min(count);
        let end = first.saturating_add(remaining).min(count);
        pages.push((index, Some(first..end)));
        remaining -= end - first;
        if end < count {
            return (pages, Some((name.to_string(), end)));
        }
    }
    (pages, None)
}

fn error_topic(name: String, code: ErrorCode) -> DescribeTopicPartitionsResponseTopic {
    let mut topic = DescribeTopicPartitionsResponseTopic::default();
    topic.error_code = code.code();
    topic.name = Some(TopicName(str_bytes(name)));
    topic.partitions = Vec::new();
    topic
}

fn topic_partitions(
    shard: &Shard,
    entry: &TopicEntry,
    range: Range<i32>,
    authz: &Authz,
) -> DescribeTopicPartitionsResponseTopic {
    let own = shard.config.broker_id;
    let image = shard.runtime().view.image();
    let placed = image
        .topic_by_name(&entry.name)
        .filter(|topic| topic.topic_id == entry.topic_id);
    let ids = |brokers: &[i32]| brokers.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
    let mut topic = DescribeTopicPartitionsResponseTopic::default();
    topic.name = Some(TopicName(str_bytes(entry.name.clone())));
    topic.topic_id = uuid(entry.topic_id);
    // The same rule as Metadata's, so that both APIs agree.
    topic.is_internal = entry.name.starts_with("__");
    topic.topic_authorized_operations = authz.topic_operations(true, &entry.name);
    topic.partitions = range
        .map(|p| {
            let mut partition = DescribeTopicPartitionsResponsePartition::default();
            partition.partition_index = p;
            partition.eligible_leader_replicas = Some(Vec::new());
            partition.last_known_elr = Some(Vec::new());
            match placed.and_then(|t| t.partitions.get(&p)) {
                Some(state) => {
                    partition.leader_id = BrokerId(state.leader);
                    partition.leader_epoch = state.leader_epoch;
                    partition.replica_nodes = ids(&state.replicas);
                    partition.isr_nodes = ids(&state.isr);
                    partition.eligible_leader_replicas = Some(ids(&state.eligible_leader_replicas));
                    partition.last_known_elr = Some(ids(&state.last_known_elr));
                    let offline: Vec<i32> = state
                        .replicas
                        .iter()
                        .copied()
                        .filter(|&b| !image.is_live(b))
                        .collect();
                    partition.offline_replicas = ids(&offline);
                    if state.leader < 0 {
                        partition.error_code = ErrorCode::LeaderNotAvailable.code();
                    }
                }
                // Not in the committed image (yet): served by this broker,
                // as Metadata answers.
                None => {
                    partition.leader_id = BrokerId(own);
                    partition.leader_epoch = 0;
                    partition.replica_nodes = vec![BrokerId(own)];
                    partition.isr_nodes = vec![BrokerId(own)];
                }
            }
            partition
        })
        .collect();
    topic
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        topics: &[(&str, Option<i32>)],
        cursor: Option<(&str, i32)>,
        limit: i32,
        skip_unknown: bool,
    ) -> (Listed, NextCursor) {
        let start = |t: &str| match cursor {
            Some((c, p)) if c == t => p,
            _ => 0,
        };
        paginate(topics, start, limit, skip_unknown)
    }

    #[test]
    fn one_page_when_everything_fits() {
        let topics = [("a", Some(3)), ("b", Some(2))];
        let (pages, next) = run(&topics, None, 2000, true);
        assert_eq!(pages, vec![(0, Some(0..3)), (1, Some(0..2))]);
        assert_eq!(next, None);
    }

    #[test]
    fn a_full_page_names_the_first_partition_left_out() {
        let topics = [("a", Some(3)), ("b", Some(4))];
        let (pages, next) = run(&topics, None, 5, true);
        assert_eq!(pages, vec![(0, Some(0..3)), (1, Some(0..2))]);
        assert_eq!(next, Some(("b".to_string(), 2)));
        // Following the cursor lists the rest, each partition once.
        let (pages, next) = run(&topics[1..], Some(("b", 2)), 5, true);
        assert_eq!(pages, vec![(0, Some(2..4))]);
        assert_eq!(next, None);
    }

    #[test]
    fn a_page_ending_on_a_topic_boundary_points_at_the_next_topic() {
        let topics = [("a", Some(3)), ("b", Some(4))];
        let (pages, next) = run(&topics, None, 3, true);
        assert_eq!(pages, vec![(0, Some(0..3))]);
        assert_eq!(next, Some(("b".to_string(), 0)));
    }

    #[test]
    fn unknown_topics_are_listed_only_when_asked_by_name() {
        let topics = [("a", None), ("b", Some(1))];
        let (pages, _) = run(&topics, None, 10, false);
        assert_eq!(pages, vec![(0, None), (1, Some(0..1))]);
        let (pages, _) = run(&topics, None, 10, true);
        assert_eq!(pages, vec![(1, Some(0..1))]);
    }

    #[test]
    fn a_cursor_past_the_last_partition_lists_none() {
        let topics = [("a", Some(2))];
        let (pages, next) = run(&topics, Some(("a", 5)), 10, true);
        assert_eq!(pages, vec![(0, Some(2..2))]);
        assert_eq!(next, None);
    }
}
