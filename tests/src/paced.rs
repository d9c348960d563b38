//! Writes that are still going when a test's fault lands.
//!
//! A fault test proves its fault hit work in flight only if it can show
//! both sides of the fault: records acknowledged before it, and records
//! still being sent when it landed. [`PacedWrites`] sends records one at a
//! time at a fixed pace from its own task and records each
//! acknowledgement; the test waits for some acknowledgements
//! ([`PacedWrites::wait_acked`]), lands its fault, checks the writer was
//! not done ([`PacedWrites::sent`] below the total), then collects what was
//! acknowledged ([`PacedWrites::finish`]) and checks every one of those
//! records survived.

use rdkafka::producer::{FutureProducer, FutureRecord};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One acknowledged record: its index in the records given, partition and
/// offset.
pub type Acked = (usize, i32, i64);

/// Records being sent at a pace by a background task.
pub struct PacedWrites {
    acked: Arc<Mutex<Vec<Acked>>>,
    sent: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl PacedWrites {
    /// Starts sending `records` to `topic` (to `partition` if given), one
    /// every `every`; each delivery is awaited in its own task, so a slow
    /// acknowledgement does not hold the pace back.
    pub fn start(
        producer: FutureProducer,
        topic: &str,
        partition: Option<i32>,
        records: Vec<(Option<Vec<u8>>, Vec<u8>)>,
        every: Duration,
    ) -> PacedWrites {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (acked_in, sent_in, stop_in) = (acked.clone(), sent.clone(), stop.clone());
        let topic = topic.to_string();
        let task = tokio::spawn(async move {
            let mut deliveries = Vec::new();
            for (index, (key, value)) in records.into_iter().enumerate() {
                if stop_in.load(Ordering::Acquire) {
                    break;
                }
                let mut record: FutureRecord<'_, Vec<u8>, Vec<u8>> =
                    FutureRecord::to(&topic).payload(&value);
                if let Some(key) = &key {
                    record = record.key(key);
                }
                if let Some(partition) = partition {
                    record = record.partition(partition);
                }
                let Ok(delivery) = producer.send_result(record) else {
                    break;
                };
                sent_in.fetch_add(1, Ordering::AcqRel);
                let acked = acked_in.clone();
                deliveries.push(tokio::spawn(async move {
                    if let Ok(Ok(d)) = delivery.await {
                        acked
                            .lock()
                            .expect("acked")
                            .push((index, d.partition, d.offset));
                    }
                }));
                tokio::time::sleep(every).await;
            }
            for delivery in deliveries {
                let _ = delivery.await;
            }
        });
        PacedWrites {
            acked,
            sent,
            stop,
            task,
        }
    }

    /// Waits until at least `count` records are acknowledged.
    ///
    /// # Panics
    /// After `timeout`.
    pub fn wait_acked(&self, count: usize, timeout: Duration) {
        let started = Instant::now();
        while self.acked.lock().expect("acked").len() < count {
            assert!(
                started.elapsed() < timeout,
                "{} of {count} records acknowledged after {timeout:?}",
                self.acked.lock().expect("acked").len()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How many records were handed to the producer so far.
    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::Acquire)
    }

    /// How many were acknowledged so far.
    pub fn acked_count(&self) -> usize {
        self.acked.lock().expect("acked").len()
    }

    /// Stops sending, waits for every record handed over to be
    /// acknowledged or to fail (bounded by the producer's
    /// `message.timeout.ms`), and returns the acknowledged ones.
    pub async fn finish(self) -> Vec<Acked> {
        self.stop.store(true, Ordering::Release);
        self.complete().await
    }

    /// Sends the rest of the records at the same pace (a producer going on
    /// through the fault), waits for each to be acknowledged or to fail,
    /// and returns the acknowledged ones.
    pub async fn complete(self) -> Vec<Acked> {
        self.task.await.expect("paced writer");
        let mut acked = self.acked.lock().expect("acked").clone();
        acked.sort_unstable();
        acked
    }
}
