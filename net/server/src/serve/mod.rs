//! `rill serve`: resolve the settings, start one glommio executor per core,
//! serve, and shut down cleanly on SIGINT/SIGTERM.
//!
//! Start: read the topic table from disk once (`scan_topics`), then on each
//! shard join the channel mesh (the mesh position is the shard id), open the
//! shard's partitions, bind the shared port (`SO_REUSEPORT`) and accept.
//!
//! A broker that cannot go on (a panic in any thread, the metadata log
//! failing, a second signal) does not shut down: it ends through
//! [`kernel::fatal`], whose panic hook [`run_with_checks`] installs.
//!
//! Shutdown, in two phases so that no shard closes its logs while another
//! still routes in-flight work to it: (1) every shard stops accepting, stops
//! reading new requests and waits for its connections to finish what they
//! have in flight; (2) once all shards are drained, each flushes and
//! checkpoints its logs (`LogManager::shutdown`) and its executor ends.

use crate::admin;
use api::connection::{self, transport, ShutdownSignal};
use engine::LogManager;
use futures::channel::oneshot;
use futures::future::{select, Either, FutureExt};
use glommio::channels::channel_mesh::{Full, MeshBuilder};
use glommio::{LocalExecutorBuilder, Placement};
use kernel::config::{BrokerConfig, ClientListener, ServeArgs};
use kernel::conn_limits::{LogLimiter, PerIpConnections};
use kernel::metrics::ShardMetrics;
use kernel::sendpath::Sender;
use kernel::services::Services;
use kernel::shard::{Shard, ShardMessage};
use kernel::topics::{TopicEntry, TopicTable};
use security::{Principal, Session};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for connections to finish their in-flight requests at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the broker until a signal; returns the process exit code.
pub fn run(args: ServeArgs) -> i32 {
    run_with_checks(
        args,
        &|_, _| Vec::new(),
        &kernel::io_setup::no_io_properties,
    )
}

/// The host checks `rill serve` runs at start: (data dir, cores) → each
/// recommendation as (check name, one-line detail).
pub type HostChecks = dyn Fn(&std::path::Path, usize) -> Vec<(String, String)>;

/// Like [`run`], logging the host warnings `checks(data_dir, cores)` returns
/// (the `rill` binary passes the tuning crate's startup checks).
///
/// `io_properties` finds the io-properties file that sizes the engine's
/// I/O (see [`kernel::io_setup`]); an unusable file refuses the start like
/// any bad setting (exit code 2).
pub fn run_with_checks(
    args: ServeArgs,
    checks: &HostChecks,
    io_properties: &kernel::io_setup::IoPropertiesLookup,
) -> i32 {
    let mut config = match BrokerConfig::from_args(&args) {
        Ok(config) => config,
        Err(e) => {
            tracing::error!(error = %e, "bad configuration");
            eprintln!("rill: {e}");
            return 2;
        }
    };
    if let Err(e) = kernel::io_setup::apply(&mut config, io_properties) {
        tracing::error!(error = %e, "bad io-properties file");
        eprintln!("rill: io-properties: {e}");
        return 2;
    }
    let config = Arc::new(config);
    // Before any thread starts, so that a panic in any of them ends the
    // process rather than only its thread.
    kernel::fatal::install_panic_hook();
    match start(config, checks) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = %e, "broker failed");
            eprintln!("rill: {e}");
            1
        }
    }
}

/// One line for the host's tuning recommendations, so that they do not
/// bury the start-up log; each one's detail is at debug level and in `rill
/// tune check`.
fn log_tuning_summary(config: &BrokerConfig, recommendations: &[(String, String)]) {
    for (_, detail) in recommendations {
        tracing::debug!("{detail}");
    }
    if recommendations.is_empty() {
        return;
    }
    let names: Vec<&str> = recommendations.iter().map(|(n, _)| n.as_str()).collect();
    tracing::warn!(
        "host tuning: {} recommendations ({}); see `rill tune check --data-dir {}`",
        recommendations.len(),
        names.join(", "),
        config.data_dir.display()
    );
}

/// Creates a data dir and checks that a file can be written in it. A dir
/// that cannot be used refuses the start, naming it (Kafka would start
/// with that dir offline; rill keeps no per-dir offline state, and a
/// broker that silently lost a dir's partitions would answer for them as
/// unknown).
fn check_data_dir(dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create data dir {}: {e}", dir.display()))?;
    let probe = dir.join(".rill-write-check");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| format!("data dir {} is not writable: {e}", dir.display()))
}

/// How long the start waits for a port that is held (see
/// [`kernel::listen`]: a broker that just exited may still be closing its
/// sockets) before it refuses.
const PORT_RELEASE_PATIENCE: Duration = Duration::from_secs(10);

/// Waits until no socket listens on the ports this broker will bind: its
/// client listeners and its controller listener (held: the start fails,
/// naming it) and its admin port (held: the admin listener is skipped with
/// a warning, as before).
fn wait_for_ports(config: &BrokerConfig) -> Result<(), String> {
    use kernel::listen::wait_until_unused;
    for spec in &config.listeners {
        wait_until_unused(spec.bind, PORT_RELEASE_PATIENCE).map_err(|e| {
            format!(
                "cannot listen on {} (listener {}): {e}",
                spec.bind, spec.name
            )
        })?;
    }
    if let Some(voter) = config.cluster.voter(config.broker_id) {
        if !config.cluster.is_single_node() {
            let address = voter.resolve()?;
            wait_until_unused(address, PORT_RELEASE_PATIENCE).map_err(|e| {
                format!("cannot listen for the controller quorum on {address}: {e}")
            })?;
        }
    }
    // The admin listener's own bind (shard 0) warns when the port is held.
    let _ = wait_until_unused(config.admin_listen, PORT_RELEASE_PATIENCE);
    Ok(())
}

fn start(config: Arc<BrokerConfig>, checks: &HostChecks) -> Result<(), String> {
    raise_memlock_limit();
    let open_files = raise_open_files_limit();
    DESCRIPTOR_CONNECTION_CAP.store(descriptor_connection_cap(open_files), Ordering::Relaxed);
    let cap = effective_max_connections(config.max_connections);
    if cap < config.max_connections {
        tracing::info!(
            max_connections = cap,
            rlimit_nofile = open_files,
            "connections capped by the descriptor limit (2 per connection, a quarter \
             kept for log files): raise `ulimit -n` for more"
        );
    }
    let data_dirs = config.data_dirs();
    for dir in &data_dirs {
        check_data_dir(dir)?;
    }
    wait_for_ports(&config)?;
    log_tuning_summary(&config, &checks(&config.data_dir, config.cores));
    let scanned = engine::manager::scan_topics(&data_dirs, config.topic_defaults())
        .map_err(|e| format!("cannot read the topics of the data dirs: {e}"))?;
    let entries: Arc<Vec<TopicEntry>> = Arc::new(
        scanned
            .into_iter()
            .map(|(name, meta)| TopicEntry {
                name,
                topic_id: meta.topic_id,
                partitions: meta.partitions,
                config: meta.config,
                version: 0,
            })
            .collect(),
    );
    tracing::info!(
        data_dir = %data_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(","),
        listen = %config.listen,
        advertised = %format!("{}:{}", config.advertised_host, config.advertised_port),
        shards = config.cores,
        send_path = %config.send_path,
        flush_policy = %config.engine.flush_policy,
        topics = entries.len(),
        "starting rill"
    );

    let shutdown_senders = spawn_signal_thread(config.cores)?;
    let mesh = (config.cores > 1).then(|| {
        MeshBuilder::<ShardMessage, Full>::full(config.cores, config.mesh_channel_capacity)
    });
    let drained = Arc::new(AtomicUsize::new(0));
    let startup_offset = Arc::new(AtomicI64::new(STARTUP_OFFSET_UNKNOWN));
    let open_connections = Arc::new(AtomicUsize::new(0));
    let per_ip_connections = Arc::new(kernel::conn_limits::PerIpConnections::default());
    let quota_sensors = Arc::new(runtimes::quotas::Sensors::new(
        config.quota_window_num,
        config.quota_window_size_seconds.saturating_mul(1000),
    ));
    let cpus: Vec<usize> = core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();

    let mut executors = Vec::with_capacity(config.cores);
    for (index, shutdown) in shutdown_senders.into_iter().enumerate() {
        let placement = match cpus.get(index % cpus.len().max(1)) {
            Some(&cpu) => Placement::Fixed(cpu),
            None => Placement::Unbound,
        };
        let shard_input = ShardInput {
            config: config.clone(),
            mesh: mesh.clone(),
            entries: entries.clone(),
            shutdown,
            drained: drained.clone(),
            startup_offset: startup_offset.clone(),
            open_connections: open_connections.clone(),
            per_ip_connections: per_ip_connections.clone(),
            quota_sensors: quota_sensors.clone(),
        };
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("rill-shard-{index}"))
            .spin_before_park(Duration::from_micros(config.spin_before_park_us))
            .io_memory(config.io_memory_bytes)
            .spawn(move || run_shard(shard_input))
            .map_err(|e| format!("cannot start executor {index}: {e}"))?;
        executors.push(handle);
    }
    let mut failure = None;
    for handle in executors {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(format!("executor failed: {e}")),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => {
            tracing::info!("rill stopped");
            Ok(())
        }
    }
}

/// Raises RLIMIT_MEMLOCK as far as allowed: glommio locks its I/O memory, and
/// the 8 MiB default is too small for many shards. Works as root; otherwise
/// the soft limit goes up to the hard one and the small per-shard
/// `rill.io_memory_bytes` keeps us inside it.
fn raise_memlock_limit() {
    let wanted = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit/getrlimit only read/write the struct passed.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &wanted) == 0 {
            return;
        }
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut current) == 0 {
            current.rlim_cur = current.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_MEMLOCK, &current);
            tracing::debug!(
                limit_bytes = current.rlim_max,
                "RLIMIT_MEMLOCK raised to the hard limit"
            );
        }
    }
}

/// Raises the soft limit on open descriptors to the hard one (as Kafka's
/// packaging and Go's runtime do): every connection and every segment file
/// holds one, and the common soft default of 1024 would refuse clients long
/// before `max.connections`.
fn raise_open_files_limit() -> u64 {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut current) != 0 {
            return u64::MAX;
        }
        if current.rlim_cur >= current.rlim_max {
            return current.rlim_cur;
        }
        let soft = current.rlim_cur;
        current.rlim_cur = current.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &current) == 0 {
            tracing::debug!(
                from = soft,
                to = current.rlim_max,
                "RLIMIT_NOFILE raised to the hard limit"
            );
            return current.rlim_max;
        }
        soft
    }
}

/// Connections the descriptor limit allows: a flood of connections must
/// never take the descriptors the logs need (an `EMFILE` on a segment
/// write takes its partition offline). A plaintext connection holds two
/// descriptors (its reader and its writer's duplicate); a quarter of the
/// limit, at least 1,024, stays for segment and index files.
fn descriptor_connection_cap(open_files_limit: u64) -> usize {
    let reserve = (open_files_limit / 4).max(1024);
    let cap = open_files_limit.saturating_sub(reserve) / 2;
    usize::try_from(cap).unwrap_or(usize::MAX).max(16)
}

/// Set once at start from RLIMIT_NOFILE; `usize::MAX` until then.
static DESCRIPTOR_CONNECTION_CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// `max.connections`, or fewer when the descriptor limit says so.
fn effective_max_connections(configured: usize) -> usize {
    configured.min(DESCRIPTOR_CONNECTION_CAP.load(Ordering::Relaxed))
}

/// Starts the thread that turns SIGINT/SIGTERM into a shutdown of every shard;
/// a second signal exits at once, through the fatal stop.
fn spawn_signal_thread(shards: usize) -> Result<Vec<oneshot::Receiver<()>>, String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..shards).map(|_| oneshot::channel::<()>()).unzip();
    std::thread::Builder::new()
        .name(String::from("rill-signals"))
        .spawn(move || {
            let mut senders = Some(senders);
            for signal in signals.forever() {
                match senders.take() {
                    Some(senders) => {
                        tracing::info!(signal, "shutting down: draining connections");
                        for sender in senders {
                            let _ = sender.send(());
                        }
                    }
                    None => kernel::fatal::stop(
                        kernel::fatal::Reason::SecondSignal,
                        &format!("second signal ({signal}) during the clean shutdown"),
                    ),
                }
            }
        })
        .map_err(|e| format!("cannot start signal thread: {e}"))?;
    Ok(receivers)
}

/// What each executor gets (all `Send`).
struct ShardInput {
    config: Arc<BrokerConfig>,
    mesh: Option<MeshBuilder<ShardMessage, Full>>,
    entries: Arc<Vec<TopicEntry>>,
    shutdown: oneshot::Receiver<()>,
    drained: Arc<AtomicUsize>,
    open_connections: Arc<AtomicUsize>,
    per_ip_connections: Arc<kernel::conn_limits::PerIpConnections>,
    quota_sensors: Arc<runtimes::quotas::Sensors>,
    /// The metadata offset this node had committed before it stopped, once
    /// shard 0 has opened the metadata log ([`STARTUP_OFFSET_UNKNOWN`]
    /// before): no shard serves clients before its image reaches it.
    startup_offset: Arc<AtomicI64>,
}

/// [`ShardInput::startup_offset`] before shard 0 has read it.
const STARTUP_OFFSET_UNKNOWN: i64 = i64::MIN;
/// Longest wait for a shard's image to catch up at start.
const STARTUP_CATCH_UP: Duration = Duration::from_secs(10);

/// Waits until this shard's copy of the metadata image holds what the node
/// had committed before it stopped, so that a restarted broker never serves
/// a request under an older image: client quotas, credentials or ACLs not
/// yet replayed would otherwise be missing for the first few milliseconds.
async fn wait_for_startup_image(shard: &Shard, startup_offset: &AtomicI64) {
    let started = Instant::now();
    loop {
        let target = startup_offset.load(Ordering::Acquire);
        let have = shard
            .service::<runtimes::cluster_runtime::ClusterView>()
            .image()
            .last_applied_offset();
        if target != STARTUP_OFFSET_UNKNOWN && have >= target {
            return;
        }
        if started.elapsed() > STARTUP_CATCH_UP {
            tracing::warn!(
                shard = shard.id,
                have,
                target,
                "metadata image still behind the log after 10 s; serving anyway"
            );
            return;
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

/// Runs one shard; if it cannot start, the whole broker stops (a broker
/// missing a shard would refuse the partitions that shard owns).
async fn run_shard(input: ShardInput) -> Result<(), String> {
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

async fn run_shard_inner(input: ShardInput) -> Result<(), String> {
    let config = input.config;
    let (peers, receivers) = match input.mesh {
        Some(mesh) => {
            let (senders, receivers) = mesh
                .join()
                .await
                .map_err(|_| String::from("cannot join the shard mesh"))?;
            (Some(senders), Some(receivers))
        }
        None => (None, None),
    };
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
    let table = TopicTable::from_entries(input.entries.iter().cloned());
    let shard = Rc::new(Shard {
        id,
        count: config.cores,
        topics: RefCell::new(table),
        config: config.clone(),
        logs: logs.clone(),
        peers,
        sender,
        metrics: RefCell::new(ShardMetrics::default()),
        open_connections: input.open_connections,
        per_ip_connections: input.per_ip_connections,
        services: Services::default(),
    });
    shard
        .services
        .get_or_build(|| runtimes::quotas::QuotaManager::new(input.quota_sensors.clone()));
    runtimes::producer_id_pool::open_allocator(&shard).map_err(|e| format!("shard {id}: {e}"))?;
    runtimes::cluster_runtime::start(&shard)
        .await
        .map_err(|e| format!("shard {id}: {e}"))?;
    runtimes::admin_changes::start_reconciler(&shard);
    if id == runtimes::cluster_runtime::METADATA_SHARD {
        // An observer has no log of its own: it serves what it fetches.
        let offset = shard
            .services
            .get::<runtimes::cluster_runtime::MetadataQuorum>()
            .filter(|_| !config.cluster.is_observer(config.broker_id))
            .map_or(-1, |quorum| quorum.applied_offset());
        input.startup_offset.store(offset, Ordering::Release);
        glommio::spawn_local(runtimes::admin_changes::scram_credentials::bootstrap(
            shard.clone(),
        ))
        .detach();
    }
    // A coordinator moves with its partition's leadership: what was loaded
    // for a `__consumer_offsets` or `__transaction_state` partition under an
    // older lease is dropped when this broker (again) starts leading it; the
    // next call or timer tick loads it from the log.
    shard
        .service::<runtimes::replication_runtime::ReplicaManager>()
        .on_leadership(Rc::new(|shard: &Rc<Shard>, tp: &engine::TopicPartition| {
            runtimes::txn_runtime::reload_on_leadership(shard, tp);
            runtimes::group_runtime::reload_on_leadership(shard, tp);
        }));
    // A transaction's offsets staged by the group coordinator (its
    // transaction coordinator being another broker) resolve with the
    // transaction's marker on their `__consumer_offsets` partition.
    shard
        .service::<runtimes::routing::MarkerHooks>()
        .add(Rc::new(|shard, tp, producer_id, commit| {
            Box::pin(runtimes::group_runtime::on_txn_marker(
                shard,
                tp,
                producer_id,
                commit,
            ))
        }));
    // Loads the `__consumer_offsets` partitions led here (calls wait for
    // the load of their group's partition), then ticks the groups.
    glommio::spawn_local(runtimes::group_runtime::run_timer(shard.clone())).detach();
    // Replays __transaction_state (requests wait for it), then finishes
    // decided transactions and aborts timed-out ones.
    glommio::spawn_local(runtimes::txn_runtime::run_timer(shard.clone())).detach();
    if let Some(mut receivers) = receivers {
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
    if id == 0 {
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
    // Every shard binds the same port (SO_REUSEPORT) and the kernel spreads
    // connections across shards; `start` checked that no one else holds it.
    wait_for_startup_image(&shard, &input.startup_offset).await;
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
            "shard serving"
        );
        bound.push((Rc::new(spec.clone()), listener));
    }

    kernel::fatal::arm_panic_point(id, &config.data_dir);
    let shutdown: ShutdownSignal = input.shutdown.shared();
    let gate = Rc::new(glommio::sync::Gate::new());
    futures::future::join_all(bound.iter().map(|(spec, listener)| {
        accept_loop(&shard, spec.clone(), listener, &gate, shutdown.clone())
    }))
    .await;
    drop(bound);
    if id == runtimes::cluster_runtime::METADATA_SHARD {
        // Hand the leaderships over while connections are still served, so
        // that clients are redirected rather than cut off.
        runtimes::cluster_runtime::controlled_shutdown(&shard).await;
    }

    // Phase 1: finish in-flight requests on this shard.
    let closed = gate.close();
    let timeout = glommio::timer::sleep(DRAIN_TIMEOUT);
    futures::pin_mut!(closed, timeout);
    if let Either::Right(_) = select(closed, timeout).await {
        tracing::warn!(shard = id, "connections still busy after the drain timeout");
    }
    // Phase 2: wait until every shard has drained (they may still route work here).
    input.drained.fetch_add(1, Ordering::AcqRel);
    while input.drained.load(Ordering::Acquire) < config.cores {
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    logs.shutdown()
        .await
        .map_err(|e| format!("shard {id}: shutdown failed: {e}"))?;
    tracing::info!(shard = id, "shard stopped");
    Ok(())
}

thread_local! {
    /// One line a second at most for refused connections (a client in a
    /// connect loop would flood the log); each refusal is still counted.
    static REFUSAL_LOG: LogLimiter = const { LogLimiter::new(Duration::from_secs(1)) };
}

async fn accept_loop(
    shard: &Rc<Shard>,
    spec: Rc<ClientListener>,
    listener: &glommio::net::TcpListener,
    gate: &Rc<glommio::sync::Gate>,
    shutdown: ShutdownSignal,
) {
    loop {
        let accepted = {
            let accept = listener.accept();
            futures::pin_mut!(accept);
            match select(accept, shutdown.clone()).await {
                Either::Left((accepted, _)) => accepted,
                Either::Right(_) => return,
            }
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                // Out of descriptors and similar: back off, keep serving the others.
                tracing::warn!(shard = shard.id, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let open = shard.open_connections.fetch_add(1, Ordering::AcqRel) + 1;
        let max_connections = effective_max_connections(shard.config.max_connections);
        if open > max_connections {
            shard.open_connections.fetch_sub(1, Ordering::AcqRel);
            shard.metrics.borrow_mut().connections_refused += 1;
            if let Some(suppressed) = REFUSAL_LOG.with(|l| l.admit(Instant::now())) {
                tracing::warn!(
                    shard = shard.id,
                    limit = max_connections,
                    suppressed,
                    "max.connections (or the descriptor limit) reached; refusing"
                );
            }
            drop(stream);
            continue;
        }
        let ip_slot = match stream.peer_addr() {
            Ok(peer) => {
                let limit = shard.config.connection_limits.limit_for(peer.ip());
                let slot =
                    PerIpConnections::try_acquire(&shard.per_ip_connections, peer.ip(), limit);
                if slot.is_none() {
                    shard.open_connections.fetch_sub(1, Ordering::AcqRel);
                    shard.metrics.borrow_mut().connections_refused += 1;
                    if let Some(suppressed) = REFUSAL_LOG.with(|l| l.admit(Instant::now())) {
                        tracing::warn!(
                            shard = shard.id,
                            %peer,
                            limit,
                            suppressed,
                            "max.connections.per.ip reached; refusing"
                        );
                    }
                    drop(stream);
                    continue;
                }
                slot
            }
            // No peer address (already closed): nothing to count it under.
            Err(_) => None,
        };
        {
            let mut metrics = shard.metrics.borrow_mut();
            metrics.connections_accepted += 1;
            metrics.connections_open += 1;
        }
        let Ok(pass) = gate.enter() else {
            shard.open_connections.fetch_sub(1, Ordering::AcqRel);
            return;
        };
        let peer = stream.peer_addr().ok().map(|a| a.ip());
        let shard = shard.clone();
        let shutdown = shutdown.clone();
        let spec = spec.clone();
        glommio::spawn_local(async move {
            // The TLS handshake runs here, in the connection's own task, so
            // a slow client never holds up the accept loop.
            if let Some(transport) = transport::open(&shard, &spec, stream, &shutdown).await {
                // SASL listeners replace the principal once SASL succeeds.
                let principal = transport
                    .principal
                    .clone()
                    .unwrap_or_else(Principal::anonymous);
                let session = Rc::new(Session::new(&spec.name, spec.protocol, peer, principal));
                connection::serve(shard.clone(), transport, session, shutdown).await;
            }
            drop(ip_slot);
            shard.open_connections.fetch_sub(1, Ordering::AcqRel);
            shard.metrics.borrow_mut().connections_open -= 1;
            drop(pass);
        })
        .detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_limit_caps_connections_and_keeps_a_reserve() {
        // 20,000 descriptors: 5,000 kept, 7,500 connections of two each.
        assert_eq!(descriptor_connection_cap(20_000), 7_500);
        // A small limit still keeps 1,024 for files.
        assert_eq!(descriptor_connection_cap(2_048), 512);
        assert_eq!(descriptor_connection_cap(1_024), 16);
        assert!(descriptor_connection_cap(u64::MAX) > 1 << 40);
    }
}
