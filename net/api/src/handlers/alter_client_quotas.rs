//! AlterClientQuotas (key 49): set or remove produce/fetch byte-rate quotas
//! of a user, a client id, a (user, client id) pair or their defaults; the
//! changes go through the metadata quorum, so every broker enforces them and
//! they survive restarts. Each entry is answered on its own.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AnsweredEntity, EntryData as AnsweredEntry,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey};
use runtimes::admin_changes::client_quotas::{self, AlterClientQuotas};
use runtimes::cluster_runtime;
use runtimes::quotas::normalize;
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AlterClientQuotas,
    min_version: 0,
    max_version: 1,
    handle,
};

/// Quota keys Kafka defines. rill enforces the two byte rates; the others
/// are stored and described but have no effect (docs/security.md says so).
pub const QUOTA_KEYS: [&str; 5] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
];

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: AlterClientQuotasRequest = request.decode()?;
        let mut response = AlterClientQuotasResponse::default();
        // Kafka: ALTER_CONFIGS on the cluster, else every entry is refused.
        let allowed =
            cluster_runtime::authz(&shard, &request.session).cluster(Operation::AlterConfigs);
        for entry in body.entries {
            let mut answer = AnsweredEntry::default();
            answer.entity = entry
                .entity
                .iter()
                .map(|e| {
                    let mut out = AnsweredEntity::default();
                    out.entity_type = e.entity_type.clone();
                    out.entity_name = e.entity_name.clone();
                    out
                })
                .collect();
            let outcome = match allowed.map(|()| checked(&entry)) {
                Err(code) => Err((code, String::from("not authorized to alter client quotas"))),
                Ok(checked) => match checked {
                    Ok(change) if body.validate_only => {
                        let _ = change;
                        Ok(())
                    }
                    Ok(change) => client_quotas::submit(&shard, change).await,
                    Err(reason) => Err((ErrorCode::InvalidRequest, reason)),
                },
            };
            if let Err((code, message)) = outcome {
                answer.error_code = code.code();
                answer.error_message = Some(str_bytes(message));
            }
            response.entries.push(answer);
        }
        request.respond(&response)
    })
}

/// The change an entry asks for, or why it is invalid (Kafka's
/// INVALID_REQUEST cases: unknown entity type or key, a type twice, an `ip`
/// entity mixed with others, a value that is not a positive number).
fn checked(entry: &EntryData) -> Result<AlterClientQuotas, String> {
    let mut entity = Vec::with_capacity(entry.entity.len());
    for part in &entry.entity {
        let kind = part.entity_type.as_str();
        if !matches!(kind, "user" | "client-id" | "ip") {
            return Err(format!("unknown quota entity type {kind:?}"));
        }
        if entity
            .iter()
            .any(|(k, _): &(String, Option<String>)| k == kind)
        {
            return Err(format!("entity type {kind:?} given twice"));
        }
        let name = part.entity_name.as_ref().map(|n| n.to_string());
        if name.as_deref() == Some("") {
            return Err(format!("empty {kind} name"));
        }
        entity.push((kind.to_string(), name));
    }
    if entity.is_empty() {
        return Err(String::from("no entity"));
    }
    if entity.len() > 1 && entity.iter().any(|(k, _)| k == "ip") {
        return Err(String::from(
            "an ip quota entity cannot be combined with others",
        ));
    }
    let mut changes = Vec::with_capacity(entry.ops.len());
    for op in &entry.ops {
        let key = op.key.as_str();
        if !QUOTA_KEYS.contains(&key) {
            return Err(format!("unknown quota {key:?}"));
        }
        if op.remove {
            changes.push((key.to_string(), None));
        } else if op.value.is_finite() && op.value > 0.0 {
            changes.push((key.to_string(), Some(op.value)));
        } else {
            return Err(format!("{key} must be a positive number, not {}", op.value));
        }
    }
    Ok(AlterClientQuotas {
        entity: normalize(entity),
        changes,
    })
}
