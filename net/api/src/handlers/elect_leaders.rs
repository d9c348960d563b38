//! ElectLeaders (key 43, KIP-460): move a partition's leadership to its
//! preferred replica, or elect any live replica of a leaderless partition
//! (unclean), as `kafka-leader-election.sh` and `Admin.electLeaders` ask it.
//!
//! Asked of any broker: the request goes to the active controller (the
//! decision is `rill-cluster`'s `elect_leaders`, per-partition errors as
//! Kafka's controller gives them), which answers once the new leaders are
//! committed; this broker answers once it has applied them. Authorization
//! is Kafka's: ALTER on the CLUSTER, else every asked partition (and, from
//! v1, the whole response) is `CLUSTER_AUTHORIZATION_FAILED`.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use runtimes::admin_changes::elections::{elect_leaders, ElectLeaders};
use runtimes::cluster_runtime::{self, TopicElections};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v2, as Kafka 3.x and 4.x serve it (v1: `election_type` and a
/// top-level error code; v2: flexible encoding).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ElectLeaders,
    min_version: 0,
    max_version: 2,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: ElectLeadersRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let outcome = match authz.cluster(Operation::Alter) {
            Err(code) => Err((code, String::from("not authorized to elect leaders"))),
            Ok(()) => {
                // v0 has no election type: it always asked for PREFERRED (0,
                // the decoded default).
                let asked = ElectLeaders {
                    election_type: body.election_type,
                    partitions: asked_partitions(&body),
                };
                elect_leaders(&shard, asked).await
            }
        };
        let response = match outcome {
            Ok(results) => answered(results),
            Err((code, message)) => refused(&body, code, message),
        };
        request.respond(&response)
    })
}

/// The request's partitions by topic name; `None`: every partition.
fn asked_partitions(body: &ElectLeadersRequest) -> Option<Vec<(String, Vec<i32>)>> {
    body.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
            .collect()
    })
}

/// The controller's answers as a response.
fn answered(results: Vec<TopicElections>) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    response.replica_election_results = results
        .into_iter()
        .map(|(topic, partitions)| {
            let mut result = ReplicaElectionResult::default();
            result.topic = TopicName(str_bytes(topic));
            result.partition_result = partitions
                .into_iter()
                .map(|(partition, code, message)| {
                    let mut answer = PartitionResult::default();
                    answer.partition_id = partition;
                    answer.error_code = code;
                    answer.error_message = message.map(str_bytes);
                    answer
                })
                .collect();
            result
        })
        .collect();
    response
}

/// The whole request refused with `code`: the top-level error (v1+), and
/// every asked partition with it (Kafka's `getErrorResponse`; asked for
/// every partition, none is listed).
fn refused(body: &ElectLeadersRequest, code: ErrorCode, message: String) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    response.error_code = code.code();
    let results = asked_partitions(body)
        .unwrap_or_default()
        .into_iter()
        .map(|(topic, partitions)| {
            let answers = partitions
                .into_iter()
                .map(|p| (p, code.code(), Some(message.clone())))
                .collect();
            (topic, answers)
        })
        .collect();
    response.replica_election_results = answered(results).replica_election_results;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;

    fn body(partitions: Option<Vec<(&str, Vec<i32>)>>) -> ElectLeadersRequest {
        let mut body = ElectLeadersRequest::default();
        body.topic_partitions = partitions.map(|topics| {
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    let mut asked = TopicPartitions::default();
                    asked.topic = TopicName(str_bytes(topic.to_string()));
                    asked.partitions = partitions;
                    asked
                })
                .collect()
        });
        body
    }

    #[test]
    fn a_refusal_answers_every_asked_partition_with_its_code() {
        let asked = body(Some(vec![("a", vec![0, 1]), ("b", vec![2])]));
        let code = ErrorCode::ClusterAuthorizationFailed;
        let response = refused(&asked, code, String::from("no"));
        assert_eq!(response.error_code, code.code());
        let listed: Vec<(String, i32, i16)> = response
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result
                    .iter()
                    .map(|p| (t.topic.0.to_string(), p.partition_id, p.error_code))
            })
            .collect();
        assert_eq!(
            listed,
            vec![
                ("a".to_string(), 0, code.code()),
                ("a".to_string(), 1, code.code()),
                ("b".to_string(), 2, code.code()),
            ]
        );
        // Every partition asked: nothing to list.
        let all = refused(&body(None), code, String::from("no"));
        assert!(all.replica_election_results.is_empty());
    }

    #[test]
    fn answers_keep_their_order_codes_and_messages() {
        let response = answered(vec![(
            "t".to_string(),
            vec![
                (0, 0, None),
                (1, ErrorCode::ElectionNotNeeded.code(), Some("done".into())),
            ],
        )]);
        let topic = &response.replica_election_results[0];
        assert_eq!(topic.topic.0.as_str(), "t");
        assert_eq!(topic.partition_result[0].error_message, None);
        assert_eq!(topic.partition_result[1].error_code, 84);
        assert_eq!(
            topic.partition_result[1].error_message.as_deref(),
            Some("done")
        );
    }
}
