//! `rill admin acl create / list / delete` (CreateAcls, DescribeAcls,
//! DeleteAcls), with Kafka's names for resource types, pattern types,
//! operations and permissions (lower case, `-` for `_`). The broker
//! answers these only with an authorizer configured
//! (`authorizer.class.name`); without one it says SecurityDisabled.

use crate::client::Admin;
use crate::error::{check, status, AdminError, Result};
use crate::output::{Report, Table};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// Kafka's `ResourceType` codes.
const RESOURCE_TYPES: &[(&str, i8)] = &[
    ("any", 1),
    ("topic", 2),
    ("group", 3),
    ("cluster", 4),
    ("transactional-id", 5),
    ("delegation-token", 6),
    ("user", 7),
];
/// Kafka's `PatternType` codes.
const PATTERN_TYPES: &[(&str, i8)] = &[("any", 1), ("match", 2), ("literal", 3), ("prefixed", 4)];
/// Kafka's `AclOperation` codes.
const OPERATIONS: &[(&str, i8)] = &[
    ("any", 1),
    ("all", 2),
    ("read", 3),
    ("write", 4),
    ("create", 5),
    ("delete", 6),
    ("alter", 7),
    ("describe", 8),
    ("cluster-action", 9),
    ("describe-configs", 10),
    ("alter-configs", 11),
    ("idempotent-write", 12),
    ("create-tokens", 13),
    ("describe-tokens", 14),
];
/// Kafka's `AclPermissionType` codes.
const PERMISSIONS: &[(&str, i8)] = &[("any", 1), ("deny", 2), ("allow", 3)];

/// The code of `name` in `table`, or a usage error listing the names.
fn code(table: &[(&str, i8)], what: &str, name: &str) -> Result<i8> {
    let wanted = name.to_ascii_lowercase().replace('_', "-");
    table
        .iter()
        .find(|(n, _)| *n == wanted)
        .map(|(_, c)| *c)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            AdminError::Usage(format!("{what} {name:?}: one of {}", names.join(", ")))
        })
}

/// The name of `code` in `table` (the number itself if unknown).
fn name(table: &[(&str, i8)], code: i8) -> String {
    table
        .iter()
        .find(|(_, c)| *c == code)
        .map_or_else(|| code.to_string(), |(n, _)| n.to_string())
}

/// `rill admin acl ...`.
#[derive(Debug, clap::Subcommand)]
pub enum AclCommand {
    /// Create ACLs: one per `--operation`.
    Create(CreateArgs),
    /// List the ACLs matching the filter (all by default).
    List(FilterArgs),
    /// Delete the ACLs matching the filter.
    Delete(FilterArgs),
}

/// `acl create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// topic, group, cluster, transactional-id, delegation-token, user.
    #[arg(long)]
    pub resource_type: String,
    /// The resource's name (`kafka-cluster` for the cluster).
    #[arg(long)]
    pub resource_name: String,
    /// literal or prefixed.
    #[arg(long, default_value = "literal")]
    pub pattern: String,
    /// Who, as `User:name`.
    #[arg(long)]
    pub principal: String,
    /// From which host (`*`: any).
    #[arg(long, default_value = "*")]
    pub host: String,
    /// read, write, create, delete, alter, describe, all, ... (repeatable).
    #[arg(long = "operation", required = true)]
    pub operations: Vec<String>,
    /// allow or deny.
    #[arg(long, default_value = "allow")]
    pub permission: String,
}

/// The filter of `acl list` and `acl delete`; a flag left out matches
/// anything.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    #[arg(long)]
    pub resource_type: Option<String>,
    #[arg(long)]
    pub resource_name: Option<String>,
    /// any, match, literal or prefixed (default any).
    #[arg(long)]
    pub pattern: Option<String>,
    #[arg(long)]
    pub principal: Option<String>,
    #[arg(long)]
    pub host: Option<String>,
    #[arg(long)]
    pub operation: Option<String>,
    #[arg(long)]
    pub permission: Option<String>,
}

/// Runs an `acl` command.
pub async fn run(admin: &mut Admin, command: AclCommand) -> Result<Report> {
    match command {
        AclCommand::Create(args) => create(admin, &args).await,
        AclCommand::List(filter) => list(admin, &filter).await,
        AclCommand::Delete(filter) => delete(admin, &filter).await,
    }
}

fn text(value: &Option<String>) -> Option<StrBytes> {
    value.clone().map(StrBytes::from_string)
}

/// The filter's codes: (resource type, pattern type, operation, permission).
fn filter_codes(filter: &FilterArgs) -> Result<(i8, i8, i8, i8)> {
    let any = |value: &Option<String>| value.as_deref().unwrap_or("any").to_string();
    Ok((
        code(
            RESOURCE_TYPES,
            "--resource-type",
            &any(&filter.resource_type),
        )?,
        code(PATTERN_TYPES, "--pattern", &any(&filter.pattern))?,
        code(OPERATIONS, "--operation", &any(&filter.operation))?,
        code(PERMISSIONS, "--permission", &any(&filter.permission))?,
    ))
}

/// One ACL: resource type, name, pattern, principal, host, operation,
/// permission.
type AclRow = (i8, String, i8, String, String, i8, i8);

fn acl_report(acls: &[AclRow]) -> (Table, serde_json::Value) {
    let mut table = Table::new(&[
        "RESOURCE-TYPE",
        "RESOURCE-NAME",
        "PATTERN",
        "PRINCIPAL",
        "HOST",
        "OPERATION",
        "PERMISSION",
    ]);
    let mut json = Vec::new();
    for (resource_type, resource_name, pattern, principal, host, operation, permission) in acls {
        let cells = vec![
            name(RESOURCE_TYPES, *resource_type),
            resource_name.clone(),
            name(PATTERN_TYPES, *pattern),
            principal.clone(),
            host.clone(),
            name(OPERATIONS, *operation),
            name(PERMISSIONS, *permission),
        ];
        json.push(json!({
            "resource_type": cells[0], "resource_name": cells[1], "pattern": cells[2],
            "principal": cells[3], "host": cells[4], "operation": cells[5], "permission": cells[6],
        }));
        table.row(cells);
    }
    (table, json.into())
}

async fn create(admin: &mut Admin, args: &CreateArgs) -> Result<Report> {
    let resource_type = code(RESOURCE_TYPES, "--resource-type", &args.resource_type)?;
    let pattern = code(PATTERN_TYPES, "--pattern", &args.pattern)?;
    let permission = code(PERMISSIONS, "--permission", &args.permission)?;
    let mut creations = Vec::new();
    let mut rows = Vec::new();
    for operation in &args.operations {
        let operation = code(OPERATIONS, "--operation", operation)?;
        creations.push(
            AclCreation::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(args.resource_name.clone()))
                .with_resource_pattern_type(pattern)
                .with_principal(StrBytes::from_string(args.principal.clone()))
                .with_host(StrBytes::from_string(args.host.clone()))
                .with_operation(operation)
                .with_permission_type(permission),
        );
        rows.push((
            resource_type,
            args.resource_name.clone(),
            pattern,
            args.principal.clone(),
            args.host.clone(),
            operation,
            permission,
        ));
    }
    let answer = admin
        .call_any(&CreateAclsRequest::default().with_creations(creations))
        .await?;
    let (mut table, _) = acl_report(&rows);
    table.headers.push("STATUS");
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for ((row, result), acl) in table.rows.iter_mut().zip(&answer.results).zip(&rows) {
        let status = status(result.error_code, result.error_message.as_deref());
        if result.error_code != 0 {
            failures.push(format!("create ACL {}: {status}", row.join(" ")));
        }
        json.push(json!({"operation": name(OPERATIONS, acl.5), "error_code": result.error_code, "status": status}));
        row.push(status);
    }
    Ok(Report {
        tables: vec![table],
        json: json.into(),
        failures,
    })
}

async fn list(admin: &mut Admin, filter: &FilterArgs) -> Result<Report> {
    let (resource_type, pattern, operation, permission) = filter_codes(filter)?;
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(resource_type)
        .with_resource_name_filter(text(&filter.resource_name))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(text(&filter.principal))
        .with_host_filter(text(&filter.host))
        .with_operation(operation)
        .with_permission_type(permission);
    let answer = admin.call_any(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "DescribeAcls",
    )?;
    let mut rows = Vec::new();
    for resource in &answer.resources {
        for acl in &resource.acls {
            rows.push((
                resource.resource_type,
                resource.resource_name.to_string(),
                resource.pattern_type,
                acl.principal.to_string(),
                acl.host.to_string(),
                acl.operation,
                acl.permission_type,
            ));
        }
    }
    rows.sort();
    let (table, json) = acl_report(&rows);
    Ok(Report::single(table, json))
}

async fn delete(admin: &mut Admin, filter: &FilterArgs) -> Result<Report> {
    if filter.resource_type.is_none()
        && filter.principal.is_none()
        && filter.resource_name.is_none()
    {
        return Err(AdminError::Usage(String::from(
            "acl delete needs --resource-type, --resource-name or --principal (use --resource-type any to delete every ACL)",
        )));
    }
    let (resource_type, pattern, operation, permission) = filter_codes(filter)?;
    let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
        .with_resource_type_filter(resource_type)
        .with_resource_name_filter(text(&filter.resource_name))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(text(&filter.principal))
        .with_host_filter(text(&filter.host))
        .with_operation(operation)
        .with_permission_type(permission)]);
    let answer = admin.call_any(&request).await?;
    let mut rows = Vec::new();
    for result in &answer.filter_results {
        check(
            result.error_code,
            result.error_message.as_deref(),
            "DeleteAcls",
        )?;
        for acl in &result.matching_acls {
            check(
                acl.error_code,
                acl.error_message.as_deref(),
                "delete an ACL",
            )?;
            rows.push((
                acl.resource_type,
                acl.resource_name.to_string(),
                acl.pattern_type,
                acl.principal.to_string(),
                acl.host.to_string(),
                acl.operation,
                acl.permission_type,
            ));
        }
    }
    rows.sort();
    let (table, json) = acl_report(&rows);
    Ok(Report::single(table.titled("DELETED"), json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        assert_eq!(code(RESOURCE_TYPES, "t", "TOPIC").unwrap(), 2);
        assert_eq!(code(RESOURCE_TYPES, "t", "transactional_id").unwrap(), 5);
        assert_eq!(code(OPERATIONS, "o", "describe-configs").unwrap(), 10);
        assert_eq!(name(OPERATIONS, 10), "describe-configs");
        assert_eq!(name(PERMISSIONS, 9), "9");
        let error = code(PERMISSIONS, "--permission", "maybe").unwrap_err();
        assert!(error.to_string().contains("any, deny, allow"), "{error}");
    }
}
