//! `rill-bench`: a throughput and latency harness for any Kafka-protocol
//! broker (rill, Kafka, Redpanda), plus disk and fetch-path measurements.
//! It stands beside the broker crates and depends on none of them: it speaks
//! only the wire protocol, so the same numbers can be taken of any broker.
//!
//! Modules:
//! - [`workload`]: OMB-style workload definitions, built-ins, YAML/TOML.
//! - [`cli`]: command-line workload selection and overrides.
//! - [`distribution`]: key and message-size generators.
//! - [`kafka`]: a small pipelined async Kafka client (the load generator's).
//! - [`stats`]: counters, hdrhistogram latencies, per-second samples.
//! - [`runner`]: producers, consumers and the progress line for one run.
//! - [`results`]: the JSON result of a run, with host facts.
//! - [`broker_cpu`]: the broker's CPU seconds per GB, from its `/metrics`
//!   or `/proc`.
//! - [`report`]: text tables and self-contained HTML/SVG reports.
//! - [`compare`]: one workload against several brokers, interleaved.
//! - [`cluster`]: local rill clusters (N brokers on loopback, or each in
//!   a network namespace of its own) to measure.
//! - [`netns`]: those namespaces, and cuts between brokers.
//! - [`ports`]: free loopback ports for the brokers it starts.
//! - [`txn_cost`]: a committed transaction's cost, transactions v1 against
//!   v2 (KIP-890).
//! - [`loopfs`]: a loop-mounted file system per broker (`--disk-mb`), and
//!   a ballast that fills one.
//! - [`failover`]: leader SIGKILL to the next acknowledged produce.
//! - [`disk`]: sequential vs random `O_DIRECT` writes through io_uring.
//! - [`disk_floor`]: the disk's own CPU per GB (`O_DIRECT` writes, each
//!   followed by `fdatasync`), the second floor beside the null sink.
//! - [`group`]: consumer groups: assignors, classic and KIP-848 membership.
//! - [`fetch_path`]: rill's copy / sendfile / splice fetch paths side by side.
//! - [`floor`]: a run against the broker and against a null-sink child,
//!   and the broker's ratio to that floor.
//! - [`omb`]: OpenMessaging Benchmark workload and driver files in, OMB's
//!   result JSON out.
//! - [`soak`]: a long mixed workload (stream, consumers, compacted keyed
//!   updates) sampled over time: broker RSS, CPU, p99, lag, disk use.
//! - [`handshakes`]: connection setup rate (TCP, TLS, SASL) per protocol.
//! - [`null_sink`]: a Kafka-protocol server that discards everything, to
//!   measure the harness's own ceiling; with [`sink_log`], the simplest
//!   durable server (writes and `fdatasync`s before it answers).
//! - [`verify`]: a Jepsen-style check of the Kafka queue workload
//!   (rdkafka clients, a SIGKILL/SIGSTOP/partition/full-disk nemesis on a local cluster, a
//!   pure history checker with `jepsen.tests.kafka`'s anomaly names).
//! - [`app`]: the `rill-bench` command line (the root package's binary
//!   calls [`app::main`]).
//! - [`error`]: the crate's error type.

pub mod app;
pub mod blkio;
pub mod broker_cpu;
pub mod cli;
pub mod cluster;
pub mod compare;
pub mod disk;
pub mod disk_floor;
pub mod distribution;
pub mod error;
pub mod failover;
pub mod fetch_path;
pub mod floor;
pub mod group;
pub mod handshakes;
pub mod kafka;
pub mod leader_move;
pub mod loopfs;
pub mod netns;
pub mod null_sink;
pub mod omb;
pub mod ports;
pub mod report;
pub mod results;
pub mod runner;
pub mod sink_log;
pub mod soak;
pub mod stats;
pub mod txn_cost;
pub mod verify;
pub mod workload;

pub use error::{BenchError, Result};
