//! One shard's life: join the mesh, open its logs, start its runtimes,
//! serve its listeners until the shutdown, then stop in order (see the
//! two-phase shutdown in [`super`]).

use super::accept::accept_loop;
use super::startup::{wait_until_ready, StartupTarget};
use crate::admin;
use api::connection::ShutdownSignal;
use engine::LogManager;
use futures::channel::oneshot;
use futures::future::{select, Either, FutureExt};
use glommio::channels::channel_mesh::{Full, MeshBuilder, Receivers, Senders};
use glommio::net::TcpListener;
use glommio::sync::Gate;
use kernel::config::{BrokerConfig, ClientListener};
use kernel::conn_limits::RequestBytes;
use kernel::metrics::ShardMetrics;
use kernel::sendpath::Sender;
use kernel::topics::{TopicEntry, TopicTable};
use runtimes::ShardRuntime;
use runtimes::{Shard, ShardMessage};
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

/// Longest wait for connections to finish their in-flight requests at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What each executor gets (all `Send`).
pub(super) struct ShardInput {
    pub(super) config: Arc<BrokerConfig>,
    pub(super) mesh: Option<MeshBuilder<ShardMessage, Full>>,
    pub(super) entries: Arc<[TopicEntry]>,
    pub(super) shutdown: oneshot::Receiver<()>,
    pub(super) drained: Arc<AtomicUsize>,
    /// Counts the shards serving; tells systemd when all do.
    pub(super) readiness: Arc<super::readiness::Readiness>,
    pub(super) open_connections: Arc<AtomicUsize>,
    pub(super) per_ip_connections: Arc<kernel::conn_limits::PerIpConnections>,
    pub(super) quota_sensors: Arc<runtimes::quotas::Sensors>,
    /// The object store of tiered storage, when it is on.
    pub(super) remote_store: Option<remote_storage::RemoteStore>,
    /// The broker's remote copy and fetch quotas.
    pub(super) remote_quotas: Arc<runtimes::tiered::quota::RemoteQuotas>,
    /// What the shard waits for before it answers clients, set by shard 0
    /// once it has opened the metadata log (see [`super::startup`]).
    pub(super) startup: Arc<OnceLock<StartupTarget>>,
}

/// A listener's settings and its bound socket.
type BoundListener = (Rc<ClientListener>, TcpListener);

/// Runs one shard; if it cannot start, the whole broker stops (a broker
/// missing a shard would refuse the partitions that shard owns).
pub(super) async fn run_shard(input: ShardInput) -> Result<(), String> {
    let drained = input.drained.clone();
    let outcome = run_shard_inner(input).await;
    if let Err(e) = &outcome {
        // Count this shard as drained so the others do not wait for it, and
        // stop them through the signal thread like an operator's SIGTERM
        // (once, however many shards fail).
        drained.fetch_add(1, Ordering::AcqRel);
        kernel::fatal::request_clean_stop(&format!("shard failed: {e}"));
    }
    outcome
}

/// The shard's start and stop, phase by phase, in order.
async fn run_shard_inner(mut input: ShardInput) -> Result<(), String> {
    let (peers, receivers) = join_mesh(input.mesh.take()).await?;
    let shard = build_shard(&input, peers).await?;
    start_runtimes(&shard, &input).await?;
    install_coordinator_hooks(&shard);
    start_coordinator_timers(&shard);
    serve_mesh(&shard, receivers);
    start_admin_listener(&shard);
    // Bound before the wait, as Kafka binds before it enables request
    // processing: connections queue in the kernel until the shard is ready.
    let bound = bind_listeners(&shard)?;
    let shutdown: ShutdownSignal = input.shutdown.shared();
    let gate = if wait_until_ready(&shard, &input.startup, shutdown.clone()).await? {
        kernel::fatal::arm_panic_point(shard.id, &shard.config.data_dir);
        input.readiness.shard_serving();
        serve_until_shutdown(&shard, bound, shutdown).await
    } else {
        tracing::info!(shard = shard.id, "stopped before it served a client");
        Rc::new(Gate::new())
    };
    input.readiness.stopping();
    stop(&shard, &gate, &input.drained).await
}

/// Joins the channel mesh to the other shards (none with a single shard):
/// the queues to them and from them.
async fn join_mesh(
    mesh: Option<MeshBuilder<ShardMessage, Full>>,
) -> Result<
    (
        Option<Senders<ShardMessage>>,
        Option<Receivers<ShardMessage>>,
    ),
    String,
> {
    match mesh {
        Some(mesh) => {
            let (senders, receivers) = mesh
                .join()
                .await
                .map_err(|_| String::from("cannot join the shard mesh"))?;
            Ok((Some(senders), Some(receivers)))
        }
        None => Ok((None, None)),
    }
}

/// Opens the shard's logs and send path and builds the shard (its id is
/// its place in the mesh).
async fn build_shard(
    input: &ShardInput,
    peers: Option<Senders<ShardMessage>>,
) -> Result<Rc<Shard>, String> {
    let config = &input.config;
    let id = peers.as_ref().map(|p| p.peer_id()).unwrap_or(0);
    let logs = LogManager::open(config.engine.clone(), id, config.cores)
        .await
        .map_err(|e| format!("shard {id}: cannot open logs: {e}"))?;
    let sender = Sender::new(config.send_path).map_err(|e| {
        format!(
            "shard {id}: cannot start {} send path: {e}",
            config.send_path
        )
    })?;
    let table = TopicTable::found_on_disk(input.entries.clone());
    let limits = &config.connection_limits;
    let request_bytes_share = limits
        .queued_max_request_bytes
        .map(|bytes| (bytes / config.cores.max(1) as u64).max(1));
    Ok(Rc::new(Shard {
        id,
        count: config.cores,
        topics: RefCell::new(Rc::new(table)),
        config: config.clone(),
        logs,
        peers,
        sender,
        metrics: RefCell::new(ShardMetrics::default()),
        open_connections: input.open_connections.clone(),
        per_ip_connections: input.per_ip_connections.clone(),
        request_bytes: Rc::new(RequestBytes::new(request_bytes_share)),
        read_buffer_bytes: Rc::default(),
        runtime: OnceCell::new(),
    }))
}

/// Builds and installs the shard's runtimes, then starts their tasks: the
/// cluster runtime and the admin-change reconciler; the metadata shard also
/// publishes the startup offset and bootstraps the SCRAM credentials.
async fn start_runtimes(shard: &Rc<Shard>, input: &ShardInput) -> Result<(), String> {
    let id = shard.id;
    let config = &shard.config;
    let shared = runtimes::SharedParts {
        quota_sensors: input.quota_sensors.clone(),
        remote_store: input.remote_store.clone(),
        remote_quotas: input.remote_quotas.clone(),
    };
    shard.install_runtime(ShardRuntime::open(shard, shared)?);
    runtimes::cluster_runtime::start(shard)
        .await
        .map_err(|e| format!("shard {id}: {e}"))?;
    runtimes::admin_changes::start_reconciler(shard);
    glommio::spawn_local(runtimes::tiered::manager::run(shard.clone())).detach();
    if id == runtimes::cluster_runtime::METADATA_SHARD {
        let quorum = shard.runtime().quorum.clone();
        // An observer has no log of its own: it serves what it fetches.
        let offset = (quorum.as_ref())
            .filter(|_| !config.cluster.is_observer(config.broker_id))
            .map_or(-1, |quorum| quorum.applied_offset());
        // A controller-only node never registers (see cluster_runtime::start).
        let registers = config.cluster.roles.is_none_or(|roles| roles.broker);
        let incarnation_id = (quorum.as_ref())
            .filter(|_| registers)
            .map(|quorum| quorum.incarnation_id());
        let target = StartupTarget {
            offset,
            incarnation_id,
        };
        if input.startup.set(target).is_err() {
            return Err(format!("shard {id}: the startup target was set twice"));
        }
        glommio::spawn_local(runtimes::admin_changes::scram_credentials::bootstrap(
            shard.clone(),
        ))
        .detach();
    }
    Ok(())
}

/// Ties the group and transaction coordinators to partition leadership
/// and to transaction markers.
fn install_coordinator_hooks(shard: &Rc<Shard>) {
    // A coordinator moves with its partition's leadership: what was loaded
    // for a `__consumer_offsets` or `__transaction_state` partition under an
    // older lease is dropped when this broker (again) starts leading it; the
    // next call or timer tick loads it from the log.
    shard.runtime().replicas.on_leadership(Rc::new(
        |shard: &Rc<Shard>, tp: &engine::TopicPartition| {
            runtimes::txn_runtime::reload_on_leadership(shard, tp);
            runtimes::group_runtime::reload_on_leadership(shard, tp);
        },
    ));
    // A transaction's offsets staged by the group coordinator (its
    // transaction coordinator being another broker) resolve with the
    // transaction's marker on their `__consumer_offsets` partition.
    shard
        .runtime()
        .marker_hooks
        .clone()
        .add(Rc::new(|shard, tp, producer_id, commit| {
            Box::pin(runtimes::group_runtime::on_txn_marker(
                shard,
                tp,
                producer_id,
                commit,
            ))
        }));
    // A transaction's first batch on a partition led here joins (or is
    // checked in) the transaction at its coordinator first (KIP-890).
    shard
        .runtime()
        .join_guards
        .set_ask(Rc::new(|shard, join, producer, partition| {
            Box::pin(runtimes::txn_runtime::join::ask_coordinator(
                shard, join, producer, partition,
            ))
        }));
}

/// Starts the group and transaction coordinators' timer tasks.
fn start_coordinator_timers(shard: &Rc<Shard>) {
    // Loads the `__consumer_offsets` partitions led here (calls wait for
    // the load of their group's partition), then ticks the groups.
    glommio::spawn_local(runtimes::group_runtime::run_timer(shard.clone())).detach();
    // Replays __transaction_state (requests wait for it), then finishes
    // decided transactions and aborts timed-out ones.
    glommio::spawn_local(runtimes::txn_runtime::run_timer(shard.clone())).detach();
}

/// Runs the jobs the other shards send this one, one task per peer queue.
fn serve_mesh(shard: &Rc<Shard>, receivers: Option<Receivers<ShardMessage>>) {
    let Some(mut receivers) = receivers else {
        return;
    };
    for (_, receiver) in receivers.streams() {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            // Each message is a job for this shard: it runs here at once
            // or spawns its own task, so this loop never waits on one.
            while let Some(message) = receiver.recv().await {
                message.open(&shard);
            }
        })
        .detach();
    }
}

/// On shard 0, serves `/metrics` on the admin port; a port that cannot
/// be had skips it with a warning.
fn start_admin_listener(shard: &Rc<Shard>) {
    if shard.id != 0 {
        return;
    }
    let config = &shard.config;
    let admin = kernel::listen::check_unused(config.admin_listen)
        .and_then(|()| kernel::listen::bind_shared(config.admin_listen));
    match admin {
        Ok(listener) => {
            tracing::info!(admin = %config.admin_listen, "serving /metrics");
            glommio::spawn_local(admin::serve(shard.clone(), listener)).detach();
        }
        Err(e) => {
            tracing::warn!(admin = %config.admin_listen, error = %e, "admin listener not started")
        }
    }
}

/// Binds every client listener of the broker on this shard.
fn bind_listeners(shard: &Shard) -> Result<Vec<BoundListener>, String> {
    let id = shard.id;
    let config = &shard.config;
    // Every shard binds the same port (SO_REUSEPORT) and the kernel spreads
    // connections across shards; `start` checked that no one else holds it.
    let mut bound = Vec::with_capacity(config.listeners.len());
    for spec in &config.listeners {
        let listener = kernel::listen::bind_shared(spec.bind).map_err(|e| {
            format!(
                "shard {id}: cannot listen on {} (listener {}): {e}",
                spec.bind, spec.name
            )
        })?;
        tracing::info!(
            shard = id,
            listener = %spec.name,
            protocol = %spec.protocol,
            listen = %spec.bind,
            "shard listening"
        );
        bound.push((Rc::new(spec.clone()), listener));
    }
    Ok(bound)
}

/// Accepts on every listener until the shutdown signal, then closes them;
/// returns the gate the open connections hold.
async fn serve_until_shutdown(
    shard: &Rc<Shard>,
    bound: Vec<BoundListener>,
    shutdown: ShutdownSignal,
) -> Rc<Gate> {
    let gate = Rc::new(Gate::new());
    futures::future::join_all(bound.iter().map(|(spec, listener)| {
        accept_loop(shard, spec.clone(), listener, &gate, shutdown.clone())
    }))
    .await;
    drop(bound);
    gate
}

/// Stops the shard in order: hands over leaderships (metadata shard),
/// drains its connections, waits for every shard to drain, then flushes
/// and checkpoints its logs.
async fn stop(shard: &Rc<Shard>, gate: &Gate, drained: &AtomicUsize) -> Result<(), String> {
    let id = shard.id;
    if id == runtimes::cluster_runtime::METADATA_SHARD {
        // Hand the leaderships over while connections are still served, so
        // that clients are redirected rather than cut off.
        runtimes::cluster_runtime::controlled_shutdown(shard).await;
        kernel::broker_state::set(kernel::broker_state::BrokerState::ShuttingDown);
    }

    // Phase 1: finish in-flight requests on this shard.
    let closed = gate.close();
    let timeout = glommio::timer::sleep(DRAIN_TIMEOUT);
    futures::pin_mut!(closed, timeout);
    if let Either::Right(_) = select(closed, timeout).await {
        tracing::warn!(shard = id, "connections still busy after the drain timeout");
    }
    // Phase 2: wait until every shard has drained (they may still route work here).
    drained.fetch_add(1, Ordering::AcqRel);
    while drained.load(Ordering::Acquire) < shard.config.cores {
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    shard
        .logs
        .shutdown()
        .await
        .map_err(|e| format!("shard {id}: shutdown failed: {e}"))?;
    tracing::info!(shard = id, "shard stopped");
    Ok(())
}
