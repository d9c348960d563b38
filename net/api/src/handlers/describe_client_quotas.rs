//! DescribeClientQuotas (key 48): the quotas of the entities a filter
//! matches, from this broker's copy of the metadata image. A component
//! matches an exact name (match type 0), the default entity (1) or any
//! entity of its type (2); `strict` leaves out entities that have types
//! beyond the filter's.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use runtimes::cluster_runtime::{self};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeClientQuotas,
    min_version: 0,
    max_version: 1,
    handle,
};

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeClientQuotasRequest = request.decode()?;
        let mut response = DescribeClientQuotasResponse::default();
        // Kafka: DESCRIBE_CONFIGS on the cluster.
        if let Err(code) =
            cluster_runtime::authz(&shard, &request.session).cluster(Operation::DescribeConfigs)
        {
            response.error_code = code.code();
            return request.respond(&response);
        }
        if let Err(reason) = check_filter(&body.components) {
            response.error_code = ErrorCode::InvalidRequest.code();
            response.error_message = Some(str_bytes(reason));
            return request.respond(&response);
        }
        let image = shard.runtime().view.image();
        let entries = image
            .client_quotas()
            .iter()
            .filter(|(entity, _)| matches(entity, &body.components, body.strict))
            .map(|(entity, quotas)| {
                let mut entry = EntryData::default();
                entry.entity = entity
                    .iter()
                    .map(|(kind, name)| {
                        let mut e = EntityData::default();
                        e.entity_type = str_bytes(kind.clone());
                        e.entity_name = name.clone().map(str_bytes);
                        e
                    })
                    .collect();
                entry.values = quotas
                    .iter()
                    .filter_map(|(key, value)| {
                        let mut v = ValueData::default();
                        v.key = str_bytes(key.clone());
                        v.value = value.parse().ok()?;
                        Some(v)
                    })
                    .collect();
                entry
            })
            .collect();
        response.entries = Some(entries);
        request.respond(&response)
    })
}

fn check_filter(components: &[ComponentData]) -> Result<(), String> {
    for (i, c) in components.iter().enumerate() {
        let kind = c.entity_type.as_str();
        if !matches!(kind, "user" | "client-id" | "ip") {
            return Err(format!("unknown quota entity type {kind:?}"));
        }
        if components[..i]
            .iter()
            .any(|o| o.entity_type == c.entity_type)
        {
            return Err(format!("entity type {kind:?} given twice"));
        }
        match c.match_type {
            MATCH_EXACT if c._match.is_none() => {
                return Err(format!("an exact match on {kind} needs a name"));
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY => {}
            other => return Err(format!("unknown match type {other}")),
        }
    }
    Ok(())
}

/// Whether `entity` passes every component (and, if `strict`, has no
/// other types).
fn matches(
    entity: &[(String, Option<String>)],
    components: &[ComponentData],
    strict: bool,
) -> bool {
    let passes = components.iter().all(|c| {
        let found = entity
            .iter()
            .find(|(kind, _)| kind == c.entity_type.as_str());
        match (found, c.match_type) {
            (None, _) => false,
            (Some((_, name)), MATCH_EXACT) => name.as_deref() == c._match.as_deref(),
            (Some((_, name)), MATCH_DEFAULT) => name.is_none(),
            (Some(_), _) => true,
        }
    });
    passes && (!strict || entity.len() == components.len())
}
