//! The partition operations routing carries to owner shards, and their
//! replies. All `Send`: they cross cores inside a [`kernel::mesh::Envelope`].

use bytes::BytesMut;
use engine::producer_state::ActiveProducer;
use engine::ErrorCode;
use engine::{ReadData, TopicConfig, TopicPartition};

/// One unit of partition work, executed by the shard that owns the partition.
#[derive(Debug)]
pub enum PartitionOp {
    /// Append a produce request's records, then wait as `acks` asks.
    Produce {
        /// Partition.
        tp: TopicPartition,
        /// Record batches (offsets are assigned in place): the partition's
        /// region of the request frame, or a copy of it (see
        /// `handlers::produce`).
        records: BytesMut,
        /// -1 (durable), 1 (written) or 0 (no wait).
        acks: i16,
        /// The request's `timeout_ms`: how long acks=all may wait for the
        /// ISR before REQUEST_TIMED_OUT.
        timeout_ms: i32,
        /// The request's transaction, when the leader must add or check
        /// the partition at its coordinator first (see
        /// [`super::txn_join`]).
        txn: Option<super::TxnJoin>,
    },
    /// ListOffsets: -1 latest, -2 earliest, -3 max timestamp, else by time.
    ListOffset {
        /// Partition.
        tp: TopicPartition,
        /// Timestamp or special value.
        timestamp_ms: i64,
        /// `isolation_level=1`: latest is the last stable offset.
        read_committed: bool,
        /// The client's view of the leader epoch (v4+; -1: unchecked).
        current_leader_epoch: i32,
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
    /// Move a partition to another of this broker's data dirs
    /// (AlterReplicaLogDirs).
    MoveToDir {
        /// Partition.
        tp: TopicPartition,
        /// The data dir's index in `log.dirs`.
        dir_index: usize,
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
    /// DescribeProducers: the producers the partition's replica here knows.
    DescribeProducers {
        /// Partition.
        tp: TopicPartition,
    },
    /// OffsetForLeaderEpoch: where `leader_epoch` ends in this log, once
    /// `current_leader_epoch` (-1: unchecked) passed the fencing check.
    EpochEndOffset {
        /// Partition.
        tp: TopicPartition,
        /// The requester's view of the partition's leader epoch.
        current_leader_epoch: i32,
        /// The epoch whose end offset is asked for.
        leader_epoch: i32,
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
            | PartitionOp::ListOffset { tp, .. }
            | PartitionOp::DeleteRecords { tp, .. }
            | PartitionOp::Create { tp, .. }
            | PartitionOp::Delete { tp }
            | PartitionOp::AlterConfig { tp, .. }
            | PartitionOp::MoveToDir { tp, .. }
            | PartitionOp::Describe { tp }
            | PartitionOp::DescribeProducers { tp }
            | PartitionOp::EpochEndOffset { tp, .. }
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

/// Why a produce was refused: the Kafka code, and when records were refused
/// one by one (KIP-467), which and why, for the response's `record_errors`
/// and `error_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRefusal {
    /// The partition's error code.
    pub code: ErrorCode,
    /// The records refused one by one, when that was the reason.
    pub records: Option<Box<engine::batch::RecordErrors>>,
}

impl From<ErrorCode> for ProduceRefusal {
    fn from(code: ErrorCode) -> Self {
        ProduceRefusal {
            code,
            records: None,
        }
    }
}

impl From<engine::EngineError> for ProduceRefusal {
    fn from(error: engine::EngineError) -> Self {
        match error {
            engine::EngineError::Batch(engine::batch::BatchError::Records(records)) => {
                ProduceRefusal {
                    code: records.code,
                    records: Some(records),
                }
            }
            other => other.error_code().into(),
        }
    }
}

/// Result of a [`PartitionRead`].
#[derive(Debug)]
pub struct ReadOutcome {
    /// Kafka error code (0 on success).
    pub error_code: ErrorCode,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset.
    pub log_start_offset: i64,
    /// The records: bytes, or a file range whose descriptor the engine
    /// shares across shards (`Arc`), as the socket's send path takes it.
    pub data: ReadData,
    /// `read_committed` reads: aborted transactions overlapping the records,
    /// as `(producer_id, first_offset)`; `None` otherwise.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// The replica the consumer should read from instead (KIP-392), with
    /// no records; -1: read here.
    pub preferred_read_replica: i32,
}

impl ReadOutcome {
    /// A read that failed with `code`: no offsets, no records.
    pub fn error(code: ErrorCode) -> ReadOutcome {
        ReadOutcome {
            error_code: code,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            data: ReadData::Empty,
            aborted_transactions: None,
            preferred_read_replica: -1,
        }
    }

    /// Whether this answer ends a long poll at once: a failed read, or
    /// one that sends the consumer to another replica (Kafka answers both
    /// without waiting).
    pub fn ends_poll(&self) -> bool {
        self.error_code != ErrorCode::None || self.preferred_read_replica >= 0
    }
}

/// One partition read of a fetch ([`super::ReadOrWait`]): whole batches
/// from `offset`.
#[derive(Debug, Clone)]
pub struct PartitionRead {
    /// Partition.
    pub tp: TopicPartition,
    /// First offset wanted.
    pub offset: i64,
    /// Byte budget (the first batch is returned even if larger).
    pub max_bytes: usize,
    /// The consumer's view of the leader epoch (Fetch v9+); -1: unchecked.
    pub current_leader_epoch: i32,
}

/// How a fetch's partitions are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Return a file range (sendfile/splice) rather than bytes.
    pub file_slice: bool,
    /// `isolation_level=1`: stop at the last stable offset and list the
    /// aborted transactions of the range.
    pub read_committed: bool,
    /// A consumer's Fetch v11+ (KIP-392's client metadata): its
    /// `client.rack`, possibly empty. Such a fetch may be served by a
    /// follower, and a leader may send it to one. `None`: an older fetch,
    /// which only the leader serves.
    pub client_rack: Option<std::sync::Arc<str>>,
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
    /// The index of its data dir in `log.dirs` (0: the first).
    pub log_dir: usize,
}

/// The answer to one [`PartitionOp`]; errors are Kafka error codes.
#[derive(Debug)]
pub enum PartitionReply {
    /// Produce.
    Produce(Result<ProduceOutcome, ProduceRefusal>),
    /// ListOffset: (offset, timestamp) or none, with the leader epoch.
    ListOffset(Result<(Option<(i64, i64)>, i32), ErrorCode>),
    /// DeleteRecords: the new low watermark.
    DeleteRecords(Result<i64, ErrorCode>),
    /// Create, Delete, AlterConfig, MoveToDir.
    Done(Result<(), ErrorCode>),
    /// Describe.
    Describe(Result<PartitionState, ErrorCode>),
    /// EpochEndOffset: (the epoch found, its end offset); `(-1, -1)` when
    /// undefined.
    EpochEndOffset(Result<(i32, i64), ErrorCode>),
    /// DescribeProducers: the partition's producers, by id.
    Producers(Result<Vec<ActiveProducer>, ErrorCode>),
}

/// Which reply an operation expects (to build an error reply when its owner is gone).
#[derive(Debug, Clone, Copy)]
pub(crate) enum OpKind {
    Produce,
    ListOffset,
    DeleteRecords,
    Done,
    Describe,
    EpochEndOffset,
    Producers,
}

impl OpKind {
    pub(crate) fn of(op: &PartitionOp) -> Self {
        match op {
            PartitionOp::Produce { .. } => OpKind::Produce,
            PartitionOp::ListOffset { .. } => OpKind::ListOffset,
            PartitionOp::DeleteRecords { .. } => OpKind::DeleteRecords,
            PartitionOp::Create { .. }
            | PartitionOp::Delete { .. }
            | PartitionOp::AlterConfig { .. }
            | PartitionOp::MoveToDir { .. }
            | PartitionOp::WriteMarker { .. } => OpKind::Done,
            PartitionOp::Describe { .. } => OpKind::Describe,
            PartitionOp::EpochEndOffset { .. } => OpKind::EpochEndOffset,
            PartitionOp::DescribeProducers { .. } => OpKind::Producers,
        }
    }

    pub(crate) fn error_reply(self, code: ErrorCode) -> PartitionReply {
        match self {
            OpKind::Produce => PartitionReply::Produce(Err(code.into())),
            OpKind::ListOffset => PartitionReply::ListOffset(Err(code)),
            OpKind::DeleteRecords => PartitionReply::DeleteRecords(Err(code)),
            OpKind::Done => PartitionReply::Done(Err(code)),
            OpKind::Describe => PartitionReply::Describe(Err(code)),
            OpKind::EpochEndOffset => PartitionReply::EpochEndOffset(Err(code)),
            OpKind::Producers => PartitionReply::Producers(Err(code)),
        }
    }
}
