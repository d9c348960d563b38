//! The broker settings of KIP-848 consumer groups and KIP-932 share groups
//! (`group.consumer.*`, `group.share.*`), with Kafka's names, defaults and
//! start-up checks.
//!
//! Each timeout has a broker-wide value and the bounds a group's own value
//! (a group config, `consumer.session.timeout.ms` and the like) must keep.
//! Kafka refuses to start when a broker value falls outside its own bounds,
//! or when a heartbeat interval is not below its session timeout; so does
//! rill ([`check`]).

use super::{num, positive};
use crate::error::ConfigError;
use coordinators::group::{GroupConfig, MigrationPolicy, MsRange, TimeoutBounds};

/// Applies one `group.consumer.*` or `group.share.*` setting; `Ok(false)`
/// when `name` is not one of them.
pub(super) fn apply(group: &mut GroupConfig, name: &str, value: &str) -> Result<bool, ConfigError> {
    if let Some(key) = name.strip_prefix("group.consumer.") {
        match key {
            "session.timeout.ms" => group.consumer_session_timeout_ms = positive(name, value)?,
            "heartbeat.interval.ms" => {
                group.consumer_heartbeat_interval_ms = positive(name, value)?
            }
            "migration.policy" => {
                group.migration_policy =
                    MigrationPolicy::from_name(value.trim()).ok_or_else(|| {
                        ConfigError::invalid(
                            name,
                            value,
                            "disabled, upgrade, downgrade or bidirectional",
                        )
                    })?
            }
            _ => return apply_bound(&mut group.consumer_bounds, key, name, value),
        }
        return Ok(true);
    }
    let Some(key) = name.strip_prefix("group.share.") else {
        return Ok(false);
    };
    let share = &mut group.share;
    match key {
        "session.timeout.ms" => share.session_timeout_ms = positive(name, value)?,
        "heartbeat.interval.ms" => share.heartbeat_interval_ms = positive(name, value)?,
        "max.size" => share.max_size = num(name, value)?,
        "record.lock.duration.ms" => share.records.lock_duration_ms = positive(name, value)?,
        "min.record.lock.duration.ms" => share.lock_duration_bounds_ms.min = positive(name, value)?,
        "max.record.lock.duration.ms" => share.lock_duration_bounds_ms.max = positive(name, value)?,
        // Kafka's name, and the one rill spelled first.
        "delivery.count.limit" | "delivery.attempt.limit" => {
            let limit: i16 = num(name, value)?;
            if !(2..=10).contains(&limit) {
                return Err(ConfigError::invalid(name, value, "from 2 to 10"));
            }
            share.records.delivery_limit = limit;
        }
        "partition.max.record.locks" => share.records.max_in_flight = positive(name, value)?,
        "max.share.sessions" => share.max_sessions = num(name, value)?,
        _ => return apply_bound(&mut share.bounds, key, name, value),
    }
    Ok(true)
}

/// The bounds keys (`min.session.timeout.ms` and the like, `key` without
/// the group type's prefix) into `bounds`; `Ok(false)` for another key.
fn apply_bound(
    bounds: &mut TimeoutBounds,
    key: &str,
    name: &str,
    value: &str,
) -> Result<bool, ConfigError> {
    let end = match key {
        "min.session.timeout.ms" => &mut bounds.session_timeout_ms.min,
        "max.session.timeout.ms" => &mut bounds.session_timeout_ms.max,
        "min.heartbeat.interval.ms" => &mut bounds.heartbeat_interval_ms.min,
        "max.heartbeat.interval.ms" => &mut bounds.heartbeat_interval_ms.max,
        _ => return Ok(false),
    };
    *end = positive(name, value)?;
    Ok(true)
}

/// Refuses group settings that contradict each other, with Kafka's rules
/// ([`MemberTimeouts::refusal`], [`MsRange::refusal`]).
pub(super) fn check(group: &GroupConfig) -> Result<(), ConfigError> {
    let consumer = ("group.consumer", group.consumer_bounds);
    let share = ("group.share", group.share.bounds);
    for (prefix, bounds) in [consumer, share] {
        check_ordered(prefix, "session.timeout.ms", bounds.session_timeout_ms)?;
        check_ordered(
            prefix,
            "heartbeat.interval.ms",
            bounds.heartbeat_interval_ms,
        )?;
    }
    let lock_bounds = group.share.lock_duration_bounds_ms;
    check_ordered("group.share", "record.lock.duration.ms", lock_bounds)?;
    let lock_name = "group.share.record.lock.duration.ms";
    let lock_ms = group.share.records.lock_duration_ms;
    let refusal = (group
        .consumer_timeouts()
        .refusal(&consumer.1, (consumer.0, consumer.0)))
    .or_else(|| group.share.timeouts().refusal(&share.1, (share.0, share.0)))
    .or_else(|| {
        lock_bounds.refusal(
            lock_name,
            lock_ms,
            ("group.share", "record.lock.duration.ms"),
        )
    });
    match refusal {
        Some(r) => Err(ConfigError::invalid(
            &r.name,
            &r.value.to_string(),
            &r.reason,
        )),
        None => Ok(()),
    }
}

/// `{prefix}.min.{key}` at most `{prefix}.max.{key}`.
fn check_ordered(prefix: &str, key: &str, range: MsRange) -> Result<(), ConfigError> {
    if range.min <= range.max {
        return Ok(());
    }
    Err(ConfigError::invalid(
        &format!("{prefix}.max.{key}"),
        &range.max.to_string(),
        &format!("must be at least {prefix}.min.{key} ({})", range.min),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(pairs: &[(&str, &str)]) -> Result<GroupConfig, ConfigError> {
        let mut group = GroupConfig::default();
        for (name, value) in pairs {
            assert!(apply(&mut group, name, value)?, "{name} is a group setting");
        }
        check(&group).map(|()| group)
    }

    #[test]
    fn kafkas_defaults_pass_and_bounds_are_read() {
        let group = applied(&[]).expect("Kafka's defaults");
        assert_eq!(
            group.share.lock_duration_bounds_ms,
            MsRange::new(15_000, 60_000)
        );
        let group = applied(&[
            ("group.share.min.record.lock.duration.ms", "1000"),
            ("group.share.record.lock.duration.ms", "1000"),
            ("group.consumer.min.session.timeout.ms", "6000"),
            ("group.consumer.session.timeout.ms", "6000"),
            ("group.share.delivery.count.limit", "3"),
            ("group.consumer.migration.policy", "UPGRADE"),
        ])
        .expect("lowered bounds");
        assert_eq!(group.migration_policy, MigrationPolicy::Upgrade);
        assert_eq!(
            GroupConfig::default().migration_policy,
            MigrationPolicy::Bidirectional
        );
        assert!(applied(&[("group.consumer.migration.policy", "both")]).is_err());
        assert_eq!(group.share.records.lock_duration_ms, 1_000);
        assert_eq!(group.consumer_session_timeout_ms, 6_000);
        assert_eq!(group.share.records.delivery_limit, 3);
        assert!(!apply(&mut GroupConfig::default(), "group.max.size", "5").unwrap_or(true));
    }

    #[test]
    fn a_value_outside_its_bounds_stops_the_start() {
        for (pairs, refused) in [
            (
                &[("group.share.record.lock.duration.ms", "1000")][..],
                "group.share.record.lock.duration.ms",
            ),
            (
                &[("group.consumer.session.timeout.ms", "90000")][..],
                "group.consumer.session.timeout.ms",
            ),
            (
                &[("group.share.max.heartbeat.interval.ms", "1000")][..],
                "group.share.max.heartbeat.interval.ms",
            ),
            (
                &[
                    ("group.share.max.heartbeat.interval.ms", "60000"),
                    ("group.share.heartbeat.interval.ms", "45000"),
                ][..],
                "group.share.heartbeat.interval.ms",
            ),
            (
                &[("group.share.delivery.count.limit", "11")][..],
                "group.share.delivery.count.limit",
            ),
        ] {
            match applied(pairs) {
                Err(ConfigError::Invalid { name, .. }) => assert_eq!(name, refused, "{pairs:?}"),
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
    }
}
