//! Metadata (key 3): the live brokers of the cluster (from the committed
//! metadata image; this broker always, even before its registration is
//! committed), the active controller, topics and partitions, with Kafka's
//! topic auto-creation when the client allows it and `auto.create.topics.enable` is set.

use super::{str_bytes, uuid, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kernel::topics::{valid_topic_name, TopicEntry};
use runtimes::admin_changes::{self, ControllerRequest};
use runtimes::cluster_runtime::{self, own_endpoint};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::rc::Rc;

/// v0–v13 (v13 only adds a top-level error code for re-bootstrapping, always 0 here).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::Metadata,
    min_version: 0,
    max_version: 13,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: MetadataRequest = request.decode()?;
        let version = request.version;
        let asked = (
            body.include_topic_authorized_operations,
            body.include_cluster_authorized_operations,
        );
        // v0 asks for every topic with an empty list; later versions with null.
        let wanted: Option<Vec<(Option<String>, [u8; 16])>> = match body.topics {
            None => None,
            Some(topics) if topics.is_empty() && version == 0 => None,
            Some(topics) => Some(
                topics
                    .into_iter()
                    .map(|t| (t.name.map(|n| n.0.to_string()), *t.topic_id.as_bytes()))
                    .collect(),
            ),
        };
        // Kafka auto-creates for v0-v3 always, later only if the client allows it.
        let may_create = shard.config.auto_create_topics_enable
            && (version < 4 || body.allow_auto_topic_creation);
        let authz = cluster_runtime::authz(&shard, &request.session);
        let mut topics = Vec::new();
        match wanted {
            None => {
                // Topics the caller may not DESCRIBE are left out, as Kafka does.
                let entries: Vec<TopicEntry> = shard
                    .topics
                    .borrow()
                    .iter()
                    .filter(|e| authz.allows_topic(Operation::Describe, &e.name))
                    .cloned()
                    .collect();
                topics.extend(entries.iter().map(|e| topic_metadata(&shard, e, version)));
            }
            Some(wanted) => {
                for (name, id) in wanted {
                    let topic = lookup_or_create(&shard, name, id, may_create, version, &authz);
                    topics.push(topic.await);
                }
            }
        }
        let mut response = MetadataResponse::default();
        response.brokers = cluster_brokers(&shard, &request.session.listener)
            .into_iter()
            .map(|b| {
                let mut broker = MetadataResponseBroker::default();
                broker.node_id = BrokerId(b.node_id);
                broker.host = str_bytes(b.host);
                broker.port = b.port;
                broker.rack = b.rack.map(str_bytes);
                broker
            })
            .collect();
        if version >= 2 {
            response.cluster_id = Some(str_bytes(shard.config.cluster_id.clone()));
        }
        response.controller_id = BrokerId(active_controller(&shard));
        response.topics = topics;
        authorized_operations(&mut response, asked, version, &authz);
        request.respond(&response)
    })
}

/// KIP-430: the caller's operations on each topic found (v8 on) and on the
/// cluster (v8 to v10; DescribeCluster since), where the request asks.
/// `asked`: the request's (topic, cluster) flags.
fn authorized_operations(
    response: &mut MetadataResponse,
    (topics_asked, cluster_asked): (bool, bool),
    version: i16,
    authz: &Authz,
) {
    if version < 8 {
        return;
    }
    for topic in &mut response.topics {
        if let (0, Some(name)) = (topic.error_code, &topic.name) {
            topic.topic_authorized_operations = authz.topic_operations(topics_asked, name);
        }
    }
    if version <= 10 {
        response.cluster_authorized_operations = authz.cluster_operations(cluster_asked);
    }
}

/// A broker as Metadata and DescribeCluster list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedBroker {
    /// `node.id`.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// `broker.rack`.
    pub rack: Option<String>,
}

/// The live (registered, unfenced) brokers of the committed image, in id
/// order, with their addresses on listener `listener`, and this broker: it
/// serves the request, so it is alive, even while its own registration is
/// being committed. A controller-only node is no broker and lists only the
/// others.
pub fn cluster_brokers(shard: &Shard, listener: &str) -> Vec<ListedBroker> {
    let image = shard.runtime().view.image();
    let own = shard.config.broker_id;
    let mut brokers: Vec<ListedBroker> = image
        .brokers()
        .values()
        .filter(|b| !b.fenced && b.broker_id != own)
        .filter_map(|b| {
            let endpoint = b.listeners.iter().find(|e| e.name == listener)?;
            Some(ListedBroker {
                node_id: b.broker_id,
                host: endpoint.host.clone(),
                port: i32::from(endpoint.port),
                rack: b.rack.clone(),
            })
        })
        .collect();
    if shard.config.cluster.roles.is_none_or(|roles| roles.broker) {
        let (host, port) = own_endpoint(shard, listener);
        brokers.push(ListedBroker {
            node_id: own,
            host,
            port,
            rack: shard.config.cluster.rack.clone(),
        });
    }
    brokers.sort_by_key(|b| b.node_id);
    brokers
}

/// The active controller's id (the quorum leader), or this broker's while
/// none is known (a client then retries here).
pub fn active_controller(shard: &Shard) -> i32 {
    let view = shard.runtime().view.clone();
    let leader = view.quorum().leader_id;
    let image = view.image();
    let own = shard.config.broker_id;
    // Clients send admin requests to this id, so it must be a broker they
    // can reach: the active controller where it is a live broker too, else
    // (a controller-only node, KRaft's answer) a live broker, this one
    // first; any broker forwards to the controller.
    match leader {
        Some(id) if image.is_live(id) => id,
        _ if image.is_live(own) => own,
        _ => image
            .brokers()
            .values()
            .find(|broker| !broker.fenced)
            .map_or(leader.unwrap_or(own), |broker| broker.broker_id),
    }
}

async fn lookup_or_create(
    shard: &Rc<Shard>,
    name: Option<String>,
    id: [u8; 16],
    may_create: bool,
    version: i16,
    authz: &Authz,
) -> MetadataResponseTopic {
    let found = match &name {
        Some(name) => shard.topics.borrow().get(name).cloned(),
        None => shard.topics.borrow().by_id(&id).cloned(),
    };
    if let Some(entry) = found {
        if !authz.allows_topic(Operation::Describe, &entry.name) {
            return error_topic(name, id, ErrorCode::TopicAuthorizationFailed);
        }
        return topic_metadata(shard, &entry, version);
    }
    if let Some(name) = &name {
        // Kafka answers an unknown topic the caller may not describe as
        // unauthorized, so that names do not leak.
        if !authz.allows_topic(Operation::Describe, name) {
            return error_topic(Some(name.clone()), id, ErrorCode::TopicAuthorizationFailed);
        }
    }
    let Some(name) = name else {
        return error_topic(None, id, ErrorCode::UnknownTopicId);
    };
    if !valid_topic_name(&name) {
        return error_topic(Some(name), id, ErrorCode::InvalidTopicException);
    }
    if !may_create {
        return error_topic(Some(name), id, ErrorCode::UnknownTopicOrPartition);
    }
    if let Err(code) = authz.create_topic(&name) {
        return error_topic(Some(name), id, code);
    }
    let request = ControllerRequest::CreateTopic {
        name: name.clone(),
        partitions: -1,
        configs: Vec::new(),
        replication_factor: admin_changes::DEFAULT_REPLICATION,
        assignment: Vec::new(),
        validate_only: false,
    };
    match admin_changes::submit(shard, request).await {
        Ok(_) | Err((ErrorCode::TopicAlreadyExists, _)) => match shard.topics.borrow().get(&name) {
            Some(entry) => topic_metadata(shard, entry, version),
            // Created by a racing request whose broadcast has not arrived
            // yet: LEADER_NOT_AVAILABLE, the client retries.
            None => error_topic(Some(name), id, ErrorCode::LeaderNotAvailable),
        },
        Err((code, message)) => {
            tracing::warn!(topic = %name, %code, %message, "auto-creation failed");
            error_topic(Some(name), id, code)
        }
    }
}

fn error_topic(name: Option<String>, id: [u8; 16], error_code: ErrorCode) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.error_code = error_code.code();
    topic.name = Some(TopicName(str_bytes(name.unwrap_or_default())));
    topic.topic_id = uuid(id);
    topic
}

fn topic_metadata(shard: &Shard, entry: &TopicEntry, version: i16) -> MetadataResponseTopic {
    let own = BrokerId(shard.config.broker_id);
    let image = shard.runtime().view.image();
    let placed = image
        .topic_by_name(&entry.name)
        .filter(|topic| topic.topic_id == entry.topic_id);
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(TopicName(str_bytes(entry.name.clone())));
    if version >= 10 {
        topic.topic_id = uuid(entry.topic_id);
    }
    topic.is_internal = entry.name.starts_with("__");
    topic.partitions = (0..entry.partitions)
        .map(|p| {
            let mut partition = MetadataResponsePartition::default();
            partition.partition_index = p;
            match placed.and_then(|t| t.partitions.get(&p)) {
                Some(state) => {
                    partition.leader_id = BrokerId(state.leader);
                    partition.leader_epoch = state.leader_epoch;
                    partition.replica_nodes = state.replicas.iter().map(|&b| BrokerId(b)).collect();
                    partition.isr_nodes = state.isr.iter().map(|&b| BrokerId(b)).collect();
                    partition.offline_replicas = state
                        .replicas
                        .iter()
                        .filter(|&&b| !image.is_live(b))
                        .map(|&b| BrokerId(b))
                        .collect();
                    if state.leader < 0 {
                        partition.error_code = ErrorCode::LeaderNotAvailable.code();
                    }
                }
                // Not in the committed image (yet): served by this broker.
                None => {
                    partition.leader_id = own;
                    partition.leader_epoch = 0;
                    partition.replica_nodes = vec![own];
                    partition.isr_nodes = vec![own];
                }
            }
            partition
        })
        .collect();
    topic
}
