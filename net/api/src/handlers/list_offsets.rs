//! ListOffsets (key 2): latest (-1), earliest (-2), max timestamp (-3),
//! earliest local (-4) and earliest pending upload (-5, v9, KIP-1005), or by
//! time. v10's `timeout_ms` bounds remote lookups, and rill answers every
//! lookup from the local log (a lookup by time below it finds the local
//! start), so it is read and needs no wait.
//! Under `isolation_level=1` (read_committed, v2+) latest is the last stable
//! offset and a lookup by time never answers an offset at or past it.

use super::{legacy, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use kernel::error::RequestError;
use runtimes::cluster_runtime;
use runtimes::routing::{run_authorized, run_checked};
use runtimes::routing::{PartitionOp, PartitionReply};
use runtimes::Shard;
use security::acl::Operation;
use std::rc::Rc;

/// v0–v10 (v0 through `legacy`).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::ListOffsets,
    min_version: 0,
    max_version: 10,
    handle,
};

/// The request body as this version lays it out, with v0's max counts
/// (also the fuzzed decoder, see [`crate::fuzzing`]).
pub(crate) fn decode_body(
    request: &mut Request,
) -> Result<(ListOffsetsRequest, Vec<i32>), RequestError> {
    if request.version == 0 {
        legacy::list_offsets::decode(request.body.clone()).map_err(|e| request.decode_error(e))
    } else {
        Ok((request.decode()?, Vec::new()))
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let (body, max_counts) = decode_body(&mut request)?;
        let read_committed = request.version >= 2 && body.isolation_level == 1;
        let mut pairs = Vec::new();
        let mut timestamps = Vec::new();
        let mut epochs = Vec::new();
        for topic in &body.topics {
            for p in &topic.partitions {
                pairs.push((topic.name.0.to_string(), p.partition_index));
                timestamps.push(p.timestamp);
                epochs.push(p.current_leader_epoch);
            }
        }
        let authz = cluster_runtime::authz(&shard, &request.session);
        let described = |topic: &str| authz.allows_topic(Operation::Describe, topic);
        let mut replies =
            run_authorized(&shard, &pairs, described, |tp, i| PartitionOp::ListOffset {
                tp,
                timestamp_ms: timestamps[i],
                read_committed,
                current_leader_epoch: epochs[i],
            })
            .await
            .into_iter();
        let mut response = ListOffsetsResponse::default();
        for topic in body.topics {
            let mut out = ListOffsetsTopicResponse::default();
            out.name = topic.name;
            for p in topic.partitions {
                let mut part = ListOffsetsPartitionResponse::default();
                part.partition_index = p.partition_index;
                part.offset = -1;
                part.timestamp = -1;
                part.leader_epoch = -1;
                match replies.next() {
                    Some(Ok(PartitionReply::ListOffset(Ok((found, epoch))))) => {
                        if let Some((offset, timestamp)) = found {
                            part.offset = offset;
                            part.timestamp = timestamp;
                        }
                        if request.version >= 4 {
                            part.leader_epoch = epoch;
                        }
                    }
                    Some(Ok(PartitionReply::ListOffset(Err(code)))) | Some(Err(code)) => {
                        part.error_code = code.code()
                    }
                    _ => part.error_code = ErrorCode::UnknownServerError.code(),
                }
                out.partitions.push(part);
            }
            response.topics.push(out);
        }
        if request.version == 0 {
            let latest = latest_where_missing(&shard, &pairs, &response).await;
            return request.respond_raw(&legacy::list_offsets::encode(
                &response,
                &latest,
                &max_counts,
            ));
        }
        request.respond(&response)
    })
}

/// v0 answers a time past the last record with the latest offset (Kafka's
/// list of offsets before that time starts at the log end): the latest
/// offset of each partition answered without error and without an offset,
/// -1 for the others, in request order.
async fn latest_where_missing(
    shard: &Rc<Shard>,
    pairs: &[(String, i32)],
    response: &ListOffsetsResponse,
) -> Vec<i64> {
    let answered: Vec<&ListOffsetsPartitionResponse> = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .collect();
    let missing: Vec<usize> = (0..answered.len())
        .filter(|&i| answered[i].error_code == 0 && answered[i].offset < 0)
        .collect();
    let mut latest = vec![-1; answered.len()];
    if missing.is_empty() {
        return latest;
    }
    let asked: Vec<(String, i32)> = missing.iter().map(|&i| pairs[i].clone()).collect();
    let replies = run_checked(shard, &asked, |tp, _| PartitionOp::ListOffset {
        tp,
        timestamp_ms: -1,
        read_committed: false,
        current_leader_epoch: -1,
    })
    .await;
    for (&i, reply) in missing.iter().zip(replies) {
        if let Ok(PartitionReply::ListOffset(Ok((Some((offset, _)), _)))) = reply {
            latest[i] = offset;
        }
    }
    latest
}
