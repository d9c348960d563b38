//! `rill admin feature describe / upgrade / downgrade`: feature levels
//! (KIP-584), as `kafka-features.sh` shows and changes them. `describe`
//! reads ApiVersions v3 (each feature's supported range on the answering
//! broker and the level the cluster runs at); `upgrade` and `downgrade`
//! send UpdateFeatures, which the controller takes only within what every
//! broker supports.

use crate::client::Admin;
use crate::error::{check, status, Result};
use crate::output::{Report, Table};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{ApiVersionsRequest, UpdateFeaturesRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

/// Kafka's `UpgradeType` codes.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// One level change.
#[derive(Debug, clap::Args)]
pub struct LevelArgs {
    /// The feature, e.g. `group.version`.
    #[arg(long)]
    pub feature: String,
    /// The level wanted.
    #[arg(long)]
    pub version: i16,
    /// Check only (UpdateFeatures' `validate_only`).
    #[arg(long)]
    pub dry_run: bool,
}

/// `rill admin feature ...`.
#[derive(Debug, clap::Subcommand)]
pub enum FeatureCommand {
    /// Each feature's supported levels and the cluster's level.
    Describe,
    /// Raise a feature's level.
    Upgrade(LevelArgs),
    /// Lower a feature's level (`--unsafe`: one that may lose metadata).
    Downgrade {
        #[command(flatten)]
        level: LevelArgs,
        #[arg(long = "unsafe")]
        unsafe_downgrade: bool,
    },
}

/// Runs a `feature` command.
pub async fn run(admin: &mut Admin, command: FeatureCommand) -> Result<Report> {
    match command {
        FeatureCommand::Describe => describe(admin).await,
        FeatureCommand::Upgrade(level) => update(admin, &level, UPGRADE).await,
        FeatureCommand::Downgrade {
            level,
            unsafe_downgrade,
        } => {
            let kind = if unsafe_downgrade {
                UNSAFE_DOWNGRADE
            } else {
                SAFE_DOWNGRADE
            };
            update(admin, &level, kind).await
        }
    }
}

async fn describe(admin: &mut Admin) -> Result<Report> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("rill-admin"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let answer = admin.call_any(&request).await?;
    check(answer.error_code, None, "ApiVersions")?;
    let mut table = Table::new(&["FEATURE", "SUPPORTED", "FINALIZED"]);
    let mut json = Vec::new();
    for feature in &answer.supported_features {
        // A feature absent from the finalized list runs at level 0.
        let finalized = answer
            .finalized_features
            .iter()
            .find(|f| f.name == feature.name)
            .map_or(0, |f| f.max_version_level);
        let name = feature.name.to_string();
        let supported = format!("{}-{}", feature.min_version, feature.max_version);
        json.push(json!({
            "feature": name,
            "min_version": feature.min_version,
            "max_version": feature.max_version,
            "finalized": finalized,
        }));
        table.row(vec![name, supported, finalized.to_string()]);
    }
    Ok(Report::single(table, json.into()))
}

async fn update(admin: &mut Admin, level: &LevelArgs, upgrade_type: i8) -> Result<Report> {
    let update = FeatureUpdateKey::default()
        .with_feature(StrBytes::from_string(level.feature.clone()))
        .with_max_version_level(level.version)
        .with_upgrade_type(upgrade_type);
    let request = UpdateFeaturesRequest::default()
        .with_timeout_ms(30_000)
        .with_feature_updates(vec![update])
        .with_validate_only(level.dry_run);
    let answer = admin.call_any(&request).await?;
    let code = answer
        .results
        .first()
        .map_or(answer.error_code, |r| r.error_code)
        .max(answer.error_code);
    let message = answer.error_message.as_deref().map(|m| m.to_string());
    let shown = status(code, message.as_deref());
    let mut table = Table::new(&["FEATURE", "LEVEL", "STATUS"]);
    table.row(vec![
        level.feature.clone(),
        level.version.to_string(),
        shown.clone(),
    ]);
    let failures = if code == 0 {
        Vec::new()
    } else {
        vec![format!(
            "update {} to {}: {shown}",
            level.feature, level.version
        )]
    };
    Ok(Report {
        tables: vec![table],
        json: json!({"feature": level.feature, "level": level.version, "error_code": code, "status": shown}),
        failures,
    })
}
