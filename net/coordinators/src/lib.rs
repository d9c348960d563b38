//! rill's sans-I/O coordinators: the state machines behind consumer groups,
//! share groups and transactions.
//!
//! Each core is stepped with plain requests and the current time (`now_ms`)
//! and answers with replies and the records to persist; it never touches a
//! socket, a file or a shard. The runtimes (`rill-runtimes`: `group_runtime`,
//! `txn_runtime`) place them on shards, persist their records through the
//! replicated log, and feed the log back on a leadership change, so the
//! state after a failover is the state the log holds.
//!
//! - [`group`]: the group coordinator (classic protocol, KIP-848 consumer
//!   groups, committed offsets), and its settings ([`group::GroupConfig`]).
//! - [`txn`]: the transaction coordinator (InitProducerId for transactional
//!   ids, AddPartitions, EndTxn, timeouts).
//!
//! - [`share`]: share groups (KIP-932) at the partition leader: which
//!   records are delivered to which member, locks, acknowledgements. The
//!   share group's membership is the group coordinator's
//!   ([`group::share`]).

pub mod group;
pub mod share;
pub mod txn;
