//! The topic configs of tiered storage checked against the broker and
//! against each other, with Kafka's refusals (INVALID_CONFIG and Kafka's
//! words): `remote.storage.enable=true` needs
//! `remote.log.storage.system.enable`, a compacted topic is never tiered,
//! `local.retention.*` may not exceed `retention.*`, and tiering is turned
//! off only with `remote.log.delete.on.disable=true` (KIP-950), which
//! deletes the remote data.

use crate::Shard;
use engine::{ErrorCode, TopicConfig};

/// Refuses a topic config (new, or replacing `before`) that tiered storage
/// cannot hold.
pub(super) fn check_tiering(
    shard: &Shard,
    config: &TopicConfig,
    before: Option<&TopicConfig>,
) -> Result<(), (ErrorCode, String)> {
    let refuse = |message: &str| Err((ErrorCode::InvalidConfig, message.to_string()));
    let remote = &config.remote;
    let was_tiered = before.is_some_and(|b| b.remote.storage_enable);
    if was_tiered && !remote.storage_enable && !remote.delete_on_disable {
        return refuse(
            "It is invalid to disable remote storage without deleting remote data. If you \
             want to keep the remote data and turn to read only, please set \
             `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to \
             disable remote storage and delete all remote data, please set \
             `remote.storage.enable=false,remote.log.delete.on.disable=true`.",
        );
    }
    if !remote.storage_enable {
        return Ok(());
    }
    if !shard.config.tiered.enabled && !was_tiered {
        return refuse(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be \
             configured with remote log storage.",
        );
    }
    if config.cleanup_policy.compact {
        return refuse("Remote log storage only supports topics with cleanup.policy=delete");
    }
    let exceeds =
        |local: i64, total: i64| local != -2 && total != -1 && (local == -1 || local > total);
    if exceeds(remote.local_retention_ms, config.retention_ms) {
        return refuse(&format!(
            "Value must not be -1 as retention.ms value is set as {}; local.retention.ms \
             can not be more than retention.ms",
            config.retention_ms
        ));
    }
    if exceeds(remote.local_retention_bytes, config.retention_bytes) {
        return refuse(&format!(
            "local.retention.bytes can not be more than retention.bytes ({})",
            config.retention_bytes
        ));
    }
    Ok(())
}
