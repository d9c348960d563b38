//! CreatePartitions (key 37): grow a topic, placed or on the brokers the
//! request assigns; the new partitions go to their owner shards.

use super::{str_bytes, Handler, HandlerFuture, Request};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};
use runtimes::admin_changes::{self, ControllerRequest};
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v3 (the codec's whole range).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::CreatePartitions,
    min_version: 0,
    max_version: 3,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: CreatePartitionsRequest = request.decode()?;
        let authz = cluster_runtime::authz(&shard, &request.session);
        let mut results = Vec::with_capacity(body.topics.len());
        for topic in body.topics {
            let mut result = CreatePartitionsTopicResult::default();
            result.name = topic.name.clone();
            let outcome = if let Err(code) = authz.topic(Operation::Alter, &topic.name) {
                Err((code, String::from("ALTER on the topic is needed")))
            } else {
                // One replica list per new partition (`kafka-topics.sh
                // --alter --replica-assignment`); none: placed.
                let assignment = topic
                    .assignments
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| a.broker_ids.into_iter().map(|id| id.0).collect())
                    .collect();
                admin_changes::submit(
                    &shard,
                    ControllerRequest::CreatePartitions {
                        name: topic.name.0.to_string(),
                        count: topic.count,
                        assignment,
                        validate_only: body.validate_only,
                    },
                )
                .await
                .map(|_| ())
            };
            if let Err((code, message)) = outcome {
                result.error_code = code.code();
                result.error_message = Some(str_bytes(message));
            }
            results.push(result);
        }
        let mut response = CreatePartitionsResponse::default();
        response.results = results;
        request.respond(&response)
    })
}
