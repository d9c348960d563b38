//! Both ends of log reconciliation after a leader change: the leader's
//! diverging-epoch check on a follower's fetch (Fetch v12+, KIP-595's
//! `diverging_epoch`), and the follower's truncation point from the leader's
//! answer (KIP-101 with KIP-279's multi-round fix).
//!
//! Why two rounds can be needed (KIP-279): when the leader answers with an
//! epoch the follower does not have, the follower cannot know where its log
//! and the leader's part; it truncates to the end of its own largest epoch
//! below the leader's answer and asks again with its new latest epoch. Each
//! round removes at least one epoch, so the exchange ends.
//!
//! The follower's side reads as Kafka's
//! `AbstractFetcherThread.getOffsetTruncationState`; the leader's as
//! `Partition.validateFetchOffsetAndMaybeGetDivergingEpoch`.

use engine::types::{LeaderEpoch, Offset};

use super::epoch_cache::{
    EpochEndOffset, LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET,
};
use super::ReplicationError;

/// Where a follower truncates its log before it fetches again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncationPoint {
    /// The new log end offset (records at and after it are removed; the
    /// epoch cache is truncated from the end to it too).
    pub offset: Offset,
    /// `false`: truncate, then ask the leader again with the new latest
    /// epoch (OffsetForLeaderEpoch, or the next fetch's `last_fetched_epoch`)
    /// — the follower did not know the leader's epoch (KIP-279).
    pub complete: bool,
}

/// Where a follower truncates, given its own epoch cache and log end offset,
/// its high watermark, and the leader's answer for the follower's latest
/// epoch (an OffsetForLeaderEpoch response, or a fetch response's
/// `diverging_epoch`).
///
/// - The leader does not know the epoch (undefined end offset): fall back to
///   the high watermark, as Kafka does (an old leader, or an empty cache).
/// - Undefined epoch with an end offset (OffsetForLeaderEpoch v0): the end
///   offset.
/// - The follower has the leader's epoch: the smaller of both ends of it.
/// - The follower's largest epoch ≤ the leader's differs from it: truncate
///   to the end of that epoch and ask again (`complete: false`).
/// - The follower's cache cannot place the leader's epoch (empty): the
///   leader's end offset. (A cache whose epochs all start above it answers
///   its first start offset, so the follower truncates to there.)
///
/// The result never exceeds the follower's log end offset.
pub fn truncation_offset(
    local_cache: &LeaderEpochCache,
    local_log_end_offset: Offset,
    local_high_watermark: Offset,
    leader_answer: EpochEndOffset,
) -> TruncationPoint {
    assert!(local_high_watermark <= local_log_end_offset);
    let point = if leader_answer.end_offset == UNDEFINED_EPOCH_OFFSET {
        TruncationPoint {
            offset: local_high_watermark,
            complete: true,
        }
    } else if leader_answer.epoch == UNDEFINED_EPOCH {
        TruncationPoint {
            offset: leader_answer.end_offset.min(local_log_end_offset),
            complete: true,
        }
    } else {
        let local = local_cache.end_offset_for(leader_answer.epoch, local_log_end_offset);
        if local.end_offset == UNDEFINED_EPOCH_OFFSET {
            TruncationPoint {
                offset: leader_answer.end_offset.min(local_log_end_offset),
                complete: true,
            }
        } else if local.epoch != leader_answer.epoch {
            TruncationPoint {
                offset: local.end_offset.min(local_log_end_offset),
                complete: false,
            }
        } else {
            TruncationPoint {
                offset: local
                    .end_offset
                    .min(leader_answer.end_offset)
                    .min(local_log_end_offset),
                complete: true,
            }
        }
    };
    assert!(point.offset <= local_log_end_offset);
    point
}

/// The leader's check of a follower's Fetch v12+ position: `Ok(Some(answer))`
/// when the follower's log diverges from the leader's at `fetch_offset` with
/// `last_fetched_epoch` (the follower's latest epoch), `Ok(None)` when the
/// fetch is consistent and may be served (and counted for the HW), and an
/// error (`OFFSET_OUT_OF_RANGE`) when the leader cannot say where that epoch
/// ends.
///
/// Diverging means: the leader's largest epoch ≤ `last_fetched_epoch` is
/// smaller than it (the leader never had that epoch), or that epoch ends in
/// the leader's log before `fetch_offset`. A fetch without a last fetched
/// epoch (`None`: the follower's cache is empty) is not checked.
///
/// When the answer is `Some`, the leader must not update its view of the
/// follower (Kafka skips `updateFollowerFetchState`): the fetch offset names
/// records the leader does not have.
pub fn diverging_epoch(
    leader_cache: &LeaderEpochCache,
    leader_log_end_offset: Offset,
    fetch_offset: Offset,
    last_fetched_epoch: Option<LeaderEpoch>,
) -> Result<Option<EpochEndOffset>, ReplicationError> {
    let Some(last_fetched_epoch) = last_fetched_epoch else {
        return Ok(None);
    };
    let answer = leader_cache.end_offset_for(last_fetched_epoch, leader_log_end_offset);
    diverging_epoch_of_answer(answer, fetch_offset, last_fetched_epoch)
}

/// [`diverging_epoch`] once the leader has looked up `last_fetched_epoch`
/// in its log: `leader_answer` is its end offset for that epoch (Kafka's
/// `Log.endOffsetForEpoch`). The runtime asks its log rather than a bare
/// cache, because the log counts its current epoch as started at its end
/// before the epoch's first batch (Kafka's leader assigns it on election).
pub fn diverging_epoch_of_answer(
    leader_answer: EpochEndOffset,
    fetch_offset: Offset,
    last_fetched_epoch: LeaderEpoch,
) -> Result<Option<EpochEndOffset>, ReplicationError> {
    let answer = leader_answer;
    if answer.epoch == UNDEFINED_EPOCH || answer.end_offset == UNDEFINED_EPOCH_OFFSET {
        return Err(ReplicationError::UnknownLastFetchedEpoch { last_fetched_epoch });
    }
    if answer.epoch < last_fetched_epoch || answer.end_offset < fetch_offset {
        return Ok(Some(answer));
    }
    Ok(None)
}

/// A Fetch v12+ partition's `last_fetched_epoch` as the leader reads it:
/// a negative value (the wire's `-1`, also what older versions decode to)
/// means the follower's log has no epoch, and the fetch is not checked.
pub fn last_fetched_epoch_from_wire(last_fetched_epoch: i32) -> Option<LeaderEpoch> {
    (last_fetched_epoch >= 0).then_some(last_fetched_epoch)
}

/// A Fetch response partition's `diverging_epoch` as the follower reads
/// it: present only with an epoch ≥ 0 (Kafka's `FetchResponse.isDivergingEpoch`;
/// the field's default is -1/-1, which every answer without one carries).
pub fn diverging_epoch_from_wire(epoch: i32, end_offset: i64) -> Option<EpochEndOffset> {
    (epoch >= 0).then_some(EpochEndOffset { epoch, end_offset })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(LeaderEpoch, Offset)]) -> LeaderEpochCache {
        let mut cache = LeaderEpochCache::new();
        for &(epoch, offset) in entries {
            cache.assign(epoch, offset).unwrap();
        }
        cache
    }

    fn answer(epoch: LeaderEpoch, end_offset: Offset) -> EpochEndOffset {
        EpochEndOffset { epoch, end_offset }
    }

    fn point(offset: Offset, complete: bool) -> TruncationPoint {
        TruncationPoint { offset, complete }
    }

    /// KIP-101's first scenario: the follower's uncommitted tail in the same
    /// epoch is cut where the leader's epoch ends, not at the follower's HW.
    #[test]
    fn same_epoch_truncates_to_the_smaller_end() {
        let follower = cache(&[(0, 0)]);
        // The follower has 0..12 of epoch 0, the leader only 0..10.
        assert_eq!(
            truncation_offset(&follower, 12, 5, answer(0, 10)),
            point(10, true)
        );
        // The follower is behind: nothing to truncate.
        assert_eq!(
            truncation_offset(&follower, 8, 5, answer(0, 10)),
            point(8, true)
        );
    }

    /// KIP-279: the follower wrote epoch 2 that the leader never saw; the
    /// leader answers epoch 1's end; the follower cuts its epoch 2 and asks
    /// again with epoch 1.
    #[test]
    fn unknown_leader_epoch_needs_another_round() {
        let follower = cache(&[(0, 0), (2, 10)]);
        // Leader's answer for epoch 2: its largest epoch ≤ 2 is 1, ending at 14.
        let first = truncation_offset(&follower, 16, 8, answer(1, 14));
        assert_eq!(first, point(10, false));
        // Second round: the follower asks for epoch 0; the leader's epoch 0
        // ended at 9 (epoch 1 started there).
        let mut follower = follower;
        follower.truncate_from_end(first.offset);
        assert_eq!(
            truncation_offset(&follower, 10, 8, answer(0, 9)),
            point(9, true)
        );
    }

    #[test]
    fn undefined_answers_fall_back() {
        let follower = cache(&[(3, 0)]);
        assert_eq!(
            truncation_offset(&follower, 20, 7, EpochEndOffset::UNDEFINED),
            point(7, true),
            "the leader knows nothing: the high watermark"
        );
        assert_eq!(
            truncation_offset(&follower, 20, 7, answer(UNDEFINED_EPOCH, 15)),
            point(15, true),
            "OffsetForLeaderEpoch v0: the end offset"
        );
        // The follower's epochs all start after 2 (its first is 3): Kafka's
        // cache answers (2, its first start offset), so everything goes.
        assert_eq!(
            truncation_offset(&follower, 20, 7, answer(2, 12)),
            point(0, true)
        );
        // The follower has no epochs at all: the leader's end offset.
        assert_eq!(
            truncation_offset(&LeaderEpochCache::new(), 20, 7, answer(2, 12)),
            point(12, true)
        );
        // Never past the follower's own log end.
        assert_eq!(
            truncation_offset(&LeaderEpochCache::new(), 4, 4, answer(2, 12)),
            point(4, true)
        );
    }

    #[test]
    fn leader_detects_divergence() {
        // The leader: epoch 1 from 0, epoch 3 from 10, log end 15.
        let leader = cache(&[(1, 0), (3, 10)]);
        // Consistent fetches.
        assert_eq!(diverging_epoch(&leader, 15, 12, Some(3)), Ok(None));
        assert_eq!(diverging_epoch(&leader, 15, 10, Some(1)), Ok(None));
        assert_eq!(diverging_epoch(&leader, 15, 5, None), Ok(None));
        // The follower has epoch 1 past where the leader's epoch 1 ended.
        assert_eq!(
            diverging_epoch(&leader, 15, 11, Some(1)),
            Ok(Some(answer(1, 10)))
        );
        // The follower has epoch 2, which the leader never had.
        assert_eq!(
            diverging_epoch(&leader, 15, 11, Some(2)),
            Ok(Some(answer(1, 10)))
        );
        // Past the leader's log end in the leader's own epoch.
        assert_eq!(
            diverging_epoch(&leader, 15, 16, Some(3)),
            Ok(Some(answer(3, 15)))
        );
        // An epoch above the leader's: the leader cannot answer.
        assert!(diverging_epoch(&leader, 15, 16, Some(4)).is_err());
    }

    /// The leader's check from its log's answer, as Kafka's
    /// `Partition.validateFetchOffsetAndMaybeGetDivergingEpoch`.
    #[test]
    fn leader_checks_its_own_answer() {
        // Same epoch, the follower ahead of the leader's end of it.
        assert_eq!(
            diverging_epoch_of_answer(answer(3, 15), 16, 3),
            Ok(Some(answer(3, 15)))
        );
        // Same epoch, at or behind the leader's end: consistent.
        assert_eq!(diverging_epoch_of_answer(answer(3, 15), 15, 3), Ok(None));
        assert_eq!(diverging_epoch_of_answer(answer(3, 15), 2, 3), Ok(None));
        // The leader never had the follower's epoch 2: diverging even when
        // the follower is behind the end of the leader's epoch 1.
        assert_eq!(
            diverging_epoch_of_answer(answer(1, 10), 4, 2),
            Ok(Some(answer(1, 10)))
        );
        // The leader cannot place the epoch: OFFSET_OUT_OF_RANGE.
        let unknown = diverging_epoch_of_answer(EpochEndOffset::UNDEFINED, 4, 7);
        assert_eq!(
            unknown.map_err(|e| e.error_code()),
            Err(engine::ErrorCode::OffsetOutOfRange)
        );
    }

    #[test]
    fn wire_values() {
        assert_eq!(last_fetched_epoch_from_wire(-1), None);
        assert_eq!(last_fetched_epoch_from_wire(0), Some(0));
        assert_eq!(last_fetched_epoch_from_wire(9), Some(9));
        assert_eq!(diverging_epoch_from_wire(-1, -1), None);
        assert_eq!(diverging_epoch_from_wire(0, 12), Some(answer(0, 12)));
    }

    /// The follower's answer to a `diverging_epoch` (KIP-595): the leader
    /// names the largest epoch it has ≤ the follower's last fetched one and
    /// where it ends; the follower cuts at the smaller of that and its own
    /// end of the epoch.
    #[test]
    fn follower_truncates_on_a_diverging_epoch() {
        // Old leader A wrote 0..10 in epoch 0 and, unreplicated, 10..14
        // still in epoch 0; B took over at 10 with epoch 1.
        let leader = cache(&[(0, 0), (1, 10)]);
        let follower = cache(&[(0, 0)]);
        let diverging = diverging_epoch(&leader, 18, 14, follower.latest_epoch())
            .unwrap()
            .unwrap();
        assert_eq!(diverging, answer(0, 10));
        assert_eq!(
            truncation_offset(&follower, 14, 8, diverging),
            point(10, true)
        );
        // A follower with an epoch 2 the leader (epoch 3 from 10) never
        // had, whose epoch 0 ran past the leader's: the leader answers its
        // epoch 1, the follower cuts its epoch 2 and learns on the next fetch
        // where epoch 0 ends (KIP-279's second round).
        let leader = cache(&[(0, 0), (1, 9), (3, 10)]);
        let mut follower = cache(&[(0, 0), (2, 12)]);
        let first = diverging_epoch(&leader, 15, 16, follower.latest_epoch())
            .unwrap()
            .unwrap();
        assert_eq!(first, answer(1, 10));
        let cut = truncation_offset(&follower, 16, 8, first);
        assert_eq!(cut, point(12, false));
        follower.truncate_from_end(cut.offset);
        let second = diverging_epoch(&leader, 15, 12, follower.latest_epoch())
            .unwrap()
            .unwrap();
        assert_eq!(second, answer(0, 9));
        assert_eq!(truncation_offset(&follower, 12, 8, second), point(9, true));
        assert_eq!(diverging_epoch(&leader, 15, 9, Some(0)), Ok(None));
    }

    /// The follower's two-step loop against a leader ends at the longest
    /// common prefix of the two logs (per-offset model, random histories).
    #[test]
    fn reconciliation_reaches_the_common_prefix() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(279);
        for _ in 0..2000 {
            // A shared history, then two forks with increasing epochs that
            // never reuse an epoch across the forks (one leader per epoch).
            let mut shared = Vec::new();
            let mut epoch = 0;
            for _ in 0..rng.gen_range(0..4) {
                let len: usize = rng.gen_range(1..4);
                shared.extend(std::iter::repeat_n(epoch, len));
                epoch += rng.gen_range(1..3);
            }
            let mut leader_log = shared.clone();
            let mut follower_log = shared.clone();
            for _ in 0..rng.gen_range(0..4) {
                let len: usize = rng.gen_range(0..4);
                let into_leader = rng.gen_bool(0.5);
                let log = if into_leader {
                    &mut leader_log
                } else {
                    &mut follower_log
                };
                log.extend(std::iter::repeat_n(epoch, len));
                epoch += 1;
            }
            // The leader's current epoch is above everything.
            leader_log.push(epoch);
            let to_cache = |log: &[LeaderEpoch]| {
                let mut c = LeaderEpochCache::new();
                for (offset, &e) in log.iter().enumerate() {
                    c.assign(e, offset as Offset).unwrap();
                }
                c
            };
            let leader_cache = to_cache(&leader_log);
            let common = leader_log
                .iter()
                .zip(&follower_log)
                .take_while(|(a, b)| a == b)
                .count();
            let mut rounds = 0;
            loop {
                rounds += 1;
                assert!(rounds < 20, "reconciliation must end");
                let follower_cache = to_cache(&follower_log);
                let leo = follower_log.len() as Offset;
                match diverging_epoch(
                    &leader_cache,
                    leader_log.len() as Offset,
                    leo,
                    follower_cache.latest_epoch(),
                )
                .unwrap()
                {
                    None => break,
                    Some(answer) => {
                        let t = truncation_offset(&follower_cache, leo, 0, answer);
                        assert!(
                            t.offset >= common as Offset,
                            "never below the common prefix"
                        );
                        follower_log.truncate(t.offset as usize);
                    }
                }
            }
            assert_eq!(follower_log.len(), common, "leader {leader_log:?}");
        }
    }
}
