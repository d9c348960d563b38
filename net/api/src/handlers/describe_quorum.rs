//! DescribeQuorum (key 55, KIP-595): the metadata quorum's leader, epoch
//! (Raft term), high watermark (commit index) and each voter's log end
//! offset, as `kafka-metadata-quorum.sh describe --status` and
//! `Admin.describeMetadataQuorum` show them.
//!
//! Asked of any broker: the metadata shard answers from this node's quorum
//! member. The leader knows every voter's progress; a follower knows only
//! its own and reports -1 for the others (ask the leader for the whole
//! picture). A broker-only node (an observer) reports the leader, term and
//! commit index a voter last told it, and -1 for every voter. The quorum's partition is `__cluster_metadata`-0; any other is
//! UNKNOWN_TOPIC_OR_PARTITION.

use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::describe_quorum_response::{PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use runtimes::cluster_runtime;
use runtimes::cluster_runtime::{DescribeQuorum, METADATA_SHARD};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v1 (v2 adds directory ids and the voters' listeners).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeQuorum,
    min_version: 0,
    max_version: 1,
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
                        data.current_voters = quorum
                            .voters
                            .iter()
                            .map(|&(node_id, log_end_offset)| {
                                let mut voter = ReplicaState::default();
                                voter.replica_id = BrokerId(node_id);
                                voter.log_end_offset = log_end_offset;
                                voter.last_fetch_timestamp = -1;
                                voter.last_caught_up_timestamp = -1;
                                voter
                            })
                            .collect();
                    }
                }
                topic_data.partitions.push(data);
            }
            response.topics.push(topic_data);
        }
        request.respond(&response)
    })
}
