//! `rill serve` settings: command-line flags, the broker file with Kafka's
//! names and defaults, and the resolved [`BrokerConfig`] every shard reads.
//!
//! Precedence: an explicit flag, then the file, then Kafka's default.
//! The file is Kafka's `server.properties` syntax ([`properties`]; chosen by a
//! `.properties` extension, or by content TOML cannot parse) or TOML. A TOML
//! key may be dotted (`log.retention.ms = 1000`), quoted
//! (`"log.retention.ms" = 1000`) or nested tables; all are flattened back to
//! Kafka's dotted name. An unknown key is logged as a warning and ignored, as
//! Kafka does, so that a stock `server.properties` starts rill; a bad value
//! for a known key stops the broker at start.
//!
//! - [`properties`]: the Java properties syntax.
//! - [`authorizer`]: `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
//! - [`keys`]: every key rill reads, as data (the configuration reference).
//! - [`listeners`]: `listeners` / `advertised.listeners` lists and the
//!   advertised host of a wildcard bind.
//! - [`sasl`]: SASL mechanisms, JAAS users, re-authentication, bootstrap
//!   SCRAM users.
//! - [`oauth`]: OAUTHBEARER's token validators and identity provider keys.
//! - [`tls`]: the `ssl.*` keys (common and `listener.name.<name>.ssl.*`)
//!   and each TLS listener's certificate, truststore and client auth.
//! - [`tiered`]: tiered storage (`remote.log.*`, `rill.remote.storage.*`).

pub mod authorizer;
mod groups;
pub mod kerberos;
pub mod keys;
pub mod listeners;
pub mod oauth;
pub mod properties;
pub mod sasl;
pub mod tiered;
pub mod tls;

use crate::cluster_config::{parse_replica_selector, parse_roles, parse_voters, ClusterConfig};
use crate::error::ConfigError;
use crate::sendpath::SendPath;
pub use coordinators::group::GroupConfig;
use engine::{EngineConfig, FlushPolicy, TopicConfig};
use listeners::{
    advertised_for, client_listeners, default_advertised_host, parse_listeners, protocol_of,
};
use security::SecurityProtocol;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Flags of `rill serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Directory of the partition logs (default ./rill-data); a comma
    /// list spreads the partitions over several (Kafka's `log.dirs`).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Address the Kafka listener binds (default 0.0.0.0:9092).
    #[arg(long)]
    pub listen: Option<String>,
    /// host:port advertised to clients in Metadata (default: the listen
    /// address; for a wildcard bind, the host's name, as Kafka).
    #[arg(long)]
    pub advertised_listener: Option<String>,
    /// Number of shards, one per core (default: all cores).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Broker settings file (Kafka's names): `server.properties` syntax or TOML.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How fetch responses leave: copy, sendfile or splice (default splice).
    #[arg(long)]
    pub fetch_send_path: Option<String>,
    /// Durability of appends: fsync, interval or os (default fsync).
    #[arg(long)]
    pub flush_policy: Option<String>,
    /// Address of the admin HTTP listener serving /metrics (default 127.0.0.1:9644).
    #[arg(long)]
    pub admin_listen: Option<String>,
    /// This node's id (`node.id`; default 0).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// The metadata quorum, `id@host:port,...` (`controller.quorum.voters`;
    /// default none: a single node). Each voter's host:port is its
    /// controller listener.
    #[arg(long)]
    pub controller_quorum_voters: Option<String>,
    /// `broker,controller` or `broker` (`process.roles`; default: a voter
    /// has both, a node outside the voters is a broker-only observer).
    #[arg(long)]
    pub process_roles: Option<String>,
    /// This node's controller listener, `host:port`, when it joins a running
    /// quorum as a new controller (KIP-853's AddRaftVoter; in a file,
    /// `listeners=...,CONTROLLER://host:port`). A voter named in
    /// `controller.quorum.voters` listens where that list says.
    #[arg(long)]
    pub controller_listener: Option<String>,
    /// The disk figures `rill iotune` wrote (`rill.io.properties.file`;
    /// default: `io-properties.yaml` in the data dir, then
    /// `/etc/rill/io-properties.yaml`, else rill's built-in sizes).
    #[arg(long)]
    pub io_properties: Option<PathBuf>,
    /// Log level or tracing filter (default info).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

/// What [`BrokerConfig::apply_one`] made of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyOutcome {
    /// A key rill reads; its value was checked and applied.
    Applied,
    /// A Kafka key that names nothing rill has ([`keys::IGNORED_KAFKA_KEYS`]).
    IgnoredKafkaKey,
    /// Neither.
    Unknown,
}

/// How this broker reaches the others: its login (SASL) and its TLS client.
type InterBrokerSecurity = (
    Option<sasl::InterBrokerLogin>,
    Option<security::tls_client::ClientTls>,
);

/// The resolved broker settings, the same on every shard.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Root of the partition directories.
    pub data_dir: PathBuf,
    /// The first client listener's address (the one brokers reach each
    /// other on).
    pub listen: SocketAddr,
    /// Host advertised in Metadata for the first listener.
    pub advertised_host: String,
    /// Port advertised in Metadata for the first listener.
    pub advertised_port: i32,
    /// Every client listener (`listeners`), the first being the one above;
    /// each answers Metadata with its own advertised address.
    pub listeners: Vec<ClientListener>,
    /// Number of shards.
    pub cores: usize,
    /// Fetch send path.
    pub send_path: SendPath,
    /// Admin HTTP listener.
    pub admin_listen: SocketAddr,
    /// `broker.id` / `node.id`.
    pub broker_id: i32,
    /// Cluster id advertised in Metadata and DescribeCluster (`rill.cluster.id`).
    pub cluster_id: String,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `transaction.partition.verification.enable` (KIP-890 part 1): a
    /// partition leader asks the transaction coordinator whether a
    /// transaction's first batch there belongs to an ongoing transaction.
    pub transaction_partition_verification_enable: bool,
    /// `num.partitions`: partitions of an auto-created topic.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `socket.request.max.bytes`: largest request frame accepted.
    pub socket_request_max_bytes: usize,
    /// `max.connections`: broker-wide connection limit.
    pub max_connections: usize,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions the
    /// broker holds, split over its shards.
    pub fetch_session_cache_slots: usize,
    /// Per-address and idle limits (`max.connections.per.ip`, …).
    pub connection_limits: crate::conn_limits::ConnectionLimitsConfig,
    /// `rill.max.in.flight.requests.per.connection`: pipelined requests per connection.
    pub max_in_flight_per_connection: usize,
    /// `offsets.topic.num.partitions`.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes` (Kafka's default, 100 MiB): the
    /// `segment.bytes` `__consumer_offsets` is created with, small enough
    /// for its segments to seal and be compacted.
    pub offsets_topic_segment_bytes: u64,
    /// `transaction.state.log.segment.bytes` (Kafka's default, 100 MiB):
    /// the same for `__transaction_state`.
    pub txn_state_segment_bytes: u64,
    /// `rill.spin_before_park_us`: how long an idle shard spins before
    /// parking. 0 by default: spinning buys a few µs of wake-up only where
    /// each shard has a core to itself, and costs everywhere else. Measured
    /// (2-core host, client beside the broker, 1 KiB at 381 MB/s, acks=all,
    /// three interleaved rounds): 100 µs of spin spent 2.73–2.94 CPU-s/GB
    /// against 2.05–2.07 without, and the client's publish p99 was 7.0–9.1
    /// ms against 4.5–6.4 (the spinning shard took the client's CPU).
    pub spin_before_park_us: u64,
    /// `rill.io_memory_bytes`: glommio locked I/O memory per shard.
    pub io_memory_bytes: usize,
    /// `rill.mesh_channel_capacity`: slots per cross-shard queue.
    pub mesh_channel_capacity: usize,
    /// Engine settings (flush policy, topic defaults from the `log.*` keys).
    pub engine: EngineConfig,
    /// `--io-properties` / `rill.io.properties.file`: the io-properties
    /// file to size the engine's I/O from (`None`: look in the default
    /// places, see [`crate::io_setup`]).
    pub io_properties_file: Option<PathBuf>,
    /// Whether `rill.stream_min_bytes` was given: it then wins over the
    /// stream chunk derived from the io-properties file.
    pub stream_min_bytes_given: bool,
    /// Group coordinator settings (`group.*`, `offsets.retention.*`).
    pub group: GroupConfig,
    /// `offsets.topic.replication.factor` and
    /// `transaction.state.log.replication.factor` (Kafka's 3), capped by the
    /// live brokers when the topic is created.
    pub internal_topics_replication_factor: i16,
    /// Cluster membership: the quorum voters, roles, rack, session timings.
    pub cluster: ClusterConfig,
    /// `quota.window.num`: samples in a client quota's rate window.
    pub quota_window_num: usize,
    /// `telemetry.max.bytes` (KIP-714): the largest PushTelemetry payload
    /// accepted, as sent (compressed).
    pub telemetry_max_bytes: usize,
    /// `rill.telemetry.max.clients`: client instances whose telemetry the
    /// broker keeps (split over its shards), so that a flood of clients
    /// cannot grow its memory without bound.
    pub telemetry_max_clients: usize,
    /// `quota.window.size.seconds`: length of one sample.
    pub quota_window_size_seconds: u64,
    /// The `ssl.*` keys as given; each TLS listener's resolved TLS is in
    /// [`ClientListener::tls`].
    pub tls: tls::TlsSettings,
    /// SASL mechanisms, users and timings (`sasl.*`, `listener.name.*.sasl.*`).
    pub sasl: sasl::SaslConfig,
    /// How this broker logs in to the others, when the first listener (the
    /// one brokers reach each other on) is SASL_PLAINTEXT or SASL_SSL in a
    /// cluster.
    pub inter_broker_login: Option<sasl::InterBrokerLogin>,
    /// The broker's own TLS client, when the first listener is SSL or
    /// SASL_SSL in a cluster.
    pub inter_broker_tls: Option<security::tls_client::ClientTls>,
    /// ACL enforcement (`authorizer.class.name`, `super.users`, ...).
    pub authorizer: authorizer::AuthorizerConfig,
    /// Tiered storage (`remote.log.storage.system.enable`, the store's URL).
    pub tiered: tiered::TieredStorageConfig,
}

impl BrokerConfig {
    /// Defaults of a broker with no flags and no file.
    pub fn defaults() -> Self {
        let listen: SocketAddr = SocketAddr::from(([0, 0, 0, 0], 9092));
        BrokerConfig {
            data_dir: PathBuf::from("./rill-data"),
            listen,
            advertised_host: String::from("127.0.0.1"),
            advertised_port: 9092,
            listeners: vec![ClientListener {
                name: String::from("PLAINTEXT"),
                protocol: SecurityProtocol::Plaintext,
                bind: listen,
                advertised_host: String::from("127.0.0.1"),
                advertised_port: 9092,
                tls: None,
            }],
            cores: available_cores(),
            send_path: SendPath::Splice,
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 9644)),
            broker_id: 0,
            cluster_id: String::from("rill-cluster-0000000000"),
            auto_create_topics_enable: true,
            delete_topic_enable: true,
            transaction_partition_verification_enable: true,
            num_partitions: 1,
            default_replication_factor: 1,
            socket_request_max_bytes: 104_857_600,
            max_connections: 2_147_483_647,
            fetch_session_cache_slots: 1000,
            connection_limits: crate::conn_limits::ConnectionLimitsConfig::default(),
            max_in_flight_per_connection: 64,
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            txn_state_segment_bytes: 104_857_600,
            spin_before_park_us: 0,
            io_memory_bytes: 2 << 20,
            mesh_channel_capacity: 1024,
            engine: EngineConfig::new("./rill-data"),
            io_properties_file: None,
            stream_min_bytes_given: false,
            group: GroupConfig::default(),
            internal_topics_replication_factor: 3,
            cluster: ClusterConfig::default(),
            quota_window_num: 11,
            telemetry_max_bytes: 1_048_576,
            telemetry_max_clients: 1000,
            quota_window_size_seconds: 1,
            tls: tls::TlsSettings::default(),
            sasl: sasl::SaslConfig::default(),
            inter_broker_login: None,
            inter_broker_tls: None,
            authorizer: authorizer::AuthorizerConfig::default(),
            tiered: tiered::TieredStorageConfig::default(),
        }
    }

    /// Resolves flags, the optional TOML file and defaults.
    pub fn from_args(args: &ServeArgs) -> Result<Self, ConfigError> {
        let mut config = BrokerConfig::defaults();
        let mut specs = Vec::new();
        if let Some(path) = &args.config {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.display().to_string(),
                source,
            })?;
            let settings = if properties::looks_like_properties(path, &text) {
                properties::parse_properties(&text)
            } else {
                parse_toml(&text)?
            };
            let applied = config.apply_settings(&settings)?;
            specs = applied.resolve()?;
            config.cluster.controller_listener = applied.controller_listener()?;
        }
        if let Some(dir) = &args.data_dir {
            config.set_data_dirs("--data-dir", &dir.to_string_lossy())?;
        }
        if let Some(path) = &args.io_properties {
            config.io_properties_file = Some(path.clone());
        }
        if let Some(text) = args.admin_listen.as_ref() {
            config.admin_listen = resolve_addr("--admin-listen", text)?;
        }
        if let Some(cores) = args.cores {
            if cores == 0 {
                return Err(ConfigError::invalid("--cores", "0", "at least one core"));
            }
            config.cores = cores;
        }
        if let Some(text) = &args.fetch_send_path {
            config.send_path = parse_send_path("--fetch-send-path", text)?;
        }
        if let Some(text) = &args.flush_policy {
            config.engine.flush_policy = text
                .parse::<FlushPolicy>()
                .map_err(|reason| ConfigError::invalid("--flush-policy", text, &reason))?;
        }
        config.listeners = resolve_listeners(specs, args)?;
        if let Some(first) = config.listeners.first() {
            config.listen = first.bind;
            config.advertised_host = first.advertised_host.clone();
            config.advertised_port = first.advertised_port;
        }
        // Every security protocol is served: TLS for SSL and SASL_SSL (the
        // acceptors are built here, once), SASL for SASL_*.
        config.attach_tls()?;
        config.engine.data_dir = config.data_dir.clone();
        if let Some(id) = args.node_id {
            config.broker_id = id;
        }
        if let Some(text) = &args.controller_quorum_voters {
            config.cluster.voters = parse_voters("--controller-quorum-voters", text)?;
        }
        if let Some(text) = &args.process_roles {
            config.cluster.roles = Some(parse_roles("--process-roles", text)?);
        }
        if let Some(text) = &args.controller_listener {
            let parsed = parse_voters("--controller-listener", &format!("0@{text}"))?;
            config.cluster.controller_listener = parsed
                .into_iter()
                .next()
                .map(|voter| (voter.host, voter.port));
        }
        if config.broker_id < 0 {
            return Err(ConfigError::invalid(
                "node.id",
                &config.broker_id.to_string(),
                "a node id is a non-negative integer",
            ));
        }
        config.cluster.validate(config.broker_id)?;
        (config.inter_broker_login, config.inter_broker_tls) = config.inter_broker_security()?;
        config.check_sasl()?;
        groups::check(&config.group)?;
        config.tiered.validate()?;
        Ok(config)
    }

    /// Every data dir (Kafka's `log.dirs`), the first one (`data_dir`, which
    /// keeps the broker-wide files) first.
    pub fn data_dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.data_dir.clone())
            .chain(self.engine.more_data_dirs.iter().cloned())
            .collect()
    }

    /// Sets the data dirs from a comma list (`log.dirs`, `--data-dir`).
    fn set_data_dirs(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let dirs = parse_data_dirs(name, value)?;
        let mut dirs = dirs.into_iter();
        if let Some(first) = dirs.next() {
            self.data_dir = first;
        }
        self.engine.more_data_dirs = dirs.collect();
        Ok(())
    }

    /// Applies flattened `name -> value` settings; returns the listener texts,
    /// which are resolved after the flags are known.
    pub fn apply_settings(
        &mut self,
        settings: &BTreeMap<String, String>,
    ) -> Result<AppliedListeners, ConfigError> {
        let mut applied = AppliedListeners::default();
        let mut units = TimeUnits::default();
        for (name, value) in settings {
            match self.apply_one(name, value, &mut applied, &mut units)? {
                KeyOutcome::Applied => {}
                KeyOutcome::IgnoredKafkaKey => {
                    tracing::info!(key = %name, "Kafka setting has no effect on rill; ignored");
                }
                // The value is not logged: an unknown key may hold a secret
                // (a SASL or keystore password), as Kafka also leaves it out.
                KeyOutcome::Unknown => {
                    tracing::warn!(key = %name, "unknown broker setting; ignored")
                }
            }
        }
        self.apply_time_units(&units)?;
        Ok(applied)
    }

    /// Applies one setting; says whether it was one rill reads, a Kafka key
    /// rill ignores, or unknown.
    fn apply_one(
        &mut self,
        name: &str,
        value: &str,
        applied: &mut AppliedListeners,
        units: &mut TimeUnits,
    ) -> Result<KeyOutcome, ConfigError> {
        // Each family answers whether the key is one of its own.
        let known = self.apply_broker_setting(name, value, applied)?
            || self.apply_cluster_setting(name, value)?
            || self.apply_group_setting(name, value)?
            || self.apply_log_setting(name, value, units)?
            || self.apply_rill_setting(name, value)?
            || self.apply_telemetry_setting(name, value)?
            || self.connection_limits.apply(name, value)?
            || self.tls.apply(name, value)?
            || self.sasl.apply(name, value)?
            || self.authorizer.apply(name, value)?
            || self.tiered.apply(name, value)?;
        Ok(if known {
            KeyOutcome::Applied
        } else if keys::IGNORED_KAFKA_KEYS.contains(&name) {
            KeyOutcome::IgnoredKafkaKey
        } else {
            KeyOutcome::Unknown
        })
    }

    /// Broker identity, listeners, topic creation and request limits;
    /// `Ok(false)` when `name` is not one of them.
    fn apply_broker_setting(
        &mut self,
        name: &str,
        value: &str,
        applied: &mut AppliedListeners,
    ) -> Result<bool, ConfigError> {
        match name {
            "broker.id" | "node.id" => self.broker_id = num(name, value)?,
            "rill.cluster.id" | "cluster.id" => self.cluster_id = value.to_string(),
            "log.dirs" | "log.dir" => self.set_data_dirs(name, value)?,
            "listeners" => applied.listeners = Some(value.to_string()),
            "advertised.listeners" => applied.advertised = Some(value.to_string()),
            "listener.security.protocol.map" => applied.protocol_map = Some(value.to_string()),
            "controller.listener.names" => applied.controller_names = listener_names(value),
            "auto.create.topics.enable" => self.auto_create_topics_enable = boolean(name, value)?,
            "delete.topic.enable" => self.delete_topic_enable = boolean(name, value)?,
            "transaction.partition.verification.enable" => {
                self.transaction_partition_verification_enable = boolean(name, value)?
            }
            "num.partitions" => {
                self.num_partitions = num(name, value)?;
                if self.num_partitions < 1 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
            }
            "default.replication.factor" => self.default_replication_factor = num(name, value)?,
            "message.max.bytes" => self.set_topic("max.message.bytes", name, value)?,
            "socket.request.max.bytes" => self.socket_request_max_bytes = num(name, value)?,
            "max.connections" => self.max_connections = num(name, value)?,
            "max.incremental.fetch.session.cache.slots" => {
                self.fetch_session_cache_slots = num(name, value)?
            }
            "quota.window.num" | "quota.window.size.seconds" => {
                let n: u64 = num(name, value)?;
                if n < 1 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
                if name == "quota.window.num" {
                    self.quota_window_num = n as usize;
                } else {
                    self.quota_window_size_seconds = n;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Cluster membership and leadership (`ClusterConfig`); `Ok(false)`
    /// when `name` is not one of them.
    fn apply_cluster_setting(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "controller.quorum.voters" => self.cluster.voters = parse_voters(name, value)?,
            "process.roles" => self.cluster.roles = Some(parse_roles(name, value)?),
            "controller.quorum.bootstrap.servers" => {
                self.cluster.bootstrap_servers = Some(value.to_string())
            }
            "broker.rack" => self.cluster.rack = Some(value.to_string()),
            "replica.selector.class" => {
                self.cluster.replica_selector = parse_replica_selector(name, value)?
            }
            "cordoned.log.dirs" => {
                self.cluster.cordoned_log_dirs = crate::cordon::parse_list(value)
            }
            "leader.replication.throttled.rate" => {
                self.cluster.replication_throttled_rates.0 = throttle_rate(name, value)?
            }
            "follower.replication.throttled.rate" => {
                self.cluster.replication_throttled_rates.1 = throttle_rate(name, value)?
            }
            "broker.heartbeat.interval.ms" => {
                self.cluster.heartbeat_interval_ms = num(name, value)?
            }
            "broker.session.timeout.ms" => self.cluster.session_timeout_ms = num(name, value)?,
            "server.max.startup.time.ms" => {
                let limit_ms: u64 = num(name, value)?;
                // Kafka's default is Long.MAX_VALUE: no limit.
                self.cluster.max_startup_time_ms = (limit_ms < i64::MAX as u64).then_some(limit_ms);
            }
            "metadata.log.dir" => self.cluster.metadata_log_dir = Some(value.into()),
            "auto.leader.rebalance.enable" => {
                self.cluster.auto_leader_rebalance_enable = boolean(name, value)?
            }
            "leader.imbalance.check.interval.seconds" => {
                let seconds: i64 = num(name, value)?;
                if seconds < 1 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
                self.cluster.leader_imbalance_check_interval_ms = seconds.saturating_mul(1000);
            }
            "leader.imbalance.per.broker.percentage" => {
                let percentage: u32 = num(name, value)?;
                if percentage > 100 {
                    return Err(ConfigError::invalid(name, value, "a percentage, 0 to 100"));
                }
                self.cluster.leader_imbalance_per_broker_percentage = percentage;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The group coordinator and its offsets topic; `Ok(false)` when `name`
    /// is not one of them.
    fn apply_group_setting(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "group.initial.rebalance.delay.ms" => {
                self.group.initial_rebalance_delay_ms = num(name, value)?
            }
            "group.min.session.timeout.ms" => self.group.min_session_timeout_ms = num(name, value)?,
            "group.max.session.timeout.ms" => self.group.max_session_timeout_ms = num(name, value)?,
            "group.max.size" => self.group.group_max_size = num(name, value)?,
            _ if groups::apply(&mut self.group, name, value)? => {}
            "offsets.retention.minutes" => {
                let minutes: i64 = num(name, value)?;
                self.group.offsets_retention_ms = minutes.saturating_mul(60_000);
            }
            "offsets.retention.check.interval.ms" => {
                self.group.offsets_retention_check_interval_ms = num(name, value)?
            }
            "offsets.topic.replication.factor" | "transaction.state.log.replication.factor" => {
                self.internal_topics_replication_factor = num(name, value)?;
                if self.internal_topics_replication_factor < 1 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
            }
            "offsets.topic.num.partitions" => self.offsets_topic_num_partitions = num(name, value)?,
            "offsets.topic.segment.bytes" => self.offsets_topic_segment_bytes = num(name, value)?,
            "transaction.state.log.segment.bytes" => {
                self.txn_state_segment_bytes = num(name, value)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The `log.*` topic defaults (and the topic-level keys a broker file
    /// may set directly); the retention and roll units are only collected
    /// into `units`, resolved once all keys are read. `Ok(false)` when
    /// `name` is not one of them.
    fn apply_log_setting(
        &mut self,
        name: &str,
        value: &str,
        units: &mut TimeUnits,
    ) -> Result<bool, ConfigError> {
        match name {
            "log.retention.ms" => units.retention_ms = Some(num(name, value)?),
            "log.retention.minutes" => units.retention_minutes = Some(num(name, value)?),
            "log.retention.hours" => units.retention_hours = Some(num(name, value)?),
            "log.roll.ms" => units.roll_ms = Some(num(name, value)?),
            "log.roll.hours" => units.roll_hours = Some(num(name, value)?),
            "log.retention.bytes" => self.set_topic("retention.bytes", name, value)?,
            "log.segment.bytes" => self.set_topic("segment.bytes", name, value)?,
            "log.cleanup.policy" => self.set_topic("cleanup.policy", name, value)?,
            "log.flush.interval.ms" => self.set_topic("flush.ms", name, value)?,
            "log.flush.interval.messages" => self.set_topic("flush.messages", name, value)?,
            "log.index.interval.bytes" => self.set_topic("index.interval.bytes", name, value)?,
            "log.index.size.max.bytes" => self.set_topic("segment.index.bytes", name, value)?,
            "log.message.timestamp.type" => {
                self.set_topic("message.timestamp.type", name, value)?
            }
            "log.cleaner.delete.retention.ms" => {
                self.set_topic("delete.retention.ms", name, value)?
            }
            "log.cleaner.min.compaction.lag.ms" => {
                self.set_topic("min.compaction.lag.ms", name, value)?
            }
            "log.cleaner.dedupe.buffer.size" => {
                self.engine.cleaner_dedupe_buffer_bytes = num(name, value)?
            }
            "log.cleaner.io.max.bytes.per.second" => {
                let rate: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| ConfigError::invalid(name, value, "a number of bytes"))?;
                if rate.is_nan() || rate <= 0.0 {
                    return Err(ConfigError::invalid(name, value, "above 0"));
                }
                // Kafka's default, Double.MAX_VALUE, means no throttle.
                self.engine.cleaner_io_max_bytes_per_second =
                    (rate < f64::MAX / 2.0).then_some(rate);
            }
            "log.retention.check.interval.ms" => {
                self.engine.retention_check_interval_ms = num(name, value)?
            }
            "compression.type" => self.set_topic("compression.type", name, value)?,
            "compression.gzip.level" | "compression.lz4.level" | "compression.zstd.level" => {
                self.set_topic(name, name, value)?
            }
            "min.insync.replicas" => self.set_topic("min.insync.replicas", name, value)?,
            "unclean.leader.election.enable" => {
                self.set_topic("unclean.leader.election.enable", name, value)?
            }
            _ => match engine::config::kafka_topic_configs::spec_of_broker_name(name) {
                // Every other broker-wide topic default (`log.preallocate`,
                // `log.cleaner.min.cleanable.ratio`, ...), by Kafka's synonyms.
                Some(spec) => self.set_topic(spec.name, name, value)?,
                None => return Ok(false),
            },
        }
        Ok(true)
    }

    /// Client telemetry (KIP-714): the push size and the clients kept;
    /// `Ok(false)` when `name` is not one of them.
    fn apply_telemetry_setting(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let at_least_one = |n: usize| match n {
            0 => Err(ConfigError::invalid(name, value, "at least 1")),
            n => Ok(n),
        };
        match name {
            "telemetry.max.bytes" => self.telemetry_max_bytes = at_least_one(num(name, value)?)?,
            "rill.telemetry.max.clients" => {
                self.telemetry_max_clients = at_least_one(num(name, value)?)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// rill's own `rill.*` tuning keys; `Ok(false)` when `name` is not one
    /// of them.
    fn apply_rill_setting(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "rill.spin_before_park_us" => self.spin_before_park_us = num(name, value)?,
            "rill.io_memory_bytes" => self.io_memory_bytes = num(name, value)?,
            "rill.mesh_channel_capacity" => self.mesh_channel_capacity = num(name, value)?,
            "rill.max.in.flight.requests.per.connection" => {
                self.max_in_flight_per_connection = num(name, value)?;
                if self.max_in_flight_per_connection == 0 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
            }
            "rill.metadata.snapshot.interval.entries" => {
                self.cluster.snapshot_interval_entries = num(name, value)?;
                if self.cluster.snapshot_interval_entries == 0 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
            }
            "rill.batch_cache_bytes" => self.engine.batch_cache_bytes = num(name, value)?,
            "rill.cache.index.max.bytes" => self.engine.index_cache_bytes = num(name, value)?,
            "rill.cache.batch.max.bytes" => {
                self.engine.batch_cache_max_bytes = Some(num(name, value)?)
            }
            "rill.preallocate_bytes" => self.engine.preallocate_bytes = num(name, value)?,
            "rill.segment.recycle.max" => self.engine.segment_recycle_max = num(name, value)?,
            "rill.stream_min_bytes" => {
                self.engine.stream_min_bytes = num(name, value)?;
                self.stream_min_bytes_given = true;
            }
            "rill.io.properties.file" => self.io_properties_file = Some(PathBuf::from(value)),
            "rill.storage.min.free.bytes" => self.engine.min_free_bytes = Some(num(name, value)?),
            "rill.fetch.send.path" | "fetch.send.path" => {
                self.send_path = parse_send_path(name, value)?
            }
            "rill.flush.policy" => {
                self.engine.flush_policy = value
                    .parse()
                    .map_err(|reason: String| ConfigError::invalid(name, value, &reason))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Sets `retention.ms` and `segment.ms` from the units collected.
    fn apply_time_units(&mut self, units: &TimeUnits) -> Result<(), ConfigError> {
        let retention = units
            .retention_ms
            .or(units.retention_minutes.map(|m| m.saturating_mul(60_000)))
            .or(units.retention_hours.map(|h| h.saturating_mul(3_600_000)));
        if let Some(ms) = retention {
            self.set_topic("retention.ms", "log.retention.ms", &ms.to_string())?;
        }
        let roll = units
            .roll_ms
            .or(units.roll_hours.map(|h| h.saturating_mul(3_600_000)));
        if let Some(ms) = roll {
            self.set_topic("segment.ms", "log.roll.ms", &ms.to_string())?;
        }
        Ok(())
    }

    fn set_topic(
        &mut self,
        topic_name: &str,
        broker_name: &str,
        value: &str,
    ) -> Result<(), ConfigError> {
        self.engine
            .topic_defaults
            .set(topic_name, value)
            .map_err(|e| ConfigError::invalid(broker_name, value, &e.to_string()))
    }

    /// Reads and checks the TLS of every listener whose protocol uses TLS
    /// (SSL, SASL_SSL): a missing certificate or a bad file stops the broker.
    fn attach_tls(&mut self) -> Result<(), ConfigError> {
        for listener in &mut self.listeners {
            listener.tls = if listener.protocol.uses_tls() {
                let tls = self.tls.listener_tls(&listener.name)?;
                Some(Arc::new(match listener.protocol {
                    SecurityProtocol::SaslSsl => tls.for_sasl(),
                    _ => tls,
                }))
            } else {
                None
            };
        }
        Ok(())
    }

    /// In a cluster, brokers reach each other (replication, transaction
    /// markers, share state) on the first listener, with rill's own
    /// client: over TLS on an SSL or SASL_SSL listener (its truststore and
    /// keystore), logged in with PLAIN or SCRAM on a SASL one. A SASL
    /// listener without the broker's own login, or a TLS one without a
    /// truststore, would leave every follower unable to fetch, so it stops
    /// the start instead.
    fn inter_broker_security(&self) -> Result<InterBrokerSecurity, ConfigError> {
        let Some(first) = self.listeners.first() else {
            return Ok((None, None));
        };
        if self.cluster.is_single_node() {
            return Ok((None, None));
        }
        let login = match first.protocol.uses_sasl() {
            true => Some(self.sasl.inter_broker_login(&first.name)?),
            false => None,
        };
        let tls = match first.protocol {
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                Some(self.tls.client_tls(&first.name)?)
            }
            _ => None,
        };
        Ok((login, tls))
    }

    /// The start-time checks over the SASL listeners: OAUTHBEARER's (see
    /// [`oauth::OAuthConfig::check`]) and GSSAPI's one keytab.
    fn check_sasl(&self) -> Result<(), ConfigError> {
        self.sasl.check_oauth(&self.sasl_listeners())?;
        self.gssapi_setup().map(|_| ())
    }

    /// What Kerberos is set up with at start, when a SASL listener offers
    /// GSSAPI.
    pub fn gssapi_setup(&self) -> Result<Option<kerberos::GssapiSetup>, ConfigError> {
        self.sasl.gssapi_setup(&self.sasl_listeners())
    }

    /// The names of the SASL listeners.
    fn sasl_listeners(&self) -> Vec<String> {
        (self.listeners.iter())
            .filter(|l| l.protocol.uses_sasl())
            .map(|l| l.name.clone())
            .collect()
    }

    /// The listener brokers reach each other on (replication, transaction
    /// markers): the first of `listeners`.
    pub fn inter_broker_listener(&self) -> &str {
        self.listeners
            .first()
            .map_or("PLAINTEXT", |l| l.name.as_str())
    }

    /// The topic defaults (from the `log.*` keys).
    pub fn topic_defaults(&self) -> &TopicConfig {
        &self.engine.topic_defaults
    }
}

/// A listener clients connect to, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientListener {
    /// Its name (`PLAINTEXT`, `SASL_SSL`, `INTERNAL`, ...): the key of
    /// `listener.security.protocol.map` and of the brokers' registered
    /// endpoints, so that a client is told the addresses of the listener it
    /// came in on.
    pub name: String,
    /// How its connections are secured.
    pub protocol: SecurityProtocol,
    /// Address bound.
    pub bind: SocketAddr,
    /// Host advertised in Metadata.
    pub advertised_host: String,
    /// Port advertised in Metadata.
    pub advertised_port: i32,
    /// Its TLS acceptor, on a listener whose protocol uses TLS; shared by
    /// every shard.
    pub tls: Option<Arc<security::tls::ListenerTls>>,
}

/// A client listener as the file gives it, before the flags and DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Listener name.
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// `host:port` to bind.
    pub bind: String,
    /// `host:port` to advertise, when `advertised.listeners` names one.
    pub advertised: Option<String>,
}

/// `controller.listener.names`: upper-cased, blanks dropped.
fn listener_names(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Listener texts found in the file, resolved once every key is read.
#[derive(Debug, Default)]
pub struct AppliedListeners {
    /// `listeners`.
    pub listeners: Option<String>,
    /// `advertised.listeners`.
    pub advertised: Option<String>,
    /// `listener.security.protocol.map`.
    pub protocol_map: Option<String>,
    /// `controller.listener.names`: listeners that are not for clients.
    pub controller_names: Vec<String>,
}

impl AppliedListeners {
    /// The controller listener of `listeners` (named in
    /// `controller.listener.names`, `CONTROLLER` when that is unset), as
    /// `(host, port)`: where a controller that joins a running quorum
    /// listens.
    pub fn controller_listener(&self) -> Result<Option<(String, u16)>, ConfigError> {
        let Some(text) = &self.listeners else {
            return Ok(None);
        };
        let default_names = [String::from("CONTROLLER")];
        let names = if self.controller_names.is_empty() {
            &default_names[..]
        } else {
            &self.controller_names[..]
        };
        Ok(parse_listeners("listeners", text)?
            .into_iter()
            .find(|l| names.iter().any(|n| n.eq_ignore_ascii_case(&l.name)))
            .map(|l| (l.host, l.port)))
    }

    /// The client listeners, in file order: every entry of `listeners` that
    /// is not a controller listener (rill's Raft traffic goes to the voters'
    /// addresses), with its protocol and advertised address. A name the
    /// protocol map does not know is an error, never a silent PLAINTEXT.
    pub fn resolve(&self) -> Result<Vec<ListenerSpec>, ConfigError> {
        let listeners = match &self.listeners {
            Some(text) => parse_listeners("listeners", text)?,
            None => Vec::new(),
        };
        let advertised = match &self.advertised {
            Some(text) => parse_listeners("advertised.listeners", text)?,
            None => Vec::new(),
        };
        let map = self.protocol_map.as_deref();
        let chosen = client_listeners(&listeners, &self.controller_names);
        let mut specs = Vec::with_capacity(chosen.len());
        for listener in chosen {
            if specs.iter().any(|s: &ListenerSpec| s.name == listener.name) {
                return Err(ConfigError::invalid(
                    "listeners",
                    self.listeners.as_deref().unwrap_or(""),
                    &format!("listener name {} appears twice", listener.name),
                ));
            }
            // The first listener also takes an unnamed advertised entry
            // (`advertised.listeners=host:9092`); the others only their own.
            let ad = if specs.is_empty() {
                advertised_for(&advertised, &listener.name, &self.controller_names)
            } else {
                advertised
                    .iter()
                    .find(|l| l.name == listener.name && !l.host.is_empty())
            };
            specs.push(ListenerSpec {
                name: listener.name.clone(),
                protocol: protocol_of(&listener.name, map)?,
                bind: listener.bind_text(),
                advertised: ad.map(listeners::Listener::bind_text),
            });
        }
        Ok(specs)
    }
}

/// The client listeners from the file's `specs` and the flags: `--listen`
/// and `--advertised-listener` set the first listener's addresses (a
/// PLAINTEXT one when the file names none). Each listener's advertised host
/// defaults to its bind address, or the host's name for a wildcard bind.
fn resolve_listeners(
    mut specs: Vec<ListenerSpec>,
    args: &ServeArgs,
) -> Result<Vec<ClientListener>, ConfigError> {
    if specs.is_empty() {
        specs.push(ListenerSpec {
            name: String::from("PLAINTEXT"),
            protocol: SecurityProtocol::Plaintext,
            bind: String::from("0.0.0.0:9092"),
            advertised: None,
        });
    }
    if let Some(text) = &args.listen {
        specs[0].bind = text.clone();
    }
    if let Some(text) = &args.advertised_listener {
        specs[0].advertised = Some(text.clone());
    }
    let mut out: Vec<ClientListener> = Vec::with_capacity(specs.len());
    for spec in specs {
        let key = if out.is_empty() {
            "--listen"
        } else {
            "listeners"
        };
        let bind = resolve_addr(key, &spec.bind)?;
        if let Some(other) = out.iter().find(|l| l.bind.port() == bind.port()) {
            return Err(ConfigError::invalid(
                "listeners",
                &spec.bind,
                &format!("port {} is already listener {}'s", bind.port(), other.name),
            ));
        }
        let (advertised_host, advertised_port) = match &spec.advertised {
            Some(text) => split_host_port("--advertised-listener", text)?,
            None => {
                let (host, why) = default_advertised_host(&bind);
                let port = i32::from(bind.port());
                tracing::info!(
                    listener = %spec.name,
                    advertised = %format!("{host}:{port}"),
                    listen = %bind,
                    "advertising {why} to clients (set --advertised-listener or \
                     advertised.listeners to choose)"
                );
                (host, port)
            }
        };
        out.push(ClientListener {
            name: spec.name,
            protocol: spec.protocol,
            bind,
            advertised_host,
            advertised_port,
            tls: None,
        });
    }
    Ok(out)
}

/// The retention and roll settings in each unit, kept until every key is
/// read because Kafka's precedence among them is ms, then minutes, then
/// hours, whatever their order in the file.
#[derive(Debug, Default)]
struct TimeUnits {
    retention_ms: Option<i64>,
    retention_minutes: Option<i64>,
    retention_hours: Option<i64>,
    roll_ms: Option<i64>,
    roll_hours: Option<i64>,
}

/// Flattens a TOML document into Kafka's dotted names with string values.
pub fn parse_toml(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Toml(e.to_string()))?;
    let mut out = BTreeMap::new();
    flatten(String::new(), &toml::Value::Table(table), &mut out)?;
    Ok(out)
}

fn flatten(
    prefix: String,
    value: &toml::Value,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    let text = match value {
        toml::Value::Table(table) => {
            for (key, inner) in table {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(name, inner, out)?;
            }
            return Ok(());
        }
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => {
            let mut parts = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    toml::Value::String(s) => parts.push(s.clone()),
                    toml::Value::Integer(i) => parts.push(i.to_string()),
                    _ => {
                        return Err(ConfigError::invalid(
                            &prefix,
                            "[..]",
                            "arrays hold strings or integers",
                        ))
                    }
                }
            }
            parts.join(",")
        }
        toml::Value::Datetime(d) => d.to_string(),
    };
    if out.insert(prefix.clone(), text).is_some() {
        return Err(ConfigError::invalid(&prefix, "", "set twice"));
    }
    Ok(())
}

fn parse_send_path(name: &str, value: &str) -> Result<SendPath, ConfigError> {
    match value.trim() {
        "copy" => Ok(SendPath::Copy),
        "sendfile" => Ok(SendPath::Sendfile),
        "splice" => Ok(SendPath::Splice),
        _ => Err(ConfigError::invalid(
            name,
            value,
            "copy, sendfile or splice",
        )),
    }
}

/// A replication throttle's bytes/s; Kafka's `Long.MAX_VALUE` (its
/// default) is none.
fn throttle_rate(name: &str, value: &str) -> Result<Option<u64>, ConfigError> {
    let rate: u64 = num(name, value)?;
    Ok(Some(rate).filter(|r| *r < i64::MAX as u64))
}

fn num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(name, value, "not a number in range"))
}

/// A number above 0.
fn positive<T: std::str::FromStr + PartialOrd + Default>(
    name: &str,
    value: &str,
) -> Result<T, ConfigError> {
    let n: T = num(name, value)?;
    if n <= T::default() {
        return Err(ConfigError::invalid(name, value, "above 0"));
    }
    Ok(n)
}

fn boolean(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::invalid(name, value, "true or false")),
    }
}

fn resolve_addr(name: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| ConfigError::invalid(name, text, "expected host:port"))
}

/// Splits `host:port` (IPv6 in brackets) for the advertised listener.
pub fn split_host_port(name: &str, text: &str) -> Result<(String, i32), ConfigError> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| ConfigError::invalid(name, text, "expected host:port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| ConfigError::invalid(name, text, "port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(ConfigError::invalid(name, text, "empty host"));
    }
    Ok((host.to_string(), i32::from(port)))
}

/// Cores this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Reads a settings file, properties or TOML (used by tests and tools).
pub fn load_file(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })?;
    if properties::looks_like_properties(path, &text) {
        Ok(properties::parse_properties(&text))
    } else {
        parse_toml(&text)
    }
}

/// A comma list of data dirs: at least one, none twice (Kafka refuses a
/// dir listed twice: both entries would hold the same partitions).
fn parse_data_dirs(name: &str, value: &str) -> Result<Vec<PathBuf>, ConfigError> {
    let dirs: Vec<PathBuf> = value
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        return Err(ConfigError::invalid(name, value, "no data dir"));
    }
    for (i, dir) in dirs.iter().enumerate() {
        if dirs[..i].contains(dir) {
            return Err(ConfigError::invalid(
                name,
                value,
                &format!("{} is listed twice", dir.display()),
            ));
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_dirs_is_a_comma_list_first_dir_first() {
        let mut config = BrokerConfig::defaults();
        config
            .set_data_dirs("log.dirs", "/a, /b,/c,")
            .expect("three dirs");
        assert_eq!(config.data_dir, PathBuf::from("/a"));
        assert_eq!(
            config.data_dirs(),
            vec![
                PathBuf::from("/a"),
                PathBuf::from("/b"),
                PathBuf::from("/c")
            ]
        );
        config
            .set_data_dirs("--data-dir", "/only")
            .expect("one dir");
        assert_eq!(config.data_dirs(), vec![PathBuf::from("/only")]);
        assert!(config.set_data_dirs("log.dirs", " , ").is_err());
        assert!(config.set_data_dirs("log.dirs", "/a,/b,/a").is_err());
    }
}
