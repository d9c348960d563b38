//! Key and message-size generators. Each producer owns one [`KeyChooser`] and
//! one [`SizeChooser`]; both are allocation-free per message (the Zipf table
//! is built once, up front).

use crate::workload::{KeyDistribution, MessageSize, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What a producer should do with the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyChoice {
    /// `None` for unkeyed messages.
    pub key: Option<u64>,
    /// Partition index in `0..partitions`, or `None` to let the sticky
    /// partitioner decide.
    pub partition: Option<u32>,
}

/// Chooses keys (and partitions derived from them) for one producer.
pub struct KeyChooser {
    distribution: KeyDistribution,
    partitions: u32,
    key_space: u64,
    next_key: u64,
    /// Cumulative Zipf probabilities, only for `KeyDistribution::Zipf`.
    zipf_cdf: Vec<f64>,
    rng: SmallRng,
}

impl KeyChooser {
    pub fn new(workload: &Workload, seed: u64) -> Self {
        let zipf_cdf = if workload.key_distribution == KeyDistribution::Zipf {
            zipf_cdf(workload.key_space, workload.zipf_exponent)
        } else {
            Vec::new()
        };
        KeyChooser {
            distribution: workload.key_distribution,
            partitions: workload.partitions_per_topic,
            key_space: workload.key_space,
            next_key: seed,
            zipf_cdf,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Maps keys onto `partitions` instead of the workload's count: a
    /// topic that already existed (`run --topic`) has the partitions it has.
    pub fn with_partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions.max(1);
        self
    }

    pub fn next_choice(&mut self) -> KeyChoice {
        let key = match self.distribution {
            KeyDistribution::None => {
                return KeyChoice {
                    key: None,
                    partition: None,
                }
            }
            KeyDistribution::RoundRobin => {
                let key = self.next_key;
                self.next_key = self.next_key.wrapping_add(1);
                key
            }
            KeyDistribution::Random => self.rng.gen_range(0..self.key_space),
            KeyDistribution::Zipf => {
                let u: f64 = self.rng.gen();
                // First rank whose cumulative probability reaches u.
                self.zipf_cdf.partition_point(|&p| p < u) as u64
            }
        };
        KeyChoice {
            key: Some(key),
            partition: Some((key % u64::from(self.partitions)) as u32),
        }
    }
}

/// Cumulative distribution of Zipf(s) over ranks 1..=n, normalised to 1.
pub fn zipf_cdf(key_space: u64, exponent: f64) -> Vec<f64> {
    let mut cdf = Vec::with_capacity(key_space as usize);
    let mut total = 0.0;
    for rank in 1..=key_space {
        total += 1.0 / (rank as f64).powf(exponent);
        cdf.push(total);
    }
    for value in &mut cdf {
        *value /= total;
    }
    if let Some(last) = cdf.last_mut() {
        *last = 1.0; // guard against rounding leaving u > last
    }
    cdf
}

/// Chooses message value sizes.
pub struct SizeChooser {
    size: MessageSize,
    rng: SmallRng,
}

impl SizeChooser {
    pub fn new(size: MessageSize, seed: u64) -> Self {
        SizeChooser {
            size,
            rng: SmallRng::seed_from_u64(seed ^ 0x5eed),
        }
    }

    pub fn next_size_bytes(&mut self) -> usize {
        match self.size {
            MessageSize::Fixed(bytes) => bytes as usize,
            MessageSize::Uniform {
                min_bytes,
                max_bytes,
            } => self.rng.gen_range(min_bytes..=max_bytes) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(distribution: KeyDistribution) -> Workload {
        Workload {
            key_distribution: distribution,
            partitions_per_topic: 4,
            key_space: 100,
            ..Workload::default()
        }
    }

    #[test]
    fn none_leaves_partition_to_sticky_partitioner() {
        let mut chooser = KeyChooser::new(&workload(KeyDistribution::None), 1);
        assert_eq!(
            chooser.next_choice(),
            KeyChoice {
                key: None,
                partition: None
            }
        );
    }

    #[test]
    fn keys_map_onto_the_topics_own_partition_count() {
        let mut chooser = KeyChooser::new(&workload(KeyDistribution::Random), 3).with_partitions(1);
        for _ in 0..100 {
            assert_eq!(chooser.next_choice().partition, Some(0));
        }
    }

    #[test]
    fn round_robin_cycles_partitions() {
        let mut chooser = KeyChooser::new(&workload(KeyDistribution::RoundRobin), 0);
        let partitions: Vec<u32> = (0..8)
            .map(|_| chooser.next_choice().partition.unwrap())
            .collect();
        assert_eq!(partitions, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn random_stays_in_key_space_and_spreads() {
        let mut chooser = KeyChooser::new(&workload(KeyDistribution::Random), 7);
        let mut per_partition = [0u32; 4];
        for _ in 0..10_000 {
            let choice = chooser.next_choice();
            assert!(choice.key.unwrap() < 100);
            per_partition[choice.partition.unwrap() as usize] += 1;
        }
        assert!(
            per_partition.iter().all(|&count| count > 2_000),
            "{per_partition:?}"
        );
    }

    #[test]
    fn zipf_is_skewed_towards_low_ranks() {
        let mut chooser = KeyChooser::new(&workload(KeyDistribution::Zipf), 3);
        let mut key_zero = 0;
        let draws = 20_000;
        for _ in 0..draws {
            let key = chooser.next_choice().key.unwrap();
            assert!(key < 100);
            if key == 0 {
                key_zero += 1;
            }
        }
        // With s = 1 and n = 100, P(rank 1) = 1 / H(100) ~= 0.193.
        let share = key_zero as f64 / draws as f64;
        assert!((0.17..0.22).contains(&share), "share {share}");
    }

    #[test]
    fn zipf_cdf_is_monotonic_and_ends_at_one() {
        let cdf = zipf_cdf(1000, 1.2);
        assert!(cdf.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(*cdf.last().unwrap(), 1.0);
    }

    #[test]
    fn uniform_sizes_stay_in_range() {
        let mut chooser = SizeChooser::new(
            MessageSize::Uniform {
                min_bytes: 10,
                max_bytes: 20,
            },
            1,
        );
        let sizes: Vec<usize> = (0..1000).map(|_| chooser.next_size_bytes()).collect();
        assert!(sizes.iter().all(|&size| (10..=20).contains(&size)));
        assert!(sizes.contains(&10) && sizes.contains(&20));
        let mut fixed = SizeChooser::new(MessageSize::Fixed(64), 1);
        assert_eq!(fixed.next_size_bytes(), 64);
    }
}
