//! The on-disk encoding of the quorum's state: log entries, the hard state
//! with the conf state, and snapshots, each inside a frame of
//! `[payload length u32][CRC32C of payload u32][payload]`, little-endian.
//!
//! Why our own encoding rather than raft-rs's protobuf: the bytes on disk
//! then depend on neither the protobuf crate's version nor the codec feature
//! raft-rs is built with, and every field we keep is listed here, once.
//! Decoding never panics on bad bytes: it returns a reason, which the store
//! turns into a torn tail or a corruption error.

use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata};

/// Bytes before a frame's payload: its length and its CRC32C.
pub const FRAME_HEADER_BYTES: usize = 8;

/// The largest payload a frame may claim. A metadata record is kilobytes; a
/// snapshot of the metadata of a large cluster is megabytes. A length past
/// this is garbage (a torn or corrupt header), not a record to allocate for.
pub const FRAME_PAYLOAD_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Appends `payload` to `out` as one frame.
pub fn write_frame(payload: &[u8], out: &mut Vec<u8>) {
    assert!(payload.len() <= FRAME_PAYLOAD_BYTES_MAX);
    let length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&crc_fast::crc32_iscsi(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// What is at a position of a buffer of frames.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameRead<'a> {
    /// A whole frame whose checksum holds; the next one starts at `next`.
    Frame {
        /// The payload.
        payload: &'a [u8],
        /// Where the next frame starts.
        next: usize,
    },
    /// The buffer ends inside this frame: a write cut short by a crash.
    Incomplete,
    /// The frame is whole but its checksum does not hold.
    BadChecksum {
        /// Where the frame would end.
        end: usize,
    },
}

/// Reads the frame starting at `position` of `buffer`.
pub fn read_frame(buffer: &[u8], position: usize) -> FrameRead<'_> {
    assert!(position <= buffer.len());
    let rest = &buffer[position..];
    if rest.len() < FRAME_HEADER_BYTES {
        return FrameRead::Incomplete;
    }
    let length = u32_at(rest, 0) as usize;
    let crc = u32_at(rest, 4);
    if length > FRAME_PAYLOAD_BYTES_MAX || rest.len() - FRAME_HEADER_BYTES < length {
        return FrameRead::Incomplete;
    }
    let end = position + FRAME_HEADER_BYTES + length;
    let payload = &buffer[position + FRAME_HEADER_BYTES..end];
    if crc_fast::crc32_iscsi(payload) != crc {
        return FrameRead::BadChecksum { end };
    }
    FrameRead::Frame { payload, next: end }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// Encodes one log entry (the payload of one log frame).
pub fn encode_entry(entry: &Entry, out: &mut Vec<u8>) {
    out.push(entry_type_code(entry.get_entry_type()));
    out.extend_from_slice(&entry.term.to_le_bytes());
    out.extend_from_slice(&entry.index.to_le_bytes());
    put_bytes(&entry.data, out);
    put_bytes(&entry.context, out);
}

/// Decodes one log entry.
pub fn decode_entry(payload: &[u8]) -> Result<Entry, String> {
    let mut reader = Reader::new(payload);
    let entry_type = entry_type_from_code(reader.u8()?)?;
    let term = reader.u64()?;
    let index = reader.u64()?;
    let data = reader.bytes()?;
    let context = reader.bytes()?;
    reader.finish()?;
    let mut entry = Entry {
        term,
        index,
        data: data.into(),
        context: context.into(),
        ..Default::default()
    };
    entry.set_entry_type(entry_type);
    Ok(entry)
}

/// Encodes the hard state (term, vote, commit) with the conf state: they
/// live in one small file, replaced whole.
pub fn encode_raft_state(hard_state: &HardState, conf_state: &ConfState) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&hard_state.term.to_le_bytes());
    out.extend_from_slice(&hard_state.vote.to_le_bytes());
    out.extend_from_slice(&hard_state.commit.to_le_bytes());
    encode_conf_state(conf_state, &mut out);
    out
}

/// Decodes what [`encode_raft_state`] wrote.
pub fn decode_raft_state(payload: &[u8]) -> Result<(HardState, ConfState), String> {
    let mut reader = Reader::new(payload);
    let hard_state = HardState {
        term: reader.u64()?,
        vote: reader.u64()?,
        commit: reader.u64()?,
        ..Default::default()
    };
    let conf_state = decode_conf_state(&mut reader)?;
    reader.finish()?;
    Ok((hard_state, conf_state))
}

/// Encodes a snapshot: its metadata (index, term, conf state) and the
/// state machine's bytes.
pub fn encode_snapshot(snapshot: &Snapshot) -> Vec<u8> {
    let metadata = snapshot.get_metadata();
    let mut out = Vec::with_capacity(64 + snapshot.data.len());
    out.extend_from_slice(&metadata.index.to_le_bytes());
    out.extend_from_slice(&metadata.term.to_le_bytes());
    encode_conf_state(metadata.get_conf_state(), &mut out);
    put_bytes(&snapshot.data, &mut out);
    out
}

/// Decodes what [`encode_snapshot`] wrote.
pub fn decode_snapshot(payload: &[u8]) -> Result<Snapshot, String> {
    let mut reader = Reader::new(payload);
    let index = reader.u64()?;
    let term = reader.u64()?;
    let conf_state = decode_conf_state(&mut reader)?;
    let data = reader.bytes()?;
    reader.finish()?;
    let mut metadata = SnapshotMetadata {
        index,
        term,
        ..Default::default()
    };
    metadata.set_conf_state(conf_state);
    let mut snapshot = Snapshot {
        data: data.into(),
        ..Default::default()
    };
    snapshot.set_metadata(metadata);
    Ok(snapshot)
}

fn encode_conf_state(conf_state: &ConfState, out: &mut Vec<u8>) {
    put_ids(&conf_state.voters, out);
    put_ids(&conf_state.learners, out);
    put_ids(&conf_state.voters_outgoing, out);
    put_ids(&conf_state.learners_next, out);
    out.push(u8::from(conf_state.auto_leave));
}

fn decode_conf_state(reader: &mut Reader<'_>) -> Result<ConfState, String> {
    Ok(ConfState {
        voters: reader.ids()?,
        learners: reader.ids()?,
        voters_outgoing: reader.ids()?,
        learners_next: reader.ids()?,
        auto_leave: reader.u8()? != 0,
        ..Default::default()
    })
}

fn entry_type_code(entry_type: EntryType) -> u8 {
    match entry_type {
        EntryType::EntryNormal => 0,
        EntryType::EntryConfChange => 1,
        EntryType::EntryConfChangeV2 => 2,
    }
}

fn entry_type_from_code(code: u8) -> Result<EntryType, String> {
    match code {
        0 => Ok(EntryType::EntryNormal),
        1 => Ok(EntryType::EntryConfChange),
        2 => Ok(EntryType::EntryConfChangeV2),
        other => Err(format!("unknown entry type {other}")),
    }
}

fn put_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    assert!(bytes.len() <= FRAME_PAYLOAD_BYTES_MAX);
    let length = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_ids(ids: &[u64], out: &mut Vec<u8>) {
    let count = u32::try_from(ids.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
}

/// A bounds-checked cursor: every read says what was missing instead of
/// panicking, because the bytes come from a disk.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, position: 0 }
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], String> {
        let remaining = self.bytes.len() - self.position;
        if count > remaining {
            return Err(format!(
                "needs {count} bytes at {}, has {remaining}",
                self.position
            ));
        }
        let slice = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32_at(self.take(4)?, 0))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }

    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let length = self.u32()? as usize;
        Ok(self.take(length)?.to_vec())
    }

    fn ids(&mut self) -> Result<Vec<u64>, String> {
        let count = self.u32()? as usize;
        // Bound the allocation by what the buffer can hold, not by the count.
        if count > (self.bytes.len() - self.position) / 8 {
            return Err(format!("{count} ids do not fit in the record"));
        }
        (0..count).map(|_| self.u64()).collect()
    }

    fn finish(&self) -> Result<(), String> {
        if self.position != self.bytes.len() {
            return Err(format!(
                "{} bytes left after the record",
                self.bytes.len() - self.position
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trips_and_a_flipped_bit_fails_the_frame() {
        let mut entry = Entry {
            term: 7,
            index: 42,
            data: b"topic-a".to_vec().into(),
            context: b"ctx".to_vec().into(),
            ..Default::default()
        };
        entry.set_entry_type(EntryType::EntryConfChangeV2);
        let mut payload = Vec::new();
        encode_entry(&entry, &mut payload);
        let mut framed = Vec::new();
        write_frame(&payload, &mut framed);
        let FrameRead::Frame {
            payload: read,
            next,
        } = read_frame(&framed, 0)
        else {
            panic!("whole frame expected");
        };
        assert_eq!(next, framed.len());
        assert_eq!(decode_entry(read), Ok(entry));

        framed[FRAME_HEADER_BYTES + 3] ^= 1;
        assert_eq!(
            read_frame(&framed, 0),
            FrameRead::BadChecksum { end: framed.len() }
        );
        assert_eq!(
            read_frame(&framed[..framed.len() - 1], 0),
            FrameRead::Incomplete
        );
    }

    #[test]
    fn raft_state_and_snapshot_round_trip() {
        let hard_state = HardState {
            term: 3,
            vote: 2,
            commit: 9,
            ..Default::default()
        };
        let conf_state = ConfState {
            voters: vec![1, 2, 3],
            learners: vec![4],
            ..Default::default()
        };
        let decoded = decode_raft_state(&encode_raft_state(&hard_state, &conf_state));
        assert_eq!(decoded, Ok((hard_state, conf_state.clone())));

        let mut snapshot = Snapshot {
            data: b"state".to_vec().into(),
            ..Default::default()
        };
        snapshot.mut_metadata().index = 10;
        snapshot.mut_metadata().term = 3;
        snapshot.mut_metadata().set_conf_state(conf_state);
        assert_eq!(decode_snapshot(&encode_snapshot(&snapshot)), Ok(snapshot));
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let payload = encode_raft_state(&HardState::default(), &ConfState::default());
        for cut in 0..payload.len() {
            assert!(decode_raft_state(&payload[..cut]).is_err());
        }
        assert!(decode_entry(&[9]).is_err());
    }
}
