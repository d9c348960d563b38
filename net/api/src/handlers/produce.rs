//! Produce (key 0): append each partition's batches on its owner shard and
//! answer per partition; one bad partition never fails the others. acks=-1
//! waits for durability, acks=1 for the write, acks=0 sends no response.

use super::{Handler, HandlerFuture, Request, Response};
use crate::produce_scan;
use bytes::{Buf, Bytes, BytesMut};
use engine::ErrorCode;
use engine::TopicPartition;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kernel::error::RequestError;
use kernel::topics::valid_topic_name;
use runtimes::admin_changes::{self, ControllerRequest};
use runtimes::cluster_runtime;
use runtimes::routing::run_on_owners;
use runtimes::routing::TxnJoin;
use runtimes::routing::{PartitionOp, PartitionReply, ProduceRefusal};
use runtimes::Shard;
use security::acl::{Authz, Operation};
use std::ops::Range;
use std::rc::Rc;
use uuid::Uuid;

/// Smallest frame whose records `own_payloads` takes over in place: the
/// connection reads frames this large into a buffer of their own
/// (`connection::read_requests`), so the buffer holds nothing else.
pub const OWNED_FRAME_MIN_BYTES: usize = 16 << 10;

/// v3–v13. v12 is the same request sent by clients that use transactions
/// v2 (KIP-890 part 2): the partition leader adds each partition to the
/// transaction itself. v13 (Kafka 4.1, KIP-516) names topics by id, in the
/// request and the response: an id this broker does not know is
/// UNKNOWN_TOPIC_ID, and creates no topic, so a producer that still holds
/// the id of a topic deleted and made again writes nothing into the new one.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::Produce,
    min_version: 3,
    max_version: 13,
    handle,
};

/// The first version that names topics by id.
const TOPIC_ID_VERSION: i16 = 13;

/// Where one partition of the request stands before the append.
enum Slot {
    /// Rejected up front with this error.
    Rejected(ErrorCode),
    /// Sent as the op at this position.
    Sent(usize),
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        // The frame's bytes after the header; the records are slices of it.
        let frame = request.body.clone();
        let mut body: ProduceRequest = request.decode()?;
        let scattered = std::mem::take(&mut request.scattered_records);
        if !scattered.is_empty() {
            produce_scan::restore_records(&mut body, scattered).map_err(|e| {
                RequestError::Decode {
                    api: "Produce",
                    version: request.version,
                    reason: e.to_string(),
                }
            })?;
        }
        // Only the records may keep the frame alive for `own_payloads` to
        // take it over without a copy: the body and the client id let go
        // of it here (the client id is copied: a few bytes).
        request.body = Bytes::new();
        request.header.client_id = request
            .header
            .client_id
            .take()
            .map(|id| StrBytes::from_string(id.to_string()));
        let acks = body.acks;
        let timeout_ms = body.timeout_ms;
        let acks_valid = matches!(acks, -1..=1);
        let authz = cluster_runtime::authz(&shard, &request.session);
        // A transactional producer needs WRITE on its transactional id;
        // every partition is refused without it, as Kafka answers.
        let txn_refused = body
            .transactional_id
            .as_ref()
            .and_then(|id| authz.transactional_id(Operation::Write, id).err());
        let txn_id = body.transactional_id.as_ref().map(|id| id.0.as_str());
        let txn = txn_join(&shard, txn_id, request.version);
        let topic_data = std::mem::take(&mut body.topic_data);
        drop(body);
        let checks = Checks {
            shard: &shard,
            authz: &authz,
            txn_refused,
            acks_valid,
            by_id: request.version >= TOPIC_ID_VERSION,
        };
        let (layout, sent) = checks.place(topic_data).await;
        let ops = produce_ops(frame, sent, (acks, timeout_ms), txn);
        let replies = run_on_owners(&shard, ops).await;
        if acks == 0 {
            return Ok(Response::Nothing);
        }
        let mut response = ProduceResponse::default();
        // Counted when the request was read (`connection::dispatch`).
        response.throttle_time_ms = request.quota_throttle_ms;
        response.responses = layout
            .into_iter()
            .map(|((name, topic_id), slots)| {
                let mut topic = TopicProduceResponse::default();
                topic.name = TopicName(StrBytes::from_string(name));
                topic.topic_id = topic_id;
                topic.partition_responses = slots
                    .into_iter()
                    .map(|(index, slot)| partition_response(index, slot, &replies, request.version))
                    .collect();
                topic
            })
            .collect();
        request.respond(&response)
    })
}

/// Per topic (its name, and its id from v13), in request order: each
/// partition's index and where it stands.
type Layout = Vec<((String, Uuid), Vec<(i32, Slot)>)>;

/// What each partition of the request is checked against before the append.
struct Checks<'a> {
    shard: &'a Rc<Shard>,
    authz: &'a Authz,
    /// WRITE on the transactional id refused, with this code.
    txn_refused: Option<ErrorCode>,
    /// `acks` is one of -1, 0, 1.
    acks_valid: bool,
    /// The request names topics by id (v13).
    by_id: bool,
}

impl Checks<'_> {
    /// Where each partition of the request stands, and the records of those
    /// sent, in request order.
    async fn place(
        &self,
        topic_data: Vec<TopicProduceData>,
    ) -> (Layout, Vec<(TopicPartition, Bytes)>) {
        let mut sent: Vec<(TopicPartition, Bytes)> = Vec::new();
        let mut layout: Layout = Vec::new();
        for topic in topic_data {
            let (name, partitions) = match self.name_of(&topic) {
                Ok(name) => {
                    let count = self.partition_count(&name).await;
                    (name, count)
                }
                Err(code) => (String::new(), Err(code)),
            };
            let mut slots = Vec::with_capacity(topic.partition_data.len());
            for data in topic.partition_data {
                let slot = match (&partitions, data.records) {
                    (Err(code), _) => Slot::Rejected(*code),
                    (Ok(count), _) if data.index < 0 || data.index >= *count => {
                        Slot::Rejected(ErrorCode::UnknownTopicOrPartition)
                    }
                    (Ok(_), None) => Slot::Rejected(ErrorCode::CorruptMessage),
                    (Ok(_), Some(records)) => {
                        sent.push((TopicPartition::new(name.clone(), data.index), records));
                        Slot::Sent(sent.len() - 1)
                    }
                };
                slots.push((data.index, slot));
            }
            layout.push(((name, topic.topic_id), slots));
        }
        (layout, sent)
    }

    /// The topic's name: as the request gives it, or (v13) that of its
    /// id, UNKNOWN_TOPIC_ID when this broker knows no topic by that id.
    fn name_of(&self, topic: &TopicProduceData) -> Result<String, ErrorCode> {
        if !self.by_id {
            return Ok(topic.name.0.to_string());
        }
        let topics = self.shard.topics.borrow();
        let entry = topics.by_id(topic.topic_id.as_bytes());
        entry
            .map(|e| e.name.clone())
            .ok_or(ErrorCode::UnknownTopicId)
    }

    /// The topic's partition count (auto-creating it where allowed), or the
    /// error every one of its partitions gets.
    async fn partition_count(&self, name: &str) -> Result<i32, ErrorCode> {
        if let Some(code) = self.txn_refused {
            Err(code)
        } else if let Err(code) = self.authz.topic(Operation::Write, name) {
            Err(code)
        } else if self.acks_valid {
            topic_partitions(self.shard, name, self.authz).await
        } else {
            Err(ErrorCode::InvalidRequiredAcks)
        }
    }
}

/// One append per sent partition, its records taken over from `frame`
/// where possible (see [`own_payloads`]).
fn produce_ops(
    frame: Bytes,
    sent: Vec<(TopicPartition, Bytes)>,
    (acks, timeout_ms): (i16, i32),
    txn: Option<TxnJoin>,
) -> Vec<PartitionOp> {
    let (tps, records): (Vec<TopicPartition>, Vec<Bytes>) = sent.into_iter().unzip();
    tps.into_iter()
        .zip(own_payloads(frame, records))
        .map(|(tp, records)| PartitionOp::Produce {
            tp,
            records,
            acks,
            timeout_ms,
            txn: txn.clone(),
        })
        .collect()
}

/// What the partition leaders do for the request's transaction before its
/// first batch on a partition: add the partition to it (v12+, transactions
/// v2, whose clients send no AddPartitionsToTxn) or check that it is in it
/// (older versions, while `transaction.partition.verification.enable`).
fn txn_join(shard: &Shard, transactional_id: Option<&str>, version: i16) -> Option<TxnJoin> {
    let transactional_id = transactional_id?.to_string();
    let add = version >= 12;
    (add || shard.config.transaction_partition_verification_enable).then_some(TxnJoin {
        transactional_id,
        add,
    })
}

/// Each partition's records as a mutable buffer (the engine writes offsets
/// into the batches in place). When the request frame has no other user
/// and is a buffer of its own (see [`OWNED_FRAME_MIN_BYTES`]), they are its
/// regions, cut apart without a copy; otherwise each is copied out, as a
/// frame that shares its allocation with the connection's read buffer or
/// other requests must stay as it is. `records` are slices of `frame`.
pub(crate) fn own_payloads(frame: Bytes, records: Vec<Bytes>) -> Vec<BytesMut> {
    let Some(ranges) = ranges_in(&frame, &records) else {
        // Records outside the frame (read apart, see `produce_scan`) are
        // taken over when nothing else holds them.
        return records
            .into_iter()
            .map(|r| r.try_into_mut().unwrap_or_else(|r| BytesMut::from(&r[..])))
            .collect();
    };
    drop(records);
    let frame = match frame.try_into_mut() {
        // `capacity == len`: the allocation ends with the frame, as one the
        // reader made for this frame does; a small frame at the end of a
        // larger read buffer would keep all of it alive in the batch cache
        // (half the minimum: the header is not in `frame`).
        Ok(whole)
            if whole.len() >= OWNED_FRAME_MIN_BYTES / 2 && whole.capacity() == whole.len() =>
        {
            return split_regions(whole, &ranges)
        }
        Ok(whole) => whole.freeze(),
        Err(shared) => shared,
    };
    ranges
        .into_iter()
        .map(|r| BytesMut::from(&frame[r]))
        .collect()
}

/// The position of each of `records` in `frame`, when they lie in it in
/// order without overlapping (as decoded records do).
fn ranges_in(frame: &Bytes, records: &[Bytes]) -> Option<Vec<Range<usize>>> {
    let base = frame.as_ptr() as usize;
    let mut from = 0;
    let mut ranges = Vec::with_capacity(records.len());
    for r in records {
        let start = (r.as_ptr() as usize).checked_sub(base)?;
        let end = start.checked_add(r.len())?;
        if start < from || end > frame.len() {
            return None;
        }
        ranges.push(start..end);
        from = end;
    }
    Some(ranges)
}

/// `ranges` (ordered, disjoint) of `whole`, each its own `BytesMut` on the
/// one allocation.
fn split_regions(mut whole: BytesMut, ranges: &[Range<usize>]) -> Vec<BytesMut> {
    let mut at = 0;
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        whole.advance(r.start - at);
        out.push(whole.split_to(r.len()));
        at = r.end;
    }
    out
}

fn partition_response(
    index: i32,
    slot: Slot,
    replies: &[PartitionReply],
    version: i16,
) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = index;
    p.base_offset = -1;
    p.log_append_time_ms = -1;
    p.log_start_offset = -1;
    let outcome = match slot {
        Slot::Rejected(code) => Err(code.into()),
        Slot::Sent(position) => match replies.get(position) {
            Some(PartitionReply::Produce(outcome)) => outcome.clone(),
            _ => Err(ErrorCode::UnknownServerError.into()),
        },
    };
    match outcome {
        Ok(done) => {
            p.base_offset = done.base_offset;
            p.log_append_time_ms = done.log_append_time_ms;
            p.log_start_offset = done.log_start_offset;
        }
        Err(refusal) => set_refusal(&mut p, refusal, version),
    }
    p
}

/// The error fields of a refused partition. Records refused one by one
/// (KIP-467, Produce v8+) are named in `record_errors`, with the summary in
/// `error_message`, as Kafka answers a `RecordValidationException`: the
/// client fails those records with the code and the rest of the batch with
/// its own "refused with another record" error. Below v8 the fields do not
/// exist (the codec refuses to encode them), and the code alone refuses the
/// whole batch.
fn set_refusal(p: &mut PartitionProduceResponse, refusal: ProduceRefusal, version: i16) {
    /// The first Produce version with `record_errors` and `error_message`.
    const RECORD_ERRORS_MIN_VERSION: i16 = 8;
    p.error_code = refusal.code.code();
    let Some(records) = refusal
        .records
        .filter(|_| version >= RECORD_ERRORS_MIN_VERSION)
    else {
        return;
    };
    p.error_message = Some(StrBytes::from_string(records.message));
    p.record_errors = records
        .records
        .into_iter()
        .map(|r| {
            let mut e = BatchIndexAndErrorMessage::default();
            e.batch_index = r.batch_index;
            e.batch_index_error_message = Some(StrBytes::from_string(r.message));
            e
        })
        .collect();
}

/// The partition count of a topic, auto-creating it as Kafka does when allowed
/// (by `auto.create.topics.enable` and by CREATE on the cluster or topic).
async fn topic_partitions(shard: &Rc<Shard>, name: &str, authz: &Authz) -> Result<i32, ErrorCode> {
    if let Some(entry) = shard.topics.borrow().get(name) {
        return Ok(entry.partitions);
    }
    if !valid_topic_name(name) {
        return Err(ErrorCode::InvalidTopicException);
    }
    if !shard.config.auto_create_topics_enable {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    authz.create_topic(name)?;
    let request = ControllerRequest::CreateTopic {
        name: name.to_string(),
        partitions: -1,
        configs: Vec::new(),
        replication_factor: admin_changes::DEFAULT_REPLICATION,
        assignment: Vec::new(),
        validate_only: false,
    };
    // Boxed: the controller round trip's future is kilobytes, and held
    // inline it would make every Produce's future (boxed and copied per
    // request) that large, for a path taken once per topic.
    match Box::pin(admin_changes::submit(shard, request)).await {
        Ok(_) | Err((ErrorCode::TopicAlreadyExists, _)) => shard
            .topics
            .borrow()
            .get(name)
            .map(|e| e.partitions)
            .ok_or(ErrorCode::UnknownTopicOrPartition),
        Err((code, _)) => Err(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_of(len: usize) -> Bytes {
        let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
        Bytes::from(bytes)
    }

    #[test]
    fn a_frame_of_its_own_is_split_without_a_copy() {
        let frame = frame_of(OWNED_FRAME_MIN_BYTES + 100);
        let base = frame.as_ptr() as usize;
        let records = vec![
            frame.slice(10..2000),
            frame.slice(2000..2000),
            frame.slice(3000..9000),
        ];
        let expected: Vec<Vec<u8>> = records.iter().map(|r| r.to_vec()).collect();
        let owned = own_payloads(frame, records);
        let got: Vec<Vec<u8>> = owned.iter().map(|r| r.to_vec()).collect();
        assert_eq!(got, expected);
        // Same memory: regions of the frame, not copies.
        assert_eq!(owned[0].as_ptr() as usize, base + 10);
        assert_eq!(owned[2].as_ptr() as usize, base + 3000);
    }

    #[test]
    fn a_shared_or_small_frame_is_copied() {
        let frame = frame_of(OWNED_FRAME_MIN_BYTES + 100);
        let keep = frame.clone();
        let records = vec![frame.slice(10..20)];
        let owned = own_payloads(frame, records);
        assert_eq!(&owned[0][..], &keep[10..20]);
        assert_ne!(owned[0].as_ptr(), keep[10..].as_ptr());

        let small = frame_of(100);
        let base = small.as_ptr() as usize;
        let owned = own_payloads(small.clone(), vec![small.slice(1..5)]);
        drop(small);
        assert_eq!(&owned[0][..], &[1, 2, 3, 4]);
        assert_ne!(owned[0].as_ptr() as usize, base + 1);
    }

    #[test]
    fn records_outside_the_frame_are_copied() {
        let frame = frame_of(OWNED_FRAME_MIN_BYTES + 100);
        let other = Bytes::from_static(b"abc");
        let owned = own_payloads(frame.clone(), vec![frame.slice(5..8), other]);
        assert_eq!(&owned[0][..], &frame[5..8]);
        assert_eq!(&owned[1][..], b"abc");
    }
}
