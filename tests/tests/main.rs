//! rill's black-box tests, one binary: each module is one concern's
//! tests (a real `rill` process, real Kafka clients; helpers in
//! `rill_tests`). One binary links the broker's test helpers once, not
//! sixty times, and lets the test threads run any file's tests side by
//! side, so a long test no longer holds up a whole file's queue.
//!
//! Run one file's tests by its module path: `cargo test --test blackbox
//! sasl::`. `doc_commands` (README's commands, on its fixed ports) and
//! `debian_package` (the package installed, on 9092) are binaries of their
//! own: nothing else may run beside them on those ports.

#[path = "../bench/common/mod.rs"]
mod common;

mod acls;
mod admin_cli;
mod authorized_operations;
mod bad_input;
mod bounded_memory;
mod broker_crcs;
mod broker_lifecycle;
mod catch_up_before_serving;
#[path = "../bench/cli_rill.rs"]
mod cli_rill;
mod client_telemetry;
mod clock_jumps;
mod cluster;
mod compression;
mod configs;
mod connection_limits;
mod controller_failover;
mod controller_only;
mod coordinator_fencing;
mod coordinator_partition;
mod deploy;
mod describe_apis;
mod disk_faults;
mod diverging_epochs;
mod docs_reference;
mod dynamic_quorum;
#[path = "../bench/e2e_rill.rs"]
mod e2e_rill;
mod elections;
mod fatal_stop;
mod features;
mod fetch_sessions;
mod follower_fetch;
mod full_disk;
mod group_configs;
mod group_membership;
mod group_migration;
mod groups;
#[path = "../bench/groups_rill.rs"]
mod groups_rill;
mod gssapi;
mod inter_broker;
mod io_properties;
mod kafkajs;
mod layering;
mod leader_epochs;
mod limits;
mod listeners;
mod log_cleaner;
mod log_dirs;
mod many_partitions;
#[path = "../bench/null_sink.rs"]
mod null_sink;
mod oauthbearer;
mod old_clients;
#[path = "../bench/omb_rill.rs"]
mod omb_rill;
mod partition;
mod pipelined_answers;
mod produce_churn;
mod produce_consume;
mod producer_ids;
mod quotas;
mod reassignment;
mod replication;
mod replication_throttle;
mod rolling_upgrade;
mod sasl;
#[path = "../bench/security_rill.rs"]
mod security_rill;
mod share_groups;
mod share_offsets;
#[path = "../bench/soak_rill.rs"]
mod soak_rill;
mod static_membership;
mod tiered_storage;
mod tls;
mod transactions;
mod transactions_v2;
mod unwritable_replicas;
#[path = "../bench/verify_rill.rs"]
mod verify_rill;
