//! `rill-bench null-sink`: a Kafka-protocol server that costs (almost)
//! nothing, to measure the harness's own ceiling — its generator against a
//! sink, in msgs/s per core.
//!
//! It answers ApiVersions, Metadata (one broker, itself; every topic asked
//! for exists), CreateTopics (always success), Produce (acknowledged with
//! increasing offsets per partition, records discarded; `acks=0` gets no
//! response), and Fetch/ListOffsets minimally (no records). Each connection
//! is pipelined: a reader task decodes and answers requests in order, a
//! writer task sends the responses in that same order.
//!
//! With `--sync-dir DIR` it keeps what it is sent instead ([`SinkLog`]):
//! a Produce is answered once its records are written and `fdatasync`ed,
//! the simplest durable server, a reference for a broker under `fsync`.

use crate::error::{BenchError, Result};
use crate::kafka::framing::split_frame;
use crate::kafka::versions::SUPPORTED_RANGES;
use crate::sink_log::{SinkLog, Synced};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest,
    FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The sink's broker id in Metadata.
const NODE_ID: i32 = 0;
/// UNSUPPORTED_VERSION, for an ApiVersions version we cannot decode.
const UNSUPPORTED_VERSION: i16 = 35;
/// Responses queued per connection before the reader waits for the writer.
const RESPONSE_QUEUE_FRAMES: usize = 1024;
/// Longest a Fetch (which never has records) is held, as a broker would.
const FETCH_WAIT_MAX: Duration = Duration::from_millis(500);
/// Offset of `lastOffsetDelta` in a v2 record batch header, and the header's
/// length (enough to read it).
const LAST_OFFSET_DELTA_AT: usize = 23;
const BATCH_LENGTH_AT: usize = 8;
const BATCH_OVERHEAD_BYTES: usize = 12;

/// `rill-bench null-sink` options.
#[derive(Debug, Clone, clap::Args)]
pub struct NullSinkArgs {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: String,
    /// Partitions of every topic not created with an explicit count.
    #[arg(long, default_value_t = 16)]
    pub partitions: u32,
    /// Keep produced records: append them to a file per partition in this
    /// directory and `fdatasync` before answering (group commit per
    /// partition): the simplest durable server.
    #[arg(long, value_name = "DIR")]
    pub sync_dir: Option<std::path::PathBuf>,
}

/// A response in the writer's queue: ready, or sent once the syncs that
/// cover its produce have returned.
enum Reply {
    Ready(Bytes),
    AfterSync {
        response: Bytes,
        synced: Vec<Synced>,
    },
}

/// Topics the sink knows: partition counts and the next offset of each
/// partition.
#[derive(Debug, Default)]
struct Topics {
    by_name: HashMap<TopicName, Vec<i64>>,
}

/// State shared by every connection.
#[derive(Debug)]
struct Sink {
    default_partitions: u32,
    topics: Mutex<Topics>,
    /// `--sync-dir`: where produced records are kept.
    log: Option<SinkLog>,
}

impl Sink {
    fn topics(&self) -> std::sync::MutexGuard<'_, Topics> {
        // A panic elsewhere cannot leave offsets inconsistent in a way that
        // matters to a sink: keep going with the inner value.
        self.topics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next offsets of `name`, creating it with `partitions` (or the
    /// default) if unknown.
    fn partitions_of<'a>(
        &self,
        topics: &'a mut Topics,
        name: &TopicName,
        partitions: Option<u32>,
    ) -> &'a mut Vec<i64> {
        topics
            .by_name
            .entry(name.clone())
            .or_insert_with(|| vec![0; partitions.unwrap_or(self.default_partitions) as usize])
    }
}

/// A topic id derived from the name, stable across requests.
fn topic_id(name: &TopicName) -> uuid::Uuid {
    let mut high = std::collections::hash_map::DefaultHasher::new();
    name.0.as_str().hash(&mut high);
    let mut low = std::collections::hash_map::DefaultHasher::new();
    (name.0.as_str(), 1u8).hash(&mut low);
    uuid::Uuid::from_u128((u128::from(high.finish()) << 64) | u128::from(low.finish()))
}

/// Messages in a `records` field: the sum of `lastOffsetDelta + 1` over its
/// v2 batches. A truncated trailing batch is ignored, as brokers do.
pub fn count_records(mut records: &[u8]) -> i64 {
    let mut count = 0i64;
    while records.len() >= LAST_OFFSET_DELTA_AT + 4 {
        let batch_length = i32::from_be_bytes([
            records[BATCH_LENGTH_AT],
            records[BATCH_LENGTH_AT + 1],
            records[BATCH_LENGTH_AT + 2],
            records[BATCH_LENGTH_AT + 3],
        ]);
        let total = BATCH_OVERHEAD_BYTES + batch_length.max(0) as usize;
        if batch_length <= 0 || total > records.len() {
            break;
        }
        let delta = i32::from_be_bytes([
            records[LAST_OFFSET_DELTA_AT],
            records[LAST_OFFSET_DELTA_AT + 1],
            records[LAST_OFFSET_DELTA_AT + 2],
            records[LAST_OFFSET_DELTA_AT + 3],
        ]);
        count += i64::from(delta.max(0)) + 1;
        records = &records[total..];
    }
    count
}

/// Binds `args.listen`, prints the bound address, and serves until killed.
pub async fn main(args: &NullSinkArgs) -> Result<()> {
    let listener = TcpListener::bind(&args.listen).await?;
    let log = args.sync_dir.clone().map(SinkLog::open).transpose()?;
    println!("null-sink listening on {}", listener.local_addr()?);
    serve(listener, args.partitions, log).await
}

/// Serves connections accepted by `listener` forever, keeping produced
/// records in `log` if there is one.
pub async fn serve(
    listener: TcpListener,
    default_partitions: u32,
    log: Option<SinkLog>,
) -> Result<()> {
    let sink = Arc::new(Sink {
        default_partitions: default_partitions.max(1),
        topics: Mutex::default(),
        log,
    });
    loop {
        let (stream, peer) = listener.accept().await?;
        let sink = sink.clone();
        tokio::spawn(async move {
            if let Err(error) = serve_connection(stream, &sink).await {
                eprintln!("null-sink: connection from {peer}: {error}");
            }
        });
    }
}

async fn serve_connection(stream: TcpStream, sink: &Sink) -> Result<()> {
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?;
    let (mut read_half, write_half) = stream.into_split();
    let (responses, responses_rx) = mpsc::channel(RESPONSE_QUEUE_FRAMES);
    let writer = tokio::spawn(write_loop(write_half, responses_rx));
    let mut buf = BytesMut::with_capacity(256 * 1024);
    let result = async {
        loop {
            while let Some(frame) = split_frame(&mut buf)? {
                if let Some(response) = handle_frame(sink, local, frame).await? {
                    if responses.send(response).await.is_err() {
                        return Ok(()); // the writer failed; it reports why
                    }
                }
            }
            if buf.capacity() - buf.len() < 64 * 1024 {
                buf.reserve(256 * 1024);
            }
            if read_half.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
    }
    .await;
    drop(responses);
    let written = writer
        .await
        .map_err(|error| BenchError::Other(format!("null-sink writer task: {error}")))?;
    result.and(written)
}

/// Writes responses in order, flushing whenever the queue runs dry or a
/// response must wait for its syncs.
async fn write_loop(
    write_half: OwnedWriteHalf,
    mut responses: mpsc::Receiver<Reply>,
) -> Result<()> {
    let mut writer = BufWriter::with_capacity(256 * 1024, write_half);
    while let Some(first) = responses.recv().await {
        let mut next = Some(first);
        while let Some(reply) = next {
            let frame = match reply {
                Reply::Ready(frame) => frame,
                Reply::AfterSync { response, synced } => {
                    writer.flush().await?;
                    for sync in synced {
                        sync.await
                            .map_err(|_| BenchError::Other("sink log writer ended".into()))?
                            .map_err(|error| {
                                BenchError::Other(format!("sink log fdatasync: {error}"))
                            })?;
                    }
                    response
                }
            };
            writer.write_all(&frame).await?;
            next = responses.try_recv().ok();
        }
        writer.flush().await?;
    }
    Ok(())
}

/// Decodes one request frame and returns its framed response, or `None` for
/// `acks=0` Produce.
async fn handle_frame(sink: &Sink, local: SocketAddr, mut frame: Bytes) -> Result<Option<Reply>> {
    if frame.len() < 4 {
        return Err(BenchError::Protocol(
            "request frame shorter than 4 bytes".into(),
        ));
    }
    let api_key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(api_key_raw)
        .map_err(|_| BenchError::Protocol(format!("unknown api key {api_key_raw}")))?;
    let header = decode_request_header_from_buffer(&mut frame)
        .map_err(|error| BenchError::Protocol(format!("decode request header: {error}")))?;
    let supported = SUPPORTED_RANGES
        .iter()
        .find(|(key, _, _)| *key == api_key_raw)
        .filter(|_| is_served(api_key));
    let in_range = supported.is_some_and(|(_, min, max)| (*min..=*max).contains(&version));
    if api_key == ApiKey::ApiVersions && !in_range {
        // Too new for us: a v0 body with UNSUPPORTED_VERSION, so the client
        // retries at a version we advertise.
        let body = api_versions().with_error_code(UNSUPPORTED_VERSION);
        return encode_response(&header, api_key, 0, &body).map(|frame| Some(Reply::Ready(frame)));
    }
    if !in_range {
        return Err(BenchError::Protocol(format!(
            "api {api_key:?} v{version} is not served by the null sink"
        )));
    }
    let response = match api_key {
        ApiKey::ApiVersions => encode_response(&header, api_key, version, &api_versions()),
        ApiKey::Metadata => {
            let request: MetadataRequest = decode_body(&mut frame, api_key, version)?;
            encode_response(&header, api_key, version, &metadata(sink, local, &request))
        }
        ApiKey::CreateTopics => {
            let request: CreateTopicsRequest = decode_body(&mut frame, api_key, version)?;
            encode_response(&header, api_key, version, &create_topics(sink, &request))
        }
        ApiKey::Produce => {
            let request: ProduceRequest = decode_body(&mut frame, api_key, version)?;
            let body = produce(sink, &request);
            let synced = match &sink.log {
                Some(log) => keep(log, &request)?,
                None => Vec::new(),
            };
            if request.acks == 0 {
                return Ok(None);
            }
            let response = encode_response(&header, api_key, version, &body)?;
            if synced.is_empty() {
                return Ok(Some(Reply::Ready(response)));
            }
            return Ok(Some(Reply::AfterSync { response, synced }));
        }
        ApiKey::Fetch => {
            let request: FetchRequest = decode_body(&mut frame, api_key, version)?;
            let body = fetch(sink, &request);
            let wait_ms = u64::try_from(request.max_wait_ms).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(wait_ms).min(FETCH_WAIT_MAX)).await;
            encode_response(&header, api_key, version, &body)
        }
        ApiKey::ListOffsets => {
            let request: ListOffsetsRequest = decode_body(&mut frame, api_key, version)?;
            encode_response(&header, api_key, version, &list_offsets(sink, &request))
        }
        _ => Err(BenchError::Protocol(format!(
            "api {api_key:?} is not served by the null sink"
        ))),
    }?;
    Ok(Some(Reply::Ready(response)))
}

/// Queues every partition's records of `request` on `log`.
fn keep(log: &SinkLog, request: &ProduceRequest) -> Result<Vec<Synced>> {
    let mut synced = Vec::new();
    for topic in &request.topic_data {
        for data in &topic.partition_data {
            if let Some(records) = data.records.clone().filter(|r| !r.is_empty()) {
                synced.push(log.append(topic.name.0.as_str(), data.index, records)?);
            }
        }
    }
    Ok(synced)
}

fn decode_body<T: Decodable>(frame: &mut Bytes, api_key: ApiKey, version: i16) -> Result<T> {
    T::decode(frame, version)
        .map_err(|error| BenchError::Protocol(format!("decode {api_key:?} v{version}: {error}")))
}

fn is_served(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::ApiVersions
            | ApiKey::Metadata
            | ApiKey::CreateTopics
            | ApiKey::Produce
            | ApiKey::Fetch
            | ApiKey::ListOffsets
    )
}

/// `length | response header | body` for the request under `header`.
fn encode_response<B: Encodable>(
    header: &RequestHeader,
    api_key: ApiKey,
    version: i16,
    body: &B,
) -> Result<Bytes> {
    let mut buf = BytesMut::with_capacity(128);
    buf.put_i32(0); // patched below
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut buf, api_key.response_header_version(version))
        .map_err(|error| BenchError::Protocol(format!("encode response header: {error}")))?;
    body.encode(&mut buf, version).map_err(|error| {
        BenchError::Protocol(format!("encode {api_key:?} v{version} response: {error}"))
    })?;
    let frame_len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&frame_len.to_be_bytes());
    Ok(buf.freeze())
}

fn api_versions() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        SUPPORTED_RANGES
            .iter()
            .filter(|(key, _, _)| ApiKey::try_from(*key).is_ok_and(is_served))
            .map(|&(key, min, max)| {
                ApiVersion::default()
                    .with_api_key(key)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

fn metadata(sink: &Sink, local: SocketAddr, request: &MetadataRequest) -> MetadataResponse {
    let mut topics = sink.topics();
    let names: Vec<TopicName> = match &request.topics {
        None => topics.by_name.keys().cloned().collect(),
        Some(asked) => asked.iter().filter_map(|t| t.name.clone()).collect(),
    };
    let topic_responses = names
        .into_iter()
        .map(|name| {
            let count = sink.partitions_of(&mut topics, &name, None).len();
            MetadataResponseTopic::default()
                .with_topic_id(topic_id(&name))
                .with_name(Some(name))
                .with_partitions(
                    (0..count as i32)
                        .map(|index| {
                            MetadataResponsePartition::default()
                                .with_partition_index(index)
                                .with_leader_id(BrokerId(NODE_ID))
                                .with_replica_nodes(vec![BrokerId(NODE_ID)])
                                .with_isr_nodes(vec![BrokerId(NODE_ID)])
                        })
                        .collect(),
                )
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(NODE_ID))
            .with_host(StrBytes::from_string(local.ip().to_string()))
            .with_port(i32::from(local.port()))])
        .with_cluster_id(Some(StrBytes::from_static_str("rill-bench-null-sink")))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topic_responses)
}

fn create_topics(sink: &Sink, request: &CreateTopicsRequest) -> CreateTopicsResponse {
    let mut topics = sink.topics();
    let results = request
        .topics
        .iter()
        .map(|topic| {
            let asked = u32::try_from(topic.num_partitions).ok().filter(|n| *n > 0);
            let count = sink.partitions_of(&mut topics, &topic.name, asked).len();
            CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic_id(&topic.name))
                .with_num_partitions(count as i32)
                .with_replication_factor(1)
        })
        .collect();
    CreateTopicsResponse::default().with_topics(results)
}

fn produce(sink: &Sink, request: &ProduceRequest) -> ProduceResponse {
    let mut topics = sink.topics();
    let responses = request
        .topic_data
        .iter()
        .map(|topic| {
            let offsets = sink.partitions_of(&mut topics, &topic.name, None);
            let partition_responses = topic
                .partition_data
                .iter()
                .map(|data| {
                    let count = data.records.as_deref().map_or(0, count_records);
                    let response = PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_log_append_time_ms(-1);
                    match usize::try_from(data.index)
                        .ok()
                        .and_then(|i| offsets.get_mut(i))
                    {
                        Some(next) => {
                            let base = *next;
                            *next += count;
                            response.with_base_offset(base)
                        }
                        // UNKNOWN_TOPIC_OR_PARTITION
                        None => response.with_error_code(3).with_base_offset(-1),
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partition_responses)
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}

fn fetch(sink: &Sink, request: &FetchRequest) -> FetchResponse {
    let mut topics = sink.topics();
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            let offsets = sink.partitions_of(&mut topics, &topic.topic, None);
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let end = usize::try_from(p.partition)
                                .ok()
                                .and_then(|i| offsets.get(i))
                                .copied()
                                .unwrap_or(0);
                            PartitionData::default()
                                .with_partition_index(p.partition)
                                .with_high_watermark(end)
                                .with_last_stable_offset(end)
                                .with_preferred_read_replica(BrokerId(-1))
                                .with_records(Some(Bytes::new()))
                        })
                        .collect(),
                )
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}

fn list_offsets(sink: &Sink, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = sink.topics();
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            let offsets = sink.partitions_of(&mut topics, &topic.name, None);
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            // Latest (-1) is the next offset; anything else 0.
                            let end = usize::try_from(p.partition_index)
                                .ok()
                                .and_then(|i| offsets.get(i))
                                .copied()
                                .unwrap_or(0);
                            ListOffsetsPartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_timestamp(-1)
                                .with_offset(if p.timestamp == -1 { end } else { 0 })
                        })
                        .collect(),
                )
        })
        .collect();
    ListOffsetsResponse::default().with_topics(responses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;

    /// A response frame without its length prefix.
    fn body_of(frame: &Bytes) -> Bytes {
        let mut frame = frame.clone();
        frame.advance(4);
        frame
    }
    use crate::kafka::batch::BatchBuilder;
    use crate::workload::{Compression, Workload};

    #[test]
    fn counts_records_of_concatenated_batches() {
        let mut records = BytesMut::new();
        for messages in [3, 5] {
            let mut builder = BatchBuilder::new(4096);
            for i in 0..messages {
                builder.append(0, None, &[i as u8; 8], b"body");
            }
            records.extend_from_slice(&builder.finish(Compression::None).unwrap());
        }
        assert_eq!(count_records(&records), 8);
        assert_eq!(count_records(&records[..records.len() - 1]), 3);
        assert_eq!(count_records(&[]), 0);
    }

    #[test]
    fn too_new_api_versions_gets_a_v0_error() {
        let sink = Sink {
            default_partitions: 2,
            topics: Mutex::default(),
            log: None,
        };
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(18)
            .with_request_api_version(99)
            .with_correlation_id(9)
            .encode(&mut buf, 2) // flexible header, as a v3+ client sends
            .unwrap();
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let frame = rt
            .block_on(handle_frame(&sink, local, buf.freeze()))
            .unwrap()
            .unwrap();
        let Reply::Ready(frame) = frame else {
            panic!("ApiVersions waits for no sync");
        };
        let mut body = body_of(&frame);
        assert_eq!(body.get_i32(), 9);
        let response =
            <ApiVersionsResponse as kafka_protocol::protocol::Decodable>::decode(&mut body, 0)
                .unwrap();
        assert_eq!(response.error_code, UNSUPPORTED_VERSION);
        assert!(response.api_keys.iter().any(|k| k.api_key == 0));
    }

    /// The harness's run of 2,000 100-byte messages per second for a
    /// second against an in-process sink.
    fn run_against_sink(log: Option<SinkLog>) -> crate::results::RunResult {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            tokio::spawn(serve(listener, 4, log));
            let workload = Workload {
                partitions_per_topic: 4,
                consumers_per_topic: 0,
                producer_rate_msgs_per_s: 2000,
                warmup_duration_s: 0,
                test_duration_s: 1,
                ..Workload::builtin("max-rate-100b").unwrap()
            };
            let options = crate::runner::RunOptions {
                quiet: true,
                ..Default::default()
            };
            crate::runner::run_workload(&addr, &workload, &options)
                .await
                .unwrap()
        })
    }

    #[test]
    fn harness_produces_against_the_sink_in_process() {
        let result = run_against_sink(None);
        assert_eq!(result.errors, 0, "{:?}", result.error_samples);
        assert!(result.total_produced_messages > 0);
        assert!(result.publish_latency_us.count > 0);
    }

    #[test]
    fn a_sink_with_a_sync_dir_keeps_every_acknowledged_record() {
        let dir = tempfile::tempdir().unwrap();
        let log = SinkLog::open(dir.path().to_path_buf()).unwrap();
        let result = run_against_sink(Some(log));
        assert_eq!(result.errors, 0, "{:?}", result.error_samples);
        assert!(result.publish_latency_us.count > 0);
        // Every acknowledged record is in the partition files (a record
        // still in flight when the run stopped may be there too).
        let mut kept = 0;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            kept += count_records(&std::fs::read(entry.unwrap().path()).unwrap());
        }
        let acknowledged = result.total_produced_messages as i64;
        assert!(acknowledged > 0);
        assert!(kept >= acknowledged, "kept {kept} of {acknowledged}");
    }
}
