//! The broker's state as Kafka numbers it (`BrokerState`, the JMX gauge
//! `kafka.server:type=KafkaServer,name=BrokerState`), served on `/metrics`
//! as `rill_broker_state`: operators script rolling restarts on it. A
//! starting broker answers no client until it is unfenced (its Kafka port
//! takes connections and answers nothing), so the admin port's gauge is
//! how a script tells that the broker is up.
//!
//! One per process: a process is one broker.

use std::sync::atomic::{AtomicU8, Ordering};

/// Kafka's broker states that rill passes through, with Kafka's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BrokerState {
    /// Started, not answering clients yet: catching up with the metadata
    /// log, or waiting for the active controller to unfence it.
    Starting = 1,
    /// Every shard answers clients.
    Running = 3,
    /// Stopping: handing its leaderships over while connections are served.
    PendingControlledShutdown = 6,
    /// Stopping: draining connections and closing its logs.
    ShuttingDown = 7,
}

static STATE: AtomicU8 = AtomicU8::new(BrokerState::Starting as u8);

/// Moves the broker to `state`.
pub fn set(state: BrokerState) {
    STATE.store(state as u8, Ordering::Release);
}

/// The broker's state, Kafka's number.
pub fn get() -> u8 {
    STATE.load(Ordering::Acquire)
}
