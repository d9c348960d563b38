//! Kafka requests over a plain socket, encoded and decoded by the
//! `kafka-protocol` crate: for the APIs rdkafka does not expose
//! (DescribeQuorum, OffsetForLeaderEpoch, InitProducerId, …) and for exact
//! error codes.

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One request/response exchange on `socket`: the response body, decoded
/// (a response that does not decode, or with trailing bytes, fails the
/// test); an I/O error when the connection fails.
pub fn exchange<Req, Resp>(
    socket: &mut TcpStream,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Req,
) -> std::io::Result<Resp>
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    socket.write_all(&request_frame(api_key, version, correlation_id, request))?;
    read_response(socket, api_key, version, correlation_id)
}

/// `length | request header | body`, as a client sends it.
pub fn request_frame<Req>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Req,
) -> Vec<u8>
where
    Req: Encodable + HeaderVersion,
{
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("rill-tests")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, Req::header_version(version))
        .expect("request header encodes");
    request.encode(&mut body, version).expect("request encodes");
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Reads one response frame from `socket` and decodes it as the answer to
/// request `correlation_id` (see [`exchange`]).
pub fn read_response<Resp>(
    socket: &mut TcpStream,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> std::io::Result<Resp>
where
    Resp: Decodable + HeaderVersion,
{
    let mut length = [0u8; 4];
    socket.read_exact(&mut length)?;
    let mut answer = vec![0u8; i32::from_be_bytes(length) as usize];
    socket.read_exact(&mut answer)?;
    let mut answer = bytes::Bytes::from(answer);
    let response_header = ResponseHeader::decode(&mut answer, Resp::header_version(version))
        .expect("response header decodes");
    assert_eq!(response_header.correlation_id, correlation_id);
    let response = Resp::decode(&mut answer, version)
        .unwrap_or_else(|e| panic!("{api_key:?} v{version} response does not decode: {e}"));
    assert_eq!(
        answer.remaining(),
        0,
        "{api_key:?} v{version}: trailing bytes"
    );
    Ok(response)
}

/// A plain connection to the broker at `bootstrap` whose reads give up
/// after `read_timeout` (a broker that never answers fails the test, it
/// does not hang it).
pub fn connect(bootstrap: &str, read_timeout: Duration) -> TcpStream {
    let socket = TcpStream::connect(bootstrap).expect("connect");
    socket
        .set_read_timeout(Some(read_timeout))
        .expect("read timeout");
    socket
}

/// [`exchange`] on a new connection to `addr`.
pub fn request<Req, Resp>(
    addr: SocketAddr,
    api_key: ApiKey,
    version: i16,
    request: &Req,
) -> std::io::Result<Resp>
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    let mut socket = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    exchange(&mut socket, api_key, version, 7, request)
}

/// `topic`'s entry in the Metadata (v12) answer of the broker at `addr`.
fn metadata_of(
    addr: SocketAddr,
    topic: &str,
) -> Option<kafka_protocol::messages::metadata_response::MetadataResponseTopic> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    let mut body = MetadataRequest::default();
    body.topics = Some(vec![wanted]);
    let response: MetadataResponse = request(addr, ApiKey::Metadata, 12, &body).ok()?;
    response.topics.into_iter().next()
}

/// The leader epoch of `topic`'s `partition` as the broker at `addr`
/// reports it; `None` while it answers an error.
pub fn leader_epoch(addr: SocketAddr, topic: &str, partition: i32) -> Option<i32> {
    let found = metadata_of(addr, topic)?.partitions;
    let partition = found.into_iter().find(|p| p.partition_index == partition)?;
    (partition.error_code == 0).then_some(partition.leader_epoch)
}

/// `topic`'s id as the broker at `addr` reports it; `None` while it
/// answers an error.
pub fn topic_id(addr: SocketAddr, topic: &str) -> Option<[u8; 16]> {
    let found = metadata_of(addr, topic)?;
    (found.error_code == 0).then(|| *found.topic_id.as_bytes())
}

/// Fetch v12 of one partition of `topic` (by name) from `addr` as
/// `replica_id` (-1: a consumer), without waiting for data: the
/// partition's answer.
pub fn fetch_v12(
    addr: SocketAddr,
    topic: &str,
    replica_id: i32,
    partition: kafka_protocol::messages::fetch_request::FetchPartition,
) -> kafka_protocol::messages::fetch_response::PartitionData {
    use kafka_protocol::messages::fetch_request::FetchTopic;
    use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
    let mut fetched = FetchTopic::default();
    fetched.topic = TopicName(StrBytes::from_string(topic.to_string()));
    fetched.partitions = vec![partition];
    let mut body = FetchRequest::default();
    body.replica_id = BrokerId(replica_id);
    body.max_wait_ms = 0;
    body.min_bytes = 1;
    body.max_bytes = 1 << 20;
    body.session_epoch = -1;
    body.topics = vec![fetched];
    let response: FetchResponse = request(addr, ApiKey::Fetch, 12, &body).expect("Fetch answered");
    response
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .next()
        .expect("an answer for the partition")
}

/// What the broker did with a connection a test expects it to answer or to
/// close.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// One response frame's body (after the 4-byte length).
    Frame(Vec<u8>),
    /// End of stream or a reset: the broker closed the connection.
    Closed,
}

/// Reads one response frame, or the broker's close.
///
/// # Panics
/// When the read times out (the socket's read timeout, which the caller
/// sets): a broker that hangs neither answers nor closes, and a test that
/// took the timeout for a close would pass against it.
pub fn answer_or_close(socket: &mut TcpStream) -> Answer {
    let mut len = [0u8; 4];
    if let Err(e) = socket.read_exact(&mut len) {
        return closed_or_hang(e);
    }
    let len = i32::from_be_bytes(len);
    assert!((0..100 << 20).contains(&len), "sane response length {len}");
    let mut body = vec![0u8; len as usize];
    match socket.read_exact(&mut body) {
        Ok(()) => Answer::Frame(body),
        Err(e) => closed_or_hang(e),
    }
}

/// Asserts that the broker closed `socket` (end of stream or a reset)
/// without writing anything more, before the socket's read timeout.
pub fn assert_closed_by_broker(socket: &mut TcpStream) {
    let mut byte = [0u8; 1];
    match socket.read(&mut byte) {
        Ok(0) => {}
        Ok(_) => panic!("the broker wrote to a connection it was expected to close"),
        Err(e) => assert_eq!(closed_or_hang(e), Answer::Closed),
    }
}

/// A failed read as a close (end of stream, reset, abort); a timeout is a
/// hang and fails the test.
fn closed_or_hang(error: std::io::Error) -> Answer {
    use std::io::ErrorKind::*;
    match error.kind() {
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => Answer::Closed,
        WouldBlock | TimedOut => {
            panic!("the broker neither answered nor closed the connection before the read timeout")
        }
        _ => panic!("reading from the broker failed: {error}"),
    }
}

/// A Produce request (acks=-1, 5 s timeout) of one record `value` to
/// partition 0 of the topic `topic` names (by name, or by id from v13).
pub fn one_record_produce(
    mut topic: kafka_protocol::messages::produce_request::TopicProduceData,
    value: &[u8],
) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::PartitionProduceData;
    let mut builder = engine::batch::BatchBuilder::new(0, engine::batch::Compression::None);
    builder.push(0, 0, None, Some(value), &[]);
    let batch = builder.build().expect("batch");
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(bytes::Bytes::from(batch));
    topic.partition_data = vec![partition];
    let mut request = kafka_protocol::messages::ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 5_000;
    request.topic_data = vec![topic];
    request
}

/// The size in bytes of `topic`'s `partition` on the broker at `addr`
/// (DescribeLogDirs v1); `None` while it has no replica of it.
pub fn partition_bytes(addr: SocketAddr, topic: &str, partition: i32) -> Option<i64> {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
    let mut asked = DescribableLogDirTopic::default();
    asked.topic = TopicName(StrBytes::from_string(topic.to_string()));
    asked.partitions = vec![partition];
    let mut body = DescribeLogDirsRequest::default();
    body.topics = Some(vec![asked]);
    let response: DescribeLogDirsResponse =
        request(addr, ApiKey::DescribeLogDirs, 1, &body).ok()?;
    response
        .results
        .iter()
        .flat_map(|d| d.topics.iter())
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .map(|p| p.partition_size)
}
