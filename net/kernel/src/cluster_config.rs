//! The cluster settings of `rill serve`, with KRaft's names: `node.id`
//! (kept in [`crate::config::BrokerConfig::broker_id`]),
//! `controller.quorum.voters`, `process.roles`, `broker.rack`,
//! `replica.selector.class` and the broker
//! session timings.
//!
//! With no voters configured the broker is a single node: a one-member
//! metadata quorum of itself, with no controller listener. A node whose id
//! is not among the voters is a broker-only node: an observer of the
//! quorum that fetches the committed metadata from a voter. Why keep the
//! quorum even then: the single node and the cluster run the same
//! registration and metadata path, so the whole test suite exercises it.

use crate::error::ConfigError;
use std::net::{SocketAddr, ToSocketAddrs};

/// One member of the metadata quorum (`id@host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    /// Its `node.id`.
    pub node_id: i32,
    /// Host of its controller listener.
    pub host: String,
    /// Port of its controller listener.
    pub port: u16,
}

impl Voter {
    /// The controller listener's address, resolved now (a host name may
    /// resolve differently later, and each connection attempt resolves again).
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}:{}: {e}", self.host, self.port))?
            .next()
            .ok_or_else(|| format!("{}:{} resolves to no address", self.host, self.port))
    }
}

/// What a node does (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// Serves clients (`broker`).
    pub broker: bool,
    /// Is a metadata quorum voter (`controller`).
    pub controller: bool,
}

/// The cluster part of the broker config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `controller.quorum.voters`; empty: a single node (a quorum of itself).
    pub voters: Vec<Voter>,
    /// This node's controller listener `(host, port)` when it is not among
    /// `controller.quorum.voters`: a controller that joins the running
    /// quorum by AddRaftVoter (KIP-853).
    pub controller_listener: Option<(String, u16)>,
    /// `controller.quorum.bootstrap.servers` as set (Kafka 3.9's dynamic
    /// quorum): without voters it stops the start (see [`Self::validate`]).
    pub bootstrap_servers: Option<String>,
    /// `process.roles` as set; `None`: not set, which means
    /// `broker,controller` for a voter and `broker` for any other node.
    pub roles: Option<Roles>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `replica.selector.class`: whether a leader sends a consumer to a
    /// follower in its rack (KIP-392).
    pub replica_selector: cluster::replication::ReplicaSelector,
    /// `cordoned.log.dirs` (KIP-1066) as the file sets it: data dirs that
    /// take no new partitions, `*` for all of them. A dynamic value
    /// (IncrementalAlterConfigs on this broker, or on every broker) wins.
    pub cordoned_log_dirs: Vec<String>,
    /// `leader.replication.throttled.rate` and
    /// `follower.replication.throttled.rate` as the file sets them
    /// (bytes/s; `None`: unthrottled); dynamic values win (KIP-73).
    pub replication_throttled_rates: (Option<u64>, Option<u64>),
    /// `broker.heartbeat.interval.ms`: how often a broker heartbeats to the
    /// active controller.
    pub heartbeat_interval_ms: i64,
    /// `server.max.startup.time.ms`: how long a starting broker waits to be
    /// registered and unfenced (caught up with the metadata log) before it
    /// gives up and stops; `None`: no limit (Kafka's default).
    pub max_startup_time_ms: Option<u64>,
    /// `broker.session.timeout.ms`: a broker not heard from for this long is
    /// fenced and loses its leaderships.
    pub session_timeout_ms: i64,
    /// The quorum's tick; the election timeout is 10 ticks and a leader
    /// heartbeats every 2.
    pub quorum_tick_ms: u64,
    /// `auto.leader.rebalance.enable`: the controller moves each partition's
    /// leadership back to its preferred (first) replica when that one is in
    /// the ISR.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms: how often the
    /// active controller checks the leader imbalance.
    pub leader_imbalance_check_interval_ms: i64,
    /// `leader.imbalance.per.broker.percentage`: a broker's preferred
    /// leaderships move back only when more than this percentage of the
    /// partitions that prefer it are led by another broker.
    pub leader_imbalance_per_broker_percentage: u32,
    /// `rill.metadata.snapshot.interval.entries`: applied metadata records
    /// after which the quorum snapshots the image and trims its log.
    pub snapshot_interval_entries: u64,
    /// `metadata.log.dir`: where the metadata quorum's log lives; `None`:
    /// `__cluster_metadata-0` under the data dir. On a disk of its own it
    /// keeps writing when the data disk fills (a failed metadata write
    /// stops the broker, as in Kafka).
    pub metadata_log_dir: Option<std::path::PathBuf>,
}

impl Default for ClusterConfig {
    /// Kafka's heartbeat interval is 2 s and its session 9 s; rill fences a
    /// silent broker within 2.5 s so that failover stays near a second.
    fn default() -> Self {
        ClusterConfig {
            voters: Vec::new(),
            controller_listener: None,
            bootstrap_servers: None,
            roles: None,
            rack: None,
            replica_selector: cluster::replication::ReplicaSelector::Leader,
            cordoned_log_dirs: Vec::new(),
            replication_throttled_rates: (None, None),
            heartbeat_interval_ms: 500,
            session_timeout_ms: 2500,
            max_startup_time_ms: None,
            quorum_tick_ms: 100,
            snapshot_interval_entries: 1024,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            leader_imbalance_per_broker_percentage: 10,
            metadata_log_dir: None,
        }
    }
}

impl ClusterConfig {
    /// Whether this node is a single node (no voters configured).
    pub fn is_single_node(&self) -> bool {
        self.voters.is_empty()
    }

    /// The voter entry of `node_id`, if it is one.
    pub fn voter(&self, node_id: i32) -> Option<&Voter> {
        self.voters.iter().find(|voter| voter.node_id == node_id)
    }

    /// Whether `node_id` runs as a broker-only node, an observer of the
    /// metadata quorum (it is not among the voters of a cluster). Only
    /// meaningful once [`ClusterConfig::validate`] accepted the settings.
    pub fn is_observer(&self, node_id: i32) -> bool {
        !self.is_single_node() && self.voter(node_id).is_none() && !self.is_joining_controller()
    }

    /// Whether this node is a controller outside the configured voters,
    /// with a controller listener of its own: it runs a quorum member that
    /// waits to be added by AddRaftVoter (KIP-853), or one that was added
    /// (its metadata log then names it).
    pub fn is_joining_controller(&self) -> bool {
        !self.is_single_node()
            && self.controller_listener.is_some()
            && self.roles.is_some_and(|roles| roles.controller)
    }

    /// Where `node_id`'s own controller listener is: its entry in the
    /// voters, else its controller listener.
    pub fn own_controller_endpoint(&self, node_id: i32) -> Option<Voter> {
        self.voter(node_id).cloned().or_else(|| {
            self.controller_listener.as_ref().map(|(host, port)| Voter {
                node_id,
                host: host.clone(),
                port: *port,
            })
        })
    }

    /// Checks the settings against this node's id; called once all are read.
    ///
    /// A node outside the voters with `process.roles` unset starts as a
    /// broker-only observer. Kafka would refuse the implied combined roles;
    /// rill takes the unset roles to mean "whatever this node can be",
    /// because the voter list already says which nodes vote. Roles that
    /// were set explicitly must agree with the voter list.
    pub fn validate(&self, node_id: i32) -> Result<(), ConfigError> {
        self.check_bootstrap_servers()?;
        let roles = self.roles.unwrap_or(Roles {
            broker: true,
            controller: true,
        });
        let joining = self.is_joining_controller() && self.voter(node_id).is_none();
        if !roles.broker && !joining && (self.is_single_node() || self.voter(node_id).is_none()) {
            return Err(ConfigError::invalid(
                "process.roles",
                "controller",
                "a controller-only node must be one of controller.quorum.voters, in a \
                 cluster with broker nodes",
            ));
        }
        let explicit_controller = self.roles.is_some_and(|r| r.controller);
        match (self.is_single_node(), self.voter(node_id).is_some()) {
            (true, _) if !roles.controller => Err(ConfigError::invalid(
                "process.roles",
                "broker",
                "a broker-only node needs controller.quorum.voters to find the quorum",
            )),
            (true, _) => Ok(()),
            (false, true) if !roles.controller => Err(ConfigError::invalid(
                "process.roles",
                "broker",
                &format!(
                    "node.id {node_id} is one of controller.quorum.voters, so it needs the \
                     controller role (broker,controller)"
                ),
            )),
            (false, true) => Ok(()),
            (false, false) if joining => Ok(()),
            (false, false) if explicit_controller => Err(ConfigError::invalid(
                "controller.quorum.voters",
                &self.voters_text(),
                &format!(
                    "node.id {node_id} has the controller role but is not a voter; \
                     give it a controller listener (listeners=...,CONTROLLER://host:port) \
                     to join the quorum by AddRaftVoter, or use --process-roles broker to \
                     join as a broker-only node"
                ),
            )),
            (false, false) => Ok(()),
        }
    }

    /// Kafka 3.9's `controller.quorum.bootstrap.servers` naming several
    /// controllers, with no voters: a cluster rill cannot find that way.
    /// Kafka's own single-node sample names just itself, and is a single
    /// node here too; beside the voters the key is ignored.
    fn check_bootstrap_servers(&self) -> Result<(), ConfigError> {
        let Some(servers) = &self.bootstrap_servers else {
            return Ok(());
        };
        let listed = servers.split(',').filter(|s| !s.trim().is_empty()).count();
        if listed > 1 && self.is_single_node() {
            return Err(ConfigError::invalid(
                "controller.quorum.bootstrap.servers",
                servers,
                "rill finds a quorum of several controllers by controller.quorum.voters \
                 (id@host:port of the first voters; voters change later with AddRaftVoter and \
                 RemoveRaftVoter, and the metadata log records them): set it instead",
            ));
        }
        Ok(())
    }

    fn voters_text(&self) -> String {
        self.voters
            .iter()
            .map(|v| format!("{}@{}:{}", v.node_id, v.host, v.port))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Parses `controller.quorum.voters`: `1@host:port,2@host:port,...`.
pub fn parse_voters(name: &str, text: &str) -> Result<Vec<Voter>, ConfigError> {
    let mut voters: Vec<Voter> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let invalid = |reason: &str| ConfigError::invalid(name, text, reason);
        let (id, address) = item
            .split_once('@')
            .ok_or_else(|| invalid("each voter is id@host:port"))?;
        let node_id: i32 = id
            .parse()
            .map_err(|_| invalid("a voter id is a non-negative integer"))?;
        if node_id < 0 {
            return Err(invalid("a voter id is a non-negative integer"));
        }
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| invalid("each voter is id@host:port"))?;
        let port: u16 = port.parse().map_err(|_| invalid("bad port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(invalid("a voter needs a host"));
        }
        if voters.iter().any(|v| v.node_id == node_id) {
            return Err(invalid("a voter id appears twice"));
        }
        voters.push(Voter {
            node_id,
            host: host.to_string(),
            port,
        });
    }
    Ok(voters)
}

/// Parses `replica.selector.class` (KIP-392): one of Kafka's selectors'
/// class names, or empty for none.
pub fn parse_replica_selector(
    name: &str,
    text: &str,
) -> Result<cluster::replication::ReplicaSelector, ConfigError> {
    cluster::replication::ReplicaSelector::from_class(text).ok_or_else(|| {
        ConfigError::invalid(
            name,
            text,
            "rill has Kafka's org.apache.kafka.common.replica.RackAwareReplicaSelector and \
             LeaderSelector, or none",
        )
    })
}

/// Parses `process.roles`: `broker`, `controller`, or both, comma-separated.
pub fn parse_roles(name: &str, text: &str) -> Result<Roles, ConfigError> {
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for role in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match role {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            _ => {
                return Err(ConfigError::invalid(
                    name,
                    text,
                    "roles are broker and controller",
                ))
            }
        }
    }
    if !roles.broker && !roles.controller {
        return Err(ConfigError::invalid(name, text, "at least one role"));
    }
    Ok(roles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_parse_as_kraft_writes_them() {
        let voters = parse_voters("v", "1@localhost:9093, 2@10.0.0.2:9093,3@[::1]:19093").unwrap();
        assert_eq!(voters.len(), 3);
        assert_eq!(voters[0].host, "localhost");
        assert_eq!(voters[2].host, "::1");
        assert_eq!(voters[2].port, 19093);
        assert!(parse_voters("v", "1@a:1,1@b:2").is_err());
        assert!(parse_voters("v", "a@b:1").is_err());
        assert!(parse_voters("v", "1@b").is_err());
        assert!(parse_voters("v", "-1@b:1").is_err());
    }

    #[test]
    fn roles_and_their_checks() {
        assert_eq!(
            parse_roles("r", "broker,controller").unwrap(),
            Roles {
                broker: true,
                controller: true
            }
        );
        assert!(parse_roles("r", "zookeeper").is_err());
        let mut config = ClusterConfig::default();
        assert!(config.validate(0).is_ok(), "a single node");
        config.voters = parse_voters("v", "1@h:1,2@h:2").unwrap();
        assert!(config.validate(1).is_ok());
        assert!(config.validate(3).is_ok(), "unset roles: an observer");
        assert!(config.is_observer(3));
        assert!(!config.is_observer(1));
        config.roles = Some(parse_roles("r", "broker,controller").unwrap());
        assert!(
            config.validate(3).is_err(),
            "a controller that is not a voter"
        );
        config.roles = Some(parse_roles("r", "broker").unwrap());
        assert!(config.validate(3).is_ok(), "a broker-only observer");
        assert!(
            config.validate(1).is_err(),
            "a voter needs the controller role"
        );
        config.roles = Some(parse_roles("r", "controller").unwrap());
        assert!(config.validate(1).is_ok(), "a controller-only voter");
        assert!(config.validate(3).is_err(), "a controller-only non-voter");
        config.controller_listener = Some((String::from("h"), 3));
        assert!(
            config.validate(3).is_ok(),
            "a controller joining by AddRaftVoter"
        );
        assert!(!config.is_observer(3));
        assert_eq!(config.own_controller_endpoint(3).map(|v| v.port), Some(3));
        assert_eq!(config.own_controller_endpoint(1).map(|v| v.port), Some(1));
        config.controller_listener = None;
        let lone = ClusterConfig {
            roles: Some(parse_roles("r", "controller").unwrap()),
            ..ClusterConfig::default()
        };
        assert!(lone.validate(0).is_err(), "a single node with no broker");
        let single = ClusterConfig {
            roles: Some(parse_roles("r", "broker").unwrap()),
            ..ClusterConfig::default()
        };
        assert!(single.validate(0).is_err(), "an observer of nothing");
        assert!(!single.is_observer(0));
    }
}
