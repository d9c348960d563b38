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
//! header:        JSON MetadataHeader (leader, term, commit index, up to date)
//! snapshot:      the rest; MetadataImage::encode_snapshot's bytes, empty
//!                when up to date
//! ```
//!
//! The voter answers as soon as its applied offset is past the asker's,
//! and otherwise waits up to [`LONG_POLL`] for a change before answering
//! "up to date" (a long poll: the observer hears of a change within one
//! publication, without polling in a loop).
//!
//! Why the whole image rather than the records since the asker's offset:
//! the committed log is trimmed at each snapshot, so "the records since"
//! may no longer exist, and the snapshot path is already written and
//! checked. Its size (snapshot.rs: ~600 KB for 10 brokers and 10 000
//! partitions) is sent once per metadata change per observer — fine for
//! rare changes and a few observers; a record delta is the next step when
//! either grows.
//!
//! The snapshot is binary after a JSON header, not inside the JSON: serde
//! would spell each byte as a decimal number (~3.5× the size).

use super::view::QuorumStatus;
use crate::Shard;
use cluster::metadata::MetadataImage;
use serde::{Deserialize, Serialize};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a voter holds a FetchMetadata of an up-to-date observer before
/// answering "up to date". Short enough that the observer soon learns of a
/// new controller (the reply carries the leader), long enough that an idle
/// cluster costs two small round trips a second per observer.
pub const LONG_POLL: Duration = Duration::from_millis(500);

/// An observer's request for the committed metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchMetadata {
    /// The observer's `node.id` (for the voter's logs).
    pub node_id: i32,
    /// The highest metadata offset the observer has applied (-1: none).
    pub applied_offset: i64,
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
}

/// A voter's answer: the header and, unless up to date, the image's
/// snapshot bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataReply {
    /// What the voter knows of the quorum.
    pub header: MetadataHeader,
    /// `MetadataImage::encode_snapshot` bytes; empty when up to date.
    pub snapshot: Vec<u8>,
}

impl MetadataReply {
    /// The reply's frame body (see the module doc).
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let header = serde_json::to_vec(&self.header).map_err(|e| e.to_string())?;
        let length = u32::try_from(header.len()).map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(4 + header.len() + self.snapshot.len());
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.snapshot);
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
        let (header, snapshot) = rest.split_at(length);
        let header: MetadataHeader = serde_json::from_slice(header).map_err(|e| e.to_string())?;
        if header.up_to_date != snapshot.is_empty() {
            return Err(String::from(
                "a metadata reply carries an image exactly when not up to date",
            ));
        }
        Ok(MetadataReply {
            header,
            snapshot: snapshot.to_vec(),
        })
    }

    /// The image the reply carries; `Ok(None)` when up to date.
    pub fn image(&self) -> Result<Option<MetadataImage>, String> {
        if self.header.up_to_date {
            return Ok(None);
        }
        MetadataImage::decode_snapshot(&self.snapshot)
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
        header: MetadataHeader {
            leader_id: status.leader_id,
            term: status.term,
            commit_index: status.commit_index,
            up_to_date: image.is_none(),
        },
        snapshot: image
            .map(|image| image.encode_snapshot())
            .unwrap_or_default(),
    }
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
            snapshot: image.encode_snapshot(),
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
            snapshot: Vec::new(),
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
            snapshot: b"RLMS junk".to_vec(),
        };
        let reply = MetadataReply::decode(&damaged.encode().unwrap()).unwrap();
        assert!(reply.image().is_err());
    }

    #[test]
    fn the_request_is_json() {
        let request = FetchMetadata {
            node_id: 4,
            applied_offset: -1,
        };
        let bytes = super::super::rpc::encode(&request).unwrap();
        assert_eq!(
            super::super::rpc::decode::<FetchMetadata>(&bytes).unwrap(),
            request
        );
    }
}
