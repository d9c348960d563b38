//! A member's session timeout and heartbeat interval, and the bounds a
//! group's own values must keep (Kafka's `group.consumer.min/max.*` and
//! `group.share.min/max.*` broker configs).
//!
//! A KIP-848 or share group may set its own `consumer.session.timeout.ms`,
//! `consumer.heartbeat.interval.ms`, `share.session.timeout.ms` and
//! `share.heartbeat.interval.ms` (group configs). The handler resolves them
//! against the broker's values and passes them with each heartbeat, so the
//! coordinator stays free of the metadata image.

/// An inclusive range of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsRange {
    /// Smallest value allowed.
    pub min: i64,
    /// Largest value allowed.
    pub max: i64,
}

impl MsRange {
    /// `min..=max`.
    pub const fn new(min: i64, max: i64) -> Self {
        Self { min, max }
    }

    /// Whether `ms` is within.
    pub fn contains(&self, ms: i64) -> bool {
        (self.min..=self.max).contains(&ms)
    }

    /// Why `value` of key `name` is outside, in Kafka's words; the bounds
    /// are the keys `{bounds}.min.{key}` and `{bounds}.max.{key}`.
    pub fn refusal(&self, name: &str, value: i64, (bounds, key): (&str, &str)) -> Option<Refusal> {
        let reason = if value < self.min {
            format!("{name} must be greater than or equal to {bounds}.min.{key}")
        } else if value > self.max {
            format!("{name} must be less than or equal to {bounds}.max.{key}")
        } else {
            return None;
        };
        Some(Refusal {
            name: name.to_owned(),
            value,
            reason,
        })
    }
}

/// A timeout Kafka refuses: the key, its value, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The key refused.
    pub name: String,
    /// Its value.
    pub value: i64,
    /// Kafka's message.
    pub reason: String,
}

/// A member's session timeout and the heartbeat interval it is told to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberTimeouts {
    /// The member leaves when it has not heartbeated for this long.
    pub session_timeout_ms: i64,
    /// The interval given to the member in each answer.
    pub heartbeat_interval_ms: i32,
}

impl MemberTimeouts {
    /// Why these break `bounds`, in Kafka's words: each within its range,
    /// and the heartbeat below the session. `prefix` names the values'
    /// keys (`consumer` for a group's configs, `group.consumer` for the
    /// broker's), `bounds_prefix` the bounds' (`group.consumer`).
    pub fn refusal(
        &self,
        bounds: &TimeoutBounds,
        (prefix, bounds_prefix): (&str, &str),
    ) -> Option<Refusal> {
        let session = (
            format!("{prefix}.session.timeout.ms"),
            self.session_timeout_ms,
        );
        let heartbeat = (
            format!("{prefix}.heartbeat.interval.ms"),
            i64::from(self.heartbeat_interval_ms),
        );
        let in_range = |(name, value): &(String, i64), range: MsRange, key: &str| {
            range.refusal(name, *value, (bounds_prefix, key))
        };
        in_range(
            &heartbeat,
            bounds.heartbeat_interval_ms,
            "heartbeat.interval.ms",
        )
        .or_else(|| in_range(&session, bounds.session_timeout_ms, "session.timeout.ms"))
        .or_else(|| {
            (session.1 <= heartbeat.1).then(|| Refusal {
                reason: format!("{} must be greater than {}", session.0, heartbeat.0),
                name: heartbeat.0.clone(),
                value: heartbeat.1,
            })
        })
    }
}

/// The bounds of one group type's timeouts (Kafka's defaults: sessions
/// 45–60 s, heartbeats 5–15 s, for consumer and share groups alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutBounds {
    /// `group.*.min.session.timeout.ms` to `group.*.max.session.timeout.ms`.
    pub session_timeout_ms: MsRange,
    /// `group.*.min.heartbeat.interval.ms` to `group.*.max.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: MsRange,
}

impl Default for TimeoutBounds {
    fn default() -> Self {
        Self {
            session_timeout_ms: MsRange::new(45_000, 60_000),
            heartbeat_interval_ms: MsRange::new(5_000, 15_000),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_in_kafkas_words() {
        let bounds = TimeoutBounds::default();
        let beat = |session_timeout_ms, heartbeat_interval_ms| MemberTimeouts {
            session_timeout_ms,
            heartbeat_interval_ms,
        };
        let names = ("share", "group.share");
        assert_eq!(beat(45_000, 5_000).refusal(&bounds, names), None);
        let refused = beat(45_000, 16_000).refusal(&bounds, names);
        assert_eq!(
            refused.map(|r| r.reason),
            Some("share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms".to_owned())
        );
        let wide = TimeoutBounds {
            session_timeout_ms: MsRange::new(1, 60_000),
            heartbeat_interval_ms: MsRange::new(1, 60_000),
        };
        let refused = beat(6_000, 6_000).refusal(&wide, names);
        assert_eq!(
            refused.map(|r| (r.name, r.reason)),
            Some((
                "share.heartbeat.interval.ms".to_owned(),
                "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
                    .to_owned()
            ))
        );
    }

    #[test]
    fn ranges_include_both_ends() {
        let r = MsRange::new(5, 10);
        assert!(r.contains(5) && r.contains(10));
        assert!(!r.contains(4) && !r.contains(11));
    }
}
