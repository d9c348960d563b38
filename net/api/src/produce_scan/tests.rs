use super::*;
use bytes::BufMut;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, RequestHeader, TopicName, TransactionalId};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// A request of `version` with two topics, one of three partitions (one
/// with null records, one with empty ones) and one of one, and tagged
/// fields everywhere the flexible versions allow them.
fn request(version: i16) -> ProduceRequest {
    let records = |n: usize, seed: u8| {
        Some(Bytes::from(
            (0..n).map(|i| seed ^ i as u8).collect::<Vec<u8>>(),
        ))
    };
    let flexible = version >= FLEXIBLE_VERSION;
    let tag = |p: PartitionProduceData| {
        if flexible {
            p.with_unknown_tagged_field(7, Bytes::from_static(b"tagged"))
        } else {
            p
        }
    };
    let topic = |name: &str, id: u128, partitions| {
        let t = TopicProduceData::default().with_partition_data(partitions);
        let t = if version >= TOPIC_ID_VERSION {
            t.with_topic_id(uuid::Uuid::from_u128(id))
        } else {
            t.with_name(TopicName(StrBytes::from_string(name.to_string())))
        };
        if flexible {
            t.with_unknown_tagged_field(3, Bytes::from_static(b"t"))
        } else {
            t
        }
    };
    let body = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("txn-1"))))
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            topic(
                "orders",
                1,
                vec![
                    tag(PartitionProduceData::default()
                        .with_index(0)
                        .with_records(records(70_000, 1))),
                    tag(PartitionProduceData::default()
                        .with_index(5)
                        .with_records(None)),
                    tag(PartitionProduceData::default()
                        .with_index(2)
                        .with_records(records(0, 0))),
                ],
            ),
            topic(
                "payments",
                2,
                vec![PartitionProduceData::default()
                    .with_index(9)
                    .with_records(records(300, 9))],
            ),
        ]);
    if flexible {
        body.with_unknown_tagged_field(11, Bytes::from_static(b"request tag"))
    } else {
        body
    }
}

/// The frame (without its length prefix) of `body`.
fn frame(body: &ProduceRequest, version: i16) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some(StrBytes::from_static_str("scan-test")));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, ApiKey::Produce.request_header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

/// Splits `frame` as the connection does, handing it over `piece` bytes
/// at a time; the envelope, the records, and the topics and partitions
/// the records were announced for.
fn split(
    frame: &Bytes,
    version: i16,
    piece: usize,
) -> (Bytes, Vec<Option<BytesMut>>, Vec<(String, i32)>) {
    let mut splitter = Splitter::new(version);
    let mut source = frame.clone();
    let mut pending = BytesMut::new();
    let mut announced = Vec::new();
    loop {
        match splitter.advance(&mut pending).unwrap() {
            Next::Read => {
                assert!(
                    !source.is_empty(),
                    "the scanner wants bytes past the request"
                );
                let n = piece.min(source.len());
                pending.put(source.split_to(n));
            }
            Next::Records { length, partition } => {
                let topic = match splitter.topic_id() {
                    Some(id) => format!("id {}", uuid::Uuid::from_bytes(id).as_u128()),
                    None => splitter.topic().to_string(),
                };
                announced.push((topic, partition));
                let mut records = BytesMut::new();
                let from_pending = length.min(pending.len());
                records.put(pending.split_to(from_pending));
                records.put(source.split_to(length - from_pending));
                splitter.push_records(records);
            }
            Next::Done => break,
        }
    }
    assert!(
        pending.is_empty() && source.is_empty(),
        "the whole request was taken"
    );
    let (envelope, records) = splitter.finish();
    (envelope, records, announced)
}

#[test]
fn every_version_splits_and_decodes_back_to_the_same_request() {
    for version in 3..=13 {
        let body = request(version);
        let whole = frame(&body, version);
        for piece in [1, 7, 512, 1 << 20] {
            let (envelope, records, announced) = split(&whole, version, piece);
            // The envelope is small: the records are out of it.
            assert!(envelope.len() < 400, "v{version}: {} bytes", envelope.len());
            let mut rest = envelope.clone();
            let header =
                RequestHeader::decode(&mut rest, ApiKey::Produce.request_header_version(version))
                    .unwrap();
            assert_eq!(header.correlation_id, 42);
            let mut decoded = ProduceRequest::decode(&mut rest, version).unwrap();
            assert!(rest.is_empty(), "v{version}: trailing envelope bytes");
            restore_records(&mut decoded, records).unwrap();
            assert_eq!(decoded, body, "v{version}, pieces of {piece}");
            let names: Vec<(&str, i32)> = if version >= TOPIC_ID_VERSION {
                vec![("id 1", 0), ("id 1", 2), ("id 2", 9)]
            } else {
                vec![("orders", 0), ("orders", 2), ("payments", 9)]
            };
            let announced: Vec<(&str, i32)> =
                announced.iter().map(|(t, p)| (t.as_str(), *p)).collect();
            assert_eq!(announced, names, "v{version}");
        }
    }
}

#[test]
fn records_that_do_not_match_the_decoded_partitions_are_refused() {
    let version = 9;
    let whole = frame(&request(version), version);
    let (envelope, mut records, _) = split(&whole, version, 64);
    records.pop();
    let mut rest = envelope;
    RequestHeader::decode(&mut rest, ApiKey::Produce.request_header_version(version)).unwrap();
    let mut decoded = ProduceRequest::decode(&mut rest, version).unwrap();
    assert_eq!(
        restore_records(&mut decoded, records),
        Err(ScanError::RecordsMismatch {
            partitions: 4,
            records: 3
        })
    );
}

#[test]
fn bad_lengths_are_refused_not_followed() {
    // v3: a negative records length other than -1.
    let mut bad = BytesMut::new();
    bad.put_i16(0); // API key
    bad.put_i16(3);
    bad.put_i32(1);
    bad.put_i16(-1); // client id
    bad.put_i16(-1); // transactional id
    bad.put_i16(1);
    bad.put_i32(1000);
    bad.put_i32(1); // one topic
    bad.put_i16(1);
    bad.put_u8(b't');
    bad.put_i32(1); // one partition
    bad.put_i32(0);
    bad.put_i32(-5);
    let mut splitter = Splitter::new(3);
    assert_eq!(
        splitter.advance(&mut bad),
        Err(ScanError::Malformed("negative records length"))
    );
    // v9: a varint that never ends.
    let mut bad = BytesMut::from(&[0u8, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff][..]);
    bad.put_slice(&[0x00]); // no tagged fields in the header
    bad.put_slice(&[0xff; 6]);
    let mut splitter = Splitter::new(9);
    assert!(splitter.advance(&mut bad).is_err());
}

/// Splits `frame` fed `piece` bytes at a time, however bad it is, until it
/// ends or is refused: never a panic, and the records taken never reach
/// past the frame.
fn split_anything(frame: &[u8], version: i16, piece: usize) {
    let mut splitter = Splitter::new(version);
    let mut source = frame;
    let mut pending = BytesMut::new();
    loop {
        match splitter.advance(&mut pending) {
            Ok(Next::Read) if source.is_empty() => return,
            Ok(Next::Read) => {
                let n = piece.min(source.len());
                pending.put_slice(&source[..n]);
                source = &source[n..];
            }
            Ok(Next::Records { length, .. }) => {
                if length > pending.len() + source.len() {
                    return;
                }
                let from_pending = length.min(pending.len());
                let mut records = pending.split_to(from_pending);
                records.put_slice(&source[..length - from_pending]);
                source = &source[length - from_pending..];
                splitter.push_records(records);
            }
            Ok(Next::Done) | Err(_) => return,
        }
    }
}

#[test]
fn damaged_and_random_requests_never_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for version in [3, 8, 9, 12, 13] {
        let whole = frame(&request(version), version).to_vec();
        for _ in 0..300 {
            // A few bytes of the envelope changed (the records are the
            // bulk, so aim at the first 200 bytes and the last 100).
            let mut damaged = whole.clone();
            for _ in 0..1 + next() % 4 {
                let at = match next() % 2 {
                    0 => (next() % 200) as usize,
                    _ => damaged.len() - 1 - (next() % 100) as usize,
                };
                damaged[at] = next() as u8;
            }
            let cut = damaged.len() - (next() % 50) as usize;
            split_anything(&damaged[..cut], version, 1 + (next() % 600) as usize);
            let noise: Vec<u8> = (0..next() % 400).map(|_| next() as u8).collect();
            split_anything(&noise, version, 1 + (next() % 64) as usize);
        }
    }
}
