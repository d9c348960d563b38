//! The `__transaction_state` record formats, byte for byte as Kafka writes
//! them, so a log written by Kafka replays here and the reverse.
//!
//! Key: `TransactionLogKey` v0 — `int16 version, string transactional_id`.
//! Value: `TransactionLogValue` v0 (written) — `int16 version, int64
//! producer_id, int16 producer_epoch, int32 transaction_timeout_ms, int8
//! state, [topic string, [int32 partition]] (null while Empty), int64
//! last_update_timestamp_ms, int64 start_timestamp_ms`. Version 1 is the
//! flexible form of the same fields (compact strings and arrays, tagged
//! fields, Kafka 3.x+) with transactions v2's three tagged fields (0
//! previous_producer_id, 1 next_producer_id, 2 client_transaction_version,
//! KIP-890); it is written only when one of those is set, so a log of
//! transactions v1 stays readable by older brokers. A missing value is a
//! tombstone: the transactional id is gone.
//!
//! Rill adds one record type of its own on the same partitions, the
//! offsets a transaction has committed with TxnOffsetCommit, so that they
//! survive a crash (Kafka keeps them in `__consumer_offsets` instead):
//! key `int16 version = PENDING_OFFSETS_KEY_VERSION, string
//! transactional_id`; value `int16 version 0, int64 producer_id, int16
//! producer_epoch, int64 start_timestamp_ms, [group string, [topic string,
//! int32 partition, int64 offset, int32 leader_epoch, nullable int32-length
//! metadata]]`. Each record holds the whole set of the transaction, so
//! compaction keeps only the latest; a tombstone (written with the Complete
//! state) ends it. The key version is far above Kafka's, so it never
//! collides with a `TransactionLogKey`; Kafka 3.7+ skips keys of unknown
//! versions when it loads the log, older Kafka refuses them.

use super::coordinator::{PendingOffset, PendingOffsets};
use super::{Tv2Fields, TxnMetadata, TxnState};
use std::collections::{BTreeMap, BTreeSet};

/// Key version written.
pub const KEY_VERSION: i16 = 0;
/// Value version written without transactions v2's fields.
pub const VALUE_VERSION: i16 = 0;
/// Value version written with them (flexible, tagged fields).
pub const VALUE_VERSION_TV2: i16 = 1;
/// Key version of rill's pending-offsets record ("rO" in ASCII).
pub const PENDING_OFFSETS_KEY_VERSION: i16 = 0x724f;
/// Value version of rill's pending-offsets record.
pub const PENDING_OFFSETS_VALUE_VERSION: i16 = 0;

/// What a `__transaction_state` key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnLogKey {
    /// Kafka's `TransactionLogKey`: the state of a transactional id.
    State(String),
    /// Rill's pending offsets of a transactional id's current transaction.
    PendingOffsets(String),
}

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnRecordError {
    /// The bytes end before the field.
    #[error("transaction log record truncated at {0}")]
    Truncated(&'static str),
    /// A schema version this broker does not read.
    #[error("unknown transaction log {what} version {version}")]
    UnknownVersion {
        /// "key" or "value".
        what: &'static str,
        /// The version read.
        version: i16,
    },
    /// A state id outside Kafka's `TransactionState`.
    #[error("unknown transaction state {0}")]
    UnknownState(i8),
    /// A string that is not UTF-8.
    #[error("transaction log string is not UTF-8")]
    BadString,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes `TransactionLogKey` v0.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_str(&mut out, transactional_id);
    out
}

/// Encodes `TransactionLogValue`: v0, or v1 when transactions v2's fields
/// are set.
pub fn encode_value(meta: &TxnMetadata) -> Vec<u8> {
    if !meta.tv2.is_default() {
        return encode_value_v1(meta);
    }
    let mut out = Vec::with_capacity(64);
    put_value_head(&mut out, VALUE_VERSION, meta);
    if meta.state == TxnState::Empty && meta.partitions.is_empty() {
        // Kafka writes a null partition list for an Empty transaction.
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        let topics = group_by_topic(&meta.partitions);
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, partitions) in topics {
            put_str(&mut out, &topic);
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
    }
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    out
}

/// The fields every value version starts with, fixed width in each.
fn put_value_head(out: &mut Vec<u8>, version: i16, meta: &TxnMetadata) {
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&meta.producer_id.to_be_bytes());
    out.extend_from_slice(&meta.producer_epoch.to_be_bytes());
    out.extend_from_slice(&meta.timeout_ms.to_be_bytes());
    out.push(meta.state.id() as u8);
}

fn put_unsigned_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_compact_str(out: &mut Vec<u8>, s: &str) {
    put_unsigned_varint(out, s.len() as u32 + 1);
    out.extend_from_slice(s.as_bytes());
}

/// `TransactionLogValue` v1: compact strings and arrays, and the tagged
/// fields of transactions v2 that differ from Kafka's defaults.
fn encode_value_v1(meta: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(80);
    put_value_head(&mut out, VALUE_VERSION_TV2, meta);
    if meta.state == TxnState::Empty && meta.partitions.is_empty() {
        put_unsigned_varint(&mut out, 0);
    } else {
        let topics = group_by_topic(&meta.partitions);
        put_unsigned_varint(&mut out, topics.len() as u32 + 1);
        for (topic, partitions) in topics {
            put_compact_str(&mut out, &topic);
            put_unsigned_varint(&mut out, partitions.len() as u32 + 1);
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
            put_unsigned_varint(&mut out, 0);
        }
    }
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    let defaults = Tv2Fields::default();
    let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
    if meta.tv2.previous_producer_id != defaults.previous_producer_id {
        tagged.push((0, meta.tv2.previous_producer_id.to_be_bytes().to_vec()));
    }
    if meta.tv2.next_producer_id != defaults.next_producer_id {
        tagged.push((1, meta.tv2.next_producer_id.to_be_bytes().to_vec()));
    }
    if meta.tv2.client_version != defaults.client_version {
        tagged.push((2, meta.tv2.client_version.to_be_bytes().to_vec()));
    }
    put_unsigned_varint(&mut out, tagged.len() as u32);
    for (tag, value) in tagged {
        put_unsigned_varint(&mut out, tag);
        put_unsigned_varint(&mut out, value.len() as u32);
        out.extend_from_slice(&value);
    }
    out
}

/// `(topic, partition)` pairs as topics with their partitions, by name.
pub fn group_by_topic(partitions: &BTreeSet<(String, i32)>) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic, partition) in partitions {
        match out.last_mut() {
            Some((last, list)) if last == topic => list.push(*partition),
            _ => out.push((topic.clone(), vec![*partition])),
        }
    }
    out
}

/// A big-endian reader over a record's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], TxnRecordError> {
        let end = self
            .position
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(TxnRecordError::Truncated(field))?;
        let out = &self.bytes[self.position..end];
        self.position = end;
        Ok(out)
    }

    fn i8(&mut self, field: &'static str) -> Result<i8, TxnRecordError> {
        Ok(self.take(1, field)?[0] as i8)
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, TxnRecordError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, TxnRecordError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, TxnRecordError> {
        let b = self.take(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn unsigned_varint(&mut self, field: &'static str) -> Result<u32, TxnRecordError> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1, field)?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(TxnRecordError::Truncated(field))
    }

    fn string(&mut self, flexible: bool, field: &'static str) -> Result<String, TxnRecordError> {
        let length = if flexible {
            (self.unsigned_varint(field)? as usize).saturating_sub(1)
        } else {
            self.i16(field)?.max(0) as usize
        };
        let bytes = self.take(length, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| TxnRecordError::BadString)
    }

    /// An array length; `None` for a null array.
    fn array_length(
        &mut self,
        flexible: bool,
        field: &'static str,
    ) -> Result<Option<usize>, TxnRecordError> {
        if flexible {
            let n = self.unsigned_varint(field)?;
            Ok(n.checked_sub(1).map(|n| n as usize))
        } else {
            let n = self.i32(field)?;
            Ok((n >= 0).then_some(n as usize))
        }
    }

    /// The value's top-level tagged fields: transactions v2's three are
    /// read, any other skipped.
    fn tv2_fields(&mut self) -> Result<Tv2Fields, TxnRecordError> {
        let mut fields = Tv2Fields::default();
        let count = self.unsigned_varint("tagged fields")?;
        for _ in 0..count {
            let tag = self.unsigned_varint("tag")?;
            let size = self.unsigned_varint("tag size")? as usize;
            let mut value = Reader {
                bytes: self.take(size, "tag value")?,
                position: 0,
            };
            match tag {
                0 => fields.previous_producer_id = value.i64("previous_producer_id")?,
                1 => fields.next_producer_id = value.i64("next_producer_id")?,
                2 => fields.client_version = value.i16("client_transaction_version")?,
                _ => {}
            }
        }
        Ok(fields)
    }

    fn skip_tagged_fields(&mut self) -> Result<(), TxnRecordError> {
        let count = self.unsigned_varint("tagged fields")?;
        for _ in 0..count {
            self.unsigned_varint("tag")?;
            let size = self.unsigned_varint("tag size")? as usize;
            self.take(size, "tag value")?;
        }
        Ok(())
    }
}

/// Decodes a `TransactionLogKey`: the transactional id.
pub fn decode_key(key: &[u8]) -> Result<String, TxnRecordError> {
    let mut reader = Reader {
        bytes: key,
        position: 0,
    };
    let version = reader.i16("key version")?;
    match version {
        0 => reader.string(false, "transactional_id"),
        1 => reader.string(true, "transactional_id"),
        version => Err(TxnRecordError::UnknownVersion {
            what: "key",
            version,
        }),
    }
}

/// Decodes any key of the log: Kafka's or rill's pending-offsets key.
pub fn decode_log_key(key: &[u8]) -> Result<TxnLogKey, TxnRecordError> {
    if key.len() >= 2 && i16::from_be_bytes([key[0], key[1]]) == PENDING_OFFSETS_KEY_VERSION {
        let mut reader = Reader {
            bytes: key,
            position: 2,
        };
        return Ok(TxnLogKey::PendingOffsets(
            reader.string(false, "transactional_id")?,
        ));
    }
    decode_key(key).map(TxnLogKey::State)
}

/// Encodes the key of rill's pending-offsets record.
pub fn encode_offsets_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&PENDING_OFFSETS_KEY_VERSION.to_be_bytes());
    put_str(&mut out, transactional_id);
    out
}

fn put_nullable_long_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(s) => {
            out.extend_from_slice(&(s.len() as i32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// Encodes the value of rill's pending-offsets record.
pub fn encode_offsets_value(pending: &PendingOffsets) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&PENDING_OFFSETS_VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&pending.producer_id.to_be_bytes());
    out.extend_from_slice(&pending.producer_epoch.to_be_bytes());
    out.extend_from_slice(&pending.start_ms.to_be_bytes());
    out.extend_from_slice(&(pending.groups.len() as i32).to_be_bytes());
    for (group, offsets) in &pending.groups {
        put_str(&mut out, group);
        out.extend_from_slice(&(offsets.len() as i32).to_be_bytes());
        for o in offsets {
            put_str(&mut out, &o.topic);
            out.extend_from_slice(&o.partition.to_be_bytes());
            out.extend_from_slice(&o.offset.to_be_bytes());
            out.extend_from_slice(&o.leader_epoch.to_be_bytes());
            put_nullable_long_str(&mut out, o.metadata.as_deref());
        }
    }
    out
}

/// Decodes the value of rill's pending-offsets record.
pub fn decode_offsets_value(value: &[u8]) -> Result<PendingOffsets, TxnRecordError> {
    let mut reader = Reader {
        bytes: value,
        position: 0,
    };
    let version = reader.i16("value version")?;
    if version != PENDING_OFFSETS_VALUE_VERSION {
        return Err(TxnRecordError::UnknownVersion {
            what: "pending offsets value",
            version,
        });
    }
    let producer_id = reader.i64("producer_id")?;
    let producer_epoch = reader.i16("producer_epoch")?;
    let start_ms = reader.i64("start_timestamp")?;
    let mut groups = BTreeMap::new();
    let group_count = reader.array_length(false, "groups")?.unwrap_or(0);
    for _ in 0..group_count {
        let group = reader.string(false, "group")?;
        let count = reader.array_length(false, "offsets")?.unwrap_or(0);
        // Bounded by the bytes left, not by the count read, so a corrupt
        // count cannot make a huge allocation.
        let mut offsets = Vec::with_capacity(count.min(value.len()));
        for _ in 0..count {
            let topic = reader.string(false, "topic")?;
            let partition = reader.i32("partition")?;
            let offset = reader.i64("offset")?;
            let leader_epoch = reader.i32("leader_epoch")?;
            let metadata = match reader.i32("metadata")? {
                n if n < 0 => None,
                n => {
                    let bytes = reader.take(n as usize, "metadata")?;
                    Some(String::from_utf8(bytes.to_vec()).map_err(|_| TxnRecordError::BadString)?)
                }
            };
            offsets.push(PendingOffset {
                topic,
                partition,
                offset,
                leader_epoch,
                metadata,
            });
        }
        groups.insert(group, offsets);
    }
    Ok(PendingOffsets {
        producer_id,
        producer_epoch,
        start_ms,
        groups,
    })
}

/// Decodes a `TransactionLogValue` v0 or v1.
pub fn decode_value(value: &[u8]) -> Result<TxnMetadata, TxnRecordError> {
    let mut reader = Reader {
        bytes: value,
        position: 0,
    };
    let version = reader.i16("value version")?;
    let flexible = match version {
        0 => false,
        1 => true,
        version => {
            return Err(TxnRecordError::UnknownVersion {
                what: "value",
                version,
            })
        }
    };
    let producer_id = reader.i64("producer_id")?;
    let producer_epoch = reader.i16("producer_epoch")?;
    let timeout_ms = reader.i32("transaction_timeout_ms")?;
    let state_id = reader.i8("state")?;
    let state = TxnState::from_id(state_id).ok_or(TxnRecordError::UnknownState(state_id))?;
    let mut partitions = BTreeSet::new();
    if let Some(topics) = reader.array_length(flexible, "partitions")? {
        for _ in 0..topics {
            let topic = reader.string(flexible, "topic")?;
            let count = reader.array_length(flexible, "partition ids")?.unwrap_or(0);
            for _ in 0..count {
                partitions.insert((topic.clone(), reader.i32("partition")?));
            }
            if flexible {
                reader.skip_tagged_fields()?;
            }
        }
    }
    let last_update_ms = reader.i64("last_update_timestamp")?;
    let start_ms = reader.i64("start_timestamp")?;
    let tv2 = if flexible {
        reader.tv2_fields()?
    } else {
        Tv2Fields::default()
    };
    Ok(TxnMetadata {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        start_ms,
        tv2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(state: TxnState) -> TxnMetadata {
        let mut partitions = BTreeSet::new();
        if state != TxnState::Empty {
            partitions.insert((String::from("a"), 0));
            partitions.insert((String::from("a"), 3));
            partitions.insert((String::from("b"), 1));
        }
        TxnMetadata {
            producer_id: 77,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state,
            partitions,
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
            tv2: Tv2Fields::default(),
        }
    }

    #[test]
    fn key_matches_kafka_bytes() {
        // Kafka: version 0 (00 00), string length 2 (00 02), "tx".
        assert_eq!(encode_key("tx"), vec![0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(&encode_key("my-txn")).as_deref(), Ok("my-txn"));
    }

    #[test]
    fn values_round_trip_in_every_state() {
        for id in 0..=7 {
            let state = TxnState::from_id(id).expect("state");
            let meta = sample(state);
            assert_eq!(decode_value(&encode_value(&meta)), Ok(meta));
        }
    }

    #[test]
    fn empty_state_writes_a_null_partition_list() {
        let bytes = encode_value(&sample(TxnState::Empty));
        // version 2 + pid 8 + epoch 2 + timeout 4 + state 1 = 17, then -1.
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes());
        assert_eq!(bytes.len(), 21 + 16);
    }

    #[test]
    fn flexible_v1_is_read() {
        let mut v = Vec::new();
        v.extend_from_slice(&1i16.to_be_bytes());
        v.extend_from_slice(&5i64.to_be_bytes());
        v.extend_from_slice(&2i16.to_be_bytes());
        v.extend_from_slice(&1000i32.to_be_bytes());
        v.push(1); // Ongoing
        v.push(2); // one topic (compact: n + 1)
        v.push(2); // "t" (compact: len + 1)
        v.push(b't');
        v.push(3); // two partitions
        v.extend_from_slice(&4i32.to_be_bytes());
        v.extend_from_slice(&9i32.to_be_bytes());
        v.push(0); // topic tagged fields
        v.extend_from_slice(&10i64.to_be_bytes());
        v.extend_from_slice(&8i64.to_be_bytes());
        v.push(0); // tagged fields
        let meta = decode_value(&v).expect("v1");
        assert_eq!(meta.state, TxnState::Ongoing);
        assert_eq!(meta.partitions.len(), 2);
        assert_eq!(meta.start_ms, 8);
    }

    #[test]
    fn pending_offsets_round_trip_and_keep_apart_from_state_keys() {
        let mut groups = BTreeMap::new();
        groups.insert(
            String::from("g"),
            vec![
                PendingOffset {
                    topic: String::from("in"),
                    partition: 2,
                    offset: 42,
                    leader_epoch: 7,
                    metadata: Some(String::from("meta")),
                },
                PendingOffset {
                    topic: String::from("in"),
                    partition: 3,
                    offset: 9,
                    leader_epoch: -1,
                    metadata: None,
                },
            ],
        );
        let pending = PendingOffsets {
            producer_id: 5,
            producer_epoch: 1,
            start_ms: 1_700_000_000_000,
            groups,
        };
        assert_eq!(
            decode_offsets_value(&encode_offsets_value(&pending)),
            Ok(pending.clone())
        );
        assert_eq!(
            decode_log_key(&encode_offsets_key("t")),
            Ok(TxnLogKey::PendingOffsets(String::from("t")))
        );
        assert_eq!(
            decode_log_key(&encode_key("t")),
            Ok(TxnLogKey::State(String::from("t")))
        );
        let bytes = encode_offsets_value(&pending);
        for cut in 0..bytes.len() {
            assert!(decode_offsets_value(&bytes[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn transactions_v2_fields_make_a_flexible_value_that_round_trips() {
        assert_eq!(encode_value(&sample(TxnState::Ongoing))[..2], [0, 0]);
        for id in 0..=7 {
            let mut meta = sample(TxnState::from_id(id).expect("state"));
            meta.tv2 = Tv2Fields {
                previous_producer_id: 76,
                next_producer_id: 78,
                client_version: 2,
            };
            let bytes = encode_value(&meta);
            assert_eq!(bytes[..2], [0, 1], "version 1");
            assert_eq!(decode_value(&bytes), Ok(meta.clone()));
            for cut in 0..bytes.len() {
                assert!(decode_value(&bytes[..cut]).is_err(), "cut {cut}");
            }
            // Only the fields that differ from Kafka's defaults are tagged.
            meta.tv2.previous_producer_id = -1;
            meta.tv2.next_producer_id = -1;
            let short = encode_value(&meta);
            assert_eq!(short.len() + 2 * 10, bytes.len());
            assert_eq!(decode_value(&short), Ok(meta));
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_value(&[0, 0, 1]).is_err());
        assert!(decode_value(&[0, 9]).is_err());
        assert!(decode_key(&[]).is_err());
        let mut bad = encode_value(&sample(TxnState::Ongoing));
        bad[16] = 42;
        assert_eq!(decode_value(&bad), Err(TxnRecordError::UnknownState(42)));
    }
}
