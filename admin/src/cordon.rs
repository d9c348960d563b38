//! `rill admin cordon / uncordon`: KIP-1066's `cordoned.log.dirs`, set as
//! a dynamic broker config (IncrementalAlterConfigs on a BROKER resource).
//! A cordoned dir keeps its partitions but gets no new one; a broker whose
//! dirs are all cordoned gets no new replica, which is what to do before
//! `decommission`.

use crate::client::Admin;
use crate::error::{status, Result};
use crate::output::{Report, Table};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// DescribeConfigs' and IncrementalAlterConfigs' resource type of a broker.
const BROKER_RESOURCE: i8 = 4;
/// IncrementalAlterConfigs operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const CORDONED_LOG_DIRS: &str = "cordoned.log.dirs";

/// Which broker, and which of its dirs.
#[derive(Debug, clap::Args)]
pub struct CordonArgs {
    /// A broker id, or `all` for every broker (the cluster-wide value).
    pub broker: String,
    /// Data dirs to cordon (comma list); all of them when left out.
    #[arg(long)]
    pub dirs: Option<String>,
}

/// The resource name of `broker`: an id, or `""` for every broker.
fn resource(broker: &str) -> String {
    if broker == "all" {
        String::new()
    } else {
        broker.to_string()
    }
}

/// `cordon BROKER [--dirs ...]`: sets its `cordoned.log.dirs`.
pub async fn cordon(admin: &mut Admin, args: &CordonArgs) -> Result<Report> {
    let value = args.dirs.clone().unwrap_or_else(|| String::from("*"));
    change(admin, &args.broker, SET, Some(value)).await
}

/// `uncordon BROKER`: a broker gets an empty list of its own, which wins
/// over the cluster-wide value and its file; `all` removes the cluster-wide
/// value.
pub async fn uncordon(admin: &mut Admin, broker: &str) -> Result<Report> {
    if broker == "all" {
        change(admin, broker, DELETE, None).await
    } else {
        change(admin, broker, SET, Some(String::new())).await
    }
}

async fn change(
    admin: &mut Admin,
    broker: &str,
    operation: i8,
    value: Option<String>,
) -> Result<Report> {
    let config = AlterableConfig::default()
        .with_name(StrBytes::from_static_str(CORDONED_LOG_DIRS))
        .with_config_operation(operation)
        .with_value(value.clone().map(StrBytes::from_string));
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(BROKER_RESOURCE)
            .with_resource_name(StrBytes::from_string(resource(broker)))
            .with_configs(vec![config]),
    ]);
    let answer = admin.call_any(&request).await?;
    let mut table = Table::new(&["BROKER", CORDONED_LOG_DIRS, "STATUS"]);
    let mut failures = Vec::new();
    let mut json = Vec::new();
    let shown_value = value.unwrap_or_else(|| String::from("(file)"));
    for result in answer.responses {
        let shown = status(result.error_code, result.error_message.as_deref());
        if result.error_code != 0 {
            failures.push(format!("cordon of broker {broker}: {shown}"));
        }
        json.push(json!({"broker": broker, "cordoned_log_dirs": shown_value, "error_code": result.error_code, "status": shown}));
        table.row(vec![broker.to_string(), shown_value.clone(), shown]);
    }
    Ok(Report {
        tables: vec![table],
        json: json.into(),
        failures,
    })
}
