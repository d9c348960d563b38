//! Changes of the configs of a named resource that is neither a topic nor a
//! broker: a client-metrics subscription (KIP-714) or a group. Both are
//! checked here ([`super::client_metrics`], [`super::group_configs`]),
//! committed by the active controller as the resource's whole set of
//! configs, and answered once every shard's image holds them. Edits run on
//! the controller shard one at a time with the other admin changes, so
//! that two changes of one resource do not lose one.

use super::client_metrics::altered_client_metrics_configs;
use super::config_ops::ConfigOpKind;
use super::group_configs::altered_group_configs;
use super::CONTROLLER_SHARD;
use crate::cluster_runtime::ControllerRpc;
use crate::Shard;
use engine::ErrorCode;
use kernel::call::OwnerCall;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Which kind of named resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedResource {
    /// A client-metrics subscription (CLIENT_METRICS).
    ClientMetrics,
    /// A group (GROUP).
    Group,
}

/// IncrementalAlterConfigs / AlterConfigs on one named resource, run on
/// the controller shard.
#[derive(Debug, Clone)]
pub struct AlterNamedConfigs {
    /// The kind of resource.
    pub resource: NamedResource,
    /// Its name (the subscription's, the group id).
    pub name: String,
    /// The changes.
    pub ops: Vec<(String, Option<String>, ConfigOpKind)>,
    /// AlterConfigs semantics: the given set replaces every config.
    pub replace_all: bool,
    /// Only check.
    pub validate_only: bool,
}

impl OwnerCall<crate::ShardRuntime> for AlterNamedConfigs {
    type Reply = Result<(), (ErrorCode, String)>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        super::one_at_a_time(&shard, self.apply(&shard)).await
    }
}

impl AlterNamedConfigs {
    /// The change, decided on the current image and committed.
    async fn apply(self, shard: &Rc<Shard>) -> Result<(), (ErrorCode, String)> {
        if self.name.is_empty() {
            let what = match self.resource {
                NamedResource::ClientMetrics => "a client-metrics resource needs a name",
                NamedResource::Group => "a group resource needs a group id",
            };
            return Err((ErrorCode::InvalidRequest, what.to_owned()));
        }
        let image = shard.runtime().view.image();
        // Refused here too, before any controller is asked: in a rolling
        // upgrade the active one may still run the older release.
        if self.resource == NamedResource::Group {
            cluster::metadata::features::group_configs_allowed(&image)
                .map_err(|error| (error.error_code(), error.to_string()))?;
        }
        let all = match self.resource {
            NamedResource::ClientMetrics => image.client_metrics_configs(),
            NamedResource::Group => image.group_configs(),
        };
        let current = all.get(&self.name).cloned().unwrap_or_default();
        let start = if self.replace_all {
            BTreeMap::new()
        } else {
            current.clone()
        };
        let configs = match self.resource {
            NamedResource::ClientMetrics => altered_client_metrics_configs(&start, &self.ops)?,
            NamedResource::Group => altered_group_configs(&start, &self.ops, &shard.config.group)?,
        };
        if self.validate_only || configs == current {
            return Ok(());
        }
        let configs = configs.into_iter().collect();
        let request = match self.resource {
            NamedResource::ClientMetrics => ControllerRpc::SetClientMetricsConfigs {
                name: self.name,
                configs,
            },
            NamedResource::Group => ControllerRpc::SetGroupConfigs {
                group: self.name,
                configs,
            },
        };
        super::commit::commit_here(shard, request).await.map(|_| ())
    }
}

/// Asks the controller shard for the change, from any shard.
pub async fn submit(
    shard: &Rc<Shard>,
    request: AlterNamedConfigs,
) -> Result<(), (ErrorCode, String)> {
    shard
        .call(CONTROLLER_SHARD, request)
        .await
        .map_err(|e| (ErrorCode::NotLeaderOrFollower, e.to_string()))?
}
