//! DescribeQuorum (key 55, KIP-595): the metadata quorum's leader, epoch
//! (Raft term), high watermark (commit index) and each voter's log end
//! offset, as `kafka-metadata-quorum.sh describe --status` and
//! `Admin.describeMetadataQuorum` show them.
//!
//! Asked of any node: the metadata shard asks the active controller, which
//! alone knows every member's progress, and answers from this node's own
//! member when it cannot be reached (a follower then knows only its own
//! progress and reports -1 for the others; a broker-only node, an
//! observer, the leader, term and commit index a voter last told it, and
//! its configured voters). A controller being added by AddRaftVoter is
//! listed among the observers while it catches up as a learner; v2's nodes
//! give each member's controller listener. The quorum's partition is
//! `__cluster_metadata`-0; any other is UNKNOWN_TOPIC_OR_PARTITION.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use runtimes::cluster_runtime;
use runtimes::cluster_runtime::{DescribeQuorum, METADATA_SHARD};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v2 (v2 adds directory ids, not kept yet: zero, and the members'
/// controller listeners).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeQuorum,
    min_version: 0,
    max_version: 2,
    handle,
};

/// The metadata log's topic name (KRaft's).
const METADATA_TOPIC: &str = "__cluster_metadata";

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: DescribeQuorumRequest = request.decode()?;
        let description = shard
            .call(METADATA_SHARD, DescribeQuorum)
            .await
            .ok()
            .flatten();
        let mut response = DescribeQuorumResponse::default();
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.cluster(Operation::Describe) {
            response.error_code = code.code();
            return request.respond(&response);
        }
        for topic in body.topics {
            let mut topic_data = TopicData::default();
            let is_metadata_topic = topic.topic_name.0.as_str() == METADATA_TOPIC;
            topic_data.topic_name = topic.topic_name;
            for partition in topic.partitions {
                let mut data = PartitionData::default();
                data.partition_index = partition.partition_index;
                match (
                    &description,
                    is_metadata_topic && partition.partition_index == 0,
                ) {
                    (_, false) => data.error_code = ErrorCode::UnknownTopicOrPartition.code(),
                    (None, true) => data.error_code = ErrorCode::NotLeaderOrFollower.code(),
                    (Some(quorum), true) => {
                        data.leader_id = BrokerId(quorum.leader_id.unwrap_or(-1));
                        data.leader_epoch = i32::try_from(quorum.term).unwrap_or(i32::MAX);
                        data.high_watermark = i64::try_from(quorum.high_watermark).unwrap_or(-1);
                        data.current_voters = quorum.voters.iter().map(replica).collect();
                        data.observers = quorum.observers.iter().map(replica).collect();
                    }
                }
                topic_data.partitions.push(data);
            }
            response.topics.push(topic_data);
        }
        if let Some(quorum) = description.as_ref().filter(|_| request.version >= 2) {
            response.nodes = quorum.endpoints.iter().map(node).collect();
        }
        request.respond(&response)
    })
}

/// A member's state: its id and log end offset (-1: unknown); the
/// timestamps are not tracked (-1).
fn replica(&(node_id, log_end_offset): &(i32, i64)) -> ReplicaState {
    let mut state = ReplicaState::default();
    state.replica_id = BrokerId(node_id);
    state.log_end_offset = log_end_offset;
    state.last_fetch_timestamp = -1;
    state.last_caught_up_timestamp = -1;
    state
}

/// A member's controller listener (v2's `Nodes`).
fn node((node_id, host, port): &(i32, String, u16)) -> Node {
    let mut listener = Listener::default();
    listener.name = str_bytes("CONTROLLER");
    listener.host = str_bytes(host.clone());
    listener.port = *port;
    let mut node = Node::default();
    node.node_id = BrokerId(*node_id);
    node.listeners = vec![listener];
    node
}
