//! DeleteTopics (key 20): by name, or by topic id from v6.

use super::{legacy, str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kernel::error::RequestError;
use runtimes::admin_changes::{self, ControllerRequest};
use runtimes::cluster_runtime;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v6 (v0 is v1 without the response's `throttle_time_ms`).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DeleteTopics,
    min_version: 0,
    max_version: 6,
    handle,
};

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(request: &mut Request) -> Result<DeleteTopicsRequest, RequestError> {
    request.decode_as(request.version.max(1))
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body = decode_body(&mut request)?;
        let version = request.version;
        // v0-v5 list names; v6 lists (name or id) states.
        let mut wanted: Vec<(Option<String>, [u8; 16])> = body
            .topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), [0; 16]))
            .collect();
        wanted.extend(body.topics.iter().map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()),
                *t.topic_id.as_bytes(),
            )
        }));
        let authz = cluster_runtime::authz(&shard, &request.session);
        let mut responses = Vec::with_capacity(wanted.len());
        for (name, id) in wanted {
            let resolved = match &name {
                Some(name) => Some(name.clone()),
                None => shard.topics.borrow().by_id(&id).map(|e| e.name.clone()),
            };
            let mut result = DeletableTopicResult::default();
            result.name = resolved.clone().or(name).map(|n| TopicName(str_bytes(n)));
            if version >= 6 {
                let known = resolved
                    .as_ref()
                    .and_then(|n| shard.topics.borrow().get(n).map(|e| e.topic_id));
                result.topic_id = uuid(known.unwrap_or(id));
            }
            let outcome = match resolved {
                Some(name) if !authz.allows_topic(Operation::Delete, &name) => Err((
                    ErrorCode::TopicAuthorizationFailed,
                    String::from("DELETE on the topic is needed"),
                )),
                Some(name) => {
                    admin_changes::submit(&shard, ControllerRequest::DeleteTopic { name })
                        .await
                        .map(|_| ())
                }
                None => Err((ErrorCode::UnknownTopicId, String::from("unknown topic id"))),
            };
            if let Err((code, message)) = outcome {
                result.error_code = code.code();
                if version >= 5 {
                    result.error_message = Some(str_bytes(message));
                }
            }
            responses.push(result);
        }
        let mut response = DeleteTopicsResponse::default();
        response.responses = responses;
        if version == 0 {
            let body =
                legacy::without_throttle(&response, 1).map_err(|e| request.encode_error(e))?;
            return request.respond_raw(&body);
        }
        request.respond(&response)
    })
}
