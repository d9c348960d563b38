//! Request versions Kafka 3.9 still accepts but Kafka 4.0 dropped (KIP-896),
//! which the `kafka-protocol` crate (4.x schemas) no longer encodes or
//! decodes: a few hand-written layouts, each converted to and from the
//! crate's types of the nearest later version so the handler stays one.
//!
//! Where an old layout equals a later one the handler simply uses
//! [`super::Request::decode_as`] / [`super::Request::respond_as`]; where it
//! only lacks a trailing request field or the leading `throttle_time_ms` of
//! the response, [`with_trailing_false`] and [`without_throttle`] bridge it;
//! the rest is decoded and encoded here, one file per API.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Encodable, StrBytes};

pub mod create_topics;
pub mod describe_configs;
pub mod list_offsets;
pub mod offset_commit;
pub mod offset_for_leader_epoch;

/// A hand-decoded body that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The body ended inside a field.
    #[error("body ends inside {0}")]
    Short(&'static str),
    /// A string is not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A negative length where null is not allowed.
    #[error("{0} has a negative length")]
    NegativeLength(&'static str),
    /// Bytes left after the last field.
    #[error("{0} bytes after the body")]
    Trailing(usize),
}

/// The lowest version of `api_key` served through this module, for the
/// APIs whose old versions the codec lacks.
pub fn lowest_version(api_key: ApiKey) -> Option<i16> {
    match api_key {
        ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::ListOffsets
        | ApiKey::CreateTopics
        | ApiKey::DeleteTopics
        | ApiKey::DescribeConfigs
        | ApiKey::DescribeLogDirs
        | ApiKey::AlterReplicaLogDirs
        | ApiKey::OffsetForLeaderEpoch => Some(0),
        _ => None,
    }
}

/// `body` with a `false` appended: an old request that is a later version
/// minus its last field, a boolean whose absence means false
/// (CreateTopics v0's `validate_only`, DescribeConfigs v0's `include_synonyms`).
pub fn with_trailing_false(body: &Bytes) -> Bytes {
    let mut out = BytesMut::with_capacity(body.len() + 1);
    out.put_slice(body);
    out.put_u8(0);
    out.freeze()
}

/// `body` encoded as `layout_version` without its leading
/// `throttle_time_ms`: an old response that is a later version minus that
/// first field (DeleteTopics v0).
pub fn without_throttle<T: Encodable>(body: &T, layout_version: i16) -> Result<Bytes, String> {
    let mut out = BytesMut::new();
    body.encode(&mut out, layout_version)
        .map_err(|e| e.to_string())?;
    if out.len() < 4 {
        return Err(String::from("response shorter than its throttle time"));
    }
    Ok(out.split_off(4).freeze())
}

/// Reads the fields of a non-flexible (pre-KIP-482) body.
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    /// Reads `buf` from its start.
    pub fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), WireError> {
        if self.buf.remaining() < n {
            return Err(WireError::Short(what));
        }
        Ok(())
    }

    /// An INT16.
    pub fn i16(&mut self, what: &'static str) -> Result<i16, WireError> {
        self.need(2, what)?;
        Ok(self.buf.get_i16())
    }

    /// An INT32.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        self.need(4, what)?;
        Ok(self.buf.get_i32())
    }

    /// An INT64.
    pub fn i64(&mut self, what: &'static str) -> Result<i64, WireError> {
        self.need(8, what)?;
        Ok(self.buf.get_i64())
    }

    /// A NULLABLE_STRING (`None` for length -1).
    pub fn nullable_string(&mut self, what: &'static str) -> Result<Option<StrBytes>, WireError> {
        let len = self.i16(what)?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        self.need(len, what)?;
        let bytes = self.buf.split_to(len);
        StrBytes::from_utf8(bytes)
            .map(Some)
            .map_err(|_| WireError::NotUtf8(what))
    }

    /// A STRING.
    pub fn string(&mut self, what: &'static str) -> Result<StrBytes, WireError> {
        self.nullable_string(what)?
            .ok_or(WireError::NegativeLength(what))
    }

    /// An ARRAY's element count; -1 (null) is refused.
    pub fn array_len(&mut self, what: &'static str) -> Result<usize, WireError> {
        let len = self.i32(what)?;
        usize::try_from(len).map_err(|_| WireError::NegativeLength(what))
    }

    /// An ARRAY of `read`, each element at least `min_element_bytes` long
    /// (so a forged count cannot reserve more than the body could hold).
    pub fn array<T>(
        &mut self,
        what: &'static str,
        min_element_bytes: usize,
        mut read: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let len = self.array_len(what)?;
        self.need(len.saturating_mul(min_element_bytes), what)?;
        let mut out = Vec::with_capacity(len);
        for _ in 0..len {
            out.push(read(self)?);
        }
        Ok(out)
    }

    /// Fails when bytes are left over.
    pub fn finish(self) -> Result<(), WireError> {
        match self.buf.remaining() {
            0 => Ok(()),
            n => Err(WireError::Trailing(n)),
        }
    }
}

/// Writes the fields of a non-flexible body.
#[derive(Default)]
pub struct Writer {
    out: BytesMut,
}

impl Writer {
    /// An INT8.
    pub fn i8(&mut self, v: i8) {
        self.out.put_i8(v);
    }

    /// A BOOLEAN.
    pub fn bool(&mut self, v: bool) {
        self.out.put_u8(u8::from(v));
    }

    /// An INT16.
    pub fn i16(&mut self, v: i16) {
        self.out.put_i16(v);
    }

    /// An INT32.
    pub fn i32(&mut self, v: i32) {
        self.out.put_i32(v);
    }

    /// An INT64.
    pub fn i64(&mut self, v: i64) {
        self.out.put_i64(v);
    }

    /// A STRING (truncated at 32767 bytes, the format's limit).
    pub fn string(&mut self, v: &str) {
        let bytes = &v.as_bytes()[..v.len().min(i16::MAX as usize)];
        self.out.put_i16(bytes.len() as i16);
        self.out.put_slice(bytes);
    }

    /// A NULLABLE_STRING.
    pub fn nullable_string(&mut self, v: Option<&str>) {
        match v {
            Some(v) => self.string(v),
            None => self.out.put_i16(-1),
        }
    }

    /// An ARRAY's element count.
    pub fn array_len(&mut self, len: usize) {
        self.out.put_i32(i32::try_from(len).unwrap_or(i32::MAX));
    }

    /// The body written so far.
    pub fn finish(self) -> Bytes {
        self.out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_array_count_is_refused_before_allocating() {
        let mut body = BytesMut::new();
        body.put_i32(i32::MAX);
        let mut r = Reader::new(body.freeze());
        assert!(r.array("topics", 4, |r| r.i32("x")).is_err());
    }

    #[test]
    fn strings_round_trip_and_null_is_told_apart() {
        let mut w = Writer::default();
        w.string("group");
        w.nullable_string(None);
        let mut r = Reader::new(w.finish());
        assert_eq!(r.string("a").unwrap().as_str(), "group");
        assert!(r.nullable_string("b").unwrap().is_none());
        r.finish().unwrap();
    }
}
