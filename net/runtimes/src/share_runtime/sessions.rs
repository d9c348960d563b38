//! Share sessions (KIP-932): one shard's cache, keyed by group and member.
//!
//! A ShareFetch with epoch 0 opens a session naming its partitions; later
//! requests carry the next epoch and name only partitions to add (and
//! those to forget); epoch -1 closes it. A connection is served by one
//! shard, so each shard keeps the sessions of its connections, like the
//! fetch sessions of KIP-227; a member that reconnects to another shard is
//! told SHARE_SESSION_NOT_FOUND and opens a new one.
//!
//! A session belongs to the connection that opened it: when that
//! connection closes, the session ends and the member's records go back at
//! once, as Kafka releases them (rather than when their locks run out).
//!
//! A session remembers each partition with the topic id the client named
//! it by, as Kafka's `ShareSession` keeps `TopicIdPartition`s: a topic
//! deleted and created again under its name is another topic, which the
//! client must add by its new id (the handler answers UNKNOWN_TOPIC_ID for
//! the old one), and forgetting the old id works after its name is gone.
//!
//! `group.share.max.share.sessions` is the broker's cap, split over the
//! shards. A full shard makes room by dropping sessions idle for longer
//! than the share session timeout; when none is, the new session is
//! refused with SHARE_SESSION_LIMIT_REACHED.

use engine::{ErrorCode, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A topic id as the wire carries it.
pub type TopicId = [u8; 16];

/// Epoch of a request that opens a session.
pub const OPEN_EPOCH: i32 = 0;
/// Epoch of a request that closes it.
pub const FINAL_EPOCH: i32 = -1;

#[derive(Debug)]
struct ShareSession {
    /// The connection that opened it (its `Session`'s address).
    connection: usize,
    /// The epoch the next request must carry.
    next_epoch: i32,
    /// Each partition, with the topic id the client named it by.
    partitions: BTreeMap<TopicPartition, TopicId>,
    last_used_ms: i64,
}

/// What a request's epoch did to the member's session.
#[derive(Debug, PartialEq, Eq)]
pub enum SessionCheck {
    /// Epoch 0: a new session; the old one's partitions, if it had one
    /// (the member's locks there go back).
    Opened(Option<BTreeSet<TopicPartition>>),
    /// The session goes on at the next epoch.
    Continued,
    /// Epoch -1: the session is closed; its partitions.
    Closed(BTreeSet<TopicPartition>),
    /// Refused; the partitions of a session that ended for it.
    Refused(ErrorCode, Option<BTreeSet<TopicPartition>>),
}

/// One shard's share sessions.
#[derive(Debug, Default)]
pub struct ShareSessionCache {
    capacity: usize,
    sessions: HashMap<(String, String), ShareSession>,
}

impl ShareSessionCache {
    /// A cache of at most `capacity` sessions.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            sessions: HashMap::new(),
        }
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Checks `epoch` for `(group, member)` and moves the session on.
    /// `may_open`: ShareFetch may open a session, ShareAcknowledge may not.
    pub fn check(
        &mut self,
        (group, member): (&str, &str),
        (epoch, connection): (i32, usize),
        may_open: bool,
        (now_ms, idle_ms): (i64, i64),
    ) -> SessionCheck {
        let key = (group.to_string(), member.to_string());
        match epoch {
            OPEN_EPOCH if !may_open => SessionCheck::Refused(ErrorCode::InvalidRequest, None),
            OPEN_EPOCH => {
                let old = self.sessions.remove(&key).map(|s| names(s.partitions));
                if self.sessions.len() >= self.capacity {
                    self.sessions
                        .retain(|_, s| now_ms.saturating_sub(s.last_used_ms) <= idle_ms);
                }
                if self.sessions.len() >= self.capacity {
                    return SessionCheck::Refused(ErrorCode::ShareSessionLimitReached, old);
                }
                let session = ShareSession {
                    connection,
                    next_epoch: 1,
                    partitions: BTreeMap::new(),
                    last_used_ms: now_ms,
                };
                self.sessions.insert(key, session);
                SessionCheck::Opened(old)
            }
            FINAL_EPOCH => match self.sessions.remove(&key) {
                Some(s) => SessionCheck::Closed(names(s.partitions)),
                None => SessionCheck::Refused(ErrorCode::ShareSessionNotFound, None),
            },
            _ => match self.sessions.get_mut(&key) {
                None => SessionCheck::Refused(ErrorCode::ShareSessionNotFound, None),
                Some(s) if s.next_epoch != epoch => {
                    let dropped = self.sessions.remove(&key).map(|s| names(s.partitions));
                    SessionCheck::Refused(ErrorCode::InvalidShareSessionEpoch, dropped)
                }
                Some(s) => {
                    s.next_epoch = s.next_epoch.checked_add(1).unwrap_or(1);
                    s.last_used_ms = now_ms;
                    SessionCheck::Continued
                }
            },
        }
    }

    /// Ends the sessions `connection` opened: their members and partitions.
    pub fn close_connection(
        &mut self,
        connection: usize,
    ) -> Vec<((String, String), Vec<TopicPartition>)> {
        let keys: Vec<(String, String)> = (self.sessions.iter())
            .filter(|(_, s)| s.connection == connection)
            .map(|(key, _)| key.clone())
            .collect();
        (keys.into_iter())
            .filter_map(|key| {
                let session = self.sessions.remove(&key)?;
                Some((key, session.partitions.into_keys().collect()))
            })
            .collect()
    }

    /// Adds `added` to the session's partitions (a partition added under
    /// another topic id replaces the one it had) and drops `forgotten`,
    /// matched by topic id and partition; the session's partitions after,
    /// each with its topic id. Empty when there is no session.
    pub fn update(
        &mut self,
        (group, member): (&str, &str),
        added: impl IntoIterator<Item = (TopicPartition, TopicId)>,
        forgotten: &[(TopicId, i32)],
    ) -> Vec<(TopicPartition, TopicId)> {
        let key = (group.to_string(), member.to_string());
        let Some(session) = self.sessions.get_mut(&key) else {
            return Vec::new();
        };
        session.partitions.extend(added);
        session
            .partitions
            .retain(|tp, id| !forgotten.contains(&(*id, tp.partition)));
        (session.partitions.iter())
            .map(|(tp, id)| (tp.clone(), *id))
            .collect()
    }
}

/// A session's partitions by name: those whose records go back when it ends.
fn names(partitions: BTreeMap<TopicPartition, TopicId>) -> BTreeSet<TopicPartition> {
    partitions.into_keys().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: (&str, &str) = ("g", "m");

    const ID: TopicId = [1; 16];

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t", partition)
    }

    fn named(partition: i32) -> (TopicPartition, TopicId) {
        (tp(partition), ID)
    }

    #[test]
    fn epochs_open_continue_and_close() {
        let mut cache = ShareSessionCache::new(10);
        assert_eq!(
            cache.check(KEY, (0, 1), true, (0, 1)),
            SessionCheck::Opened(None)
        );
        assert_eq!(
            cache.update(KEY, [named(0), named(1)], &[]),
            vec![named(0), named(1)]
        );
        assert_eq!(
            cache.check(KEY, (1, 1), true, (0, 1)),
            SessionCheck::Continued
        );
        assert_eq!(cache.update(KEY, [], &[(ID, 0)]), vec![named(1)]);
        assert_eq!(
            cache.check(KEY, (2, 1), false, (0, 1)),
            SessionCheck::Continued
        );
        let closed = cache.check(KEY, (-1, 1), false, (0, 1));
        assert_eq!(closed, SessionCheck::Closed(BTreeSet::from([tp(1)])));
        assert!(cache.is_empty());
    }

    #[test]
    fn wrong_epochs_are_refused() {
        let mut cache = ShareSessionCache::new(10);
        let missing = cache.check(KEY, (3, 1), true, (0, 1));
        assert_eq!(
            missing,
            SessionCheck::Refused(ErrorCode::ShareSessionNotFound, None)
        );
        let final_missing = cache.check(KEY, (-1, 1), true, (0, 1));
        assert_eq!(
            final_missing,
            SessionCheck::Refused(ErrorCode::ShareSessionNotFound, None)
        );
        let ack_open = cache.check(KEY, (0, 1), false, (0, 1));
        assert_eq!(
            ack_open,
            SessionCheck::Refused(ErrorCode::InvalidRequest, None)
        );
        cache.check(KEY, (0, 1), true, (0, 1));
        cache.update(KEY, [named(0)], &[]);
        let wrong = cache.check(KEY, (5, 1), true, (0, 1));
        let dropped = Some(BTreeSet::from([tp(0)]));
        assert_eq!(
            wrong,
            SessionCheck::Refused(ErrorCode::InvalidShareSessionEpoch, dropped)
        );
        assert!(cache.is_empty(), "a wrong epoch ends the session");
    }

    #[test]
    fn a_full_cache_drops_idle_sessions_only() {
        let mut cache = ShareSessionCache::new(1);
        cache.check(("g", "a"), (0, 1), true, (0, 100));
        let full = cache.check(("g", "b"), (0, 1), true, (50, 100));
        assert_eq!(
            full,
            SessionCheck::Refused(ErrorCode::ShareSessionLimitReached, None)
        );
        assert_eq!(
            cache.check(("g", "b"), (0, 1), true, (101, 100)),
            SessionCheck::Opened(None)
        );
        assert_eq!(cache.len(), 1);
        // Reopening one's own session never counts against the cap.
        let again = cache.check(("g", "b"), (0, 1), true, (102, 100));
        assert_eq!(again, SessionCheck::Opened(Some(BTreeSet::new())));
    }

    #[test]
    fn a_closed_connection_ends_its_sessions_only() {
        let mut cache = ShareSessionCache::new(10);
        cache.check(("g", "a"), (0, 7), true, (0, 1));
        cache.update(("g", "a"), [named(0)], &[]);
        cache.check(("g", "b"), (0, 8), true, (0, 1));
        let ended = cache.close_connection(7);
        assert_eq!(
            ended,
            vec![(("g".to_string(), "a".to_string()), vec![tp(0)])]
        );
        assert_eq!(cache.len(), 1);
        assert!(cache.close_connection(7).is_empty());
    }

    #[test]
    fn partitions_are_known_by_the_topic_id_they_were_added_under() {
        let mut cache = ShareSessionCache::new(10);
        cache.check(KEY, (0, 1), true, (0, 1));
        cache.update(KEY, [named(0), named(1)], &[]);
        // The topic is deleted and created again under its name: the
        // client forgets the old id, whose name the broker no longer
        // knows, and the partition leaves the session all the same.
        let recreated: TopicId = [2; 16];
        assert_eq!(cache.update(KEY, [], &[(ID, 0)]), vec![named(1)]);
        // Forgetting the new id does not drop what was added by the old.
        assert_eq!(cache.update(KEY, [], &[(recreated, 1)]), vec![named(1)]);
        // Adding the new id replaces the old one's entry.
        assert_eq!(
            cache.update(KEY, [(tp(1), recreated)], &[]),
            vec![(tp(1), recreated)]
        );
    }
}
