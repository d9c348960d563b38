//! InitProducerId (key 22): producer ids for idempotent producers (the
//! default of the Java 3.x+ and franz-go producers). Transactions are not
//! served yet, so a transactional id is refused.
//!
//! Ids must not repeat, even across restarts, or a new producer would be taken
//! for an old one's retry. Without a replicated id block (Kafka's controller
//! hands out blocks), an id is built from the wall clock in ms, the shard and a
//! per-shard counter: unique unless one shard hands out more than 256 ids in
//! one millisecond, or the clock goes backwards across a restart.

use super::{Handler, HandlerFuture, Request};
use crate::codes;
use crate::shard::Shard;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::cell::Cell;
use std::rc::Rc;

/// v0–v4 (v5+ concern transactions v2).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::InitProducerId,
    min_version: 0,
    max_version: 4,
    handle,
};

thread_local! {
    /// Per-shard counter (each shard is one thread).
    static COUNTER: Cell<u64> = const { Cell::new(0) };
}

/// A fresh producer id: ms clock (41 bits) | shard (4 bits) | counter (8 bits).
pub fn next_producer_id(shard_id: usize, now_ms: u64) -> i64 {
    let counter = COUNTER.with(|c| {
        let n = c.get();
        c.set(n.wrapping_add(1));
        n
    });
    let id =
        ((now_ms & ((1 << 41) - 1)) << 12) | (((shard_id as u64) & 0xf) << 8) | (counter & 0xff);
    id as i64
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: InitProducerIdRequest = request.decode()?;
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        if body.transactional_id.is_some() {
            response.error_code = codes::INVALID_REQUEST;
        } else if body.producer_id.0 >= 0
            && body.producer_epoch >= 0
            && body.producer_epoch < i16::MAX - 1
        {
            // KIP-360: an idempotent producer bumps its own epoch after an error.
            response.producer_id = body.producer_id;
            response.producer_epoch = body.producer_epoch + 1;
        } else {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            response.producer_id = ProducerId(next_producer_id(shard.id, now_ms));
            response.producer_epoch = 0;
        }
        request.respond(&response)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_positive() {
        let a = next_producer_id(1, 1_800_000_000_000);
        let b = next_producer_id(1, 1_800_000_000_000);
        let c = next_producer_id(2, 1_800_000_000_000);
        assert!(a > 0 && b > 0 && c > 0);
        assert!(a != b && b != c && a != c);
    }
}
