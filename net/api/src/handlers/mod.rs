//! One file per Kafka API. Each file decodes its request, applies it and
//! encodes its response side by side, and declares the version range it
//! serves in its [`Handler`]. [`REGISTRY`] is the single list that drives both
//! dispatch and the ApiVersions answer, so the broker never advertises an API
//! it does not serve.
//!
//! Advertised ranges are the intersection of what the `kafka-protocol` crate
//! decodes and what the handler fills correctly (fields added in later versions
//! that would need behaviour rill lacks are left out by capping the range).

use crate::fetch_response::OutChunk;
use bytes::{BufMut, Bytes, BytesMut};
use futures::future::LocalBoxFuture;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kernel::error::RequestError;
use runtimes::Shard;
use security::Session;
use std::rc::Rc;
use std::time::Instant;

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_share_group_state;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
mod fetch_follower;
mod fetch_session;
pub mod find_coordinator;
pub mod get_telemetry_subscriptions;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod initialize_share_group_state;
pub mod join_group;
pub mod leave_group;
pub mod legacy;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod push_telemetry;
pub mod read_share_group_state;
pub mod read_share_group_state_summary;
pub mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod update_features;
pub mod write_share_group_state;
pub mod write_txn_markers;

/// A decoded request header with the undecoded body.
pub struct Request {
    /// The API.
    pub api_key: ApiKey,
    /// The version.
    pub version: i16,
    /// The full header.
    pub header: RequestHeader,
    /// The body (a slice of the frame).
    pub body: Bytes,
    /// A Produce request the connection read apart: its partitions'
    /// records, in request order, whose fields `body` holds empty (see
    /// `produce_scan`). Empty for any other request.
    pub scattered_records: Vec<Option<bytes::BytesMut>>,
    /// When the frame was complete (for latency metrics).
    pub received: Instant,
    /// The connection's listener and principal (for authorization).
    pub session: Rc<Session>,
    /// The quota throttle this request earned when it was read (a Produce
    /// over its client's `producer_byte_rate`), for `throttle_time_ms`.
    pub quota_throttle_ms: i32,
}

impl Request {
    /// Decodes the body as `T`; a failure closes the connection, as Kafka does.
    pub fn decode<T: Decodable>(&mut self) -> Result<T, RequestError> {
        T::decode(&mut self.body, self.version).map_err(|e| RequestError::Decode {
            api: api_name(self.api_key),
            version: self.version,
            reason: e.to_string(),
        })
    }

    /// Decodes the body as `T` laid out as the codec's `layout_version`: for
    /// an old version the codec no longer knows (Kafka 4.0 dropped it) whose
    /// wire layout is the same as a later one's.
    pub fn decode_as<T: Decodable>(&mut self, layout_version: i16) -> Result<T, RequestError> {
        T::decode(&mut self.body, layout_version).map_err(|e| RequestError::Decode {
            api: api_name(self.api_key),
            version: self.version,
            reason: e.to_string(),
        })
    }

    /// Frames `body` as this request's response.
    pub fn respond<T: Encodable>(&self, body: &T) -> Result<Response, RequestError> {
        self.respond_as(body, self.version)
    }

    /// Frames `body` encoded as the codec's `layout_version` (see
    /// [`Self::decode_as`]); the response header stays this request's.
    pub fn respond_as<T: Encodable>(
        &self,
        body: &T,
        layout_version: i16,
    ) -> Result<Response, RequestError> {
        let header_version = self.api_key.response_header_version(self.version);
        let frame = encode_frame(
            self.header.correlation_id,
            header_version,
            body,
            layout_version,
        )
        .map_err(|reason| RequestError::Encode {
            api: api_name(self.api_key),
            version: self.version,
            reason,
        })?;
        Ok(Response::Chunks(vec![OutChunk::Bytes(frame)]))
    }

    /// Frames a body encoded by hand (an old version, see [`legacy`]).
    pub fn respond_raw(&self, body: &[u8]) -> Result<Response, RequestError> {
        // Every hand-encoded version predates flexible headers: v0 header.
        let mut frame = BytesMut::with_capacity(8 + body.len());
        frame.put_i32((4 + body.len()) as i32);
        frame.put_i32(self.header.correlation_id);
        frame.put_slice(body);
        Ok(Response::Chunks(vec![OutChunk::Bytes(frame.freeze())]))
    }

    /// A [`RequestError::Encode`] for a hand-encoded body.
    pub fn encode_error(&self, reason: String) -> RequestError {
        RequestError::Encode {
            api: api_name(self.api_key),
            version: self.version,
            reason,
        }
    }

    /// A [`RequestError::Decode`] for a hand-decoded body.
    pub fn decode_error(&self, reason: legacy::WireError) -> RequestError {
        RequestError::Decode {
            api: api_name(self.api_key),
            version: self.version,
            reason: reason.to_string(),
        }
    }
}

/// What a handler hands to the connection writer.
pub enum Response {
    /// A complete framed response.
    Chunks(Vec<OutChunk>),
    /// No response at all (Produce with acks=0).
    Nothing,
    /// A complete framed response, after which the connection closes (a
    /// failed SASL authentication, as Kafka does).
    ChunksThenClose(Vec<OutChunk>),
}

/// The future of one request.
pub type HandlerFuture = LocalBoxFuture<'static, Result<Response, RequestError>>;

/// One API: its served version range and its entry point.
#[derive(Clone, Copy)]
pub struct Handler {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest version served.
    pub min_version: i16,
    /// Highest version served.
    pub max_version: i16,
    /// Entry point.
    pub handle: fn(Rc<Shard>, Request) -> HandlerFuture,
}

/// Every API this broker serves.
pub const REGISTRY: &[Handler] = &[
    produce::HANDLER,
    fetch::HANDLER,
    list_offsets::HANDLER,
    metadata::HANDLER,
    describe_topic_partitions::HANDLER,
    api_versions::HANDLER,
    create_topics::HANDLER,
    delete_topics::HANDLER,
    delete_records::HANDLER,
    init_producer_id::HANDLER,
    offset_for_leader_epoch::HANDLER,
    describe_configs::HANDLER,
    alter_configs::HANDLER,
    describe_log_dirs::HANDLER,
    create_partitions::HANDLER,
    incremental_alter_configs::HANDLER,
    describe_cluster::HANDLER,
    describe_client_quotas::HANDLER,
    alter_client_quotas::HANDLER,
    describe_quorum::HANDLER,
    add_raft_voter::HANDLER,
    remove_raft_voter::HANDLER,
    describe_acls::HANDLER,
    create_acls::HANDLER,
    delete_acls::HANDLER,
    alter_partition_reassignments::HANDLER,
    alter_replica_log_dirs::HANDLER,
    list_partition_reassignments::HANDLER,
    elect_leaders::HANDLER,
    unregister_broker::HANDLER,
    update_features::HANDLER,
    add_partitions_to_txn::HANDLER,
    add_offsets_to_txn::HANDLER,
    end_txn::HANDLER,
    write_txn_markers::HANDLER,
    txn_offset_commit::HANDLER,
    describe_transactions::HANDLER,
    describe_producers::HANDLER,
    list_transactions::HANDLER,
    consumer_group_describe::HANDLER,
    consumer_group_heartbeat::HANDLER,
    share_group_heartbeat::HANDLER,
    share_group_describe::HANDLER,
    share_fetch::HANDLER,
    share_acknowledge::HANDLER,
    initialize_share_group_state::HANDLER,
    read_share_group_state::HANDLER,
    write_share_group_state::HANDLER,
    delete_share_group_state::HANDLER,
    read_share_group_state_summary::HANDLER,
    describe_share_group_offsets::HANDLER,
    alter_share_group_offsets::HANDLER,
    delete_share_group_offsets::HANDLER,
    delete_groups::HANDLER,
    describe_groups::HANDLER,
    find_coordinator::HANDLER,
    heartbeat::HANDLER,
    join_group::HANDLER,
    leave_group::HANDLER,
    list_groups::HANDLER,
    offset_commit::HANDLER,
    offset_delete::HANDLER,
    offset_fetch::HANDLER,
    sync_group::HANDLER,
    sasl_handshake::HANDLER,
    sasl_authenticate::HANDLER,
    describe_user_scram_credentials::HANDLER,
    alter_user_scram_credentials::HANDLER,
    get_telemetry_subscriptions::HANDLER,
    push_telemetry::HANDLER,
    list_config_resources::HANDLER,
];

/// The handler of an API key.
pub fn find(api_key: i16) -> Option<&'static Handler> {
    REGISTRY.iter().find(|h| h.api_key as i16 == api_key)
}

/// An API's name for logs and metrics.
pub fn api_name(api_key: ApiKey) -> &'static str {
    match api_key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeQuorum => "DescribeQuorum",
        ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
        ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
        ApiKey::ElectLeaders => "ElectLeaders",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
        ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
        ApiKey::EndTxn => "EndTxn",
        ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
        ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
        ApiKey::DescribeTransactions => "DescribeTransactions",
        ApiKey::DescribeProducers => "DescribeProducers",
        ApiKey::DescribeTopicPartitions => "DescribeTopicPartitions",
        ApiKey::ListTransactions => "ListTransactions",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        ApiKey::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        ApiKey::ShareGroupHeartbeat => "ShareGroupHeartbeat",
        ApiKey::ShareGroupDescribe => "ShareGroupDescribe",
        ApiKey::ShareFetch => "ShareFetch",
        ApiKey::ShareAcknowledge => "ShareAcknowledge",
        ApiKey::ReadShareGroupState => "ReadShareGroupState",
        ApiKey::WriteShareGroupState => "WriteShareGroupState",
        ApiKey::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::GetTelemetrySubscriptions => "GetTelemetrySubscriptions",
        ApiKey::PushTelemetry => "PushTelemetry",
        ApiKey::ListConfigResources => "ListConfigResources",
        _ => "Other",
    }
}

/// Frames a response: size, header (tagged fields when `header_version` is 1), body.
pub fn encode_frame<T: Encodable>(
    correlation_id: i32,
    header_version: i16,
    body: &T,
    version: i16,
) -> Result<Bytes, String> {
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let size = header
        .compute_size(header_version)
        .and_then(|h| body.compute_size(version).map(|b| h + b))
        .map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(size as i32);
    header
        .encode(&mut buf, header_version)
        .map_err(|e| e.to_string())?;
    body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

/// A `StrBytes` from a `String`.
pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// A topic id as the codec's `Uuid`.
pub fn uuid(id: [u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id)
}

/// An assignment's partitions by topic, in name order, each topic with its
/// id where this shard's table knows it (`None`: gone meanwhile): what the
/// group heartbeat and describe answers carry.
pub fn by_topic<'a>(
    shard: &Shard,
    partitions: impl IntoIterator<Item = &'a coordinators::group::TopicPartition>,
) -> Vec<(String, Option<uuid::Uuid>, Vec<i32>)> {
    let table = shard.topics.borrow();
    let mut grouped: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for tp in partitions {
        grouped.entry(&tp.topic).or_default().push(tp.partition);
    }
    grouped
        .into_iter()
        .map(|(name, partitions)| {
            let id = table.get(name).map(|entry| uuid(entry.topic_id));
            (name.to_owned(), id, partitions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_ranges_are_decodable_by_the_codec() {
        for h in REGISTRY {
            let codec = h.api_key.valid_versions();
            assert!(h.min_version <= h.max_version, "{:?}", h.api_key);
            // Versions below the codec's floor are decoded by `legacy`.
            let floor = legacy::lowest_version(h.api_key).unwrap_or(codec.min);
            assert!(
                floor <= h.min_version && h.max_version <= codec.max,
                "{:?}",
                h.api_key
            );
        }
    }

    #[test]
    fn registry_has_each_api_once() {
        let mut keys: Vec<i16> = REGISTRY.iter().map(|h| h.api_key as i16).collect();
        keys.sort();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len());
        assert!(find(18).is_some());
        assert!(find(999).is_none());
    }
}
