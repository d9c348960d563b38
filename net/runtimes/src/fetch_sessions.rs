//! Incremental fetch sessions (KIP-227): the cache of one shard.
//!
//! A session remembers, per partition a client fetches, the request's
//! parameters (fetch offset, max bytes, epochs) and what the last response
//! told the client (high watermark, last stable offset, log start offset).
//! An incremental request then names only the partitions whose parameters
//! changed and those to forget; its response carries only the partitions
//! with records, a changed offset, or an error.
//!
//! **Where the cache lives.** A connection is served from start to end by
//! one shard, and a client keeps its session on the connection it made it
//! on (the Java client does; Kafka does not require it, but a session is
//! only an optimisation: a client that loses it fetches in full again). So
//! each shard keeps its own cache, with no lock and no cross-shard call on
//! the fetch path, and a session id names its shard: `id - 1 ≡ shard
//! (mod shards)`. A session id presented on another shard (the client
//! reconnected and landed elsewhere) is FETCH_SESSION_ID_NOT_FOUND, which
//! makes the client start over with a full fetch, as after an eviction.
//!
//! `max.incremental.fetch.session.cache.slots` is Kafka's cap for the
//! whole broker: rill splits it evenly over the shards (the first shards
//! take the remainder), so the broker never holds more sessions than the
//! cap. A shard whose share is 0 serves only sessionless fetches.
//!
//! Eviction follows Kafka's `FetchSessionCache`: when the shard's share is
//! full, a new session may take the place of (1) the least recently used
//! session when it has gone unused for [`EVICTION_MS`], else (2) the
//! smallest session it outranks: a follower's session outranks every
//! consumer session, and among sessions of the same kind the larger
//! (more partitions) wins; a consumer may only displace sessions older
//! than [`EVICTION_MS`], a follower also any consumer session. A session
//! that can displace none is not made: the fetch is answered sessionless
//! (session id 0), and the client keeps sending full fetches. The shard's
//! share is small (1000 by default): the eviction scans it, which is done
//! only when the share is full.

use std::collections::{BTreeMap, HashMap};

/// Kafka's `INITIAL_EPOCH`: a full fetch that asks for a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// Kafka's `FINAL_EPOCH`: a full fetch without a session (closing the one
/// named, if any).
pub const FINAL_EPOCH: i32 = -1;
/// Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: a session unused
/// this long may be evicted by anyone, and one this old by a session that
/// outranks it.
pub const EVICTION_MS: i64 = 120_000;

/// How a session names a partition's topic: by name up to Fetch v12, by
/// topic id from v13. A session uses one or the other throughout.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TopicRef {
    /// Topic name (Fetch v7 – v12).
    Name(String),
    /// Topic id (Fetch v13+).
    Id([u8; 16]),
}

/// A partition of a session.
pub type SessionKey = (TopicRef, i32);

/// What a request says of one partition (the client's side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionParams {
    /// The offset to read from.
    pub fetch_offset: i64,
    /// The partition's byte cap.
    pub max_bytes: i32,
    /// The client's current leader epoch.
    pub current_leader_epoch: i32,
    /// The epoch of the client's last fetched batch (followers, v12+).
    pub last_fetched_epoch: i32,
    /// A follower's log start offset.
    pub log_start_offset: i64,
}

/// What the last response said of one partition: an incremental response
/// carries the partition again only when one of these changed, or it has
/// records or an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionSeen {
    /// High watermark (-1: never sent, or an error was: send again).
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset.
    pub log_start_offset: i64,
}

impl PartitionSeen {
    /// Nothing sent yet: the next response carries the partition.
    pub const UNSENT: PartitionSeen = PartitionSeen {
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
    };
}

/// One partition of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedPartition {
    /// The client's side.
    pub params: PartitionParams,
    /// The last response's side.
    pub seen: PartitionSeen,
}

/// One session.
#[derive(Debug, Clone)]
pub struct FetchSession {
    /// Its id (never 0).
    pub id: i32,
    /// The epoch the next incremental request must carry.
    pub next_epoch: i32,
    /// A follower's session (outranks consumers' at eviction).
    pub privileged: bool,
    /// Made by a Fetch v13+ request: partitions are named by topic id.
    pub uses_topic_ids: bool,
    /// Its partitions, in a stable order.
    pub partitions: BTreeMap<SessionKey, CachedPartition>,
    created_ms: i64,
    last_used_ms: i64,
}

impl FetchSession {
    /// Kafka's `EvictableKey` order: privileged, then size, then id.
    fn rank(&self) -> (bool, usize, i32) {
        (self.privileged, self.partitions.len(), self.id)
    }
}

/// Why an incremental request is refused (Kafka's top-level error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// FETCH_SESSION_ID_NOT_FOUND (70): no such session on this shard.
    #[error("fetch session not found")]
    NotFound,
    /// INVALID_FETCH_SESSION_EPOCH (71): not the epoch the session expects.
    #[error("invalid fetch session epoch")]
    InvalidEpoch,
    /// FETCH_SESSION_TOPIC_ID_ERROR (106): the request names topics by id
    /// and the session by name, or the other way round.
    #[error("fetch session topic id mismatch")]
    TopicIdMismatch,
}

/// The cache's figures for `/metrics` (the kernel's type: it renders them).
pub use kernel::metrics::FetchSessionCounters as CacheStats;

/// The session cache of one shard.
#[derive(Debug)]
pub struct FetchSessionCache {
    /// This shard's share of the broker's cap.
    slots: usize,
    shard: usize,
    shards: usize,
    /// The next id's sequence number (id = 1 + shard + shards · seq).
    next_seq: u32,
    sessions: HashMap<i32, FetchSession>,
    evictions: u64,
}

/// The next epoch after `epoch`, wrapping past `i32::MAX` to 1 (Kafka's
/// `FetchMetadata.nextEpoch`).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessionCache {
    /// The cache of shard `shard` of `shards`, with its share of the
    /// broker's `total_slots`.
    pub fn new(total_slots: usize, shard: usize, shards: usize) -> FetchSessionCache {
        let shards = shards.max(1);
        let slots = total_slots / shards + usize::from(shard < total_slots % shards);
        FetchSessionCache {
            slots,
            shard,
            shards,
            next_seq: 0,
            sessions: HashMap::new(),
            evictions: 0,
        }
    }

    /// This shard's share of the cap.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The figures for `/metrics`.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            sessions: self.sessions.len() as u64,
            partitions: self
                .sessions
                .values()
                .map(|s| s.partitions.len() as u64)
                .sum(),
            evictions: self.evictions,
        }
    }

    /// The session `id`, if this shard holds it.
    pub fn get(&self, id: i32) -> Option<&FetchSession> {
        self.sessions.get(&id)
    }

    /// Closes session `id` (a FINAL_EPOCH request, or a new INITIAL one
    /// naming it); whether it was held.
    pub fn remove(&mut self, id: i32) -> bool {
        self.sessions.remove(&id).is_some()
    }

    /// Makes a session of `partitions` for a full fetch with INITIAL_EPOCH
    /// when the share has room or an eviction makes some; its id, or
    /// `None` when the fetch stays sessionless.
    pub fn create(
        &mut self,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: BTreeMap<SessionKey, CachedPartition>,
        now_ms: i64,
    ) -> Option<i32> {
        if self.sessions.len() >= self.slots
            && !self.try_evict(privileged, partitions.len(), now_ms)
        {
            return None;
        }
        let id = self.new_id()?;
        let session = FetchSession {
            id,
            next_epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            uses_topic_ids,
            partitions,
            created_ms: now_ms,
            last_used_ms: now_ms,
        };
        self.sessions.insert(id, session);
        Some(id)
    }

    /// A fresh id of this shard, none in use; `None` only if every id of
    /// the shard is (more sessions than a shard's share can ever hold).
    fn new_id(&mut self) -> Option<i32> {
        let per_shard = (i32::MAX as u64 - 1) / self.shards as u64;
        for _ in 0..=self.sessions.len() {
            let seq = u64::from(self.next_seq) % per_shard;
            self.next_seq = self.next_seq.wrapping_add(1);
            let id = 1 + self.shard as u64 + self.shards as u64 * seq;
            let id = i32::try_from(id).ok()?;
            if !self.sessions.contains_key(&id) {
                return Some(id);
            }
        }
        None
    }

    /// Kafka's `tryEvict`: the least recently used session if stale, else
    /// the lowest-ranked evictable one if the new session (ranked with id
    /// 0) is not below it.
    fn try_evict(&mut self, privileged: bool, size: usize, now_ms: i64) -> bool {
        let lru = self
            .sessions
            .values()
            .min_by_key(|s| (s.last_used_ms, s.id))
            .map(|s| (s.id, s.last_used_ms));
        let Some((lru_id, lru_used_ms)) = lru else {
            return false;
        };
        let victim = if now_ms - lru_used_ms > EVICTION_MS {
            Some(lru_id)
        } else {
            self.sessions
                .values()
                .filter(|s| {
                    let old = now_ms - s.created_ms > EVICTION_MS;
                    old || (privileged && !s.privileged)
                })
                .min_by_key(|s| s.rank())
                .filter(|s| (privileged, size, 0) >= s.rank())
                .map(|s| s.id)
        };
        match victim {
            Some(id) => {
                self.sessions.remove(&id);
                self.evictions += 1;
                true
            }
            None => false,
        }
    }

    /// An incremental request on session `id` at `epoch`: checks the
    /// epoch, applies the changed partitions then the forgotten ones
    /// (Kafka's order), moves the epoch on and returns the session.
    pub fn update(
        &mut self,
        id: i32,
        epoch: i32,
        uses_topic_ids: bool,
        changed: Vec<(SessionKey, PartitionParams)>,
        forgotten: &[SessionKey],
        now_ms: i64,
    ) -> Result<&FetchSession, SessionError> {
        let session = self.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if session.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return Err(SessionError::TopicIdMismatch);
        }
        for (key, params) in changed {
            session
                .partitions
                .entry(key)
                .and_modify(|cached| cached.params = params)
                .or_insert(CachedPartition {
                    params,
                    seen: PartitionSeen::UNSENT,
                });
        }
        for key in forgotten {
            session.partitions.remove(key);
        }
        session.next_epoch = next_epoch(session.next_epoch);
        session.last_used_ms = now_ms;
        Ok(session)
    }

    /// Records what a response of session `id` said of `key`; whether
    /// the response must carry the partition (records, an error, or an
    /// offset the client has not seen). A session gone meanwhile (evicted
    /// during the long poll) makes every partition worth sending.
    pub fn record_sent(
        &mut self,
        id: i32,
        key: &SessionKey,
        seen: PartitionSeen,
        has_records: bool,
        has_error: bool,
    ) -> bool {
        let Some(cached) = self
            .sessions
            .get_mut(&id)
            .and_then(|s| s.partitions.get_mut(key))
        else {
            return true;
        };
        let changed = cached.seen != seen;
        // After an error the partition is sent again once it clears.
        cached.seen = if has_error {
            PartitionSeen::UNSENT
        } else {
            seen
        };
        has_records || has_error || changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(offset: i64) -> PartitionParams {
        PartitionParams {
            fetch_offset: offset,
            max_bytes: 1 << 20,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: -1,
        }
    }

    fn key(partition: i32) -> SessionKey {
        (TopicRef::Name("t".into()), partition)
    }

    fn partitions(n: i32) -> BTreeMap<SessionKey, CachedPartition> {
        (0..n)
            .map(|p| {
                let cached = CachedPartition {
                    params: params(0),
                    seen: PartitionSeen::UNSENT,
                };
                (key(p), cached)
            })
            .collect()
    }

    fn seen(hw: i64) -> PartitionSeen {
        PartitionSeen {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
        }
    }

    #[test]
    fn ids_are_non_zero_and_name_their_shard() {
        let mut cache = FetchSessionCache::new(10, 2, 4);
        // Shard 2 of 4 holds 10/4 = 2 (the remainder went to shards 0, 1).
        for _ in 0..2 {
            let id = cache.create(false, false, partitions(1), 0).unwrap();
            assert_ne!(id, 0);
            assert_eq!((id - 1) % 4, 2);
        }
        assert_eq!(cache.create(false, false, partitions(1), 0), None);
        assert_eq!(cache.stats().sessions, 2);
    }

    #[test]
    fn the_cap_is_split_over_shards() {
        let shares: Vec<usize> = (0..4)
            .map(|s| FetchSessionCache::new(10, s, 4).slots())
            .collect();
        assert_eq!(shares, vec![3, 3, 2, 2]);
        assert_eq!(FetchSessionCache::new(1000, 0, 1).slots(), 1000);
        assert_eq!(FetchSessionCache::new(0, 0, 1).slots(), 0);
    }

    #[test]
    fn epochs_are_checked_and_move_on() {
        let mut cache = FetchSessionCache::new(10, 0, 1);
        let id = cache.create(false, false, partitions(2), 0).unwrap();
        assert_eq!(cache.get(id).unwrap().next_epoch, 1);
        let wrong = cache.update(id, 2, false, vec![], &[], 1).unwrap_err();
        assert_eq!(wrong, SessionError::InvalidEpoch);
        cache.update(id, 1, false, vec![], &[], 1).unwrap();
        assert_eq!(cache.get(id).unwrap().next_epoch, 2);
        let replayed = cache.update(id, 1, false, vec![], &[], 1).unwrap_err();
        assert_eq!(replayed, SessionError::InvalidEpoch);
        let unknown = cache.update(id + 1, 1, false, vec![], &[], 1).unwrap_err();
        assert_eq!(unknown, SessionError::NotFound);
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    #[test]
    fn topic_ids_and_names_do_not_mix() {
        let mut cache = FetchSessionCache::new(10, 0, 1);
        let id = cache.create(false, true, BTreeMap::new(), 0).unwrap();
        let error = cache.update(id, 1, false, vec![], &[], 0).unwrap_err();
        assert_eq!(error, SessionError::TopicIdMismatch);
    }

    #[test]
    fn incremental_requests_add_update_and_forget() {
        let mut cache = FetchSessionCache::new(10, 0, 1);
        let id = cache.create(false, false, partitions(3), 0).unwrap();
        let changed = vec![(key(1), params(50)), (key(7), params(3))];
        let session = cache.update(id, 1, false, changed, &[key(0)], 1).unwrap();
        let offsets: Vec<(i32, i64)> = session
            .partitions
            .iter()
            .map(|((_, p), c)| (*p, c.params.fetch_offset))
            .collect();
        assert_eq!(offsets, vec![(1, 50), (2, 0), (7, 3)]);
        // Named and forgotten in one request: forgotten (applied last).
        let session = cache.update(id, 2, false, vec![(key(9), params(0))], &[key(9)], 2);
        assert!(!session.unwrap().partitions.contains_key(&key(9)));
        assert_eq!(cache.stats().partitions, 3);
    }

    #[test]
    fn responses_carry_only_what_changed() {
        let mut cache = FetchSessionCache::new(10, 0, 1);
        let id = cache.create(false, false, partitions(1), 0).unwrap();
        assert!(
            cache.record_sent(id, &key(0), seen(5), false, false),
            "first time"
        );
        assert!(
            !cache.record_sent(id, &key(0), seen(5), false, false),
            "unchanged"
        );
        assert!(
            cache.record_sent(id, &key(0), seen(5), true, false),
            "records"
        );
        assert!(
            cache.record_sent(id, &key(0), seen(6), false, false),
            "HW moved"
        );
        assert!(
            cache.record_sent(id, &key(0), seen(6), false, true),
            "error"
        );
        assert!(
            cache.record_sent(id, &key(0), seen(6), false, false),
            "error cleared"
        );
        assert!(!cache.record_sent(id, &key(0), seen(6), false, false));
        assert!(
            cache.record_sent(id + 1, &key(0), seen(6), false, false),
            "gone"
        );
    }

    #[test]
    fn a_full_share_refuses_a_fresh_consumer_session() {
        let mut cache = FetchSessionCache::new(2, 0, 1);
        assert!(cache.create(false, false, partitions(1), 0).is_some());
        assert!(cache.create(false, false, partitions(1), 0).is_some());
        assert_eq!(cache.create(false, false, partitions(50), 10), None);
        assert_eq!(
            cache.stats(),
            CacheStats {
                sessions: 2,
                partitions: 2,
                evictions: 0
            }
        );
    }

    #[test]
    fn a_stale_session_is_evicted_by_anyone() {
        let mut cache = FetchSessionCache::new(2, 0, 1);
        let old = cache.create(false, false, partitions(9), 0).unwrap();
        let used = cache.create(false, false, partitions(9), 0).unwrap();
        cache
            .update(used, 1, false, vec![], &[], EVICTION_MS)
            .unwrap();
        let new = cache
            .create(false, false, partitions(1), EVICTION_MS + 1)
            .unwrap();
        assert!(cache.get(old).is_none(), "the least recently used went");
        assert!(cache.get(used).is_some() && cache.get(new).is_some());
        assert_eq!(cache.stats().evictions, 1);
    }

    #[test]
    fn a_follower_evicts_the_smallest_consumer_session() {
        let mut cache = FetchSessionCache::new(2, 0, 1);
        let big = cache.create(false, false, partitions(10), 0).unwrap();
        let small = cache.create(false, false, partitions(2), 0).unwrap();
        let follower = cache.create(true, false, partitions(1), 5).unwrap();
        assert!(cache.get(small).is_none());
        assert!(cache.get(big).is_some() && cache.get(follower).is_some());
        // A consumer cannot displace a fresh follower session, nor a fresh
        // consumer session, however large.
        assert_eq!(cache.create(false, false, partitions(100), 6), None);
        // Another follower session displaces the remaining consumer one.
        assert!(cache.create(true, false, partitions(1), 7).is_some());
        assert!(cache.get(big).is_none());
        // A follower does not displace a fresh follower session.
        assert_eq!(cache.create(true, false, partitions(1), 8), None);
        assert_eq!(cache.stats().evictions, 2);
    }

    #[test]
    fn an_old_session_yields_to_a_larger_one() {
        let mut cache = FetchSessionCache::new(1, 0, 1);
        let old = cache.create(false, false, partitions(3), 0).unwrap();
        // Used lately (not stale) but created long ago: evictable by a
        // session that outranks it, not by a smaller one.
        cache
            .update(old, 1, false, vec![], &[], EVICTION_MS + 10)
            .unwrap();
        assert_eq!(
            cache.create(false, false, partitions(2), EVICTION_MS + 20),
            None
        );
        assert!(cache
            .create(false, false, partitions(4), EVICTION_MS + 20)
            .is_some());
        assert!(cache.get(old).is_none());
    }

    #[test]
    fn a_zero_share_makes_no_session() {
        let mut cache = FetchSessionCache::new(0, 0, 1);
        assert_eq!(cache.create(true, false, partitions(1), 0), None);
    }
}
