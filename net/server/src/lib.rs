//! rill's broker process: `rill serve` starts the shards, serves `/metrics`,
//! handles signals and shuts down.
//!
//! The top of the broker's crates: it builds each shard's runtimes
//! (`rill-runtimes`) on the kernel (`rill-kernel`), accepts connections for
//! the API layer (`rill-api`), and is what the `rill` binary calls.
//!
//! - [`serve`]: start the shards (one pinned glommio executor per core),
//!   accept on the shared port, handle signals, shut down in order.
//! - [`admin`]: the HTTP `/metrics` responder (and its health answers).
//! - [`process_stats`]: the process's CPU and RSS under Prometheus's
//!   standard names.
//! - [`oauth_stats`]: OAUTHBEARER's JWKS refreshes on `/metrics`.
//! - [`config_doc`]: `docs/configuration.md`, written from the config
//!   tables (`rill docs config`).
//! - [`metrics_doc`]: `docs/metrics.md`, written from the metric registry
//!   (`rill docs metrics`).

pub mod admin;
pub mod config_doc;
pub mod metrics_doc;
pub mod oauth_stats;
pub mod process_stats;
pub mod serve;
