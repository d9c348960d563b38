//! Consumer groups on the client side: the harness's consumers can join
//! real groups, classic protocol with assignors of the harness's own, or
//! KIP-848 (`group.protocol=consumer`) where the broker assigns.
//!
//! - [`assignor`]: `range`, `roundrobin` and `sticky` (pure).
//! - [`protocol`]: the embedded subscription and assignment payloads (pure).
//! - [`member`]: FindCoordinator, JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
//!   ConsumerGroupHeartbeat, OffsetCommit and OffsetFetch.

pub mod assignor;
pub mod member;
pub mod protocol;

pub use assignor::Assignor;
