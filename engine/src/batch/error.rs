//! [`BatchError`]: everything that can be wrong with batch bytes, and the Kafka
//! error code a producer should see for each.

use crate::error_code::ErrorCode;

/// Why batch bytes were refused. Structured so callers can log the numbers and
/// map each case to a Kafka error code with [`BatchError::error_code`].
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// Not enough bytes yet: expected for a partial trailing batch in a
    /// segment or a read buffer, a malformed request when it is a produce.
    #[error("incomplete batch: {needed_bytes} bytes needed")]
    Incomplete {
        /// Bytes the batch (or its header) needs in total.
        needed_bytes: usize,
    },
    /// The magic byte is not 2; rill stores only RecordBatch v2.
    #[error("unsupported record batch magic {magic}")]
    UnsupportedMagic {
        /// The magic byte found.
        magic: i8,
    },
    /// The stored CRC32C does not match the bytes.
    #[error("batch crc mismatch: stored {expected:#010x}, computed {actual:#010x}")]
    CorruptCrc {
        /// CRC stored in the header.
        expected: u32,
        /// CRC computed over attributes..end.
        actual: u32,
    },
    /// The batch framing is inconsistent (lengths, counts).
    #[error("corrupt batch: {reason}")]
    Corrupt {
        /// What was inconsistent.
        reason: &'static str,
    },
    /// A record inside the batch is malformed.
    #[error("invalid record: {reason}")]
    InvalidRecord {
        /// What was malformed.
        reason: &'static str,
    },
    /// The batch is larger than the topic's `max.message.bytes`.
    #[error("batch of {size_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    TooLarge {
        /// Size of the batch, log overhead included.
        size_bytes: usize,
        /// The limit it broke.
        max_bytes: usize,
    },
    /// Attribute bits 0-2 name no codec Kafka defines.
    #[error("unknown compression codec {codec}")]
    UnknownCompression {
        /// The value of attribute bits 0-2.
        codec: i16,
    },
    /// The codec failed to compress or decompress, or the output was too large.
    #[error("{codec} codec error: {reason}")]
    Compression {
        /// Codec name ("gzip", "snappy", "lz4", "zstd").
        codec: &'static str,
        /// What the codec reported.
        reason: String,
    },
    /// Records of the batch refused one by one (Kafka's
    /// `RecordValidationException`, KIP-467): the batch is refused whole, and
    /// the produce response names the bad records so that the client fails
    /// those and reports the others as refused for their company.
    #[error("{}", .0.message)]
    Records(Box<RecordErrors>),
}

/// The records of one batch that broke a per-record rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordErrors {
    /// `INVALID_RECORD`, or `INVALID_TIMESTAMP` when any record's timestamp
    /// was out of range (Kafka's `LogValidator.processRecordErrors`).
    pub code: ErrorCode,
    /// The summary for the response's `error_message`.
    pub message: String,
    /// Each bad record, in batch order.
    pub records: Vec<RecordError>,
}

/// One refused record: its position in its batch and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index in its batch (0: the first).
    pub batch_index: i32,
    /// What was wrong with it.
    pub message: String,
}

impl RecordErrors {
    /// The refusal of `records` (not empty): `INVALID_TIMESTAMP` when
    /// `timestamps` says a timestamp was out of range, else `INVALID_RECORD`,
    /// with Kafka's summaries.
    pub fn new(records: Vec<RecordError>, timestamps: bool) -> Self {
        let (code, message) = if timestamps {
            (
                ErrorCode::InvalidTimestamp,
                "One or more records have been rejected due to invalid timestamp".to_string(),
            )
        } else {
            let first: Vec<String> = records
                .iter()
                .take(3)
                .map(|r| format!("record {}: {}", r.batch_index, r.message))
                .collect();
            let message = format!(
                "One or more records have been rejected due to {} record errors in total, \
                 and only showing the first three errors at most: [{}]",
                records.len(),
                first.join("; ")
            );
            (ErrorCode::InvalidRecord, message)
        };
        RecordErrors {
            code,
            message,
            records,
        }
    }
}

impl BatchError {
    /// The Kafka error code to put in a produce response for this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            // A produce request whose batch is cut short is malformed, not
            // "retry later": the client sent what it meant to send.
            BatchError::Incomplete { .. } => ErrorCode::CorruptMessage,
            BatchError::UnsupportedMagic { .. } => ErrorCode::UnsupportedForMessageFormat,
            BatchError::CorruptCrc { .. } => ErrorCode::CorruptMessage,
            BatchError::Corrupt { .. } => ErrorCode::CorruptMessage,
            BatchError::InvalidRecord { .. } => ErrorCode::InvalidRecord,
            BatchError::TooLarge { .. } => ErrorCode::MessageTooLarge,
            BatchError::UnknownCompression { .. } => ErrorCode::UnsupportedCompressionType,
            BatchError::Compression { .. } => ErrorCode::CorruptMessage,
            BatchError::Records(errors) => errors.code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_match_kafka() {
        assert_eq!(
            BatchError::Incomplete { needed_bytes: 61 }
                .error_code()
                .code(),
            2
        );
        assert_eq!(
            BatchError::UnsupportedMagic { magic: 1 }
                .error_code()
                .code(),
            43
        );
        assert_eq!(
            BatchError::CorruptCrc {
                expected: 1,
                actual: 2
            }
            .error_code()
            .code(),
            2
        );
        assert_eq!(BatchError::Corrupt { reason: "x" }.error_code().code(), 2);
        assert_eq!(
            BatchError::InvalidRecord { reason: "x" }
                .error_code()
                .code(),
            87
        );
        let too_large = BatchError::TooLarge {
            size_bytes: 2,
            max_bytes: 1,
        };
        assert_eq!(too_large.error_code().code(), 10);
        assert_eq!(
            BatchError::UnknownCompression { codec: 5 }
                .error_code()
                .code(),
            76
        );
        let codec = BatchError::Compression {
            codec: "gzip",
            reason: String::new(),
        };
        assert_eq!(codec.error_code().code(), 2);
    }

    #[test]
    fn messages_carry_the_numbers() {
        let text = BatchError::TooLarge {
            size_bytes: 2000,
            max_bytes: 1000,
        }
        .to_string();
        assert!(text.contains("2000") && text.contains("1000"), "{text}");
    }
}
