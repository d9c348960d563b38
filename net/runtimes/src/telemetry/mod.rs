//! Client telemetry (KIP-714): GetTelemetrySubscriptions tells a client
//! which of its metrics to push and how often, PushTelemetry brings them,
//! and `/metrics` shows them. The subscriptions are the CLIENT_METRICS
//! config resources, kept in the metadata quorum
//! (`admin_changes::client_metrics`), so every broker of the cluster
//! answers the same, before and after a restart.
//!
//! - [`subscription`]: the resources' configs, checked and parsed, and what
//!   they ask of one client (pure).
//! - [`instances`]: the client instances a shard knows, KIP-714's
//!   throttling and checks, and their latest series, within a cap (pure).
//! - [`otlp`]: a pushed payload → Prometheus series (pure).
//! - [`render`]: every shard's series → Prometheus text (pure).
//! - here: [`TelemetryRuntime`], the per-shard state, and the entry points
//!   the handlers and the admin endpoint call.
//!
//! # Where the state lives, and why
//!
//! **Per shard, on the shard that serves the connection.** A request is
//! answered from the table of the shard it arrived on, with no hop and no
//! lock; `/metrics` (served by shard 0) asks every shard for a snapshot
//! with the owner call, as it already does for the shard metrics, and
//! merges them. Telemetry is rare (a push per client per interval) but a
//! hop per push to an owner shard would buy nothing: nothing about an
//! instance needs to be in one place.
//!
//! - The subscription id is derived from what the client is asked for and
//!   its instance id ([`subscription::resolve`]), not stored: a client
//!   whose connection lands on another shard (or another broker, or this
//!   one after a restart) pushes under the same id and is accepted there.
//!   The old shard's copy of it goes silent and is dropped; until then the
//!   merge shows the copy that pushed last.
//! - Throttling is per shard: a client that hops shards between two pushes
//!   gets one early push accepted. Kafka's broker-wide cache buys exactness
//!   here with a lock; one push is not worth one.
//! - The cap `rill.telemetry.max.clients` is split evenly over the shards
//!   (as `max.incremental.fetch.session.cache.slots` is), so the broker never
//!   holds more than it in all; a shard whose share is full evicts its
//!   least recently active instance, even if another shard has room.
//! - The subscriptions are parsed once per change of the image's
//!   CLIENT_METRICS resources, on each shard (a few regexes).
//!
//! With no CLIENT_METRICS resource every client is told to push nothing
//! (an empty metrics list, the default 5-minute interval), as Kafka does.
//! Clients are asked for cumulative sums (`delta_temporality` false):
//! Prometheus expects counters to be cumulative.

pub mod instances;
pub mod otlp;
pub mod render;
pub mod subscription;

use crate::Shard;
use cluster::metadata::MetadataImage;
use engine::ErrorCode;
use instances::{InstanceId, InstanceSnapshot, InstanceTable, PushCheck};
use kernel::call::OwnerCall;
use kernel::config::BrokerConfig;
use security::Session;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;
use subscription::{ClientMetadata, Resolved, Subscription};

/// The compression types offered for pushes, most preferred first
/// (Kafka's order: zstd, lz4, gzip, snappy; "none" is always allowed).
pub const ACCEPTED_COMPRESSION_TYPES: [i8; 4] = [4, 3, 1, 2];

/// A decompressed push may be this many times `telemetry.max.bytes`, and
/// a zip bomb is refused there rather than at the engine's 64 MiB cap.
/// Real pushes are far below either bound (librdkafka's: 1.5 KB
/// compressed), but decoding is what costs: prost's structs take about ten
/// times the bytes they decode from, so the default 1 MiB allows ~80 MB for
/// the moment one push is decoded (one at a time per shard: decoding does
/// not yield).
const MAX_DECOMPRESSION_RATIO: usize = 8;

/// The subscriptions as last parsed from the image.
#[derive(Default)]
struct ParsedSubscriptions {
    configs: BTreeMap<String, BTreeMap<String, String>>,
    parsed: Rc<Vec<Subscription>>,
}

/// One shard's telemetry state. **Shard-local** (`RefCell`s, no locks).
pub struct TelemetryRuntime {
    table: RefCell<InstanceTable>,
    subscriptions: RefCell<ParsedSubscriptions>,
    /// The zero of this shard's monotonic milliseconds.
    started: Instant,
    /// `telemetry.max.bytes`.
    max_bytes: usize,
}

impl TelemetryRuntime {
    /// Shard `shard_id` of `shard_count`: its share of
    /// `rill.telemetry.max.clients` (the remainder to the first shards).
    pub fn new(config: &BrokerConfig, shard_id: usize, shard_count: usize) -> TelemetryRuntime {
        let shards = shard_count.max(1);
        let total = config.telemetry_max_clients;
        let share = total / shards + usize::from(shard_id < total % shards);
        TelemetryRuntime {
            table: RefCell::new(InstanceTable::new(share)),
            subscriptions: RefCell::default(),
            started: Instant::now(),
            max_bytes: config.telemetry_max_bytes,
        }
    }

    /// `telemetry.max.bytes`.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The image's subscriptions, parsed again only when they changed. A
    /// resource that does not parse (the controller checked it; a newer
    /// broker's key?) is left out with a warning.
    fn subscriptions(&self, image: &MetadataImage) -> Rc<Vec<Subscription>> {
        let mut cached = self.subscriptions.borrow_mut();
        let configs = image.client_metrics_configs();
        if cached.configs != *configs {
            let parsed = configs
                .iter()
                .filter_map(|(name, configs)| match Subscription::parse(name, configs) {
                    Ok(subscription) => Some(subscription),
                    Err(e) => {
                        tracing::warn!(subscription = %name, error = %e, "client-metrics resource ignored");
                        None
                    }
                })
                .collect();
            *cached = ParsedSubscriptions {
                configs: configs.clone(),
                parsed: Rc::new(parsed),
            };
        }
        cached.parsed.clone()
    }
}

/// What the subscriptions ask of the client on `session` with instance
/// `id`.
fn resolve(shard: &Shard, client_id: &str, session: &Session, id: InstanceId) -> Resolved {
    let subscriptions = shard
        .runtime()
        .telemetry
        .subscriptions(&shard.runtime().view.image());
    let (software_name, software_version) = session.client_software().unwrap_or_default();
    let metadata = ClientMetadata {
        instance_id: instances::kafka_uuid_text(id),
        client_id: client_id.to_owned(),
        software_name,
        software_version,
        source_address: session.peer.map(|a| a.to_string()).unwrap_or_default(),
        source_port: session.peer_port.map(|p| p.to_string()).unwrap_or_default(),
    };
    subscription::resolve(&subscriptions, &metadata, id)
}

/// A new client instance id: random (version 4), never zero.
fn new_instance_id() -> InstanceId {
    let mut id: InstanceId = rand::random();
    // Version 4, variant 1, as Kafka's `Uuid.randomUuid`.
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

/// GetTelemetrySubscriptions: the instance id (a new one when the client
/// sent the zero id) and its subscription, or why it is refused.
pub fn get_subscriptions(
    shard: &Shard,
    client_id: &str,
    session: &Session,
    requested: InstanceId,
) -> (InstanceId, Result<Resolved, ErrorCode>) {
    let id = if requested == [0; 16] {
        new_instance_id()
    } else {
        requested
    };
    let resolved = resolve(shard, client_id, session, id);
    let telemetry = &shard.runtime().telemetry;
    let now_ms = telemetry.now_ms();
    let outcome = telemetry
        .table
        .borrow_mut()
        .get_subscriptions(now_ms, id, client_id, &resolved);
    (id, outcome.map(|()| resolved))
}

/// One PushTelemetry request's fields.
#[derive(Debug, Clone, Copy)]
pub struct Push<'a> {
    /// Its instance id.
    pub instance_id: InstanceId,
    /// Its subscription id.
    pub subscription_id: i32,
    /// Its last push before the client closes.
    pub terminating: bool,
    /// The payload's compression (Kafka's record codec ids).
    pub compression_type: i8,
    /// The OTLP payload.
    pub metrics: &'a [u8],
}

/// PushTelemetry: checks, decodes and keeps a push; the error code to
/// answer with.
pub fn push(shard: &Shard, client_id: &str, session: &Session, push: Push<'_>) -> ErrorCode {
    if push.instance_id == [0; 16] {
        return ErrorCode::InvalidRequest;
    }
    let resolved = resolve(shard, client_id, session, push.instance_id);
    let telemetry = &shard.runtime().telemetry;
    let now_ms = telemetry.now_ms();
    let mut table = telemetry.table.borrow_mut();
    let check = PushCheck {
        subscription_id: push.subscription_id,
        terminating: push.terminating,
        compression_offered: push.compression_type == 0
            || ACCEPTED_COMPRESSION_TYPES.contains(&push.compression_type),
        payload_bytes: push.metrics.len(),
        max_bytes: telemetry.max_bytes,
    };
    let id = push.instance_id;
    if let Err(code) = table.check_push(now_ms, id, client_id, &resolved, check) {
        return code;
    }
    if push.metrics.is_empty() {
        return ErrorCode::None;
    }
    let max_decompressed_bytes = telemetry.max_bytes.saturating_mul(MAX_DECOMPRESSION_RATIO);
    match otlp::decode(
        push.metrics,
        push.compression_type,
        max_decompressed_bytes,
        &resolved,
    ) {
        Ok(points) => {
            table.store(id, points);
            ErrorCode::None
        }
        Err(e) => {
            tracing::debug!(client_id, error = %e, "telemetry push refused");
            table.record_error(id, ErrorCode::InvalidRecord);
            ErrorCode::InvalidRecord
        }
    }
}

/// Asks a shard for its client instances' series.
#[derive(Debug)]
struct SnapshotRequest;

impl OwnerCall<crate::ShardRuntime> for SnapshotRequest {
    type Reply = Vec<InstanceSnapshot>;

    async fn run(self, shard: Rc<Shard>) -> Vec<InstanceSnapshot> {
        let telemetry = &shard.runtime().telemetry;
        let now_ms = telemetry.now_ms();
        telemetry.table.borrow_mut().snapshot(now_ms)
    }
}

/// Every shard's client metrics as Prometheus text (for `/metrics`).
pub async fn render_all(shard: &Rc<Shard>) -> String {
    let mut snapshots = Vec::new();
    for id in 0..shard.count {
        if let Ok(snapshot) = shard.call(id, SnapshotRequest).await {
            snapshots.extend(snapshot);
        }
    }
    render::render(&render::merge(snapshots))
}
