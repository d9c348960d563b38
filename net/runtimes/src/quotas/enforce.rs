//! The request path's use of the quotas: count a request (or check what is
//! owed), mute the connection for the throttle, and return the
//! `throttle_time_ms` to answer with.

use super::{QuotaKind, QuotaManager};
use crate::Shard;
use security::Session;

/// The user a quota knows the session as: the principal's name for a
/// `User` principal (Kafka's `user` entity), the whole principal otherwise.
fn quota_user(session: &Session) -> String {
    let principal = session.principal();
    if principal.kind == "User" {
        principal.name
    } else {
        principal.to_string()
    }
}

/// Counts `bytes` for the client of `session` and returns its throttle time
/// (ms, 0 when none); a throttled connection reads nothing for that long.
pub fn record(
    shard: &Shard,
    session: &Session,
    client_id: &str,
    kind: QuotaKind,
    bytes: usize,
) -> i32 {
    throttle(shard, session, |manager, quotas, user| {
        manager.record(quotas, kind, user, client_id, bytes)
    })
}

/// The throttle the client still owes, counting nothing (a fetch checks
/// this before reading, so that a throttled consumer gets an empty answer).
pub fn owed(shard: &Shard, session: &Session, client_id: &str, kind: QuotaKind) -> i32 {
    throttle(shard, session, |manager, quotas, user| {
        manager.owed(quotas, kind, user, client_id)
    })
}

fn throttle(
    shard: &Shard,
    session: &Session,
    measure: impl FnOnce(
        &QuotaManager,
        &std::collections::BTreeMap<
            cluster::metadata::QuotaEntity,
            std::collections::BTreeMap<String, String>,
        >,
        &str,
    ) -> u64,
) -> i32 {
    let manager = &shard.runtime().quotas;
    let image = shard.runtime().view.image();
    if image.client_quotas().is_empty() {
        return 0;
    }
    let ms = measure(manager, image.client_quotas(), &quota_user(session));
    if ms == 0 {
        return 0;
    }
    session.mute_for(ms);
    let mut metrics = shard.metrics.borrow_mut();
    metrics.quota_throttled_requests += 1;
    metrics.quota_throttle_ms += ms;
    i32::try_from(ms).unwrap_or(i32::MAX)
}
