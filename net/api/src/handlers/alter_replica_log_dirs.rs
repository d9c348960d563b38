//! AlterReplicaLogDirs (key 34): move replicas this broker holds to
//! another of its data dirs (`log.dirs`), as `kafka-reassign-partitions.sh`
//! with `log_dirs` in its JSON and `Admin.alterReplicaLogDirs` ask, e.g.
//! to drain a disk before it is replaced.
//!
//! Each partition is moved by the shard that owns it
//! (`LogManager::move_partition`): closed, copied into the new dir,
//! swapped in crash-safely, and opened there. Unlike Kafka's, the move is
//! not online: while the copy runs, produce and fetch of that partition
//! are answered NOT_LEADER_OR_FOLLOWER and retried by clients and
//! followers, so a big leader is best moved when it is a follower. The
//! answer comes once the move is done.
//!
//! A path that is not one of this broker's data dirs is LOG_DIR_NOT_FOUND;
//! a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION,
//! and one this broker holds no replica of is REPLICA_NOT_AVAILABLE.
//! Authorization is Kafka's: ALTER on the CLUSTER.

use super::{Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, TopicName,
};
use kernel::error::RequestError;
use runtimes::cluster_runtime;
use runtimes::routing::{run_checked, PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::path::Path;
use std::rc::Rc;

/// v0–v2 (v0 is v1's layout both ways; Kafka 4 dropped it, Kafka 3.9's
/// clients may still send it).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::AlterReplicaLogDirs,
    min_version: 0,
    max_version: 2,
    handle,
};

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(
    request: &mut Request,
) -> Result<AlterReplicaLogDirsRequest, RequestError> {
    let layout = request.version.max(1);
    request.decode_as(layout)
}

/// The index of `path` among this broker's data dirs, compared as the
/// file system resolves them (DescribeLogDirs shows them resolved).
fn dir_index(shard: &Shard, path: &str) -> Option<usize> {
    let resolve = |dir: &Path| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let wanted = resolve(Path::new(path));
    shard
        .config
        .data_dirs()
        .iter()
        .position(|dir| resolve(dir) == wanted)
}

/// The answer for one partition from its owner's reply.
fn partition_code(reply: Result<PartitionReply, ErrorCode>) -> ErrorCode {
    match reply {
        Ok(PartitionReply::Done(Ok(()))) => ErrorCode::None,
        // The topic exists (run_checked found it), its replica is elsewhere.
        Ok(PartitionReply::Done(Err(
            ErrorCode::UnknownTopicOrPartition | ErrorCode::NotLeaderOrFollower,
        ))) => ErrorCode::ReplicaNotAvailable,
        Ok(PartitionReply::Done(Err(code))) | Err(code) => code,
        Ok(_) => ErrorCode::UnknownServerError,
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let layout = request.version.max(1);
        let body = decode_body(&mut request)?;
        let authorized = cluster_runtime::authz(&shard, &request.session)
            .cluster(Operation::Alter)
            .err();
        let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
        for dir in body.dirs {
            let target = dir_index(&shard, dir.path.as_str());
            for topic in dir.topics {
                let pairs: Vec<(String, i32)> = topic
                    .partitions
                    .iter()
                    .map(|&p| (topic.name.0.to_string(), p))
                    .collect();
                let codes: Vec<ErrorCode> = match (authorized, target) {
                    (Some(code), _) => vec![code; pairs.len()],
                    (None, None) => vec![ErrorCode::LogDirNotFound; pairs.len()],
                    (None, Some(dir_index)) => {
                        let make = |tp, _| PartitionOp::MoveToDir { tp, dir_index };
                        let replies = run_checked(&shard, &pairs, make).await;
                        replies.into_iter().map(partition_code).collect()
                    }
                };
                let mut result = AlterReplicaLogDirTopicResult::default();
                result.topic_name = TopicName(topic.name.0.clone());
                for (&partition, code) in topic.partitions.iter().zip(codes) {
                    let mut answer = AlterReplicaLogDirPartitionResult::default();
                    answer.partition_index = partition;
                    answer.error_code = code.code();
                    result.partitions.push(answer);
                }
                results.push(result);
            }
        }
        let mut response = AlterReplicaLogDirsResponse::default();
        response.results = results;
        request.respond_as(&response, layout)
    })
}
