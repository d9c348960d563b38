//! The bytes of tiered storage's remote log segment records (types 19–21,
//! laid out in the [`super`] module doc): encode and decode side by side,
//! so that the two cannot drift apart unnoticed.
//!
//! A segment's leader epochs are few (one per leader change within one
//! segment, usually one), so their list is read with the codec's usual
//! guard: a count that the frame could not hold is refused before anything
//! is allocated.

use super::super::record::{MetadataRecord, RemoteSegmentRecord, RemoteSegmentState};
use super::{
    DecodeError, Reader, Writer, RECORD_TYPE_REMOTE_LOG_SEGMENT,
    RECORD_TYPE_REMOTE_LOG_SEGMENT_STATE, RECORD_TYPE_REMOTE_TOPIC_PURGED,
};

/// epoch (4) + start offset (8).
const LEADER_EPOCH_ENTRY_BYTES: usize = 12;

impl Writer {
    /// The remote log segment records of [`Self::record`].
    pub(super) fn remote_record(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RemoteLogSegment(segment) => self.remote_segment(segment),
            MetadataRecord::RemoteLogSegmentState {
                topic_id,
                partition,
                segment_id,
                state,
            } => {
                self.u8(RECORD_TYPE_REMOTE_LOG_SEGMENT_STATE);
                self.bytes16(topic_id);
                self.i32(*partition);
                self.bytes16(segment_id);
                self.u8(state.id());
            }
            MetadataRecord::RemoteTopicPurged { topic_id } => {
                self.u8(RECORD_TYPE_REMOTE_TOPIC_PURGED);
                self.bytes16(topic_id);
            }
            _ => unreachable!("not a remote log record: {}", record.kind()),
        }
    }

    fn remote_segment(&mut self, segment: &RemoteSegmentRecord) {
        self.u8(RECORD_TYPE_REMOTE_LOG_SEGMENT);
        self.bytes16(&segment.topic_id);
        self.i32(segment.partition);
        self.bytes16(&segment.segment_id);
        self.i64(segment.base_offset);
        self.i64(segment.end_offset);
        self.i64(segment.max_timestamp_ms);
        self.i64(segment.size_bytes);
        self.i32(segment.broker_id);
        self.i32(segment.leader_epoch);
        self.count(segment.segment_leader_epochs.len());
        for &(epoch, start_offset) in &segment.segment_leader_epochs {
            self.i32(epoch);
            self.i64(start_offset);
        }
        self.u8(segment.state.id());
    }
}

impl Reader<'_> {
    /// The remote log segment records of [`Self::record`].
    pub(super) fn remote_record(&mut self, record_type: u8) -> Result<MetadataRecord, DecodeError> {
        Ok(match record_type {
            RECORD_TYPE_REMOTE_LOG_SEGMENT => {
                MetadataRecord::RemoteLogSegment(self.remote_segment()?)
            }
            RECORD_TYPE_REMOTE_LOG_SEGMENT_STATE => MetadataRecord::RemoteLogSegmentState {
                topic_id: self.array()?,
                partition: self.i32()?,
                segment_id: self.array()?,
                state: self.remote_segment_state()?,
            },
            RECORD_TYPE_REMOTE_TOPIC_PURGED => MetadataRecord::RemoteTopicPurged {
                topic_id: self.array()?,
            },
            other => unreachable!("not a remote log record type: {other}"),
        })
    }

    fn remote_segment(&mut self) -> Result<RemoteSegmentRecord, DecodeError> {
        let topic_id = self.array()?;
        let partition = self.i32()?;
        let segment_id = self.array()?;
        let base_offset = self.i64()?;
        let end_offset = self.i64()?;
        let max_timestamp_ms = self.i64()?;
        let size_bytes = self.i64()?;
        let broker_id = self.i32()?;
        let leader_epoch = self.i32()?;
        let count = self.count(LEADER_EPOCH_ENTRY_BYTES)?;
        let mut segment_leader_epochs = Vec::with_capacity(count);
        for _ in 0..count {
            segment_leader_epochs.push((self.i32()?, self.i64()?));
        }
        Ok(RemoteSegmentRecord {
            topic_id,
            partition,
            segment_id,
            base_offset,
            end_offset,
            max_timestamp_ms,
            size_bytes,
            broker_id,
            leader_epoch,
            segment_leader_epochs,
            state: self.remote_segment_state()?,
        })
    }

    fn remote_segment_state(&mut self) -> Result<RemoteSegmentState, DecodeError> {
        let id = self.u8()?;
        RemoteSegmentState::from_id(id).ok_or(DecodeError::InvalidRemoteSegmentState(id))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::framed;
    use super::super::{FORMAT_VERSION, HEADER_BYTES};
    use super::*;

    fn sample_segment() -> RemoteSegmentRecord {
        RemoteSegmentRecord {
            topic_id: [4; 16],
            partition: 2,
            segment_id: [9; 16],
            base_offset: 1_000,
            end_offset: 1_999,
            max_timestamp_ms: 1_700_000_000_000,
            size_bytes: 1 << 30,
            broker_id: 3,
            leader_epoch: 7,
            segment_leader_epochs: vec![(5, 1_000), (7, 1_500)],
            state: RemoteSegmentState::CopySegmentStarted,
        }
    }

    fn samples() -> Vec<MetadataRecord> {
        let mut records = vec![MetadataRecord::RemoteLogSegment(sample_segment())];
        for state in RemoteSegmentState::ALL {
            records.push(MetadataRecord::RemoteLogSegment(RemoteSegmentRecord {
                state,
                segment_leader_epochs: Vec::new(),
                ..sample_segment()
            }));
            records.push(MetadataRecord::RemoteLogSegmentState {
                topic_id: [4; 16],
                partition: -1,
                segment_id: [0xfe; 16],
                state,
            });
        }
        records.push(MetadataRecord::RemoteTopicPurged { topic_id: [8; 16] });
        records
    }

    #[test]
    fn remote_log_records_round_trip() {
        for record in samples() {
            let frame = record.encode();
            assert_eq!(MetadataRecord::decode(&frame).as_ref(), Ok(&record));
        }
        let frame = MetadataRecord::RemoteLogSegment(sample_segment()).encode();
        assert_eq!(frame[9], RECORD_TYPE_REMOTE_LOG_SEGMENT);
        // Ids, eight fixed fields, two epochs and the state.
        assert_eq!(
            frame.len(),
            HEADER_BYTES + 16 + 4 + 16 + 4 * 8 + 4 + 4 + 4 + 2 * 12 + 1
        );
        let purged = MetadataRecord::RemoteTopicPurged { topic_id: [8; 16] }.encode();
        assert_eq!(
            (purged.len(), purged[9]),
            (HEADER_BYTES + 16, RECORD_TYPE_REMOTE_TOPIC_PURGED)
        );
    }

    #[test]
    fn the_states_keep_kafkas_ids() {
        let ids: Vec<u8> = RemoteSegmentState::ALL.iter().map(|s| s.id()).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        for state in RemoteSegmentState::ALL {
            assert_eq!(RemoteSegmentState::from_id(state.id()), Some(state));
        }
        assert_eq!(RemoteSegmentState::from_id(4), None);
    }

    #[test]
    fn every_cut_and_every_flipped_bit_of_a_remote_record_is_caught() {
        for record in samples() {
            let frame = record.encode();
            for length in 0..frame.len() {
                assert!(MetadataRecord::decode(&frame[..length]).is_err());
            }
            for byte in 0..frame.len() {
                for bit in 0..8 {
                    let mut damaged = frame.clone();
                    damaged[byte] ^= 1 << bit;
                    assert!(
                        MetadataRecord::decode(&damaged).is_err(),
                        "{}: flip of bit {bit} in byte {byte} went unnoticed",
                        record.kind()
                    );
                }
            }
        }
    }

    /// Bad bodies behind a good CRC (as a bug or a future build would
    /// write) are refused with the precise reason.
    #[test]
    fn bad_remote_bodies_behind_a_good_crc_are_refused() {
        let mut state = vec![FORMAT_VERSION, RECORD_TYPE_REMOTE_LOG_SEGMENT_STATE];
        state.extend_from_slice(&[1; 16]);
        state.extend_from_slice(&0i32.to_be_bytes());
        state.extend_from_slice(&[2; 16]);
        state.push(4);
        assert_eq!(
            MetadataRecord::decode(&framed(&state)),
            Err(DecodeError::InvalidRemoteSegmentState(4))
        );
        // A leader-epoch count far beyond the frame.
        let frame = MetadataRecord::RemoteLogSegment(sample_segment()).encode();
        let count_at = HEADER_BYTES + 16 + 4 + 16 + 4 * 8 + 4 + 4;
        let mut huge = frame[8..].to_vec();
        huge[count_at - 8..count_at - 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            MetadataRecord::decode(&framed(&huge)),
            Err(DecodeError::Truncated { .. })
        ));
        // A body cut anywhere, behind a good CRC.
        for length in 2..frame.len() - 8 {
            let cut = framed(&frame[8..8 + length]);
            assert!(MetadataRecord::decode(&cut).is_err(), "cut at {length}");
        }
        let mut trailing = frame[8..].to_vec();
        trailing.push(0);
        assert_eq!(
            MetadataRecord::decode(&framed(&trailing)),
            Err(DecodeError::TrailingBytes(1))
        );
    }
}
