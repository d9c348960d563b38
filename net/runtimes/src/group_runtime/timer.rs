//! The per-shard timer task of the group coordinator.

use super::execute::deliver;
use super::persist::persist;
use super::replay::{led_unloaded, loaded_lease, unload_lost};
use super::TIMER_MAX_SLEEP_MS;
use crate::Shard;
use std::rc::Rc;
use std::time::Duration;

/// The per-shard timer: unloads the partitions this broker no longer
/// leads (their groups' timers stop with them), loads the ones it has come
/// to lead, and ticks the coordinator at its next deadline.
pub async fn run_timer(shard: Rc<Shard>) {
    let runtime = shard.runtime().groups.clone();
    loop {
        unload_lost(&shard, &runtime);
        for partition in led_unloaded(&shard, &runtime) {
            // NOT_COORDINATOR or a load in progress: the next round retries.
            let _ = loaded_lease(&shard, &runtime, partition).await;
        }
        let now = shard.now_ms();
        let deadline = runtime.coordinator.borrow().next_deadline_ms();
        let sleep_ms = deadline
            .map_or(TIMER_MAX_SLEEP_MS, |d| d - now)
            .clamp(1, TIMER_MAX_SLEEP_MS);
        glommio::timer::sleep(Duration::from_millis(sleep_ms as u64)).await;
        let now = shard.now_ms();
        let due = runtime
            .coordinator
            .borrow()
            .next_deadline_ms()
            .is_some_and(|d| d <= now);
        if !due {
            continue;
        }
        let (records, responses) = {
            let mut coordinator = runtime.coordinator.borrow_mut();
            let records = coordinator.tick(now);
            (records, coordinator.take_responses())
        };
        // A partition whose records did not persist is unloaded (persist
        // logs it); its waiters' answers are dropped with it.
        persist(&shard, &runtime, records).await;
        deliver(&runtime, responses);
    }
}
