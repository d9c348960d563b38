//! The group coordinator's core: pure state machines with no I/O.
//!
//! One [`GroupCoordinator`] lives on each shard and serves the groups whose
//! `__consumer_offsets` partition ([`offsets_partition_for`]) that shard owns.
//! It is stepped with plain requests and the current time (`now_ms`), and hands
//! back (a) answers, some of them later through [`GroupCoordinator::take_responses`]
//! because JoinGroup and SyncGroup wait on other members, and (b) the records
//! to append to `__consumer_offsets`; replaying those records with
//! [`GroupCoordinator::replay`] rebuilds the same state after a restart.
//!
//! Map of the modules:
//! - [`classic`]: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
//! - [`consumer`]: the KIP-848 protocol (ConsumerGroupHeartbeat).
//! - [`migration`]: online moves between the two protocols, made by
//!   [`conversion`]; classic members a KIP-848 group hosts are served by
//!   [`consumer_classic`], and [`consumer_protocol`] reads and writes
//!   their embedded payloads.
//! - [`share`]: KIP-932 share groups (ShareGroupHeartbeat): membership and
//!   assignment; the records' delivery is [`crate::share`]'s.
//! - [`share_topics`]: the topics each share group has had assigned, kept
//!   so that DeleteGroups can drop its share-partition states.
//! - [`membership`]: KIP-848 and share groups' membership kept in
//!   `__consumer_offsets` ([`membership_records`] is its format), so that
//!   members go on at their epochs after a coordinator moves.
//! - [`assignor`]: server-side assignors `range`, `roundrobin`, `uniform`.
//! - [`offsets`]: committed offsets and their expiry.
//! - [`records`]: the `__consumer_offsets` key and value formats.
//! - [`coordinator`]: the per-shard coordinator tying the above together.
//! - [`timeouts`]: members' session timeouts and heartbeat intervals, and
//!   the bounds a group's own values keep.
//! - [`error`]: record decoding errors (Kafka codes are [`engine::ErrorCode`]).

pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod consumer_classic;
pub mod consumer_protocol;
pub mod conversion;
pub mod coordinator;
pub mod error;
pub mod membership;
pub mod membership_records;
pub mod migration;
pub mod offsets;
pub mod records;
pub mod share;
pub mod share_topics;
pub mod timeouts;

#[cfg(test)]
mod membership_tests;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod tests;

pub use assignor::{Assignor, TopicPartition};
pub use classic::{
    ClassicGroup, ClassicState, HeartbeatRequest, JoinRequest, JoinResponse, LeavingMember,
    SyncRequest, SyncResponse,
};
pub use consumer::{
    ConsumerGroup, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, TopicInfo, TopicLookups,
};
pub use coordinator::{
    FetchedOffset, Group, GroupCoordinator, JoinOutcome, ListedGroup, OffsetCommitRequest,
    SyncOutcome,
};
pub use migration::MigrationPolicy;
pub use offsets::Record;
pub use share::{ShareGroup, ShareGroupConfig, ShareHeartbeatRequest, ShareHeartbeatResponse};
pub use timeouts::{MemberTimeouts, MsRange, Refusal, TimeoutBounds};

/// Identifies a request whose answer may come later; chosen by the caller.
pub type RequestToken = u64;

/// A delayed answer, drained with [`GroupCoordinator::take_responses`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupResponse {
    /// A JoinGroup answer.
    Join(JoinResponse),
    /// A SyncGroup answer.
    Sync(SyncResponse),
}

/// Coordinator settings, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`.
    pub group_max_size: usize,
    /// `group.consumer.session.timeout.ms`.
    pub consumer_session_timeout_ms: i64,
    /// `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.min/max.session.timeout.ms` and
    /// `group.consumer.min/max.heartbeat.interval.ms`: what a group's own
    /// `consumer.*` configs may be.
    pub consumer_bounds: TimeoutBounds,
    /// `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval_ms: i64,
    /// Seed of the member-id generator (give each shard and start a different one).
    pub member_id_seed: u64,
    /// Share groups' settings.
    pub share: share::ShareGroupConfig,
    /// `group.consumer.migration.policy`.
    pub migration_policy: migration::MigrationPolicy,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            initial_rebalance_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX as usize,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_bounds: TimeoutBounds::default(),
            offsets_retention_ms: 10_080 * 60_000,
            offsets_retention_check_interval_ms: 600_000,
            member_id_seed: 0x5eed,
            share: share::ShareGroupConfig::default(),
            migration_policy: migration::MigrationPolicy::default(),
        }
    }
}

impl GroupConfig {
    /// A KIP-848 member's timeouts when its group sets none of its own.
    pub fn consumer_timeouts(&self) -> MemberTimeouts {
        MemberTimeouts {
            session_timeout_ms: self.consumer_session_timeout_ms,
            heartbeat_interval_ms: self.consumer_heartbeat_interval_ms,
        }
    }
}

/// Generates member ids: deterministic from a seed so tests are reproducible;
/// the caller seeds it from the clock or a random source in production.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdGenerator {
    state: u64,
}

impl IdGenerator {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// splitmix64: a full-period 64-bit sequence with well-mixed output.
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A UUID-shaped random string (version 4 layout).
    pub fn uuid_string(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let bytes = (u128::from(hi) << 64 | u128::from(lo)).to_be_bytes();
        let mut b = bytes;
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }

    /// A classic member id, `{client_id}-{uuid}` as Kafka builds it.
    pub fn member_id(&mut self, client_id: &str) -> String {
        format!("{client_id}-{}", self.uuid_string())
    }
}

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code
/// units with wrapping `int` arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The `__consumer_offsets` partition that holds `group_id`: Kafka's
/// `Utils.abs(groupId.hashCode) % partitions`, where `Utils.abs` masks the sign
/// bit (so `Integer.MIN_VALUE` maps to 0, not to itself). Using Kafka's exact
/// function means a group lands on the same partition as on a Kafka cluster, so
/// a migrated `__consumer_offsets` log is served by the right coordinator.
pub fn offsets_partition_for(group_id: &str, partitions: i32) -> i32 {
    if partitions <= 0 {
        return 0;
    }
    (java_string_hash(group_id) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod placement_tests {
    use super::*;

    #[test]
    fn java_hash_matches_java() {
        // "abc": 97*31^2 + 98*31 + 99 = 93217 + 3038 + 99 = 96354.
        assert_eq!(java_string_hash("abc"), 96354);
        assert_eq!(java_string_hash(""), 0);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE, a known Java fact.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Non-ASCII: 'é' is one UTF-16 unit, 0xE9 = 233.
        assert_eq!(java_string_hash("é"), 233);
        // U+1F600 is a surrogate pair 0xD83D 0xDE00: 0xD83D*31 + 0xDE00.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn partition_placement() {
        assert_eq!(offsets_partition_for("abc", 50), 96354 % 50);
        assert_eq!(offsets_partition_for("polygenelubricants", 50), 0);
        // "hello".hashCode() = 99162322 → 99162322 % 50 = 22.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(offsets_partition_for("hello", 50), 22);
        for g in ["a", "group-1", "x".repeat(100).as_str()] {
            let p = offsets_partition_for(g, 50);
            assert!((0..50).contains(&p));
        }
    }

    #[test]
    fn ids_look_like_kafkas() {
        let mut ids = IdGenerator::new(1);
        let id = ids.member_id("client");
        assert!(id.starts_with("client-"));
        assert_eq!(id.len(), "client-".len() + 36);
        assert_ne!(ids.member_id("client"), id);
    }
}
