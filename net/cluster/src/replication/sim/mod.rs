//! A seeded simulation of one partition replicated on three brokers, with an
//! auditor of Kafka's safety rules (issue #18's replication half of the
//! simulation; TigerBeetle's VOPR is the model).
//!
//! Each step the scheduler, driven only by the seed, does one thing:
//! delivers a message in flight (any one: delay and reordering), drops or
//! duplicates one, has a follower fetch, a client produce with acks=all, a
//! replica fsync, a leader run its ISR check, a replica read the committed
//! metadata, a replica crash (losing its unsynced tail) or restart, a link
//! between two endpoints be cut or healed, or the controller fence an
//! unreachable broker or unfence a reachable one. Time advances by a random
//! few milliseconds per step, and now and then jumps ahead, so followers
//! fall out of the ISR and rejoin.
//!
//! The partition is also a `__transaction_state` partition (issue #30).
//! Each broker runs a transaction coordinator; transactional clients begin
//! transactions, write to three data partitions and ask to commit or abort;
//! coordinators time transactions out and send markers. So the steps also
//! include a client request, a coordinator's timer, a marker delivered (any
//! one in flight) and a link between a broker and a data partition cut or
//! healed — a marker waits while its link is cut, which is how one arrives
//! after its coordinator lost its lease. Coordinators load, act on what the
//! HW passed and unload after every step. A stale coordinator (its broker
//! has not yet learned it lost leadership) keeps writing: the model shows
//! its writes never count.
//!
//! After every step the auditor checks the rules; the first violation stops
//! the run and names the seed and the step, so `simulate(seed, steps)`
//! reproduces it. The replication logic under test is the real one
//! ([`LeaderState`](crate::replication::LeaderState),
//! [`LeaderEpochCache`](crate::replication::LeaderEpochCache),
//! [`truncation_offset`](crate::replication::truncation_offset),
//! [`diverging_epoch`](crate::replication::diverging_epoch)).
//!
//! Map of the modules: `run` (the entry points), `world` (the scheduler),
//! `node` (a replica: a thin runtime around the cores), `controller` (a
//! minimal KRaft controller: fencing, elections, AlterPartition), `network`
//! (messages and cut links), `coordinator` (a transaction coordinator under
//! a leadership lease), `txn` (transaction records, markers, data
//! partitions), `auditor` (the rules, transactions' included: none torn,
//! leader epochs monotonic per replica), `rng` (SplitMix64), `config` (the
//! settings) and `report` (stats and violations). Imports run one way:
//! `run` → `world` → the rest → `config`/`report`; this file only declares
//! the modules and re-exports.
//!
//! Faults a correct cluster survives are always on. Rules a correct cluster
//! keeps can be broken through [`SimConfig`] (`election`,
//! `eligible_leader_replicas` above the leaders' minimum ISR,
//! `follower_fsync_before_fetch`, `leader_applies_isr_before_commit`,
//! `coordinator_writes_locally` — the coordinator before issue #30's fix —
//! `coordinator_loads_early` and `markers_unfenced`); the tests break each and check the auditor
//! reports it, so the auditor is known to be able to fail.

mod auditor;
mod config;
mod controller;
mod coordinator;
mod network;
mod node;
mod report;
mod rng;
mod run;
#[cfg(test)]
mod tests;
mod txn;
mod world;

pub use config::SimConfig;
pub use controller::ElectionRule;
pub use report::{Rule, SimStats, Violation};
pub use run::{simulate, simulate_with};
