//! Share group requests over a raw socket (kafka-protocol), for tests that
//! need a member without a share consumer, or an exact error code.

use crate::raw;
use kafka_protocol::messages::{
    ApiKey, GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;

/// ShareGroupHeartbeat v1 of `member` of `group` at `epoch` (0 joins, -1
/// leaves), subscribing to `topics` when it joins; the answer's code.
pub fn heartbeat(addr: SocketAddr, group: &str, member: &str, epoch: i32, topics: &[&str]) -> i16 {
    let mut request = ShareGroupHeartbeatRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.member_id = StrBytes::from_string(member.to_string());
    request.member_epoch = epoch;
    request.subscribed_topic_names = (epoch == 0).then(|| {
        (topics.iter())
            .map(|t| TopicName(StrBytes::from_string(t.to_string())))
            .collect()
    });
    let response: ShareGroupHeartbeatResponse =
        raw::request(addr, ApiKey::ShareGroupHeartbeat, 1, &request)
            .expect("ShareGroupHeartbeat answered");
    response.error_code
}
