//! The API version ranges the harness speaks, and negotiation against what a
//! broker advertises in ApiVersions: for each API the highest version both
//! sides support. The ranges are conservative so that every Kafka-protocol
//! broker of the last several years qualifies.

use crate::error::BenchError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use std::collections::HashMap;

pub const API_VERSIONS_KEY: i16 = 18;

/// `(api key, our min, our max)`.
pub const SUPPORTED_RANGES: [(i16, i16, i16); 18] = [
    (0, 3, 9),  // Produce
    (1, 4, 11), // Fetch
    (2, 1, 5),  // ListOffsets
    (3, 1, 12), // Metadata (v10+ carries topic ids, for KIP-848)
    (8, 2, 9),  // OffsetCommit
    (9, 1, 7),  // OffsetFetch (v8+ batches groups; not needed)
    (10, 1, 4), // FindCoordinator
    (11, 4, 9), // JoinGroup (v4+: MEMBER_ID_REQUIRED)
    (12, 1, 4), // Heartbeat
    (13, 1, 5), // LeaveGroup
    (14, 1, 5), // SyncGroup
    (17, 1, 1), // SaslHandshake (v1: tokens in SaslAuthenticate)
    (18, 0, 3), // ApiVersions
    (19, 2, 5), // CreateTopics
    (36, 0, 2), // SaslAuthenticate
    (68, 0, 1), // ConsumerGroupHeartbeat (KIP-848)
    (76, 1, 1), // ShareGroupHeartbeat (KIP-932)
    (78, 1, 1), // ShareFetch (KIP-932)
];

/// `(api key, our min, our max)` rows: the APIs one client speaks.
pub type ApiRanges = &'static [(i16, i16, i16)];

/// The chosen version per API key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegotiatedVersions {
    chosen: HashMap<i16, i16>,
    /// The ranges negotiated from, for the error that names ours.
    ranges: ApiRanges,
}

impl NegotiatedVersions {
    /// Before negotiation only ApiVersions itself may be sent.
    pub fn bootstrap() -> Self {
        NegotiatedVersions {
            chosen: HashMap::from([(API_VERSIONS_KEY, 0)]),
            ranges: &SUPPORTED_RANGES,
        }
    }

    pub fn get(&self, api_key: i16) -> Option<i16> {
        self.chosen.get(&api_key).copied()
    }

    pub fn unsupported(&self, addr: &str, api_key: i16) -> BenchError {
        let (ours_min, ours_max) = self
            .ranges
            .iter()
            .find(|(key, _, _)| *key == api_key)
            .map_or((-1, -1), |(_, min, max)| (*min, *max));
        BenchError::UnsupportedApi {
            addr: addr.to_string(),
            api_key,
            ours_min,
            ours_max,
        }
    }
}

/// Picks, for each API we speak, the highest version inside both ranges.
/// APIs with no overlap are left out; using them later is an error.
pub fn negotiate(addr: &str, broker: &[ApiVersion]) -> NegotiatedVersions {
    negotiate_ranges(addr, &SUPPORTED_RANGES, broker)
}

/// [`negotiate`] over another client's `ranges` (`rill admin` speaks the
/// admin APIs the load generator never sends).
pub fn negotiate_ranges(
    _addr: &str,
    ranges: ApiRanges,
    broker: &[ApiVersion],
) -> NegotiatedVersions {
    let mut chosen = HashMap::new();
    for &(api_key, ours_min, ours_max) in ranges {
        if let Some(theirs) = broker.iter().find(|v| v.api_key == api_key) {
            let version = ours_max.min(theirs.max_version);
            if version >= ours_min.max(theirs.min_version) {
                chosen.insert(api_key, version);
            }
        }
    }
    NegotiatedVersions { chosen, ranges }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advertised(api_key: i16, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(api_key)
            .with_min_version(min)
            .with_max_version(max)
    }

    #[test]
    fn picks_highest_common_version() {
        let broker = [
            advertised(0, 0, 11),  // newer broker: we cap at 9
            advertised(1, 0, 6),   // older broker: it caps at 6
            advertised(3, 13, 14), // no overlap with our 1..=12
        ];
        let versions = negotiate("b", &broker);
        assert_eq!(versions.get(0), Some(9));
        assert_eq!(versions.get(1), Some(6));
        assert_eq!(versions.get(3), None);
        assert_eq!(versions.get(19), None); // not advertised
        assert!(matches!(
            versions.unsupported("b", 3),
            BenchError::UnsupportedApi {
                ours_min: 1,
                ours_max: 12,
                ..
            }
        ));
    }
}
