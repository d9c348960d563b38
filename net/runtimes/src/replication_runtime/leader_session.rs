//! A follower fetcher's fetch session with its leader (KIP-227), the
//! client's side of [`crate::fetch_sessions`], on the fetcher's connection
//! (the leader keeps it on the shard serving that connection).
//!
//! The first fetch is full with epoch 0 and asks for a session; once the
//! leader names one, each fetch is incremental: it names the partition
//! only when what the leader holds of it is stale (our log end, last
//! fetched epoch, log start or leader epoch moved), and the answer carries
//! the partition only when it changed. An answer without the partition
//! is "nothing new". When the leader no longer knows the session
//! (FETCH_SESSION_ID_NOT_FOUND after an eviction or a restart,
//! INVALID_FETCH_SESSION_EPOCH), the next fetch is full again, as the
//! Java client's `FetchSessionHandler` does; a leader that made no session
//! (its cache full) is asked again at each full fetch.

use crate::fetch_sessions::{next_epoch, INITIAL_EPOCH};
use engine::ErrorCode;
use kafka_protocol::messages::fetch_request::FetchPartition;

/// What a request says of the partition, compared with what the leader's
/// session holds: `(fetch offset, last fetched epoch, log start, leader
/// epoch)`.
type Sent = (i64, i32, i64, i32);

/// The session state of one fetcher's connection.
#[derive(Debug, Default)]
pub struct LeaderSession {
    /// The leader's session id; 0 before it names one.
    id: i32,
    /// The epoch of the next request.
    epoch: i32,
    /// What the leader's session holds of our partition.
    sent: Option<Sent>,
    /// The high watermark last answered (an answer without the partition
    /// leaves it as it was).
    high_watermark: i64,
}

/// How the leader answered at the session level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAnswer {
    /// The answer holds what changed (maybe nothing).
    Served,
    /// The session is gone or out of step: fetch in full again now.
    Restart(ErrorCode),
}

impl LeaderSession {
    /// The request's `(session_id, session_epoch)`.
    pub fn metadata(&self) -> (i32, i32) {
        (self.id, self.epoch)
    }

    /// Whether the request carries `partition` (always in a full fetch).
    pub fn must_send(&self, partition: &FetchPartition) -> bool {
        self.epoch == INITIAL_EPOCH || self.sent != Some(sent_of(partition))
    }

    /// Takes in the leader's top-level answer to a request that carried
    /// `partition` (or not) and names `session_id`.
    pub fn answered(
        &mut self,
        partition: Option<&FetchPartition>,
        error_code: i16,
        session_id: i32,
    ) -> SessionAnswer {
        if error_code != 0 {
            let code = ErrorCode::from_code(error_code).unwrap_or(ErrorCode::UnknownServerError);
            *self = LeaderSession::default();
            return SessionAnswer::Restart(code);
        }
        if let Some(partition) = partition {
            self.sent = Some(sent_of(partition));
        }
        if session_id == 0 {
            // Sessionless answer: the next fetch asks again.
            self.id = 0;
            self.epoch = INITIAL_EPOCH;
        } else {
            self.id = session_id;
            self.epoch = next_epoch(self.epoch);
        }
        SessionAnswer::Served
    }

    /// The high watermark to assume when the answer left the partition out.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Records the high watermark of an answer that carried the partition.
    pub fn set_high_watermark(&mut self, high_watermark: i64) {
        self.high_watermark = high_watermark;
    }
}

fn sent_of(p: &FetchPartition) -> Sent {
    (
        p.fetch_offset,
        p.last_fetched_epoch,
        p.log_start_offset,
        p.current_leader_epoch,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(offset: i64) -> FetchPartition {
        let mut p = FetchPartition::default();
        p.fetch_offset = offset;
        p
    }

    #[test]
    fn full_once_then_incremental_naming_only_changes() {
        let mut s = LeaderSession::default();
        assert_eq!(s.metadata(), (0, 0));
        assert!(s.must_send(&partition(0)));
        assert_eq!(s.answered(Some(&partition(0)), 0, 9), SessionAnswer::Served);
        assert_eq!(s.metadata(), (9, 1));
        assert!(!s.must_send(&partition(0)), "the leader holds offset 0");
        assert_eq!(s.answered(None, 0, 9), SessionAnswer::Served);
        assert_eq!(s.metadata(), (9, 2));
        assert!(s.must_send(&partition(5)), "our log end moved");
    }

    #[test]
    fn a_lost_session_restarts_in_full() {
        let mut s = LeaderSession::default();
        s.answered(Some(&partition(0)), 0, 9);
        let answer = s.answered(None, ErrorCode::FetchSessionIdNotFound.code(), 0);
        assert_eq!(
            answer,
            SessionAnswer::Restart(ErrorCode::FetchSessionIdNotFound)
        );
        assert_eq!(s.metadata(), (0, 0));
        assert!(s.must_send(&partition(0)));
    }

    #[test]
    fn a_sessionless_answer_asks_again() {
        let mut s = LeaderSession::default();
        s.answered(Some(&partition(0)), 0, 0);
        assert_eq!(s.metadata(), (0, 0));
        assert!(s.must_send(&partition(0)));
    }
}
