//! `rill admin user create / delete / list`: SCRAM credentials
//! (AlterUserScramCredentials, DescribeUserScramCredentials, KIP-554).
//! The password never travels: the tool salts and hashes it here with
//! rill-bench's SCRAM code and sends the salted password.

use crate::client::Admin;
use crate::error::{check, status, AdminError, Result};
use crate::output::{Report, Table};
use bench_harness::kafka::sasl::{random_salt, salted_password, SaslMechanism};
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// Kafka's default (and minimum) SCRAM iteration count.
const DEFAULT_ITERATIONS: u32 = 4096;

/// `rill admin user ...`.
#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Create a SCRAM user, or change its password.
    Create {
        user: String,
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: String,
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Delete a user's credential for one mechanism.
    Delete {
        user: String,
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: String,
    },
    /// Users and their mechanisms.
    List,
}

/// Runs a `user` command.
pub async fn run(admin: &mut Admin, command: UserCommand) -> Result<Report> {
    match command {
        UserCommand::Create {
            user,
            password,
            mechanism,
            iterations,
        } => create(admin, &user, &password, &mechanism, iterations).await,
        UserCommand::Delete { user, mechanism } => delete(admin, &user, &mechanism).await,
        UserCommand::List => list(admin).await,
    }
}

/// A SCRAM mechanism and its KIP-554 code (1: SHA-256, 2: SHA-512).
fn scram(mechanism: &str) -> Result<(SaslMechanism, i8)> {
    match SaslMechanism::parse(mechanism)? {
        SaslMechanism::ScramSha256 => Ok((SaslMechanism::ScramSha256, 1)),
        SaslMechanism::ScramSha512 => Ok((SaslMechanism::ScramSha512, 2)),
        SaslMechanism::Plain | SaslMechanism::OAuthBearer => Err(AdminError::Usage(String::from(
            "--mechanism: SCRAM-SHA-256 or SCRAM-SHA-512 (PLAIN and OAUTHBEARER users are not stored by the broker)",
        ))),
    }
}

fn mechanism_name(code: i8) -> String {
    match code {
        1 => String::from("SCRAM-SHA-256"),
        2 => String::from("SCRAM-SHA-512"),
        other => format!("UNKNOWN({other})"),
    }
}

fn results_report(answer: AlterUserScramCredentialsResponse, what: &str) -> Report {
    let mut table = Table::new(&["USER", "STATUS"]);
    let mut json = Vec::new();
    let mut failures = Vec::new();
    for result in answer.results {
        let status = status(result.error_code, result.error_message.as_deref());
        if result.error_code != 0 {
            failures.push(format!("{what} {}: {status}", result.user));
        }
        json.push(json!({"user": result.user.as_str(), "error_code": result.error_code, "status": status}));
        table.row(vec![result.user.to_string(), status]);
    }
    Report {
        tables: vec![table],
        json: json.into(),
        failures,
    }
}

async fn create(
    admin: &mut Admin,
    user: &str,
    password: &str,
    mechanism: &str,
    iterations: u32,
) -> Result<Report> {
    let (mechanism, code) = scram(mechanism)?;
    if iterations < DEFAULT_ITERATIONS {
        return Err(AdminError::Usage(format!(
            "--iterations {iterations}: at least {DEFAULT_ITERATIONS}"
        )));
    }
    let iterations_field = i32::try_from(iterations)
        .map_err(|_| AdminError::Usage(format!("--iterations {iterations}: too many")))?;
    let salt = random_salt();
    let salted = salted_password(mechanism, password, &salt, iterations);
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(code)
            .with_iterations(iterations_field)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    let answer = admin.call_any(&request).await?;
    Ok(results_report(answer, "create user"))
}

async fn delete(admin: &mut Admin, user: &str, mechanism: &str) -> Result<Report> {
    let (_, code) = scram(mechanism)?;
    let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(code),
    ]);
    let answer = admin.call_any(&request).await?;
    Ok(results_report(answer, "delete user"))
}

async fn list(admin: &mut Admin) -> Result<Report> {
    let request = DescribeUserScramCredentialsRequest::default().with_users(None);
    let answer = admin.call_any(&request).await?;
    check(
        answer.error_code,
        answer.error_message.as_deref(),
        "DescribeUserScramCredentials",
    )?;
    let mut rows = Vec::new();
    for result in &answer.results {
        check(
            result.error_code,
            result.error_message.as_deref(),
            format!("credentials of user {}", result.user),
        )?;
        for info in &result.credential_infos {
            rows.push((
                result.user.to_string(),
                mechanism_name(info.mechanism),
                info.iterations,
            ));
        }
    }
    rows.sort();
    let mut table = Table::new(&["USER", "MECHANISM", "ITERATIONS"]);
    let mut json = Vec::new();
    for (user, mechanism, iterations) in rows {
        json.push(json!({"user": user, "mechanism": mechanism, "iterations": iterations}));
        table.row(vec![user, mechanism, iterations.to_string()]);
    }
    Ok(Report::single(table, json.into()))
}
