//! `rill serve`: resolve the settings, start one glommio executor per core,
//! serve, and shut down cleanly on SIGINT/SIGTERM.
//!
//! Start: read the topics on disk once (`scan_topics`), then on each
//! shard join the channel mesh (the mesh position is the shard id), open the
//! shard's partitions, bind the shared port (`SO_REUSEPORT`), and accept
//! once the broker is caught up and unfenced (see `startup`).
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
//!
//! - `limits`: the process limits raised at start, and the connection cap
//!   the descriptor limit sets.
//! - `startup`: what a shard waits for before it answers clients (its
//!   image caught up; this broker registered and unfenced).
//! - `readiness`: "serving clients" once every shard serves, and
//!   systemd's `READY=1` / `STOPPING=1` (sd_notify) when it asked.
//! - `shard`: one shard's life, phase by phase (start, serve, stop).
//! - `accept`: each listener's accept loop and the connection limits.
//! - `jwks`: the identity provider's keys for OAUTHBEARER, loaded before
//!   the listeners open and refreshed by a thread of their own.

mod accept;
mod jwks;
mod limits;
mod readiness;
mod shard;
mod startup;

use futures::channel::oneshot;
use glommio::channels::channel_mesh::{Full, MeshBuilder};
use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};
use kernel::config::{BrokerConfig, ServeArgs};
use kernel::topics::TopicEntry;
use runtimes::ShardMessage;
use shard::{run_shard, ShardInput};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

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
    config.engine.clock = kernel::fault_clock::broker_clock(&config.data_dir);
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

/// Checks the host, reads the topics, then runs one executor per shard
/// until they all end.
fn start(config: Arc<BrokerConfig>, checks: &HostChecks) -> Result<(), String> {
    limits::raise_process_limits(&config);
    let data_dirs = config.data_dirs();
    for dir in &data_dirs {
        check_data_dir(dir)?;
    }
    wait_for_ports(&config)?;
    if let Some(source) = &config.sasl.oauth.jwks {
        jwks::start(source, config.sasl.oauth.keys.0.clone())?;
    }
    start_kerberos(&config)?;
    log_tuning_summary(&config, &checks(&config.data_dir, config.cores));
    let entries = read_topics(&config, &data_dirs)?;
    log_start(&config, &data_dirs, entries.len());
    let shutdowns = spawn_signal_thread(config.cores)?;
    let executors = spawn_shards(&config, &entries, shutdowns)?;
    join_shards(executors)
}

/// Loads MIT Kerberos and its keytab when a listener offers GSSAPI; a
/// missing library or keytab stops the start, naming it.
fn start_kerberos(config: &BrokerConfig) -> Result<(), String> {
    let Some(setup) = config.gssapi_setup().map_err(|e| e.to_string())? else {
        return Ok(());
    };
    let kerberos = security::kerberos::init(setup.keytab.as_deref())
        .map_err(|e| format!("GSSAPI cannot start: {e}"))?;
    tracing::info!(
        keytab = %setup.keytab.as_deref().map_or_else(|| String::from("MIT's default"), |k| k.display().to_string()),
        realm = kerberos.default_realm(),
        "GSSAPI (Kerberos) ready"
    );
    Ok(())
}

/// The topics as the data dirs hold them (read once, before the shards
/// start): each shard's topic table until its metadata image replaces it,
/// and what the broker adopts into a new metadata log.
fn read_topics(
    config: &BrokerConfig,
    data_dirs: &[std::path::PathBuf],
) -> Result<Arc<[TopicEntry]>, String> {
    let scanned = engine::manager::scan_topics(data_dirs, config.topic_defaults())
        .map_err(|e| format!("cannot read the topics of the data dirs: {e}"))?;
    Ok(scanned
        .into_iter()
        .map(|(name, meta)| TopicEntry {
            name,
            topic_id: meta.topic_id,
            partitions: meta.partitions,
            config: meta.config,
        })
        .collect())
}

/// The "starting rill" line: where the broker keeps its data, where it
/// listens, and how it runs.
fn log_start(config: &BrokerConfig, data_dirs: &[std::path::PathBuf], topics: usize) {
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
        topics,
        "starting rill"
    );
}

/// Starts one executor per shard (pinned to a CPU where there is one for
/// it), each given the state the shards share and its own shutdown signal.
fn spawn_shards(
    config: &Arc<BrokerConfig>,
    entries: &Arc<[TopicEntry]>,
    shutdowns: Vec<oneshot::Receiver<()>>,
) -> Result<Vec<ExecutorJoinHandle<Result<(), String>>>, String> {
    let mesh = (config.cores > 1).then(|| {
        MeshBuilder::<ShardMessage, Full>::full(config.cores, config.mesh_channel_capacity)
    });
    let drained = Arc::new(AtomicUsize::new(0));
    let readiness = Arc::new(readiness::Readiness::new(config.cores));
    let startup = Arc::new(std::sync::OnceLock::new());
    let open_connections = Arc::new(AtomicUsize::new(0));
    let per_ip_connections = Arc::new(kernel::conn_limits::PerIpConnections::default());
    let quota_sensors = Arc::new(runtimes::quotas::Sensors::new(
        config.quota_window_num,
        config.quota_window_size_seconds.saturating_mul(1000),
    ));
    let remote_store = open_remote_store(config)?;
    let remote_quotas = Arc::new(runtimes::tiered::quota::RemoteQuotas::new(&config.tiered));
    let cpus: Vec<usize> = core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();

    let mut executors = Vec::with_capacity(config.cores);
    for (index, shutdown) in shutdowns.into_iter().enumerate() {
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
            readiness: readiness.clone(),
            startup: startup.clone(),
            open_connections: open_connections.clone(),
            per_ip_connections: per_ip_connections.clone(),
            quota_sensors: quota_sensors.clone(),
            remote_store: remote_store.clone(),
            remote_quotas: remote_quotas.clone(),
        };
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("rill-shard-{index}"))
            .spin_before_park(Duration::from_micros(config.spin_before_park_us))
            .io_memory(config.io_memory_bytes)
            .spawn(move || run_shard(shard_input))
            .map_err(|e| format!("cannot start executor {index}: {e}"))?;
        executors.push(handle);
    }
    Ok(executors)
}

/// The object store of tiered storage (`remote.log.storage.system.enable`),
/// opened once and shared by every shard; a store that cannot be opened
/// (a bad URL, no bucket) stops the start with its reason.
fn open_remote_store(config: &BrokerConfig) -> Result<Option<remote_storage::RemoteStore>, String> {
    let tiered = &config.tiered;
    let (true, Some(url)) = (tiered.enabled, &tiered.url) else {
        return Ok(None);
    };
    let mut store_config = remote_storage::RemoteStorageConfig::from_url(url);
    store_config.endpoint = tiered.endpoint.clone();
    store_config.region = tiered.region.clone();
    store_config.allow_http = tiered.allow_http;
    store_config.cache_bytes = tiered.cache_bytes;
    store_config.chunk_bytes = tiered.chunk_bytes;
    store_config.op_timeout_ms = tiered.op_timeout_ms;
    let store = remote_storage::RemoteStore::open(store_config)
        .map_err(|e| format!("tiered storage: cannot open {url}: {e}"))?;
    tracing::info!(%url, "tiered storage on");
    Ok(Some(store))
}

/// Waits for every executor to end; the broker fails with the last shard
/// failure, if any.
fn join_shards(executors: Vec<ExecutorJoinHandle<Result<(), String>>>) -> Result<(), String> {
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
