//! The typed messages shards exchange over glommio's channel mesh. Everything
//! here is `Send`: owned bytes, owned file descriptors, and a
//! `futures::channel::oneshot` reply slot (its waker may be on another core;
//! glommio forwards foreign wakes to the owning executor).

use crate::controller::{ControllerReply, ControllerRequest};
use crate::metrics::MetricsSnapshot;
use crate::topics::TopicUpdate;
use bytes::Bytes;
use engine::{ErrorCode, TopicConfig, TopicPartition};
use futures::channel::oneshot;

/// One unit of partition work, executed by the shard that owns the partition.
#[derive(Debug)]
pub enum PartitionOp {
    /// Append a produce request's records, then wait as `acks` asks.
    Produce {
        /// Partition.
        tp: TopicPartition,
        /// Record batches (offsets are assigned in place).
        records: Vec<u8>,
        /// -1 (durable), 1 (written) or 0 (no wait).
        acks: i16,
    },
    /// Read whole batches from `offset`.
    Read {
        /// Partition.
        tp: TopicPartition,
        /// First offset wanted.
        offset: i64,
        /// Byte budget (the first batch is returned even if larger).
        max_bytes: usize,
        /// Return a file range (sendfile/splice) rather than bytes.
        file_slice: bool,
        /// `isolation_level=1`: stop at the last stable offset and list
        /// the aborted transactions of the range.
        read_committed: bool,
    },
    /// ListOffsets: -1 latest, -2 earliest, -3 max timestamp, else by time.
    ListOffset {
        /// Partition.
        tp: TopicPartition,
        /// Timestamp or special value.
        timestamp_ms: i64,
        /// `isolation_level=1`: latest is the last stable offset.
        read_committed: bool,
    },
    /// DeleteRecords: move the log start to `offset` (-1: the high watermark).
    DeleteRecords {
        /// Partition.
        tp: TopicPartition,
        /// New log start offset.
        offset: i64,
    },
    /// Create a partition of a new topic.
    Create {
        /// Partition.
        tp: TopicPartition,
        /// Topic id.
        topic_id: [u8; 16],
        /// Effective config.
        config: TopicConfig,
    },
    /// Delete a partition and its files.
    Delete {
        /// Partition.
        tp: TopicPartition,
    },
    /// Replace a partition's config.
    AlterConfig {
        /// Partition.
        tp: TopicPartition,
        /// New effective config.
        config: TopicConfig,
    },
    /// Offsets, epoch and size of a partition.
    Describe {
        /// Partition.
        tp: TopicPartition,
    },
    /// Append a transaction marker and wait until it is durable
    /// (WriteTxnMarkers; replies `Done`).
    WriteMarker {
        /// Partition.
        tp: TopicPartition,
        /// The producer whose transaction ends.
        producer_id: i64,
        /// Its epoch (the coordinator's, possibly bumped).
        producer_epoch: i16,
        /// Commit (true) or abort.
        commit: bool,
        /// The coordinator's epoch.
        coordinator_epoch: i32,
    },
}

impl PartitionOp {
    /// The partition this operation concerns (decides the owner shard).
    pub fn topic_partition(&self) -> &TopicPartition {
        match self {
            PartitionOp::Produce { tp, .. }
            | PartitionOp::Read { tp, .. }
            | PartitionOp::ListOffset { tp, .. }
            | PartitionOp::DeleteRecords { tp, .. }
            | PartitionOp::Create { tp, .. }
            | PartitionOp::Delete { tp }
            | PartitionOp::AlterConfig { tp, .. }
            | PartitionOp::Describe { tp }
            | PartitionOp::WriteMarker { tp, .. } => tp,
        }
    }
}

/// What an append produced, as a produce response needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// Offset of the first record.
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    /// Log start offset after the append.
    pub log_start_offset: i64,
}

/// Record bytes that may cross cores: a file range carries its own duplicated
/// descriptor, because the engine's `Rc<File>` cannot leave its shard.
#[derive(Debug)]
pub enum SendData {
    /// Nothing to send.
    Empty,
    /// Bytes in memory (copy path or batch cache).
    Bytes(Bytes),
    /// Batches from the batch cache, in pieces sent with one gathered write.
    Pieces(Vec<Bytes>),
    /// A byte range of a segment file.
    File {
        /// Duplicated descriptor of the segment.
        file: std::fs::File,
        /// Start of the range.
        position: u64,
        /// Length of the range.
        length: usize,
    },
}

impl SendData {
    /// Bytes of records.
    pub fn len(&self) -> usize {
        match self {
            SendData::Empty => 0,
            SendData::Bytes(bytes) => bytes.len(),
            SendData::Pieces(pieces) => pieces.iter().map(Bytes::len).sum(),
            SendData::File { length, .. } => *length,
        }
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Result of a [`PartitionOp::Read`].
#[derive(Debug)]
pub struct ReadOutcome {
    /// Kafka error code (`ErrorCode::None` on success).
    pub error_code: ErrorCode,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset.
    pub log_start_offset: i64,
    /// The records.
    pub data: SendData,
    /// `read_committed` reads: aborted transactions overlapping the records,
    /// as `(producer_id, first_offset)`; `None` otherwise.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
}

/// State of a partition for Describe-style APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionState {
    /// First offset in the log.
    pub log_start_offset: i64,
    /// Next offset to be written.
    pub log_end_offset: i64,
    /// High watermark.
    pub high_watermark: i64,
    /// Current leader epoch.
    pub leader_epoch: i32,
    /// Bytes on disk.
    pub size_bytes: u64,
}

/// The answer to one [`PartitionOp`]; errors are Kafka error codes.
#[derive(Debug)]
pub enum PartitionReply {
    /// Produce.
    Produce(Result<ProduceOutcome, ErrorCode>),
    /// Read.
    Read(ReadOutcome),
    /// ListOffset: (offset, timestamp) or none, with the leader epoch.
    ListOffset(Result<(Option<(i64, i64)>, i32), ErrorCode>),
    /// DeleteRecords: the new low watermark.
    DeleteRecords(Result<i64, ErrorCode>),
    /// Create, Delete, AlterConfig.
    Done(Result<(), ErrorCode>),
    /// Describe.
    Describe(Result<PartitionState, ErrorCode>),
}

/// A message from one shard to another.
pub enum ShardMessage {
    /// Partition work for the receiving (owner) shard; replies in the same order.
    Partitions {
        /// The operations.
        ops: Vec<PartitionOp>,
        /// Reply slot.
        reply: oneshot::Sender<Vec<PartitionReply>>,
    },
    /// Long poll: reply once any partition has data past its offset. The
    /// waiter ends early if the asker drops its receiver (fetch answered).
    WaitForData {
        /// (partition, offset the fetcher waits past).
        parts: Vec<(TopicPartition, i64)>,
        /// Reply slot.
        reply: oneshot::Sender<()>,
    },
    /// A topic-table change for the controller (shard 0) to perform.
    Controller {
        /// The change.
        request: ControllerRequest,
        /// Reply slot.
        reply: oneshot::Sender<ControllerReply>,
    },
    /// A topic-table change to apply (from the controller).
    TopicUpdate(TopicUpdate),
    /// A transaction coordinator request for the shard that owns the
    /// transactional id's `__transaction_state` partition.
    Txn {
        /// The request.
        request: crate::txn_runtime::TxnRequest,
        /// Reply slot.
        reply: oneshot::Sender<crate::txn_runtime::TxnReply>,
    },
    /// Ask for this shard's metrics.
    Metrics {
        /// Reply slot.
        reply: oneshot::Sender<MetricsSnapshot>,
    },
    /// A group-coordinator call for the shard owning the group's
    /// `__consumer_offsets` partition.
    Group {
        /// The call.
        request: crate::group_runtime::GroupRequest,
        /// Reply slot.
        reply: oneshot::Sender<crate::group_runtime::GroupReply>,
    },
}
