//! DescribeUserScramCredentials (key 50): which SCRAM mechanisms each user
//! has, with their iteration counts — never a salt or key.
//!
//! No user list (or an empty one) describes every user with a credential;
//! a named user without one is RESOURCE_NOT_FOUND, a user named twice
//! DUPLICATE_RESOURCE, as Kafka answers.

use super::{str_bytes, Handler, HandlerFuture, Request};
use cluster::metadata::MetadataImage;
use engine::ErrorCode;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use runtimes::cluster_runtime::{self};
use runtimes::Shard;
use security::acl::Operation;
use security::sasl::ScramMechanism;
use std::collections::BTreeMap;
use std::rc::Rc;

/// v0.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeUserScramCredentials,
    min_version: 0,
    max_version: 0,
    handle,
};

/// Every user's (mechanism number, iterations), by user.
pub fn credentials_by_user(image: &MetadataImage) -> BTreeMap<String, Vec<(i8, i32)>> {
    let mut users: BTreeMap<String, Vec<(i8, i32)>> = BTreeMap::new();
    for ((name, mechanism), credential) in image.scram_credentials() {
        let Some(mechanism) = i8::try_from(*mechanism)
            .ok()
            .and_then(ScramMechanism::from_kafka_type)
        else {
            continue;
        };
        users
            .entry(name.clone())
            .or_default()
            .push((mechanism.kafka_type(), credential.iterations));
    }
    users
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeUserScramCredentialsRequest = request.decode()?;
        let image = shard.runtime().view.image();
        let users = credentials_by_user(&image);
        let result = |name: &str, infos: &[(i8, i32)]| {
            let mut result = DescribeUserScramCredentialsResult::default();
            result.user = str_bytes(name);
            result.credential_infos = infos
                .iter()
                .map(|&(mechanism, iterations)| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = mechanism;
                    info.iterations = iterations;
                    info
                })
                .collect();
            result
        };
        let mut response = DescribeUserScramCredentialsResponse::default();
        // Kafka: DESCRIBE on the cluster.
        if let Err(code) =
            cluster_runtime::authz(&shard, &request.session).cluster(Operation::Describe)
        {
            response.error_code = code.code();
            return request.respond(&response);
        }
        let named: Vec<String> = body
            .users
            .unwrap_or_default()
            .into_iter()
            .map(|u| u.name.to_string())
            .collect();
        if named.is_empty() {
            response.results = users
                .iter()
                .map(|(name, infos)| result(name, infos))
                .collect();
            return request.respond(&response);
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in &named {
            let twice = named.iter().filter(|n| *n == name).count() > 1;
            if twice && !seen.insert(name.clone()) {
                continue;
            }
            let mut entry = result(name, &[]);
            if twice {
                entry.error_code = ErrorCode::DuplicateResource.code();
                entry.error_message = Some(str_bytes(format!(
                    "Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
                )));
            } else if let Some(infos) = users.get(name) {
                entry = result(name, infos);
            } else {
                entry.error_code = ErrorCode::ResourceNotFound.code();
                entry.error_message = Some(str_bytes(format!(
                    "Attempt to describe a user credential that does not exist: {name}"
                )));
            }
            response.results.push(entry);
        }
        request.respond(&response)
    })
}
