//! ListOffsets v0: `replica_id [topic [partition timestamp max_num_offsets]]`,
//! answered with `[topic [partition error_code [offset]]]`.
//!
//! Kafka answers v0 from segment base offsets ("offsets before a time",
//! newest first, at most `max_num_offsets`); latest (-1) and earliest (-2),
//! what old clients ask, are one offset each: the high watermark and the log
//! start. For a time rill answers the offset v1 would (the first record at
//! or after it, or the latest offset when none is), a single offset where
//! Kafka's segment-granular list would start at or before it.

use super::{Reader, WireError, Writer};
use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};

/// Decodes a v0 body as the codec's request, with each partition's
/// `max_num_offsets` in request order.
pub fn decode(body: Bytes) -> Result<(ListOffsetsRequest, Vec<i32>), WireError> {
    let mut r = Reader::new(body);
    let mut out = ListOffsetsRequest::default();
    let mut max_counts = Vec::new();
    out.replica_id = BrokerId(r.i32("replica_id")?);
    out.topics = r.array("topics", 6, |r| {
        let mut topic = ListOffsetsTopic::default();
        topic.name = TopicName(r.string("topic name")?);
        topic.partitions = r.array("partitions", 16, |r| {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = r.i32("partition_index")?;
            p.current_leader_epoch = -1;
            p.timestamp = r.i64("timestamp")?;
            max_counts.push(r.i32("max_num_offsets")?);
            Ok(p)
        })?;
        Ok(topic)
    })?;
    r.finish()?;
    Ok((out, max_counts))
}

/// Encodes the answer to a v0 request: each partition's offset (or, for a
/// time past the last record, `latest`) as a one-element `old_style_offsets`,
/// none when it failed or `max_num_offsets` is 0. `latest` and `max_counts`
/// are per partition in request order.
pub fn encode(response: &ListOffsetsResponse, latest: &[i64], max_counts: &[i32]) -> Bytes {
    let mut w = Writer::default();
    w.array_len(response.topics.len());
    let mut i = 0;
    for topic in &response.topics {
        w.string(topic.name.0.as_str());
        w.array_len(topic.partitions.len());
        for p in &topic.partitions {
            w.i32(p.partition_index);
            w.i16(p.error_code);
            let offset = if p.offset >= 0 {
                p.offset
            } else {
                latest.get(i).copied().unwrap_or(-1)
            };
            let wanted = max_counts.get(i).copied().unwrap_or(0) > 0;
            if p.error_code == 0 && wanted && offset >= 0 {
                w.array_len(1);
                w.i64(offset);
            } else {
                w.array_len(0);
            }
            i += 1;
        }
    }
    w.finish()
}
