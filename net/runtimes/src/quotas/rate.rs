//! A rate over a sliding window of samples (Kafka's `Rate` with
//! `quota.window.num` samples of `quota.window.size.seconds` each), and the
//! throttle time that brings an observed rate back to a quota.

use std::collections::VecDeque;

/// One sample: what was recorded in `[start_ms, start_ms + sample_ms)`.
#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    total: f64,
}

/// Values recorded over the last `samples × sample_ms`.
#[derive(Debug, Clone)]
pub struct WindowedRate {
    samples: VecDeque<Sample>,
    sample_ms: u64,
    count: usize,
}

impl WindowedRate {
    /// `count` samples of `sample_ms` (both at least 1).
    pub fn new(count: usize, sample_ms: u64) -> WindowedRate {
        WindowedRate {
            samples: VecDeque::with_capacity(count.max(1)),
            sample_ms: sample_ms.max(1),
            count: count.max(1),
        }
    }

    /// Adds `value` at `now_ms`.
    pub fn record(&mut self, now_ms: u64, value: f64) {
        self.purge(now_ms);
        let fresh = self
            .samples
            .back()
            .is_some_and(|s| now_ms < s.start_ms + self.sample_ms);
        if !fresh {
            self.samples.push_back(Sample {
                start_ms: now_ms,
                total: 0.0,
            });
        }
        if let Some(last) = self.samples.back_mut() {
            last.total += value;
        }
    }

    /// When the last value was recorded (`None`: nothing in the window).
    pub fn last_sample_ms(&self) -> Option<u64> {
        self.samples.back().map(|s| s.start_ms)
    }

    /// The rate per second at `now_ms`. The window counts as at least
    /// `count - 1` whole samples, as Kafka's does, so that a client's first
    /// burst is spread over the window rather than measured over a few
    /// milliseconds.
    pub fn per_second(&mut self, now_ms: u64) -> f64 {
        self.purge(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.total).sum();
        total * 1000.0 / self.window_ms(now_ms)
    }

    /// How long the client must pause so that its rate falls back to
    /// `quota` per second: `(rate - quota) / quota × window`, Kafka's
    /// formula, at most one whole window.
    pub fn throttle_ms(&mut self, now_ms: u64, quota: f64) -> u64 {
        if quota <= 0.0 || !quota.is_finite() {
            return 0;
        }
        let rate = self.per_second(now_ms);
        if rate <= quota {
            return 0;
        }
        let ms = (rate - quota) / quota * self.window_ms(now_ms);
        let cap = (self.count as u64).saturating_mul(self.sample_ms);
        (ms.ceil() as u64).min(cap)
    }

    fn window_ms(&self, now_ms: u64) -> f64 {
        let elapsed = self
            .samples
            .front()
            .map_or(0, |s| now_ms.saturating_sub(s.start_ms));
        let least = (self.count as u64 - 1).max(1) * self.sample_ms;
        elapsed.max(least) as f64
    }

    fn purge(&mut self, now_ms: u64) {
        let span = (self.count as u64).saturating_mul(self.sample_ms);
        while self
            .samples
            .front()
            .is_some_and(|s| s.start_ms + span <= now_ms)
        {
            self.samples.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_rate_is_measured_over_the_window() {
        let mut rate = WindowedRate::new(11, 1000);
        // 1000 units a second for 20 s.
        for second in 0..20u64 {
            for tenth in 0..10u64 {
                rate.record(second * 1000 + tenth * 100, 100.0);
            }
        }
        let measured = rate.per_second(20_000);
        assert!((measured - 1000.0).abs() < 100.0, "{measured}");
        assert_eq!(rate.throttle_ms(20_000, 2000.0), 0);
    }

    #[test]
    fn a_burst_is_spread_over_the_window_and_throttled() {
        let mut rate = WindowedRate::new(11, 1000);
        rate.record(0, 20_000.0);
        // 20 000 over the 10 s minimum window: 2000/s, twice a 1000/s quota.
        assert!((rate.per_second(10) - 2000.0).abs() < 1.0);
        // (2000 - 1000) / 1000 × 10 s = 10 s, capped at the whole window.
        assert_eq!(rate.throttle_ms(10, 1000.0), 10_000);
        assert_eq!(rate.throttle_ms(10, 5000.0), 0);
        // Once the samples age out nothing is left.
        assert_eq!(rate.per_second(12_000), 0.0);
        assert_eq!(rate.last_sample_ms(), None);
    }

    #[test]
    fn no_quota_never_throttles() {
        let mut rate = WindowedRate::new(2, 1000);
        rate.record(0, 1e12);
        assert_eq!(rate.throttle_ms(1, 0.0), 0);
        assert_eq!(rate.throttle_ms(1, f64::NAN), 0);
        assert!(rate.throttle_ms(1, 1.0) <= 2000);
    }
}
