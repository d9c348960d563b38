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
}

/// A member's session timeout and the heartbeat interval it is told to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberTimeouts {
    /// The member leaves when it has not heartbeated for this long.
    pub session_timeout_ms: i64,
    /// The interval given to the member in each answer.
    pub heartbeat_interval_ms: i32,
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
    fn ranges_include_both_ends() {
        let r = MsRange::new(5, 10);
        assert!(r.contains(5) && r.contains(10));
        assert!(!r.contains(4) && !r.contains(11));
    }
}
