//! `rill admin quota describe / alter`: client quotas (DescribeClientQuotas,
//! AlterClientQuotas, KIP-546) of a user, a client id, an IP, or their
//! defaults, with Kafka's keys (`producer_byte_rate`,
//! `consumer_byte_rate`, `request_percentage`, ...).

use crate::client::{key_value, Admin};
use crate::error::{check, status, AdminError, Result};
use crate::output::{Report, Table};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// DescribeClientQuotas match types.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;

/// Which entity: at most one of each type; a value of `default` (or the
/// `--default-*` flags) names the type's default entity.
#[derive(Debug, clap::Args)]
pub struct EntityArgs {
    /// The user (`default`: every user without a quota of its own).
    #[arg(long)]
    pub user: Option<String>,
    /// The client id (`default`: the default client).
    #[arg(long)]
    pub client_id: Option<String>,
    /// The client IP (`default`: the default IP).
    #[arg(long)]
    pub ip: Option<String>,
}

impl EntityArgs {
    /// `(entity type, name)`; `None` names the default entity.
    fn parts(&self) -> Vec<(&'static str, Option<String>)> {
        let named =
            |value: &Option<String>| value.as_ref().map(|v| (v != "default").then(|| v.clone()));
        [
            ("user", &self.user),
            ("client-id", &self.client_id),
            ("ip", &self.ip),
        ]
        .into_iter()
        .filter_map(|(kind, value)| named(value).map(|name| (kind, name)))
        .collect()
    }
}

/// `rill admin quota ...`.
#[derive(Debug, clap::Subcommand)]
pub enum QuotaCommand {
    /// The quotas of the entities matching (all without flags).
    Describe(EntityArgs),
    /// Set (`--set key=value`) or remove (`--delete key`) quotas of one
    /// entity.
    Alter {
        #[command(flatten)]
        entity: EntityArgs,
        #[arg(long = "set")]
        set: Vec<String>,
        #[arg(long = "delete")]
        delete: Vec<String>,
    },
}

/// Runs a `quota` command.
pub async fn run(admin: &mut Admin, command: QuotaCommand) -> Result<Report> {
    match command {
        QuotaCommand::Describe(entity) => describe(admin, &entity).await,
        QuotaCommand::Alter {
            entity,
            set,
            delete,
        } => alter(admin, &entity, &set, &delete).await,
    }
}

/// An entity as text: `user=alice,client-id=<default>`.
fn entity_text(parts: &[(String, Option<String>)]) -> String {
    parts
        .iter()
        .map(|(kind, name)| format!("{kind}={}", name.as_deref().unwrap_or("<default>")))
        .collect::<Vec<_>>()
        .join(",")
}

async fn describe(admin: &mut Admin, entity: &EntityArgs) -> Result<Report> {
    let components = entity
        .parts()
        .into_iter()
        .map(|(kind, name)| {
            ComponentData::default()
                .with_entity_type(StrBytes::from_static_str(kind))
                .with_match_type(if name.is_some() {
                    MATCH_EXACT
                } else {
                    MATCH_DEFAULT
                })
                .with_match(name.map(StrBytes::from_string))
        })
        .collect();
    let request = DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(false);
    let answer = admin.call_any(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "DescribeClientQuotas",
    )?;
    let mut rows = Vec::new();
    for entry in answer.entries.unwrap_or_default() {
        let parts: Vec<(String, Option<String>)> = entry
            .entity
            .iter()
            .map(|e| {
                (
                    e.entity_type.to_string(),
                    e.entity_name.as_ref().map(|n| n.to_string()),
                )
            })
            .collect();
        for value in &entry.values {
            rows.push((
                entity_text(&parts),
                value.key.to_string(),
                value.value,
                parts.clone(),
            ));
        }
    }
    rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let mut table = Table::new(&["ENTITY", "KEY", "VALUE"]);
    let mut json = Vec::new();
    for (text, key, value, parts) in rows {
        let entity: serde_json::Map<String, serde_json::Value> = parts
            .into_iter()
            .map(|(kind, name)| (kind, json!(name)))
            .collect();
        json.push(json!({"entity": entity, "key": key, "value": value}));
        table.row(vec![text, key, value.to_string()]);
    }
    Ok(Report::single(table, json.into()))
}

async fn alter(
    admin: &mut Admin,
    entity: &EntityArgs,
    set: &[String],
    delete: &[String],
) -> Result<Report> {
    let parts = entity.parts();
    if parts.is_empty() {
        return Err(AdminError::Usage(String::from(
            "quota alter needs --user, --client-id or --ip",
        )));
    }
    if set.is_empty() && delete.is_empty() {
        return Err(AdminError::Usage(String::from(
            "quota alter needs --set key=value or --delete key",
        )));
    }
    let mut ops = Vec::new();
    for pair in set {
        let (key, value) = key_value(pair)?;
        let value: f64 = value
            .parse()
            .map_err(|_| AdminError::Usage(format!("--set {pair}: the value is not a number")))?;
        ops.push(
            OpData::default()
                .with_key(StrBytes::from_string(key))
                .with_value(value),
        );
    }
    for key in delete {
        ops.push(
            OpData::default()
                .with_key(StrBytes::from_string(key.clone()))
                .with_remove(true),
        );
    }
    let entity_data = parts
        .iter()
        .map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(StrBytes::from_static_str(kind))
                .with_entity_name(name.clone().map(StrBytes::from_string))
        })
        .collect();
    let request = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(entity_data)
        .with_ops(ops)]);
    let answer = admin.call_any(&request).await?;
    let shown: Vec<(String, Option<String>)> = parts
        .iter()
        .map(|(k, n)| (k.to_string(), n.clone()))
        .collect();
    let mut table = Table::new(&["ENTITY", "STATUS"]);
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for entry in answer.entries {
        let status = status(entry.error_code, entry.error_message.as_deref());
        if entry.error_code != 0 {
            failures.push(format!("alter quotas of {}: {status}", entity_text(&shown)));
        }
        json.push(json!({"entity": entity_text(&shown), "error_code": entry.error_code, "status": status}));
        table.row(vec![entity_text(&shown), status]);
    }
    Ok(Report {
        tables: vec![table],
        json: json.into(),
        failures,
    })
}
