//! Object names of tiered segments. Each segment's files share a stem
//! `<topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>`,
//! the layout of Kafka's own `LocalTieredStorage`: a topic's and a
//! partition's objects list by prefix (topic deletion is one prefix), and
//! the random segment id keeps a retried or abandoned upload from ever
//! overwriting a committed one. The store puts its URL's prefix in front.

use std::fmt::Write as _;

/// The files of one remote segment (Kafka's `LogSegmentData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentKeys {
    stem: String,
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Every object of topic `topic` with id `topic_id` lies under this.
pub fn topic_prefix(topic: &str, topic_id: &[u8; 16]) -> String {
    format!("{topic}-{}/", hex(topic_id))
}

impl SegmentKeys {
    /// The objects of segment `segment_id` based at `base_offset`.
    pub fn new(
        topic: &str,
        topic_id: &[u8; 16],
        partition: i32,
        base_offset: i64,
        segment_id: &[u8; 16],
    ) -> SegmentKeys {
        SegmentKeys {
            stem: format!(
                "{}{partition}/{base_offset:020}-{}",
                topic_prefix(topic, topic_id),
                hex(segment_id)
            ),
        }
    }

    /// The log, batches as the producers sent them.
    pub fn log(&self) -> String {
        format!("{}.log", self.stem)
    }

    /// The sparse offset index.
    pub fn offset_index(&self) -> String {
        format!("{}.index", self.stem)
    }

    /// The time index.
    pub fn time_index(&self) -> String {
        format!("{}.timeindex", self.stem)
    }

    /// The aborted-transaction index.
    pub fn txn_index(&self) -> String {
        format!("{}.txnindex", self.stem)
    }

    /// The log's leader epochs up to the segment's end, in Kafka's
    /// checkpoint text.
    pub fn leader_epochs(&self) -> String {
        format!("{}.leader-epoch-checkpoint", self.stem)
    }

    /// The producer-state snapshot at the segment's end.
    pub fn producer_snapshot(&self) -> String {
        format!("{}.snapshot", self.stem)
    }

    /// Every object of the segment, the log last: an upload writes it
    /// last and a deletion removes it last, so a listing that shows a log
    /// shows a whole segment.
    pub fn all(&self) -> [String; 6] {
        [
            self.offset_index(),
            self.time_index(),
            self.txn_index(),
            self.leader_epochs(),
            self.producer_snapshot(),
            self.log(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_segment_stem_under_the_topic_prefix() {
        let keys = SegmentKeys::new("orders", &[0xab; 16], 3, 170_410, &[1; 16]);
        let stem = format!(
            "orders-{}/3/00000000000000170410-{}",
            "ab".repeat(16),
            "01".repeat(16)
        );
        assert_eq!(keys.log(), format!("{stem}.log"));
        assert_eq!(keys.offset_index(), format!("{stem}.index"));
        assert!(keys
            .all()
            .iter()
            .all(|k| k.starts_with(&topic_prefix("orders", &[0xab; 16]))));
        assert_eq!(keys.all().last(), Some(&keys.log()));
    }
}
