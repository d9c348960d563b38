//! Splitting a request's items by owner shard and joining the owners'
//! replies back in request order (pure functions).

use engine::TopicPartition;
use std::collections::BTreeMap;

/// Groups item positions by owner shard: `owner -> positions`, positions in order.
pub fn split_by_owner<'a>(
    tps: impl IntoIterator<Item = &'a TopicPartition>,
    shard_count: usize,
) -> BTreeMap<usize, Vec<usize>> {
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (position, tp) in tps.into_iter().enumerate() {
        let owner = engine::shard::shard_of(&tp.topic, tp.partition, shard_count);
        groups.entry(owner).or_default().push(position);
    }
    groups
}

/// Puts per-owner replies back at their positions. A group whose replies are
/// missing (owner gone) gets `fallback(position)`.
///
/// The groups are those of [`split_by_owner`]: each position below `total`
/// in at most one group, and an owner answers each of its positions once
/// (in order). Anything else is a bug of the caller, not an input.
pub fn join_by_position<T>(
    total: usize,
    groups: Vec<(Vec<usize>, Option<Vec<T>>)>,
    mut fallback: impl FnMut(usize) -> T,
) -> Vec<T> {
    let mut slots: Vec<Option<T>> = (0..total).map(|_| None).collect();
    let mut joined = vec![false; total];
    for (positions, replies) in groups {
        for &position in &positions {
            assert!(
                position < total,
                "a joined position is one of the request's: position {position} of {total}"
            );
            assert!(
                !joined[position],
                "each position is joined once: position {position} is in two groups"
            );
            joined[position] = true;
        }
        match replies {
            Some(replies) => {
                assert_eq!(
                    replies.len(),
                    positions.len(),
                    "an owner answers each of its positions once: {} replies for positions {positions:?}",
                    replies.len()
                );
                for (position, reply) in positions.into_iter().zip(replies) {
                    slots[position] = Some(reply);
                }
            }
            None => {
                for position in positions {
                    slots[position] = Some(fallback(position));
                }
            }
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(position, slot)| slot.unwrap_or_else(|| fallback(position)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::TopicPartition;

    #[test]
    fn split_then_join_restores_request_order() {
        let tps: Vec<TopicPartition> = (0..10).map(|p| TopicPartition::new("t", p)).collect();
        let groups = split_by_owner(tps.iter(), 3);
        assert_eq!(groups.values().map(Vec::len).sum::<usize>(), 10);
        for (owner, positions) in &groups {
            for &p in positions {
                assert_eq!(engine::shard::shard_of("t", tps[p].partition, 3), *owner);
            }
        }
        // Each owner answers with the partition numbers of its positions.
        let answered: Vec<(Vec<usize>, Option<Vec<i32>>)> = groups
            .into_values()
            .map(|positions| {
                let replies = positions.iter().map(|&p| tps[p].partition).collect();
                (positions, Some(replies))
            })
            .collect();
        let joined = join_by_position(10, answered, |_| -1);
        assert_eq!(joined, (0..10).collect::<Vec<i32>>());
    }

    #[test]
    fn a_missing_owner_fails_only_its_positions() {
        let groups = vec![(vec![0, 2], Some(vec!["a", "c"])), (vec![1, 3], None)];
        let joined = join_by_position(4, groups, |_| "gone");
        assert_eq!(joined, vec!["a", "gone", "c", "gone"]);
    }

    #[test]
    fn single_shard_is_one_group() {
        let tps: Vec<TopicPartition> = (0..5).map(|p| TopicPartition::new("x", p)).collect();
        let groups = split_by_owner(tps.iter(), 1);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[&0], vec![0, 1, 2, 3, 4]);
    }
}
