//! Online migration between the classic and the KIP-848 protocol (Kafka's
//! `group.consumer.migration.policy`), so that an application can move a
//! live consumer group from one protocol to the other by a rolling restart.
//!
//! - **Upgrade**: the first ConsumerGroupHeartbeat into a non-empty classic
//!   group turns it into a KIP-848 group. Each classic member comes over at
//!   the group's generation, owning what its last SyncGroup gave it, and
//!   stays a classic member: [`super::consumer_classic`] answers its
//!   JoinGroup, SyncGroup, Heartbeat and LeaveGroup from the KIP-848 state.
//! - **Downgrade**: once every member left is a classic one (the last
//!   KIP-848 member left or was fenced), the group turns classic again, at
//!   generation = group epoch, each member holding its target, and a
//!   rebalance starts so that they all join again.
//!
//! This file holds the policy and what a hosted classic member keeps;
//! [`super::conversion`] turns groups from one protocol to the other.

/// `group.consumer.migration.policy`: which conversions are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Neither; a classic member may not join a KIP-848 group either.
    Disabled,
    /// Classic to KIP-848 only.
    Upgrade,
    /// KIP-848 to classic only.
    Downgrade,
    /// Both (Kafka's default since 4.0).
    #[default]
    Bidirectional,
}

impl MigrationPolicy {
    /// Parses Kafka's names, in any case.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "disabled" => Some(Self::Disabled),
            "upgrade" => Some(Self::Upgrade),
            "downgrade" => Some(Self::Downgrade),
            "bidirectional" => Some(Self::Bidirectional),
            _ => None,
        }
    }

    /// Whether a classic group may turn KIP-848.
    pub fn allows_upgrade(self) -> bool {
        matches!(self, Self::Upgrade | Self::Bidirectional)
    }

    /// Whether a KIP-848 group of classic members may turn classic.
    pub fn allows_downgrade(self) -> bool {
        matches!(self, Self::Downgrade | Self::Bidirectional)
    }
}

/// What a classic member hosted by a KIP-848 group keeps of its JoinGroup
/// (Kafka's `ClassicMemberMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMemberMetadata {
    /// Its session timeout (classic members have their own).
    pub session_timeout_ms: i32,
    /// Its protocols with their subscription metadata, in its order.
    pub protocols: Vec<(String, Vec<u8>)>,
}

impl ClassicMemberMetadata {
    /// The protocol it prefers, which its JoinGroup answer names.
    pub fn first_protocol(&self) -> &str {
        self.protocols.first().map_or("", |(name, _)| name.as_str())
    }

    /// The subscription metadata of its preferred protocol.
    pub fn first_metadata(&self) -> &[u8] {
        self.protocols
            .first()
            .map_or(&[][..], |(_, m)| m.as_slice())
    }
}
