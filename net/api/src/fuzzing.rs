//! Entry points for the fuzz targets in `fuzz/` and for the corpus replay
//! test (`net/api/tests/fuzz_corpus.rs`): the path a request takes from the
//! socket's bytes to a decoded body, as [`crate::connection`]'s `dispatch`
//! and the handlers run it, with no shard, no executor and no socket.
//!
//! - [`request_frame`]: bytes as read from a connection: split into frames,
//!   header prefix, handler lookup and version check, full header, body.
//! - [`produce_request`] / [`fetch_request`]: one body of those APIs at a
//!   version the broker serves, chosen by the first input byte.
//!
//! Each body is decoded by the handler's own decode step ([`body_decoder`]:
//! the handler's `decode_body` where it has one, else the one
//! `Request::decode` call it makes), and a Produce body's record sets go on
//! through [`engine::fuzzing::record_batch`], as an append would take them.
//! Nothing here may panic on any input; the assertions are invariants of
//! rill's own framing code.

use crate::frame::{bytes_missing, decode_header, peek_header, try_split_frame};
use crate::handlers::{self, api_versions, Handler, Request};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use kernel::error::RequestError;
use security::Session;
use std::rc::Rc;
use std::time::Instant;

/// `socket.request.max.bytes`: the broker's default.
const MAX_REQUEST_BYTES: usize = 104_857_600;

/// A handler's decode step, its result dropped.
pub type BodyDecoder = fn(&mut Request) -> Result<(), RequestError>;

/// Bytes as a connection reads them: every complete frame at the front is
/// dispatched as the broker would (up to its decoded body), and a trailing
/// partial frame is left, as the connection waits for the rest of it.
/// Returns how many frames decoded to the end of their body's decode step.
pub fn request_frame(data: &[u8]) -> usize {
    let mut buf = BytesMut::from(data);
    let mut decoded = 0;
    loop {
        let missing = bytes_missing(&buf);
        let before = buf.len();
        match try_split_frame(&mut buf, MAX_REQUEST_BYTES) {
            Ok(Some(frame)) => {
                assert_eq!(missing, 0, "a frame split while bytes were missing");
                assert_eq!(before, buf.len() + 4 + frame.len());
                decoded += usize::from(dispatch(frame).is_ok());
            }
            Ok(None) => {
                assert!(missing > 0, "no frame split while no byte was missing");
                return decoded;
            }
            Err(_) => return decoded,
        }
    }
}

/// One Produce body, at the version the first byte picks among those the
/// broker serves, decoded as the handler does; its record sets go through
/// the append's checks. Returns whether the body decoded.
pub fn produce_request(data: &[u8]) -> bool {
    body_at_served_version(ApiKey::Produce, data)
}

/// One Fetch body, at the version the first byte picks among those the
/// broker serves, decoded as the handler does. Returns whether it decoded.
pub fn fetch_request(data: &[u8]) -> bool {
    body_at_served_version(ApiKey::Fetch, data)
}

fn body_at_served_version(api_key: ApiKey, data: &[u8]) -> bool {
    let Some(handler) = handlers::find(api_key as i16) else {
        return false;
    };
    let Some((&pick, body)) = data.split_first() else {
        return false;
    };
    let span = i32::from(handler.max_version) - i32::from(handler.min_version) + 1;
    let version = i32::from(handler.min_version) + i32::from(pick) % span;
    let Ok(version) = i16::try_from(version) else {
        return false;
    };
    let mut header = RequestHeader::default();
    header.request_api_key = api_key as i16;
    header.request_api_version = version;
    let mut request = request(handler, version, header, Bytes::copy_from_slice(body));
    body_decoder(api_key).is_some_and(|decode| decode(&mut request).is_ok())
}

/// `connection::dispatch` up to the handler's decode step.
fn dispatch(mut frame: Bytes) -> Result<(), String> {
    let prefix = peek_header(&frame).map_err(|e| e.to_string())?;
    let handler = handlers::find(prefix.api_key)
        .ok_or_else(|| format!("unknown API key {}", prefix.api_key))?;
    if !(handler.min_version <= prefix.api_version && prefix.api_version <= handler.max_version) {
        if handler.api_key == ApiKey::ApiVersions {
            api_versions::unsupported_version_frame(prefix.correlation_id)?;
        }
        return Err("unsupported version".to_string());
    }
    let header = decode_header(handler.api_key, prefix.api_version, &mut frame)
        .map_err(|e| e.to_string())?;
    assert_eq!(header.request_api_key, prefix.api_key);
    assert_eq!(header.request_api_version, prefix.api_version);
    assert_eq!(header.correlation_id, prefix.correlation_id);
    let mut request = request(handler, prefix.api_version, header, frame);
    let decode = body_decoder(handler.api_key).ok_or("no decoder")?;
    decode(&mut request).map_err(|e| e.to_string())
}

fn request(handler: &Handler, version: i16, header: RequestHeader, body: Bytes) -> Request {
    Request {
        api_key: handler.api_key,
        version,
        header,
        body,
        scattered_records: Vec::new(),
        received: Instant::now(),
        session: Rc::new(Session::internal()),
        quota_throttle_ms: 0,
    }
}

/// The decode step of the handler of `api_key`; `None` for an API rill does
/// not serve. A test checks that every API in the registry has one.
pub fn body_decoder(api_key: ApiKey) -> Option<BodyDecoder> {
    use crate::handlers::*;
    let decoder: BodyDecoder = match api_key {
        ApiKey::Produce => produce_body,
        ApiKey::Fetch => plain::<FetchRequest>,
        ApiKey::ListOffsets => |r| list_offsets::decode_body(r).map(drop),
        ApiKey::Metadata => plain::<MetadataRequest>,
        ApiKey::ApiVersions => plain::<ApiVersionsRequest>,
        ApiKey::CreateTopics => |r| create_topics::decode_body(r).map(drop),
        ApiKey::DeleteTopics => |r| delete_topics::decode_body(r).map(drop),
        ApiKey::DeleteRecords => plain::<DeleteRecordsRequest>,
        ApiKey::InitProducerId => plain::<InitProducerIdRequest>,
        ApiKey::OffsetForLeaderEpoch => |r| offset_for_leader_epoch::decode_body(r).map(drop),
        ApiKey::DescribeConfigs => |r| describe_configs::decode_body(r).map(drop),
        ApiKey::AlterConfigs => plain::<AlterConfigsRequest>,
        ApiKey::DescribeLogDirs => |r| describe_log_dirs::decode_body(r).map(drop),
        ApiKey::CreatePartitions => plain::<CreatePartitionsRequest>,
        ApiKey::IncrementalAlterConfigs => plain::<IncrementalAlterConfigsRequest>,
        ApiKey::DescribeCluster => plain::<DescribeClusterRequest>,
        ApiKey::DescribeQuorum => plain::<DescribeQuorumRequest>,
        ApiKey::AlterPartitionReassignments => plain::<AlterPartitionReassignmentsRequest>,
        ApiKey::ListPartitionReassignments => plain::<ListPartitionReassignmentsRequest>,
        ApiKey::ElectLeaders => plain::<ElectLeadersRequest>,
        ApiKey::UnregisterBroker => plain::<UnregisterBrokerRequest>,
        ApiKey::AddRaftVoter => plain::<AddRaftVoterRequest>,
        ApiKey::AlterReplicaLogDirs => |r| alter_replica_log_dirs::decode_body(r).map(drop),
        ApiKey::RemoveRaftVoter => plain::<RemoveRaftVoterRequest>,
        ApiKey::UpdateFeatures => plain::<UpdateFeaturesRequest>,
        ApiKey::AddPartitionsToTxn => plain::<AddPartitionsToTxnRequest>,
        ApiKey::AddOffsetsToTxn => plain::<AddOffsetsToTxnRequest>,
        ApiKey::EndTxn => plain::<EndTxnRequest>,
        ApiKey::WriteTxnMarkers => plain::<WriteTxnMarkersRequest>,
        ApiKey::TxnOffsetCommit => plain::<TxnOffsetCommitRequest>,
        ApiKey::DescribeTransactions => plain::<DescribeTransactionsRequest>,
        ApiKey::DescribeProducers => plain::<DescribeProducersRequest>,
        ApiKey::DescribeTopicPartitions => plain::<DescribeTopicPartitionsRequest>,
        ApiKey::ListTransactions => plain::<ListTransactionsRequest>,
        ApiKey::ConsumerGroupDescribe => plain::<ConsumerGroupDescribeRequest>,
        ApiKey::ConsumerGroupHeartbeat => plain::<ConsumerGroupHeartbeatRequest>,
        ApiKey::ShareGroupHeartbeat => plain::<ShareGroupHeartbeatRequest>,
        ApiKey::ShareGroupDescribe => plain::<ShareGroupDescribeRequest>,
        ApiKey::ShareFetch => plain::<ShareFetchRequest>,
        ApiKey::ShareAcknowledge => plain::<ShareAcknowledgeRequest>,
        ApiKey::ReadShareGroupState => plain::<ReadShareGroupStateRequest>,
        ApiKey::WriteShareGroupState => plain::<WriteShareGroupStateRequest>,
        ApiKey::DescribeShareGroupOffsets => plain::<DescribeShareGroupOffsetsRequest>,
        ApiKey::InitializeShareGroupState => plain::<InitializeShareGroupStateRequest>,
        ApiKey::DeleteShareGroupState => plain::<DeleteShareGroupStateRequest>,
        ApiKey::ReadShareGroupStateSummary => plain::<ReadShareGroupStateSummaryRequest>,
        ApiKey::AlterShareGroupOffsets => plain::<AlterShareGroupOffsetsRequest>,
        ApiKey::DeleteShareGroupOffsets => plain::<DeleteShareGroupOffsetsRequest>,
        ApiKey::DeleteGroups => plain::<DeleteGroupsRequest>,
        ApiKey::DescribeGroups => plain::<DescribeGroupsRequest>,
        ApiKey::FindCoordinator => plain::<FindCoordinatorRequest>,
        ApiKey::Heartbeat => plain::<HeartbeatRequest>,
        ApiKey::JoinGroup => plain::<JoinGroupRequest>,
        ApiKey::LeaveGroup => plain::<LeaveGroupRequest>,
        ApiKey::ListGroups => plain::<ListGroupsRequest>,
        ApiKey::OffsetCommit => |r| offset_commit::decode_body(r).map(drop),
        ApiKey::OffsetDelete => plain::<OffsetDeleteRequest>,
        ApiKey::OffsetFetch => |r| offset_fetch::decode_body(r).map(drop),
        ApiKey::SyncGroup => plain::<SyncGroupRequest>,
        ApiKey::SaslHandshake => plain::<SaslHandshakeRequest>,
        ApiKey::SaslAuthenticate => sasl_authenticate_body,
        ApiKey::DescribeUserScramCredentials => plain::<DescribeUserScramCredentialsRequest>,
        ApiKey::AlterUserScramCredentials => plain::<AlterUserScramCredentialsRequest>,
        ApiKey::CreateAcls => plain::<CreateAclsRequest>,
        ApiKey::DescribeAcls => plain::<DescribeAclsRequest>,
        ApiKey::DeleteAcls => plain::<DeleteAclsRequest>,
        ApiKey::DescribeClientQuotas => plain::<DescribeClientQuotasRequest>,
        ApiKey::AlterClientQuotas => plain::<AlterClientQuotasRequest>,
        ApiKey::GetTelemetrySubscriptions => plain::<GetTelemetrySubscriptionsRequest>,
        ApiKey::PushTelemetry => push_telemetry_body,
        ApiKey::ListConfigResources => plain::<ListConfigResourcesRequest>,
        _ => return None,
    };
    Some(decoder)
}

/// The decode step of a handler that makes one `Request::decode` call.
fn plain<T: Decodable>(request: &mut Request) -> Result<(), RequestError> {
    request.decode::<T>().map(drop)
}

/// SaslAuthenticate's decode step, then its token through every SASL
/// message parser the broker runs on it.
fn sasl_authenticate_body(request: &mut Request) -> Result<(), RequestError> {
    let body: SaslAuthenticateRequest = request.decode()?;
    sasl(&body.auth_bytes);
    Ok(())
}

/// PushTelemetry's decode step, then its payload through the telemetry
/// decoder (decompression and OTLP) as a push asking for every metric.
fn push_telemetry_body(request: &mut Request) -> Result<(), RequestError> {
    let body: PushTelemetryRequest = request.decode()?;
    let everything = runtimes::telemetry::subscription::Resolved {
        subscription_id: 0,
        interval_ms: 1000,
        metrics: vec![String::new()],
    };
    let _ = runtimes::telemetry::otlp::decode(
        &body.metrics,
        body.compression_type,
        1 << 20,
        &everything,
    );
    Ok(())
}

/// A SASL token through the PLAIN, SCRAM (client-first, client-final) and
/// OAUTHBEARER parsers, and an OAUTHBEARER token through the unsecured
/// validator; never panics. Returns how many parsed, so a fuzzer's input
/// is used.
pub fn sasl(data: &[u8]) -> usize {
    use security::oauth::unsecured::{self, UnsecuredOptions};
    use security::sasl::{oauthbearer, plain, scram};
    let token_valid = oauthbearer::parse(data).map_or(0, |response| {
        1 + usize::from(
            unsecured::validate(&response.token, &UnsecuredOptions::default(), 0).is_ok(),
        )
    });
    usize::from(plain::parse(data).is_ok())
        + usize::from(scram::parse_client_first(data).is_ok())
        + usize::from(scram::parse_client_final(data).is_ok())
        + token_valid
}

/// Produce's decode step, then each partition's record set through what
/// the append does with it before it touches a log.
fn produce_body(request: &mut Request) -> Result<(), RequestError> {
    let body: ProduceRequest = request.decode()?;
    for topic in &body.topic_data {
        for partition in &topic.partition_data {
            if let Some(records) = &partition.records {
                engine::fuzzing::record_batch(records);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_api_has_a_fuzzed_decoder() {
        for handler in handlers::REGISTRY {
            assert!(
                body_decoder(handler.api_key).is_some(),
                "{:?} is served but not fuzzed: add it to fuzzing::body_decoder",
                handler.api_key
            );
        }
    }

    /// Found by the fuzzer: an array length read off the wire went straight
    /// to `Vec::with_capacity`, and a 25-byte frame aborted the broker on a
    /// failed 130 GB allocation (third_party/README.md). Now a decode error.
    #[test]
    fn a_declared_length_past_the_frame_is_an_error_not_an_allocation() {
        // DeleteRecords v1 (non-flexible): topics array of i32::MAX.
        let mut req = request(
            handlers::find(ApiKey::DeleteRecords as i16).unwrap(),
            1,
            RequestHeader::default(),
            Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
        );
        assert!(body_decoder(ApiKey::DeleteRecords).unwrap()(&mut req).is_err());
        // Fetch v16 (flexible): replica state tagged out, then the fixed
        // fields, then a compact topics array of u32::MAX - 1 entries.
        let mut body = vec![0u8; 4 + 4 + 4 + 1 + 4 + 4];
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let mut req = request(
            handlers::find(ApiKey::Fetch as i16).unwrap(),
            16,
            RequestHeader::default(),
            Bytes::from(body),
        );
        assert!(body_decoder(ApiKey::Fetch).unwrap()(&mut req).is_err());
        // A compact string (CreateTopics v5 topic name) of ~4 GiB.
        let mut req = request(
            handlers::find(ApiKey::CreateTopics as i16).unwrap(),
            5,
            RequestHeader::default(),
            Bytes::from_static(&[0x02, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        );
        assert!(body_decoder(ApiKey::CreateTopics).unwrap()(&mut req).is_err());
    }

    #[test]
    fn a_real_request_goes_through_and_garbage_does_not_panic() {
        let mut body = MetadataRequest::default();
        body.topics = None;
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::Metadata as i16;
        header.request_api_version = 12;
        header.correlation_id = 7;
        let mut frame = BytesMut::new();
        use kafka_protocol::protocol::Encodable;
        header
            .encode(&mut frame, ApiKey::Metadata.request_header_version(12))
            .unwrap();
        body.encode(&mut frame, 12).unwrap();
        assert_eq!(dispatch(frame.clone().freeze()), Ok(()));
        assert!(!produce_request(&[0xff; 64]));
        let mut framed = BytesMut::new();
        framed.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        framed.extend_from_slice(&frame);
        assert_eq!(request_frame(&framed), 1);
        for cut in 0..framed.len() {
            assert_eq!(request_frame(&framed[..cut]), 0);
        }
        assert!(!fetch_request(&[0x01, 0x02, 0x03]));
    }
}
