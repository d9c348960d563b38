//! AlterUserScramCredentials (key 51): create, replace and delete SCRAM
//! credentials. The client sends the salt and the salted password (as
//! Kafka's API does; the password itself never travels); the broker keeps
//! only StoredKey and ServerKey, committed to the metadata quorum.
//!
//! Per user, Kafka's answers: DUPLICATE_RESOURCE when the user appears
//! more than once in the request, UNSUPPORTED_SASL_MECHANISM for a
//! mechanism other than SCRAM-SHA-256/512, UNACCEPTABLE_CREDENTIAL for an
//! empty name, salt or salted password, or iterations outside
//! 4096..=16384, RESOURCE_NOT_FOUND for deleting a credential that does not
//! exist. The valid changes of a request are committed together.

use super::{str_bytes, Handler, HandlerFuture, Request};
use cluster::metadata::MetadataImage;
use engine::ErrorCode;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
};
use runtimes::admin_changes::scram_credentials::{self, AlterScramCredentials, Upsert};
use runtimes::cluster_runtime::{self};
use runtimes::Shard;
use security::acl::Operation;
use security::sasl::{scram, ScramMechanism, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS};
use std::collections::BTreeMap;
use std::rc::Rc;

/// v0.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AlterUserScramCredentials,
    min_version: 0,
    max_version: 0,
    handle,
};

/// A per-user refusal.
type Refusal = (ErrorCode, String);

fn mechanism(number: i8) -> Result<ScramMechanism, Refusal> {
    ScramMechanism::from_kafka_type(number).ok_or_else(|| {
        (
            ErrorCode::UnsupportedSaslMechanism,
            format!("Unknown SCRAM mechanism {number}"),
        )
    })
}

fn check_deletion(
    image: &MetadataImage,
    d: &ScramCredentialDeletion,
) -> Result<(String, ScramMechanism), Refusal> {
    let name = d.name.to_string();
    if name.is_empty() {
        return Err((
            ErrorCode::UnacceptableCredential,
            String::from("Username must not be empty"),
        ));
    }
    let m = mechanism(d.mechanism)?;
    if image.scram_credential(&name, m.record_type()).is_none() {
        return Err((
            ErrorCode::ResourceNotFound,
            format!(
                "Attempt to delete a user credential that does not exist: {name} ({})",
                m.name()
            ),
        ));
    }
    Ok((name, m))
}

fn check_upsertion(u: &ScramCredentialUpsertion) -> Result<Upsert, Refusal> {
    let name = u.name.to_string();
    let unacceptable = |reason: &str| (ErrorCode::UnacceptableCredential, reason.to_string());
    if name.is_empty() {
        return Err(unacceptable("Username must not be empty"));
    }
    let m = mechanism(u.mechanism)?;
    if u.iterations < SCRAM_MIN_ITERATIONS {
        return Err(unacceptable(&format!(
            "Too few iterations: {} (at least {SCRAM_MIN_ITERATIONS})",
            u.iterations
        )));
    }
    if u.iterations > SCRAM_MAX_ITERATIONS {
        return Err(unacceptable(&format!(
            "Too many iterations: {} (at most {SCRAM_MAX_ITERATIONS})",
            u.iterations
        )));
    }
    if u.salt.is_empty() {
        return Err(unacceptable("Salt must not be empty"));
    }
    if u.salted_password.is_empty() {
        return Err(unacceptable("Salted password must not be empty"));
    }
    let credential = scram::credential_from_salted(m, &u.salt, u.iterations, &u.salted_password);
    Ok((name, m, credential))
}

/// Each user's outcome (in first-appearance order) and the valid changes.
pub fn plan(
    image: &MetadataImage,
    body: &AlterUserScramCredentialsRequest,
) -> (Vec<(String, Option<Refusal>)>, AlterScramCredentials) {
    let mut appearances: BTreeMap<String, usize> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let names = body
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(body.upsertions.iter().map(|u| u.name.to_string()));
    for name in names {
        let count = appearances.entry(name.clone()).or_default();
        if *count == 0 {
            order.push(name);
        }
        *count += 1;
    }
    let mut outcome: BTreeMap<String, Option<Refusal>> = BTreeMap::new();
    let mut change = AlterScramCredentials {
        upserts: Vec::new(),
        deletions: Vec::new(),
    };
    for (name, count) in &appearances {
        if *count > 1 {
            outcome.insert(
                name.clone(),
                Some((
                    ErrorCode::DuplicateResource,
                    format!(
                        "A user credential cannot be altered twice in the same request: {name}"
                    ),
                )),
            );
        }
    }
    for d in &body.deletions {
        let name = d.name.to_string();
        if outcome.contains_key(&name) {
            continue;
        }
        match check_deletion(image, d) {
            Ok(deletion) => {
                change.deletions.push(deletion);
                outcome.insert(name, None);
            }
            Err(refusal) => {
                outcome.insert(name, Some(refusal));
            }
        }
    }
    for u in &body.upsertions {
        let name = u.name.to_string();
        if outcome.contains_key(&name) {
            continue;
        }
        match check_upsertion(u) {
            Ok(upsert) => {
                change.upserts.push(upsert);
                outcome.insert(name, None);
            }
            Err(refusal) => {
                outcome.insert(name, Some(refusal));
            }
        }
    }
    let results = order
        .into_iter()
        .map(|name| {
            let refusal = outcome.remove(&name).flatten();
            (name, refusal)
        })
        .collect();
    (results, change)
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AlterUserScramCredentialsRequest = request.decode()?;
        let image = shard.runtime().view.image();
        let (mut outcomes, change) = plan(&image, &body);
        // Kafka: ALTER on the cluster, else every user is refused.
        let allowed = cluster_runtime::authz(&shard, &request.session).cluster(Operation::Alter);
        if let Err(code) = allowed {
            for (_, refusal) in outcomes.iter_mut() {
                *refusal = Some((
                    code,
                    String::from("not authorized to alter SCRAM credentials"),
                ));
            }
        } else if !change.upserts.is_empty() || !change.deletions.is_empty() {
            if let Err((code, message)) = scram_credentials::submit(&shard, change).await {
                // Nothing was committed: every user the change held fails alike.
                for (_, refusal) in outcomes.iter_mut().filter(|(_, r)| r.is_none()) {
                    *refusal = Some((code, message.clone()));
                }
            }
        }
        let mut response = AlterUserScramCredentialsResponse::default();
        response.results = outcomes
            .into_iter()
            .map(|(name, refusal)| {
                let mut result = AlterUserScramCredentialsResult::default();
                result.user = str_bytes(name);
                if let Some((code, message)) = refusal {
                    result.error_code = code.code();
                    result.error_message = Some(str_bytes(message));
                }
                result
            })
            .collect();
        request.respond(&response)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;

    fn upsertion(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        let mut u = ScramCredentialUpsertion::default();
        u.name = StrBytes::from_string(name.to_string());
        u.mechanism = mechanism;
        u.iterations = iterations;
        u.salt = Bytes::from_static(b"salt");
        u.salted_password = Bytes::from_static(b"salted");
        u
    }

    fn deletion(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        let mut d = ScramCredentialDeletion::default();
        d.name = StrBytes::from_string(name.to_string());
        d.mechanism = mechanism;
        d
    }

    #[test]
    fn each_user_gets_kafkas_error_code() {
        let image = MetadataImage::new();
        let mut body = AlterUserScramCredentialsRequest::default();
        body.upsertions = vec![
            upsertion("ok", 2, 4096),
            upsertion("few", 1, 4095),
            upsertion("many", 1, 16385),
            upsertion("mech", 3, 4096),
            upsertion("twice", 1, 4096),
            upsertion("", 1, 4096),
        ];
        body.deletions = vec![deletion("twice", 1), deletion("missing", 1)];
        let (results, change) = plan(&image, &body);
        let code = |name: &str| {
            results
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, r)| r.as_ref().map(|(c, _)| *c))
                .unwrap()
        };
        assert_eq!(code("ok"), None);
        assert_eq!(code("few"), Some(ErrorCode::UnacceptableCredential));
        assert_eq!(code("many"), Some(ErrorCode::UnacceptableCredential));
        assert_eq!(code("mech"), Some(ErrorCode::UnsupportedSaslMechanism));
        assert_eq!(code("twice"), Some(ErrorCode::DuplicateResource));
        assert_eq!(code(""), Some(ErrorCode::UnacceptableCredential));
        assert_eq!(code("missing"), Some(ErrorCode::ResourceNotFound));
        assert_eq!(results.len(), 7);
        assert_eq!(change.upserts.len(), 1);
        assert!(change.deletions.is_empty());
        let (_, m, credential) = &change.upserts[0];
        assert_eq!(*m, ScramMechanism::Sha512);
        assert_eq!(credential.stored_key.len(), 64);
    }
}
