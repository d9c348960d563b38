//! `rill admin quorum add-voter / remove-voter`: KIP-853's AddRaftVoter
//! and RemoveRaftVoter, as `kafka-metadata-quorum.sh add-controller` and
//! `remove-controller` send them. Asked of any broker, which hands them to
//! the active controller.
//!
//! Replacing a dead controller: start the new one with a controller
//! listener of its own, `add-voter` it, then `remove-voter` the dead one;
//! docs/admin.md walks through it.

use crate::client::Admin;
use crate::error::{check, AdminError, Result};
use crate::output::{Report, Table};
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{AddRaftVoterRequest, RemoveRaftVoterRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// `quorum add-voter`'s arguments.
#[derive(Debug, clap::Args)]
pub struct AddVoterArgs {
    /// The new controller's `node.id`.
    #[arg(long)]
    pub id: i32,
    /// Its controller listener, `host:port`.
    #[arg(long)]
    pub endpoint: String,
}

/// `add-voter --id N --endpoint HOST:PORT`: the controller at that
/// listener becomes a voter once it caught up (the broker answers then).
pub async fn add_voter(admin: &mut Admin, args: &AddVoterArgs) -> Result<Report> {
    let (host, port) = args
        .endpoint
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
        .filter(|(host, _)| !host.is_empty())
        .ok_or_else(|| {
            AdminError::Usage(format!("--endpoint {}: expected host:port", args.endpoint))
        })?;
    let listener = Listener::default()
        .with_name(StrBytes::from_static_str("CONTROLLER"))
        .with_host(StrBytes::from_string(host.to_string()))
        .with_port(port);
    let request = AddRaftVoterRequest::default()
        .with_timeout_ms(30_000)
        .with_voter_id(args.id)
        .with_listeners(vec![listener]);
    let answer = admin.call_any(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        format!("AddRaftVoter of node {}", args.id),
    )?;
    Ok(done("added", args.id))
}

/// `remove-voter --id N`: node N stops voting.
pub async fn remove_voter(admin: &mut Admin, id: i32) -> Result<Report> {
    let request = RemoveRaftVoterRequest::default().with_voter_id(id);
    let answer = admin.call_any(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        format!("RemoveRaftVoter of node {id}"),
    )?;
    Ok(done("removed", id))
}

fn done(what: &str, id: i32) -> Report {
    let mut table = Table::new(&["NODE", "VOTER"]);
    table.row(vec![id.to_string(), what.to_string()]);
    Report {
        tables: vec![table],
        json: json!({ "node_id": id, "voter": what }),
        failures: Vec::new(),
    }
}
