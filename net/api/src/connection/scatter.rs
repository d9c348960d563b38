//! Large Produce requests read apart, so their records reach the disk
//! without a copy.
//!
//! An O_DIRECT write needs its memory aligned like its file position, so
//! the appender copies records into aligned DMA buffers unless they already
//! lie in memory at the same offset within a block as they will in the file
//! (`engine::appender`). Here each partition's records are received into a
//! buffer of their own, placed at the offset where the partition's next
//! append will start (`engine::placement`); the rest of the request (its
//! header and the fields around the records, see [`crate::produce_scan`])
//! becomes a small frame whose records fields are empty, and the handler
//! puts the records back after decoding it.
//!
//! Only plain-TCP Produce requests of [`SCATTER_MIN_FRAME_BYTES`] or more
//! take this path: smaller ones hold no run of whole blocks worth writing
//! on its own, and TLS decrypts into its own buffers.

use super::{read_rest, read_some, Frame, FrameReader, RestOfFrame};
use crate::frame::LENGTH_PREFIX_BYTES;
use crate::produce_scan::{Next, Splitter};
use bytes::{Buf, BytesMut};
use futures::future::{select, Either};
use kafka_protocol::messages::ApiKey;
use kernel::error::FrameError;

/// Smallest Produce frame read apart.
pub(super) const SCATTER_MIN_FRAME_BYTES: usize = 128 << 10;

/// Most bytes read at once while the envelope is scanned after large
/// records: a partition's fields are tens of bytes, and what comes along
/// (the start of the next partition's records, likely large too) is copied
/// into the records' buffer.
const ENVELOPE_READ_BYTES: usize = 512;
/// Records below this size are followed by reads of
/// [`super::READ_CHUNK_BYTES`]: a request of many small partitions is read
/// in a few large reads, not one per partition.
const LARGE_RECORDS_BYTES: usize = 64 << 10;

impl FrameReader<'_> {
    /// The version of the frame announced at the front of the buffer if it
    /// is a Produce request to read apart.
    pub(super) fn scattered_version(&self, length: usize) -> Option<i16> {
        let start = self.buf.get(LENGTH_PREFIX_BYTES..LENGTH_PREFIX_BYTES + 4)?;
        let api_key = i16::from_be_bytes([start[0], start[1]]);
        let version = i16::from_be_bytes([start[2], start[3]]);
        let produce = api_key == ApiKey::Produce as i16;
        let scans = crate::produce_scan::Scanner::scans(version);
        (length >= SCATTER_MIN_FRAME_BYTES && produce && scans && self.stream.is_plain())
            .then_some(version)
    }

    /// Reads the Produce frame of `length` bytes announced at the front of
    /// the buffer apart; `None` when the connection must close.
    pub(super) async fn read_scattered(&mut self, length: usize, version: i16) -> Option<Frame> {
        self.buf.advance(LENGTH_PREFIX_BYTES);
        // Bytes of the frame still in the socket.
        let mut unread = length.checked_sub(self.buf.len())?;
        self.account.set(self.buf.capacity() + length);
        self.chunk_bytes = super::READ_CHUNK_BYTES;
        let mut splitter = Splitter::new(version);
        let mut read_bytes = ENVELOPE_READ_BYTES;
        loop {
            let next = match splitter.advance(&mut self.buf) {
                Ok(next) => next,
                Err(e) => {
                    super::log_protocol_error(self.shard, self.peer, &e.to_string());
                    return None;
                }
            };
            match next {
                Next::Read if unread == 0 => {
                    let reason = "produce request ends inside its envelope";
                    super::log_protocol_error(self.shard, self.peer, reason);
                    return None;
                }
                Next::Read => {
                    // Doubling past the first read: a long field (tagged
                    // fields may be) is not scanned again per 512 bytes.
                    let want = unread.min(read_bytes.max(self.buf.len()));
                    unread -= self.read_envelope(want).await?;
                }
                Next::Records { length, partition } => {
                    if length > self.buf.len() + unread {
                        let reason = "produce records longer than their request";
                        super::log_protocol_error(self.shard, self.peer, reason);
                        return None;
                    }
                    let records = self.records_buffer(&splitter, partition, length);
                    let (records, from_socket) = self.read_records(records, length).await?;
                    unread -= from_socket;
                    splitter.push_records(records);
                    read_bytes = if length >= LARGE_RECORDS_BYTES {
                        ENVELOPE_READ_BYTES
                    } else {
                        super::READ_CHUNK_BYTES
                    };
                }
                Next::Done => break,
            }
        }
        // Bytes after the envelope: the decoder of a whole frame ignores
        // them, so they are read and dropped here too.
        while unread > 0 {
            self.buf.clear();
            unread -= self
                .read_envelope(unread.min(super::READ_CHUNK_BYTES))
                .await?;
        }
        self.buf.clear();
        self.next_fill_most_bytes = ENVELOPE_READ_BYTES;
        let (body, records) = splitter.finish();
        Some(Frame {
            body,
            records,
            wire_bytes: LENGTH_PREFIX_BYTES + length,
        })
    }

    /// A buffer for `length` bytes of records of the partition announced
    /// last, placed where they will lie in its segment file and reserved
    /// there (`engine::placement::receive_buffer`; placed for position 0
    /// when this process has no hint: a topic not led here, or an id it
    /// does not know).
    fn records_buffer(&self, splitter: &Splitter, partition: i32, length: usize) -> BytesMut {
        let named;
        let topic = match splitter.topic_id() {
            Some(id) => {
                let topics = self.shard.topics.borrow();
                let Some(entry) = topics.by_id(&id) else {
                    return engine::placement::placed_buffer(length, 0);
                };
                named = entry.name.clone();
                named.as_str()
            }
            None => splitter.topic(),
        };
        engine::placement::receive_buffer(topic, partition, length, self.shard.id)
    }

    /// Reads at most `most` bytes (at least one) onto the end of the
    /// buffer: what the socket holds, without the runtime's poll when it
    /// holds something; how many, or `None` when the connection must close.
    async fn read_envelope(&mut self, most: usize) -> Option<usize> {
        if self.room.len() < most {
            super::new_region(&mut self.buf, &mut self.room, most.max(self.chunk_bytes));
        }
        let outcome = match self.stream.try_recv(&mut self.room[..most]) {
            Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => None,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => None,
            other => other,
        };
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                let read = read_some(self.stream, &mut self.room[..most]);
                futures::pin_mut!(read);
                match select(read, self.shutdown.clone()).await {
                    Either::Left((outcome, _)) => outcome,
                    Either::Right(_) => return None,
                }
            }
        };
        self.landed(outcome, Some(most))
    }

    /// One partition's `length` bytes of records, into `records` (empty,
    /// placed): what the frame buffer already holds of them, then the rest
    /// from the socket. The records, and how many came from the socket.
    async fn read_records(
        &mut self,
        mut records: BytesMut,
        length: usize,
    ) -> Option<(BytesMut, usize)> {
        let buffered = length.min(self.buf.len());
        records.extend_from_slice(&self.buf[..buffered]);
        self.buf.advance(buffered);
        match read_rest(
            self.stream,
            &mut records,
            length,
            self.shutdown,
            self.activity,
        )
        .await
        {
            RestOfFrame::Complete => Some((records, length - buffered)),
            RestOfFrame::Closed(filled) => {
                let e = FrameError::Truncated {
                    have: filled,
                    want: length,
                };
                super::log_protocol_error(self.shard, self.peer, &e.to_string());
                None
            }
            RestOfFrame::Stopped => None,
        }
    }
}
