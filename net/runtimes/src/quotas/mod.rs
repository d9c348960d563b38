//! Client quotas, Kafka's way: produce and fetch byte rates per user and
//! client id (`producer_byte_rate`, `consumer_byte_rate`), set with
//! AlterClientQuotas, kept in the metadata quorum and enforced by throttling.
//!
//! A client over its quota gets its response at once with
//! `throttle_time_ms`, and its connection reads no further request for that
//! long (KIP-219: the broker mutes the channel, the client backs off too).
//! A throttled fetch is answered empty, as Kafka does, so that a consumer
//! over its rate receives nothing until the throttle ends.
//!
//! - [`rate`]: the windowed rate (Kafka's `quota.window.num` samples of
//!   `quota.window.size.seconds`) and the throttle time it implies.
//! - [`entity`]: which configured entity's quota applies to a (user,
//!   client id), in Kafka's order of precedence.
//! - [`manager`]: the broker-wide sensors, shared by every shard.
//! - [`enforce`]: what the Produce and Fetch handlers call.
//! - [`replication`]: replication throttles (KIP-73), on the same sensors.

pub mod enforce;
pub mod entity;
pub mod manager;
pub mod rate;
pub mod replication;

pub use entity::{normalize, resolve, QuotaMatch, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE};
pub use manager::{QuotaKind, QuotaManager, Sensors};
pub use rate::WindowedRate;
