//! DescribeLogDirs (key 35): every data dir (`log.dirs`), its partitions
//! and their sizes, and its file system's total and usable bytes.

use super::{str_bytes, Handler, HandlerFuture, Request};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kernel::error::RequestError;
use runtimes::cluster_runtime;
use runtimes::routing::run_checked;
use runtimes::routing::{PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v4 (v0 is v1's layout both ways).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::DescribeLogDirs,
    min_version: 0,
    max_version: 4,
    handle,
};

/// (total, usable) bytes of the file system holding `path`, or (-1, -1).
fn disk_bytes(path: &std::path::Path) -> (i64, i64) {
    match engine::disk_space::file_system_bytes(path) {
        Ok((total, usable)) => (
            i64::try_from(total).unwrap_or(i64::MAX),
            i64::try_from(usable).unwrap_or(i64::MAX),
        ),
        Err(_) => (-1, -1),
    }
}

/// The request body as this version lays it out (also the fuzzed decoder,
/// see [`crate::fuzzing`]).
pub(crate) fn decode_body(request: &mut Request) -> Result<DescribeLogDirsRequest, RequestError> {
    let layout = request.version.max(1);
    request.decode_as(layout)
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let layout = request.version.max(1);
        let body = decode_body(&mut request)?;
        // DESCRIBE on the cluster; without it Kafka answers with no dirs.
        let authz = cluster_runtime::authz(&shard, &request.session);
        if let Err(code) = authz.cluster(Operation::Describe) {
            let mut response = DescribeLogDirsResponse::default();
            if request.version >= 3 {
                response.error_code = code.code();
            }
            return request.respond_as(&response, layout);
        }
        let pairs: Vec<(String, i32)> = match body.topics {
            None => shard
                .topics
                .borrow()
                .iter()
                .flat_map(|e| (0..e.partitions).map(move |p| (e.name.clone(), p)))
                .collect(),
            Some(topics) => topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(move |&p| (t.topic.0.to_string(), p))
                })
                .collect(),
        };
        let replies = run_checked(&shard, &pairs, |tp, _| PartitionOp::Describe { tp }).await;
        let mut results: Vec<DescribeLogDirsResult> = shard
            .config
            .data_dirs()
            .iter()
            .map(|configured| {
                let dir = std::fs::canonicalize(configured).unwrap_or_else(|_| configured.clone());
                let mut result = DescribeLogDirsResult::default();
                result.log_dir = str_bytes(dir.display().to_string());
                if request.version >= 4 {
                    let (total, usable) = disk_bytes(&dir);
                    result.total_bytes = total;
                    result.usable_bytes = usable;
                }
                result
            })
            .collect();
        for ((topic, partition), reply) in pairs.into_iter().zip(replies) {
            // Partitions that do not exist are left out, as Kafka does.
            let Ok(PartitionReply::Describe(Ok(state))) = reply else {
                continue;
            };
            let Some(result) = results.get_mut(state.log_dir) else {
                continue;
            };
            let mut part = DescribeLogDirsPartition::default();
            part.partition_index = partition;
            part.partition_size = state.size_bytes as i64;
            if result
                .topics
                .last()
                .is_none_or(|t: &DescribeLogDirsTopic| t.name.0.as_str() != topic)
            {
                let mut t = DescribeLogDirsTopic::default();
                t.name = TopicName(str_bytes(topic));
                result.topics.push(t);
            }
            if let Some(t) = result.topics.last_mut() {
                t.partitions.push(part);
            }
        }
        let mut response = DescribeLogDirsResponse::default();
        response.results = results;
        request.respond_as(&response, layout)
    })
}
