//! OffsetCommit v0 and v1 requests (their responses are v2's layout).
//!
//! v0: `group_id [topic [partition offset metadata]]` — no generation or
//! member: a "simple" commit, which Kafka treats as generation -1 (accepted
//! for a group without live members, refused for an active one).
//! v1: `group_id generation member_id [topic [partition offset timestamp
//! metadata]]` — a per-partition commit timestamp other than -1 is kept as
//! the commit's time (as Kafka 3.9 does; a simple group's retention counts
//! from it).

use super::{Reader, WireError};
use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Decodes a v0 or v1 body as the codec's request (v2's meaning:
/// `retention_time_ms` -1, the broker's retention) and each partition's
/// commit timestamp in request order (-1 for v0).
pub fn decode(body: Bytes, version: i16) -> Result<(OffsetCommitRequest, Vec<i64>), WireError> {
    let mut r = Reader::new(body);
    let mut timestamps = Vec::new();
    let mut out = OffsetCommitRequest::default();
    out.group_id = GroupId(r.string("group_id")?);
    out.generation_id_or_member_epoch = -1;
    out.member_id = StrBytes::from_static_str("");
    out.retention_time_ms = -1;
    if version >= 1 {
        out.generation_id_or_member_epoch = r.i32("generation_id")?;
        out.member_id = r.string("member_id")?;
    }
    out.topics = r.array("topics", 6, |r| {
        let mut topic = OffsetCommitRequestTopic::default();
        topic.name = TopicName(r.string("topic name")?);
        topic.partitions = r.array("partitions", 14, |r| {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = r.i32("partition_index")?;
            p.committed_offset = r.i64("committed_offset")?;
            p.committed_leader_epoch = -1;
            timestamps.push(if version >= 1 {
                r.i64("commit_timestamp")?
            } else {
                -1
            });
            p.committed_metadata = r.nullable_string("committed_metadata")?;
            Ok(p)
        })?;
        Ok(topic)
    })?;
    r.finish()?;
    Ok((out, timestamps))
}

#[cfg(test)]
mod tests {
    use super::super::Writer;
    use super::*;

    #[test]
    fn v1_reads_generation_member_and_skips_the_timestamp() {
        let mut w = Writer::default();
        w.string("g");
        w.i32(7);
        w.string("m-1");
        w.array_len(1);
        w.string("t");
        w.array_len(1);
        w.i32(3);
        w.i64(42);
        w.i64(1_500);
        w.nullable_string(Some("meta"));
        let (req, timestamps) = decode(w.finish(), 1).unwrap();
        assert_eq!(timestamps, vec![1_500]);
        assert_eq!(req.generation_id_or_member_epoch, 7);
        assert_eq!(req.member_id.as_str(), "m-1");
        let p = &req.topics[0].partitions[0];
        assert_eq!((p.partition_index, p.committed_offset), (3, 42));
        assert_eq!(p.committed_metadata.as_ref().unwrap().as_str(), "meta");
    }

    #[test]
    fn v0_is_a_simple_commit() {
        let mut w = Writer::default();
        w.string("g");
        w.array_len(1);
        w.string("t");
        w.array_len(1);
        w.i32(0);
        w.i64(5);
        w.nullable_string(None);
        let (req, timestamps) = decode(w.finish(), 0).unwrap();
        assert_eq!(timestamps, vec![-1]);
        assert_eq!(req.generation_id_or_member_epoch, -1);
        assert_eq!(req.member_id.as_str(), "");
        assert_eq!(req.topics[0].partitions[0].committed_offset, 5);
    }
}
