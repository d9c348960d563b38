//! Partition → shard placement.
//!
//! `shard_of` is a pure function so that every shard (and every test) agrees on
//! the owner of a partition without asking anyone. Kafka clients spread load
//! over partitions `0..n` of a topic, so consecutive partitions of one topic
//! should land on consecutive shards: we hash the topic name once (FNV-1a, a
//! stable hash that does not change between Rust releases, unlike `DefaultHasher`)
//! to pick a starting shard and add the partition number. A topic with at least
//! as many partitions as shards therefore uses every shard, and different
//! topics start on different shards so small topics do not pile onto shard 0.

/// FNV-1a over the topic name: stable across builds and platforms.
pub fn topic_hash(topic: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in topic.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The shard that owns `partition` of `topic` when the broker runs `shard_count` shards.
pub fn shard_of(topic: &str, partition: i32, shard_count: usize) -> usize {
    let shard_count = shard_count.max(1) as u64;
    let start = topic_hash(topic) % shard_count;
    let partition = u64::from(partition.unsigned_abs());
    ((start + partition % shard_count) % shard_count) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_shard_owns_everything() {
        for p in 0..100 {
            assert_eq!(shard_of("orders", p, 1), 0);
        }
    }

    #[test]
    fn consecutive_partitions_use_every_shard() {
        for shards in 1..=16usize {
            let mut seen = vec![0usize; shards];
            for p in 0..shards as i32 {
                seen[shard_of("clicks", p, shards)] += 1;
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "shards={shards} seen={seen:?}"
            );
        }
    }

    #[test]
    fn is_stable_and_in_range() {
        assert_eq!(topic_hash("a"), 0xaf63_dc4c_8601_ec8c);
        for p in 0..1000 {
            let s = shard_of("t", p, 7);
            assert!(s < 7);
            assert_eq!(s, shard_of("t", p, 7));
        }
    }

    #[test]
    fn topics_start_on_different_shards() {
        let starts: std::collections::HashSet<usize> = (0..64)
            .map(|i| shard_of(&format!("topic-{i}"), 0, 8))
            .collect();
        assert!(starts.len() >= 6, "starts={starts:?}");
    }
}
