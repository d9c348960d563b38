//! OffsetForLeaderEpoch v0 and v1: requests `[topic [partition
//! leader_epoch]]` (no `current_leader_epoch`: not fenced, as -1 means);
//! responses `[topic [error_code partition end_offset]]`, v1 with the
//! `leader_epoch` found before `end_offset` (v2 added `throttle_time_ms`).

use super::{Reader, WireError, Writer};
use bytes::Bytes;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};

/// Decodes a v0 or v1 body as the codec's request.
pub fn decode(body: Bytes) -> Result<OffsetForLeaderEpochRequest, WireError> {
    let mut r = Reader::new(body);
    let mut out = OffsetForLeaderEpochRequest::default();
    // Kafka's default for versions without the field (a debugging replica).
    out.replica_id = BrokerId(-2);
    out.topics = r.array("topics", 6, |r| {
        let mut topic = OffsetForLeaderTopic::default();
        topic.topic = TopicName(r.string("topic name")?);
        topic.partitions = r.array("partitions", 8, |r| {
            let mut p = OffsetForLeaderPartition::default();
            p.partition = r.i32("partition")?;
            p.current_leader_epoch = -1;
            p.leader_epoch = r.i32("leader_epoch")?;
            Ok(p)
        })?;
        Ok(topic)
    })?;
    r.finish()?;
    Ok(out)
}

/// Encodes `response` as v0 or v1.
pub fn encode(response: &OffsetForLeaderEpochResponse, version: i16) -> Bytes {
    let mut w = Writer::default();
    w.array_len(response.topics.len());
    for topic in &response.topics {
        w.string(topic.topic.0.as_str());
        w.array_len(topic.partitions.len());
        for p in &topic.partitions {
            w.i16(p.error_code);
            w.i32(p.partition);
            if version >= 1 {
                w.i32(p.leader_epoch);
            }
            w.i64(p.end_offset);
        }
    }
    w.finish()
}
