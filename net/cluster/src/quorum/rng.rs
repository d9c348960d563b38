//! SplitMix64, a small seeded generator. The quorum needs randomness in two
//! places: each node's election timeout (raft-rs draws it from `thread_rng`,
//! which would make a simulated run unrepeatable, so the node overrides it
//! from this) and the simulation's scheduler. Our own 15 lines rather than
//! `rand`'s generators so that a seed means the same run whatever version of
//! `rand` is in the lock file.

/// A SplitMix64 generator (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator that yields the same sequence for the same seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..high` (`high > low`). The modulo bias is below
    /// 2^-40 for the ranges used here, which is fine for a scheduler.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        assert!(high > low, "empty range {low}..{high}");
        low + self.next_u64() % (high - low)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.range(0, 100) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_ranges_hold() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let mut c = SplitMix64::new(8);
        let first: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let other: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(first, other);
        for _ in 0..1000 {
            let value = a.range(10, 20);
            assert!((10..20).contains(&value));
        }
    }
}
