//! The engine's one source of wall-clock time.
//!
//! Every wall-clock read of the engine (append and log-append timestamps,
//! `segment.ms` rolls, `retention.ms`, `min.compaction.lag.ms`, producer-id
//! expiry, the `interval` flush policy's timer) goes through a [`Clock`],
//! carried in [`crate::EngineConfig::clock`]. In production it is the system
//! clock; a test hands the engine a [`Clock::manual`] clock and moves time
//! itself, so time-based behaviour runs deterministically and at once.
//!
//! Durations measured for statistics (write and fdatasync latency) use
//! `std::time::Instant` directly: they are not wall time, and a test clock
//! standing still would only zero the figures.
//!
//! Cost: reading the clock is one match plus either a `clock_gettime` (the
//! vDSO, ≈50 ns here) or one relaxed atomic load; the append path reads it
//! once per append, as it did before the seam. Cloning is a copy or one
//! `Arc` increment, and happens when a config is cloned, not per append.
//!
//! the runtimes' coordinators (group and transaction runtimes) read time too; they
//! can take the same `Clock` from the engine config so a whole broker runs
//! on one clock.

use crate::types::TimestampMs;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A source of wall-clock milliseconds. Cheap to clone; clones of a manual
/// clock share its time.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system's real-time clock.
    #[default]
    System,
    /// A clock that moves only when told to (tests). Shared by its clones.
    Manual(Arc<AtomicI64>),
    /// The system clock plus an offset that can be changed at any time:
    /// a wall-clock jump, forward or back, injected by a test (the
    /// broker's `RILL_FAULT_CLOCK`, debug builds only). Shared by clones.
    Skewed(Arc<AtomicI64>),
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Clock::System
    }

    /// The system clock, skewed by what [`Clock::set_skew_ms`] sets (0 at
    /// first).
    pub fn skewed() -> Self {
        Clock::Skewed(Arc::new(AtomicI64::new(0)))
    }

    /// Sets a skewed clock's offset from the system clock. Does nothing on
    /// the other clocks.
    pub fn set_skew_ms(&self, offset_ms: i64) {
        if let Clock::Skewed(skew_ms) = self {
            skew_ms.store(offset_ms, Ordering::Relaxed);
        }
    }

    /// A manual clock reading `start_ms` until it is moved.
    pub fn manual(start_ms: TimestampMs) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start_ms)))
    }

    /// Milliseconds since the Unix epoch. A system clock set before 1970
    /// reads 0 rather than failing: time is never an error on the append
    /// path.
    #[inline]
    pub fn now_ms(&self) -> TimestampMs {
        match self {
            Clock::System => system_now_ms(),
            Clock::Manual(now_ms) => now_ms.load(Ordering::Relaxed),
            Clock::Skewed(skew_ms) => {
                system_now_ms().saturating_add(skew_ms.load(Ordering::Relaxed))
            }
        }
    }

    /// Moves a manual clock forward by `delta_ms` (backward when negative).
    /// Does nothing on the system clock, which only time moves.
    pub fn advance_ms(&self, delta_ms: i64) {
        if let Clock::Manual(now_ms) = self {
            now_ms.fetch_add(delta_ms, Ordering::Relaxed);
        }
    }

    /// Sets a manual clock to `now_ms`. Does nothing on the system clock.
    pub fn set_ms(&self, now_ms: TimestampMs) {
        if let Clock::Manual(current_ms) = self {
            current_ms.store(now_ms, Ordering::Relaxed);
        }
    }

    /// Whether this is a manual clock.
    pub fn is_manual(&self) -> bool {
        matches!(self, Clock::Manual(_))
    }
}

fn system_now_ms() -> TimestampMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_it() {
        let clock = Clock::manual(1_000);
        let clone = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance_ms(250);
        assert_eq!(clone.now_ms(), 1_250);
        clone.set_ms(5_000);
        assert_eq!(clock.now_ms(), 5_000);
        clock.advance_ms(-1_000);
        assert_eq!(clock.now_ms(), 4_000);
        assert!(clock.is_manual());
    }

    #[test]
    fn a_skewed_clock_jumps_with_its_offset_and_clones_share_it() {
        let clock = Clock::skewed();
        let clone = clock.clone();
        let before = system_now_ms();
        clock.set_skew_ms(-3_600_000);
        let back = clone.now_ms();
        assert!(back < before - 3_500_000, "{back} {before}");
        clone.set_skew_ms(0);
        assert!(clock.now_ms() >= before);
        assert!(!clock.is_manual());
    }

    #[test]
    fn system_clock_reads_the_time_and_ignores_moves() {
        let clock = Clock::system();
        let before = system_now_ms();
        clock.advance_ms(1_000_000);
        clock.set_ms(0);
        let now = clock.now_ms();
        assert!(
            now >= before && now < before + 60_000,
            "now {now} before {before}"
        );
        assert!(!clock.is_manual());
    }
}
