//! InitProducerId (key 22): producer ids for idempotent and transactional
//! producers.
//!
//! Without a transactional id, any shard hands out a fresh id with epoch 0
//! (or, KIP-360, bumps the epoch of the id the producer names). With one,
//! the request goes to the transaction coordinator of the id (the owner
//! shard of its `__transaction_state` partition, created here on first
//! use), which keeps the producer id and bumps the epoch on every re-init,
//! aborting a transaction left open — so the previous producer is fenced.
//!
//! Ids must not repeat, even across restarts, or a new producer would be
//! taken for an old one's retry. Without a replicated id block (Kafka's
//! controller hands out blocks), an id is built from the wall clock:
//! `ms (41 bits) << 22 | shard (10 bits) << 12 | counter (12 bits)`. Each
//! shard keeps its own last millisecond and counter and never goes back: a
//! 4097th id in one millisecond borrows the next millisecond. Ids are unique
//! across shards (up to 1024), and across restarts unless the clock goes
//! back, or a restart takes less time than what was borrowed (4096 ids/ms).

use super::{Handler, HandlerFuture, Request};
use crate::shard::Shard;
use crate::txn_runtime::{self, TxnReply, TxnRequest};
use engine::ErrorCode;
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

/// Bits of the per-millisecond counter.
const COUNTER_BITS: u32 = 12;
/// Bits of the shard id.
const SHARD_BITS: u32 = 10;

thread_local! {
    /// Per-shard (each shard is one thread): last millisecond used, counter in it.
    static CLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A fresh producer id for this shard (see the module doc for the layout).
pub fn next_producer_id(shard_id: usize) -> i64 {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    producer_id_at(shard_id, now_ms)
}

/// [`next_producer_id`] at a given clock reading.
pub fn producer_id_at(shard_id: usize, now_ms: u64) -> i64 {
    let (ms, counter) = CLOCK.with(|clock| {
        let (last_ms, counter) = clock.get();
        let next = if now_ms > last_ms {
            (now_ms, 0)
        } else if counter + 1 < (1 << COUNTER_BITS) {
            (last_ms, counter + 1)
        } else {
            (last_ms + 1, 0)
        };
        clock.set(next);
        next
    });
    let id = ((ms & ((1 << 41) - 1)) << (SHARD_BITS + COUNTER_BITS))
        | (((shard_id as u64) & ((1 << SHARD_BITS) - 1)) << COUNTER_BITS)
        | counter;
    id as i64
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: InitProducerIdRequest = request.decode()?;
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        let expected = (body.producer_id.0 >= 0 && body.producer_epoch >= 0)
            .then_some((body.producer_id.0, body.producer_epoch));
        match body.transactional_id {
            Some(id) => {
                let reply = txn_runtime::call(
                    &shard,
                    TxnRequest::InitProducerId {
                        transactional_id: id.0.to_string(),
                        timeout_ms: body.transaction_timeout_ms,
                        expected,
                    },
                )
                .await;
                match reply {
                    TxnReply::Init(Ok((producer_id, epoch))) => {
                        response.producer_id = ProducerId(producer_id);
                        response.producer_epoch = epoch;
                    }
                    TxnReply::Init(Err(code)) | TxnReply::Code(code) => {
                        response.error_code = fenced_for_version(code, request.version, 4).code();
                    }
                    _ => response.error_code = ErrorCode::UnknownServerError.code(),
                }
            }
            None => match expected {
                // KIP-360: an idempotent producer bumps its own epoch after an error.
                Some((producer_id, epoch)) if epoch < i16::MAX - 1 => {
                    response.producer_id = ProducerId(producer_id);
                    response.producer_epoch = epoch + 1;
                }
                _ => {
                    response.producer_id = ProducerId(next_producer_id(shard.id));
                    response.producer_epoch = 0;
                }
            },
        }
        request.respond(&response)
    })
}

/// PRODUCER_FENCED (KIP-588) for versions that know it, INVALID_PRODUCER_EPOCH before.
pub fn fenced_for_version(
    code: ErrorCode,
    version: i16,
    first_version_with_fenced: i16,
) -> ErrorCode {
    if code == ErrorCode::ProducerFenced && version < first_version_with_fenced {
        ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_positive() {
        let a = producer_id_at(1, 1_800_000_000_000);
        let b = producer_id_at(1, 1_800_000_000_000);
        let c = producer_id_at(2, 1_800_000_000_000);
        assert!(a > 0 && b > 0 && c > 0);
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn a_burst_borrows_the_next_millisecond_and_never_repeats() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            assert!(seen.insert(producer_id_at(3, 1_900_000_000_000)));
        }
        // The clock going back within a process does not repeat ids either.
        for _ in 0..100 {
            assert!(seen.insert(producer_id_at(3, 1_899_999_999_000)));
        }
    }

    #[test]
    fn fenced_maps_to_invalid_epoch_for_old_versions() {
        assert_eq!(
            fenced_for_version(ErrorCode::ProducerFenced, 3, 4),
            ErrorCode::InvalidProducerEpoch
        );
        assert_eq!(
            fenced_for_version(ErrorCode::ProducerFenced, 4, 4),
            ErrorCode::ProducerFenced
        );
        assert_eq!(
            fenced_for_version(ErrorCode::ConcurrentTransactions, 0, 4),
            ErrorCode::ConcurrentTransactions
        );
    }
}
