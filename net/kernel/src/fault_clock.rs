//! `RILL_FAULT_CLOCK=1`, in debug builds only: a wall-clock jump injected
//! into a running broker. Its clock (`engine::Clock`, the one every wall
//! time of the broker is read from) is then the system clock plus the
//! milliseconds written in the file [`FAULT_CLOCK_OFFSET_FILE`] of its data
//! dir (none, or unreadable: 0), read every 50 ms. A test or the nemesis
//! (`rill-bench verify --faults clock`) writes it to jump the broker's
//! clock forward or back, and removes it to jump back to the real time.
//! Monotonic time (timers, `Instant`) does not move, as a real jump of the
//! system clock moves only CLOCK_REALTIME. A release build never reads the
//! variable.

use engine::Clock;
use std::path::Path;

/// The variable that arms the point.
pub const FAULT_CLOCK: &str = "RILL_FAULT_CLOCK";

/// The file in the data dir holding the offset, in milliseconds (a file,
/// so the partition scan skips it).
pub const FAULT_CLOCK_OFFSET_FILE: &str = "rill-fault-clock-offset-ms";

/// The broker's clock: the system clock, or a skewed one that follows
/// [`FAULT_CLOCK_OFFSET_FILE`] in `data_dir` when the point is armed.
pub fn broker_clock(data_dir: &Path) -> Clock {
    #[cfg(debug_assertions)]
    if std::env::var_os(FAULT_CLOCK).is_some_and(|v| v == "1") {
        let clock = Clock::skewed();
        let follower = clock.clone();
        let file = data_dir.join(FAULT_CLOCK_OFFSET_FILE);
        tracing::warn!(file = %file.display(), "fault injection: the wall clock follows this file's offset");
        let spawned = std::thread::Builder::new()
            .name("fault-clock".into())
            .spawn(move || loop {
                let offset_ms = (std::fs::read_to_string(&file).ok())
                    .and_then(|text| text.trim().parse::<i64>().ok())
                    .unwrap_or(0);
                follower.set_skew_ms(offset_ms);
                std::thread::sleep(std::time::Duration::from_millis(50));
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "fault clock thread not started");
        }
        return clock;
    }
    let _ = data_dir;
    Clock::system()
}
