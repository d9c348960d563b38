//! Which configured quota applies to a client, in Kafka's order: the most
//! specific (user, client-id) entity that sets the quota, with `<default>`
//! entities standing for every user or client id without their own.

use cluster::metadata::{QuotaEntity, QUOTA_ENTITY_TYPES};
use std::collections::BTreeMap;

/// The quota on bytes produced per second.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// The quota on bytes fetched per second.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// A broker's leader replication throttle, bytes/s (KIP-73, see
/// [`super::replication`]).
pub const LEADER_REPLICATION_RATE: &str = "leader.replication.throttled.rate";
/// A broker's follower replication throttle, bytes/s.
pub const FOLLOWER_REPLICATION_RATE: &str = "follower.replication.throttled.rate";

/// The quota that applies, and whose usage it counts: `sensor` is the
/// (user, client id) the usage is summed under — the matched entity's parts
/// with the client's own names (a default entity's quota holds for each
/// user or client id separately, as Kafka's), `""` for a part the entity
/// does not have.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaMatch {
    /// Bytes per second.
    pub limit: f64,
    /// (user, client id) the usage is counted under.
    pub sensor: (String, String),
}

/// An entity's parts in the canonical order (user, client-id, ip), so that
/// `client-id=a,user=b` and `user=b,client-id=a` are one entity.
pub fn normalize(mut entity: QuotaEntity) -> QuotaEntity {
    entity.sort_by_key(|(kind, _)| {
        QUOTA_ENTITY_TYPES
            .iter()
            .position(|t| t == kind)
            .unwrap_or(usize::MAX)
    });
    entity
}

/// The quota `key` for `user` connecting as `client_id`, if any entity
/// sets it: `/users/<user>/clients/<client>`, `.../clients/<default>`,
/// `/users/<user>`, `/users/<default>/clients/<client>`,
/// `.../clients/<default>`, `/users/<default>`, `/clients/<client>`,
/// `/clients/<default>`, first match wins.
pub fn resolve(
    quotas: &BTreeMap<QuotaEntity, BTreeMap<String, String>>,
    user: &str,
    client_id: &str,
    key: &str,
) -> Option<QuotaMatch> {
    if quotas.is_empty() {
        return None;
    }
    let part = |kind: &str, name: Option<&str>| (kind.to_string(), name.map(str::to_string));
    let (u, c) = (Some(user), Some(client_id));
    let both = |user: Option<&str>, client: Option<&str>| {
        vec![part("user", user), part("client-id", client)]
    };
    let candidates: [(QuotaEntity, bool, bool); 8] = [
        (both(u, c), true, true),
        (both(u, None), true, true),
        (vec![part("user", u)], true, false),
        (both(None, c), true, true),
        (both(None, None), true, true),
        (vec![part("user", None)], true, false),
        (vec![part("client-id", c)], false, true),
        (vec![part("client-id", None)], false, true),
    ];
    candidates
        .into_iter()
        .find_map(|(entity, has_user, has_client)| {
            let limit = quotas.get(&entity)?.get(key)?.parse::<f64>().ok()?;
            let sensor = (
                if has_user { user } else { "" }.to_string(),
                if has_client { client_id } else { "" }.to_string(),
            );
            Some(QuotaMatch { limit, sensor })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(
        quotas: &mut BTreeMap<QuotaEntity, BTreeMap<String, String>>,
        entity: &[(&str, Option<&str>)],
        value: &str,
    ) {
        let entity = entity
            .iter()
            .map(|(k, n)| (k.to_string(), n.map(str::to_string)))
            .collect();
        quotas
            .entry(normalize(entity))
            .or_default()
            .insert(PRODUCER_BYTE_RATE.to_string(), value.to_string());
    }

    #[test]
    fn the_most_specific_entity_wins() {
        let mut quotas = BTreeMap::new();
        assert_eq!(resolve(&quotas, "alice", "app", PRODUCER_BYTE_RATE), None);
        set(&mut quotas, &[("client-id", None)], "10");
        let m = resolve(&quotas, "alice", "app", PRODUCER_BYTE_RATE).unwrap();
        assert_eq!(m.limit, 10.0);
        assert_eq!(m.sensor, (String::new(), String::from("app")));
        set(&mut quotas, &[("client-id", Some("app"))], "20");
        assert_eq!(
            resolve(&quotas, "alice", "app", PRODUCER_BYTE_RATE)
                .unwrap()
                .limit,
            20.0
        );
        set(&mut quotas, &[("user", None)], "30");
        let m = resolve(&quotas, "alice", "app", PRODUCER_BYTE_RATE).unwrap();
        assert_eq!((m.limit, m.sensor.1.as_str()), (30.0, ""));
        assert_eq!(m.sensor.0, "alice");
        set(
            &mut quotas,
            &[("client-id", Some("app")), ("user", Some("alice"))],
            "40",
        );
        let m = resolve(&quotas, "alice", "app", PRODUCER_BYTE_RATE).unwrap();
        assert_eq!(m.limit, 40.0);
        assert_eq!(m.sensor, (String::from("alice"), String::from("app")));
        // Another user falls back to the user default; the consumer quota is unset.
        assert_eq!(
            resolve(&quotas, "bob", "app", PRODUCER_BYTE_RATE)
                .unwrap()
                .limit,
            30.0
        );
        assert_eq!(resolve(&quotas, "bob", "app", CONSUMER_BYTE_RATE), None);
    }
}
