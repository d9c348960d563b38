//! A Produce request's envelope, scanned as its bytes arrive.
//!
//! The connection reads a large Produce request apart (`connection::scatter`):
//! the header and the fields around each partition's records as they come,
//! and each partition's records into a buffer of their own. This scanner
//! tells which is which, a step at a time, over whatever bytes have
//! arrived; it keeps no bytes itself. It checks only what it needs to find
//! the records: the handler still decodes the envelope (with the records
//! fields emptied) with the full decoder, which judges everything else.
//!
//! Layout (Produce v3–v13): the request header (v1, or v2 with tagged
//! fields from v9), `transactional_id`, `acks`, `timeout_ms`, then topics
//! (a name, or from v13 an id), each with partitions (an index and the
//! records); flexible versions (v9+) use compact lengths and end each
//! partition, topic and the request with tagged fields.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::ProduceRequest;
use thiserror::Error;

/// A request the scanner cannot follow; the connection closes, as it does
/// for any request that does not decode.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ScanError {
    /// A length or count that no valid request holds.
    #[error("malformed produce request: {0}")]
    Malformed(&'static str),
    /// The records read apart do not match the decoded partitions.
    #[error("produce request: {partitions} partitions decoded, {records} records read")]
    RecordsMismatch { partitions: usize, records: usize },
}

/// What the bytes at the front of the input are.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Not enough bytes to tell: read more, then scan the same input again
    /// with the new bytes after it.
    More,
    /// The first `n` bytes are envelope: keep them as they are.
    Envelope(usize),
    /// A partition's records follow: the first `head` bytes are envelope
    /// (the partition's index), then a records length field `length_bytes`
    /// long, then `records` bytes of records (`None`: null records, no
    /// bytes follow).
    Records {
        head: usize,
        length_bytes: usize,
        records: Option<usize>,
        partition: i32,
    },
    /// The envelope is complete: nothing of the request is left.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Body,
    TopicHead,
    PartitionHead,
    PartitionEnd,
    TopicEnd,
    RequestEnd,
    Done,
}

/// The scanner's place in one request.
#[derive(Debug)]
pub struct Scanner {
    version: i16,
    stage: Stage,
    topics_left: usize,
    partitions_left: usize,
    /// The topic whose partitions are being scanned (empty from v13,
    /// which names topics by id).
    topic: String,
    /// Its id, from v13.
    topic_id: Option<[u8; 16]>,
}

/// First version with compact lengths and tagged fields (header v2).
const FLEXIBLE_VERSION: i16 = 9;
/// First version naming topics by id.
const TOPIC_ID_VERSION: i16 = 13;

impl Scanner {
    /// A scanner for a Produce request of `version` (3–13), from its first
    /// byte (the API key).
    pub fn new(version: i16) -> Scanner {
        Scanner {
            version,
            stage: Stage::Header,
            topics_left: 0,
            partitions_left: 0,
            topic: String::new(),
            topic_id: None,
        }
    }

    /// Whether the scanner follows this version.
    pub fn scans(version: i16) -> bool {
        (3..=TOPIC_ID_VERSION).contains(&version)
    }

    /// The topic of the partition last reported in [`Step::Records`] (empty
    /// for v13 requests).
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Its id, in v13 requests.
    pub fn topic_id(&self) -> Option<[u8; 16]> {
        self.topic_id
    }

    fn flexible(&self) -> bool {
        self.version >= FLEXIBLE_VERSION
    }

    /// The next step over `input`, the request's bytes from the scanner's
    /// place on. After [`Step::Envelope`] or [`Step::Records`], the caller
    /// moves past those bytes before the next call.
    pub fn step(&mut self, input: &[u8]) -> Result<Step, ScanError> {
        let mut cursor = Cursor { input, at: 0 };
        match self.scan(&mut cursor) {
            Ok(step) => Ok(step),
            Err(Stop::More) => Ok(Step::More),
            Err(Stop::Bad(e)) => Err(e),
        }
    }

    fn scan(&mut self, c: &mut Cursor) -> Result<Step, Stop> {
        let flexible = self.flexible();
        let next = match self.stage {
            Stage::Header => {
                c.skip(8)?; // API key, version, correlation id
                c.nullable_string()?; // client id (never compact)
                if flexible {
                    c.tagged_fields()?;
                }
                Stage::Body
            }
            Stage::Body => {
                if flexible {
                    c.compact_nullable_string()?;
                } else {
                    c.nullable_string()?;
                }
                c.skip(6)?; // acks, timeout_ms
                self.topics_left = c.array_length(flexible)?;
                self.after_array(self.topics_left, Stage::TopicHead, Stage::RequestEnd)
            }
            Stage::TopicHead => {
                let (topic, topic_id) = if self.version >= TOPIC_ID_VERSION {
                    let id: [u8; 16] = c.take(16)?.try_into().map_err(|_| bad("topic id"))?;
                    (String::new(), Some(id))
                } else if flexible {
                    (c.compact_string()?, None)
                } else {
                    (c.string()?, None)
                };
                self.partitions_left = c.array_length(flexible)?;
                (self.topic, self.topic_id) = (topic, topic_id);
                self.after_array(self.partitions_left, Stage::PartitionHead, Stage::TopicEnd)
            }
            Stage::PartitionHead => return self.partition_head(c),
            Stage::PartitionEnd => {
                if flexible {
                    c.tagged_fields()?;
                }
                self.partitions_left -= 1;
                self.after_array(self.partitions_left, Stage::PartitionHead, Stage::TopicEnd)
            }
            Stage::TopicEnd => {
                if flexible {
                    c.tagged_fields()?;
                }
                self.topics_left -= 1;
                self.after_array(self.topics_left, Stage::TopicHead, Stage::RequestEnd)
            }
            Stage::RequestEnd => {
                if flexible {
                    c.tagged_fields()?;
                }
                Stage::Done
            }
            Stage::Done => return Ok(Step::Done),
        };
        self.stage = next;
        Ok(Step::Envelope(c.at))
    }

    fn after_array(&self, left: usize, each: Stage, after: Stage) -> Stage {
        if left > 0 {
            each
        } else {
            after
        }
    }

    /// A partition's index and records length.
    fn partition_head(&mut self, c: &mut Cursor) -> Result<Step, Stop> {
        let partition = c.i32()?;
        let head = c.at;
        let records = if self.flexible() {
            match c.uvarint()? {
                0 => None,
                n => Some(n as usize - 1),
            }
        } else {
            match c.i32()? {
                -1 => None,
                n => Some(usize::try_from(n).map_err(|_| bad("negative records length"))?),
            }
        };
        self.stage = Stage::PartitionEnd;
        Ok(Step::Records {
            head,
            length_bytes: c.at - head,
            records,
            partition,
        })
    }
}

/// What to do next while splitting a request (see [`Splitter::advance`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Read more of the request.
    Read,
    /// The next `length` bytes of the request are `partition`'s records
    /// (of [`Splitter::topic`]): read them into a buffer of their own, and
    /// hand it to [`Splitter::push_records`].
    Records { length: usize, partition: i32 },
    /// The envelope is complete.
    Done,
}

/// A Produce request taken apart as it arrives: the envelope, with every
/// records field emptied, and each partition's records on their own.
#[derive(Debug)]
pub struct Splitter {
    scanner: Scanner,
    envelope: BytesMut,
    /// Per partition in request order: its records, `None` where null.
    records: Vec<Option<BytesMut>>,
}

impl Splitter {
    /// A splitter for a Produce request of `version` (see [`Scanner::scans`]).
    pub fn new(version: i16) -> Splitter {
        Splitter {
            scanner: Scanner::new(version),
            envelope: BytesMut::new(),
            records: Vec::new(),
        }
    }

    /// The topic of the partition of the last [`Next::Records`] (empty
    /// from v13, see [`Splitter::topic_id`]).
    pub fn topic(&self) -> &str {
        self.scanner.topic()
    }

    /// Its id, in v13 requests.
    pub fn topic_id(&self) -> Option<[u8; 16]> {
        self.scanner.topic_id()
    }

    /// Takes the envelope bytes at the front of `pending` (the request's
    /// bytes read and not yet taken), up to the next records, the end of
    /// what `pending` holds, or the end of the request.
    pub fn advance(&mut self, pending: &mut BytesMut) -> Result<Next, ScanError> {
        loop {
            match self.scanner.step(pending)? {
                Step::More => return Ok(Next::Read),
                Step::Envelope(n) => {
                    self.envelope.extend_from_slice(&pending[..n]);
                    pending.advance(n);
                }
                Step::Records {
                    head,
                    length_bytes,
                    records,
                    partition,
                } => {
                    let field = head + length_bytes;
                    self.envelope.extend_from_slice(&pending[..head]);
                    let Some(length) = records else {
                        self.envelope.extend_from_slice(&pending[head..field]);
                        pending.advance(field);
                        self.records.push(None);
                        continue;
                    };
                    self.envelope
                        .extend_from_slice(empty_records_field(self.scanner.version));
                    pending.advance(field);
                    return Ok(Next::Records { length, partition });
                }
                Step::Done => return Ok(Next::Done),
            }
        }
    }

    /// The records of the partition of the last [`Next::Records`].
    pub fn push_records(&mut self, records: BytesMut) {
        self.records.push(Some(records));
    }

    /// The envelope (as a frame whose records are all empty) and the
    /// records, once [`Next::Done`].
    pub fn finish(self) -> (Bytes, Vec<Option<BytesMut>>) {
        (self.envelope.freeze(), self.records)
    }
}

/// Puts the records read apart back into the request decoded from the
/// envelope, partition by partition in request order.
pub fn restore_records(
    request: &mut ProduceRequest,
    records: Vec<Option<BytesMut>>,
) -> Result<(), ScanError> {
    let partitions: usize = request
        .topic_data
        .iter()
        .map(|t| t.partition_data.len())
        .sum();
    if partitions != records.len() {
        return Err(ScanError::RecordsMismatch {
            partitions,
            records: records.len(),
        });
    }
    let slots = request
        .topic_data
        .iter_mut()
        .flat_map(|t| t.partition_data.iter_mut());
    for (partition, records) in slots.zip(records) {
        partition.records = records.map(BytesMut::freeze);
    }
    Ok(())
}

/// The records length field of an empty (not null) records value, as the
/// envelope keeps it in place of the real one.
pub fn empty_records_field(version: i16) -> &'static [u8] {
    if version >= FLEXIBLE_VERSION {
        &[1]
    } else {
        &[0, 0, 0, 0]
    }
}

/// Why a scan stopped short.
enum Stop {
    More,
    Bad(ScanError),
}

fn bad(what: &'static str) -> Stop {
    Stop::Bad(ScanError::Malformed(what))
}

/// Reads over the input; running out of bytes is [`Stop::More`].
struct Cursor<'a> {
    input: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Stop> {
        let end = self
            .at
            .checked_add(n)
            .ok_or_else(|| bad("length overflows"))?;
        let bytes = self.input.get(self.at..end).ok_or(Stop::More)?;
        self.at = end;
        Ok(bytes)
    }

    fn skip(&mut self, n: usize) -> Result<(), Stop> {
        self.take(n).map(drop)
    }

    fn i16(&mut self) -> Result<i16, Stop> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, Stop> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn uvarint(&mut self) -> Result<u32, Stop> {
        let mut value = 0u32;
        for i in 0..5 {
            let byte = self.take(1)?[0];
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(bad("varint longer than 5 bytes"))
    }

    fn nullable_string(&mut self) -> Result<(), Stop> {
        match self.i16()? {
            -1 => Ok(()),
            n => self.skip(usize::try_from(n).map_err(|_| bad("negative string length"))?),
        }
    }

    fn string(&mut self) -> Result<String, Stop> {
        let n = usize::try_from(self.i16()?).map_err(|_| bad("negative string length"))?;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    fn compact_nullable_string(&mut self) -> Result<(), Stop> {
        match self.uvarint()? {
            0 => Ok(()),
            n => self.skip(n as usize - 1),
        }
    }

    fn compact_string(&mut self) -> Result<String, Stop> {
        let n = self
            .uvarint()?
            .checked_sub(1)
            .ok_or_else(|| bad("null topic name"))?;
        Ok(String::from_utf8_lossy(self.take(n as usize)?).into_owned())
    }

    /// An array's element count; a null array counts as empty (the
    /// decoder judges it).
    fn array_length(&mut self, compact: bool) -> Result<usize, Stop> {
        if compact {
            return Ok((self.uvarint()? as usize).saturating_sub(1));
        }
        Ok(usize::try_from(self.i32()?).unwrap_or(0))
    }

    fn tagged_fields(&mut self) -> Result<(), Stop> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?; // tag
            let size = self.uvarint()?;
            self.skip(size as usize)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
