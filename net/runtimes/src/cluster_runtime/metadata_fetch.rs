//! FetchMetadata: how a broker-only node (an observer of the metadata
//! quorum) learns the committed metadata from a voter, over the controller
//! listener.
//!
//! The observer sends a `KIND_FETCH_METADATA` frame whose body is the JSON
//! [`FetchMetadata`] (the metadata offset it has applied). Any voter
//! answers — not only the active controller, since what it sends is
//! committed and so the same on every voter — with one `KIND_METADATA`
//! frame:
//!
//! ```text
//! header length: u32 BE
//! header:        JSON MetadataHeader (leader, term, commit index, up to
//!                date, delta)
//! body:          the rest: empty when up to date; for a delta, the records
//!                applied since the asker's offset, each its offset (i64 BE)
//!                and its record frame (codec.rs: u32 BE length first);
//!                else MetadataImage::encode_snapshot's bytes
//! ```
//!
//! The voter answers as soon as its applied offset is past the asker's,
//! and otherwise waits up to [`LONG_POLL`] for a change before answering
//! "up to date" (a long poll: the observer hears of a change within one
//! publication, without polling in a loop).
//!
//! Deltas (issue #33): an observer that asks for them gets the records
//! applied since its offset, up to [`DELTA_MAX_BYTES`] per answer, when
//! the voter still keeps them (`MetadataMachine::records_after`, the last
//! few MiB of records); else, and after a snapshot was installed on the
//! voter, the whole image. The whole image is ~600 KB for 10 brokers and
//! 10 000 partitions (snapshot.rs), sent to every observer at every
//! change; a delta is the few records that changed. An observer that
//! cannot apply a delta (a bug, or records it does not know) asks for the
//! whole image next time.
//!
//! The snapshot is binary after a JSON header, not inside the JSON: serde
//! would spell each byte as a decimal number (~3.5× the size).

use super::view::QuorumStatus;
use crate::Shard;
use cluster::metadata::{MetadataImage, MetadataRecord};
use serde::{Deserialize, Serialize};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a voter holds a FetchMetadata of an up-to-date observer before
/// answering "up to date". Short enough that the observer soon learns of a
/// new controller (the reply carries the leader), long enough that an idle
/// cluster costs two small round trips a second per observer.
pub const LONG_POLL: Duration = Duration::from_millis(500);

/// The most record bytes in one delta answer: an observer far behind takes
/// several answers, each a bounded piece of work on both sides.
pub const DELTA_MAX_BYTES: usize = 1 << 20;

/// Answers of each kind this process took as an observer: (deltas, whole
/// images), for `/metrics`.
pub static OBSERVED_DELTAS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// See [`OBSERVED_DELTAS`].
pub static OBSERVED_IMAGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// An observer's request for the committed metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchMetadata {
    /// The observer's `node.id` (for the voter's logs).
    pub node_id: i32,
    /// The highest metadata offset the observer has applied (-1: none).
    pub applied_offset: i64,
    /// It takes the records since its offset rather than the whole image
    /// (absent from an older observer's request: no).
    #[serde(default)]
    pub deltas: bool,
}

/// What a voter knows of the quorum, sent with every answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataHeader {
    /// The active controller's node id, if the voter knows it.
    pub leader_id: Option<i32>,
    /// The Raft term.
    pub term: u64,
    /// The voter's commit index.
    pub commit_index: u64,
    /// The voter's applied offset is not past the asker's: no image follows.
    pub up_to_date: bool,
    /// The body is the records since the asker's offset, not an image.
    #[serde(default)]
    pub delta: bool,
}

/// A voter's answer: the header and, unless up to date, the records since
/// the asker's offset or the image's snapshot bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataReply {
    /// What the voter knows of the quorum.
    pub header: MetadataHeader,
    /// A delta's records (see the module doc), or
    /// `MetadataImage::encode_snapshot` bytes; empty when up to date.
    pub body: Vec<u8>,
}

impl MetadataReply {
    /// The reply's frame body (see the module doc).
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let header = serde_json::to_vec(&self.header).map_err(|e| e.to_string())?;
        let length = u32::try_from(header.len()).map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(4 + header.len() + self.body.len());
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.body);
        Ok(out)
    }

    /// Reads a frame body; short or bad bytes are an error, never a panic.
    pub fn decode(body: &[u8]) -> Result<MetadataReply, String> {
        let (length, rest) = body
            .split_first_chunk::<4>()
            .ok_or_else(|| String::from("metadata reply shorter than its header length"))?;
        let length = u32::from_be_bytes(*length) as usize;
        if rest.len() < length {
            return Err(format!(
                "metadata reply header of {length} bytes, {} present",
                rest.len()
            ));
        }
        let (header, body) = rest.split_at(length);
        let header: MetadataHeader = serde_json::from_slice(header).map_err(|e| e.to_string())?;
        if header.up_to_date != body.is_empty() {
            return Err(String::from(
                "a metadata reply carries an image or records exactly when not up to date",
            ));
        }
        Ok(MetadataReply {
            header,
            body: body.to_vec(),
        })
    }

    /// The records of a delta, as (offset, record), in order.
    pub fn records(&self) -> Result<Vec<(i64, MetadataRecord)>, String> {
        let mut records = Vec::new();
        let mut rest = self.body.as_slice();
        while !rest.is_empty() {
            let (offset, after) = rest
                .split_first_chunk::<8>()
                .ok_or_else(|| String::from("a delta record without its offset"))?;
            let (length, _) = after
                .split_first_chunk::<4>()
                .ok_or_else(|| String::from("a delta record without its length"))?;
            let frame_bytes = 4 + u32::from_be_bytes(*length) as usize;
            if after.len() < frame_bytes {
                return Err(String::from("a delta record cut short"));
            }
            let (frame, next) = after.split_at(frame_bytes);
            let record = MetadataRecord::decode(frame).map_err(|e| format!("delta record: {e}"))?;
            records.push((i64::from_be_bytes(*offset), record));
            rest = next;
        }
        Ok(records)
    }

    /// The image the reply carries; `Ok(None)` when up to date or a delta.
    pub fn image(&self) -> Result<Option<MetadataImage>, String> {
        if self.header.up_to_date || self.header.delta {
            return Ok(None);
        }
        MetadataImage::decode_snapshot(&self.body)
            .map(Some)
            .map_err(|e| format!("metadata snapshot refused: {e}"))
    }
}

/// A voter answers `request` (on the metadata shard): at once when its
/// image is past the asker's offset, else after the next publication or
/// [`LONG_POLL`], whichever comes first.
pub async fn answer(shard: &Rc<Shard>, request: &FetchMetadata) -> MetadataReply {
    let view = shard.runtime().view.clone();
    let deadline = Instant::now() + LONG_POLL;
    loop {
        // The view on the metadata shard is installed synchronously by the
        // quorum's pump, so it is the quorum's latest committed image.
        let (sequence, image, status) = view.current();
        if image.last_applied_offset() > request.applied_offset {
            if let Some(delta) = delta_reply(shard, request, &status) {
                return delta;
            }
            tracing::debug!(
                observer = request.node_id,
                offset = image.last_applied_offset(),
                "sending the metadata image to an observer"
            );
            return reply(&status, Some(&image));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return reply(&status, None);
        }
        let _ = glommio::timer::timeout(left, async {
            view.newer_than(sequence).await;
            Ok(())
        })
        .await;
    }
}

fn reply(status: &QuorumStatus, image: Option<&Arc<MetadataImage>>) -> MetadataReply {
    MetadataReply {
        header: header_of(status, image.is_none(), false),
        body: image
            .map(|image| image.encode_snapshot())
            .unwrap_or_default(),
    }
}

fn header_of(status: &QuorumStatus, up_to_date: bool, delta: bool) -> MetadataHeader {
    MetadataHeader {
        leader_id: status.leader_id,
        term: status.term,
        commit_index: status.commit_index,
        up_to_date,
        delta,
    }
}

/// The records since the asker's offset, when it takes deltas and this
/// voter still keeps them all; `None` for the whole image.
fn delta_reply(
    shard: &Rc<Shard>,
    request: &FetchMetadata,
    status: &QuorumStatus,
) -> Option<MetadataReply> {
    if !request.deltas {
        return None;
    }
    let quorum = shard.runtime().quorum.clone()?;
    let body = quorum.records_after(request.applied_offset, DELTA_MAX_BYTES)?;
    (!body.is_empty()).then(|| MetadataReply {
        header: header_of(status, false, true),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::metadata::{Endpoint, MetadataRecord};

    fn header(up_to_date: bool) -> MetadataHeader {
        MetadataHeader {
            leader_id: Some(2),
            term: 7,
            commit_index: 41,
            up_to_date,
            delta: false,
        }
    }

    #[test]
    fn an_image_travels_as_snapshot_bytes_after_a_json_header() {
        let mut image = MetadataImage::new();
        let record = MetadataRecord::RegisterBroker {
            broker_id: 4,
            incarnation_id: [9; 16],
            broker_epoch: 12,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            rack: None,
            features: cluster::metadata::features::supported_by_this_binary(),
        };
        image.apply(12, &record).unwrap();
        let sent = MetadataReply {
            header: header(false),
            body: image.encode_snapshot(),
        };
        let body = sent.encode().unwrap();
        let received = MetadataReply::decode(&body).unwrap();
        assert_eq!(received, sent);
        let decoded = received.image().unwrap().unwrap();
        assert_eq!(decoded, image);
        assert_eq!(decoded.last_applied_offset(), 12);
        assert!(decoded.broker(4).is_some());
    }

    #[test]
    fn up_to_date_has_no_image_and_bad_bytes_are_errors() {
        let sent = MetadataReply {
            header: header(true),
            body: Vec::new(),
        };
        let body = sent.encode().unwrap();
        assert_eq!(MetadataReply::decode(&body).unwrap().image(), Ok(None));
        // Every truncation is refused, none panics.
        for cut in 0..body.len() {
            assert!(MetadataReply::decode(&body[..cut]).is_err(), "cut at {cut}");
        }
        // An image where none belongs, and a header claiming more bytes.
        let mut extra = body.clone();
        extra.push(1);
        assert!(MetadataReply::decode(&extra).is_err());
        let mut long = body;
        long[3] = 200;
        assert!(MetadataReply::decode(&long).is_err());
        // Damaged snapshot bytes decode as a reply but not as an image.
        let damaged = MetadataReply {
            header: header(false),
            body: b"RLMS junk".to_vec(),
        };
        let reply = MetadataReply::decode(&damaged.encode().unwrap()).unwrap();
        assert!(reply.image().is_err());
    }

    #[test]
    fn a_delta_carries_records_with_their_offsets_and_cut_ones_are_errors() {
        let records = [
            (5i64, MetadataRecord::RemoveTopic { topic_id: [1; 16] }),
            (
                9,
                MetadataRecord::FeatureLevel {
                    name: "group.version".into(),
                    level: 0,
                },
            ),
        ];
        let mut body = Vec::new();
        for (offset, record) in &records {
            body.extend_from_slice(&offset.to_be_bytes());
            body.extend_from_slice(&record.encode());
        }
        let mut delta_header = header(false);
        delta_header.delta = true;
        let sent = MetadataReply {
            header: delta_header,
            body,
        };
        let received = MetadataReply::decode(&sent.encode().unwrap()).unwrap();
        assert_eq!(received.records().unwrap(), records.to_vec());
        assert_eq!(received.image(), Ok(None));
        // Every cut but the one between the records (a shorter delta).
        let first = 8 + records[0].1.encode().len();
        for cut in (1..sent.body.len()).filter(|&cut| cut != first) {
            let short = MetadataReply {
                header: sent.header.clone(),
                body: sent.body[..cut].to_vec(),
            };
            assert!(short.records().is_err(), "cut at {cut}");
        }
        // An older observer's request (no `deltas`) reads as not taking them.
        let older: FetchMetadata =
            super::super::rpc::decode(br#"{"node_id":4,"applied_offset":7}"#).unwrap();
        assert!(!older.deltas);
    }

    #[test]
    fn the_request_is_json() {
        let request = FetchMetadata {
            node_id: 4,
            applied_offset: -1,
            deltas: true,
        };
        let bytes = super::super::rpc::encode(&request).unwrap();
        assert_eq!(
            super::super::rpc::decode::<FetchMetadata>(&bytes).unwrap(),
            request
        );
    }
}
