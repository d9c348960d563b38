//! [`ErrorCode`]: the one table of Kafka protocol error codes rill answers with.
//!
//! Every layer that reports an outcome to a client — the engine mapping its
//! own errors, the group and transaction coordinator cores, the runtimes and
//! the mesh replies between shards, the handlers — carries an `ErrorCode`; the
//! number appears only where a response is encoded ([`ErrorCode::code`]).
//!
//! Why an enum of ours in the engine rather than kafka-protocol's
//! `ResponseError`: the engine maps its errors to Kafka codes
//! ([`crate::EngineError::error_code`]) and does not depend on the wire codec,
//! and rill needs success (`None`, code 0) in the same type, since most
//! responses carry "no error" in the same field as an error, whereas
//! `ResponseError` has no variant for 0. The variants keep Kafka's names
//! (CamelCase here, UPPER_SNAKE in [`Display`](std::fmt::Display)), and a test
//! in the net crate checks every one against `ResponseError::try_from_code`,
//! so this table cannot drift from Kafka's.

/// Declares [`ErrorCode`] with, for each variant, its code, Kafka's
/// UPPER_SNAKE name and its doc, so the numbers and names sit in one list.
macro_rules! error_codes {
    ($( $(#[doc = $doc:literal])* $variant:ident = $code:literal, $name:literal; )*) => {
        /// A Kafka protocol error code (Kafka's `Errors` enum), `None` being success.
        ///
        /// Only the codes rill answers with are listed; add one here (with
        /// Kafka's name and number) before answering with it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i16)]
        pub enum ErrorCode {
            $( $(#[doc = $doc])* $variant = $code, )*
        }

        impl ErrorCode {
            /// Every variant, in declaration order (for tests and tables).
            pub const ALL: &'static [ErrorCode] = &[$( ErrorCode::$variant, )*];

            /// The variant with this numeric code, if rill knows it.
            pub fn from_code(code: i16) -> Option<ErrorCode> {
                match code {
                    $( $code => Some(ErrorCode::$variant), )*
                    _ => None,
                }
            }

            /// Kafka's name for the code, e.g. `UNKNOWN_TOPIC_OR_PARTITION`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $name, )*
                }
            }
        }
    };
}

error_codes! {
    /// No error.
    None = 0, "NONE";
    /// An unexpected broker-side error.
    UnknownServerError = -1, "UNKNOWN_SERVER_ERROR";
    /// The offset asked for is outside the log.
    OffsetOutOfRange = 1, "OFFSET_OUT_OF_RANGE";
    /// A record batch failed validation (CRC, framing, codec).
    CorruptMessage = 2, "CORRUPT_MESSAGE";
    /// The topic or partition does not exist.
    UnknownTopicOrPartition = 3, "UNKNOWN_TOPIC_OR_PARTITION";
    /// The partition has no leader yet (e.g. a topic created a moment ago):
    /// the client retries.
    LeaderNotAvailable = 5, "LEADER_NOT_AVAILABLE";
    /// This broker does not lead the partition (or the log closed under us):
    /// the client refreshes its metadata and retries.
    NotLeaderOrFollower = 6, "NOT_LEADER_OR_FOLLOWER";
    /// A request timed out.
    RequestTimedOut = 7, "REQUEST_TIMED_OUT";
    /// A batch is larger than `max.message.bytes`.
    MessageTooLarge = 10, "MESSAGE_TOO_LARGE";
    /// The coordinator is loading its state.
    CoordinatorLoadInProgress = 14, "COORDINATOR_LOAD_IN_PROGRESS";
    /// The coordinator cannot serve now (its state topic is missing, or the
    /// group is being removed).
    CoordinatorNotAvailable = 15, "COORDINATOR_NOT_AVAILABLE";
    /// This broker does not lead the coordinator's partition: the client
    /// finds the coordinator again.
    NotCoordinator = 16, "NOT_COORDINATOR";
    /// A topic name is not legal.
    InvalidTopicException = 17, "INVALID_TOPIC_EXCEPTION";
    /// Fewer in-sync replicas than `min.insync.replicas`: an acks=all
    /// produce is refused before it is written.
    NotEnoughReplicas = 19, "NOT_ENOUGH_REPLICAS";
    /// The ISR shrank below `min.insync.replicas` after the write.
    NotEnoughReplicasAfterAppend = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND";
    /// `acks` is not -1, 0 or 1.
    InvalidRequiredAcks = 21, "INVALID_REQUIRED_ACKS";
    /// The generation id of the request is not the group's current one.
    IllegalGeneration = 22, "ILLEGAL_GENERATION";
    /// No protocol is supported by every member, or the protocol type differs.
    InconsistentGroupProtocol = 23, "INCONSISTENT_GROUP_PROTOCOL";
    /// The group id is empty.
    InvalidGroupId = 24, "INVALID_GROUP_ID";
    /// The member id is not a member of the group.
    UnknownMemberId = 25, "UNKNOWN_MEMBER_ID";
    /// The session timeout is outside the broker's bounds.
    InvalidSessionTimeout = 26, "INVALID_SESSION_TIMEOUT";
    /// The group is rebalancing; the member must rejoin.
    RebalanceInProgress = 27, "REBALANCE_IN_PROGRESS";
    /// The principal may not act on the topic (ACLs).
    TopicAuthorizationFailed = 29, "TOPIC_AUTHORIZATION_FAILED";
    /// The principal may not act on the group (ACLs).
    GroupAuthorizationFailed = 30, "GROUP_AUTHORIZATION_FAILED";
    /// The principal may not act on the cluster (ACLs).
    ClusterAuthorizationFailed = 31, "CLUSTER_AUTHORIZATION_FAILED";
    /// A record's CreateTime lies outside `message.timestamp.before.max.ms` /
    /// `message.timestamp.after.max.ms` of now.
    InvalidTimestamp = 32, "INVALID_TIMESTAMP";
    /// SaslHandshake named a mechanism the listener does not offer.
    UnsupportedSaslMechanism = 33, "UNSUPPORTED_SASL_MECHANISM";
    /// A SASL request out of order (SaslAuthenticate before SaslHandshake,
    /// SaslHandshake on a listener without SASL).
    IllegalSaslState = 34, "ILLEGAL_SASL_STATE";
    /// The API version is not supported.
    UnsupportedVersion = 35, "UNSUPPORTED_VERSION";
    /// The topic already exists.
    TopicAlreadyExists = 36, "TOPIC_ALREADY_EXISTS";
    /// Partition count not acceptable.
    InvalidPartitions = 37, "INVALID_PARTITIONS";
    /// Replication factor not acceptable.
    InvalidReplicationFactor = 38, "INVALID_REPLICATION_FACTOR";
    /// Replica assignment not acceptable.
    InvalidReplicaAssignment = 39, "INVALID_REPLICA_ASSIGNMENT";
    /// A config name or value was refused.
    InvalidConfig = 40, "INVALID_CONFIG";
    /// The active controller could not be reached: the client retries.
    NotController = 41, "NOT_CONTROLLER";
    /// A request was malformed.
    InvalidRequest = 42, "INVALID_REQUEST";
    /// The batch's format (magic) is not one rill stores.
    UnsupportedForMessageFormat = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT";
    /// A batch whose first sequence does not follow the producer's last one.
    OutOfOrderSequenceNumber = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER";
    /// The producer epoch is older than the current one (pre-KIP-588 form of
    /// fencing).
    InvalidProducerEpoch = 47, "INVALID_PRODUCER_EPOCH";
    /// The request does not fit the transaction's state.
    InvalidTxnState = 48, "INVALID_TXN_STATE";
    /// The producer id is not the transactional id's.
    InvalidProducerIdMapping = 49, "INVALID_PRODUCER_ID_MAPPING";
    /// `transaction.timeout.ms` above `transaction.max.timeout.ms`.
    InvalidTransactionTimeout = 50, "INVALID_TRANSACTION_TIMEOUT";
    /// Another step of the transaction is in progress: retry.
    ConcurrentTransactions = 51, "CONCURRENT_TRANSACTIONS";
    /// A transaction marker from a coordinator older than the last one seen.
    TransactionCoordinatorFenced = 52, "TRANSACTION_COORDINATOR_FENCED";
    /// The principal may not use the transactional id (ACLs).
    TransactionalIdAuthorizationFailed = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
    /// ACL requests on a broker without an authorizer.
    SecurityDisabled = 54, "SECURITY_DISABLED";
    /// The broker did not try this part of a batched request because another
    /// part failed.
    OperationNotAttempted = 55, "OPERATION_NOT_ATTEMPTED";
    /// The disk failed, or the broker has no such log dir.
    KafkaStorageError = 56, "KAFKA_STORAGE_ERROR";
    /// SASL authentication failed (wrong user or password, bad proof).
    SaslAuthenticationFailed = 58, "SASL_AUTHENTICATION_FAILED";
    /// The group still has members.
    NonEmptyGroup = 68, "NON_EMPTY_GROUP";
    /// The group does not exist.
    GroupIdNotFound = 69, "GROUP_ID_NOT_FOUND";
    /// An incremental fetch named a session this broker (shard) does not
    /// hold: the client fetches in full again.
    FetchSessionIdNotFound = 70, "FETCH_SESSION_ID_NOT_FOUND";
    /// An incremental fetch's session epoch is not the one expected.
    InvalidFetchSessionEpoch = 71, "INVALID_FETCH_SESSION_EPOCH";
    /// Topic deletion is disabled (`delete.topic.enable=false`).
    TopicDeletionDisabled = 73, "TOPIC_DELETION_DISABLED";
    /// The request's leader epoch is older than the partition's.
    FencedLeaderEpoch = 74, "FENCED_LEADER_EPOCH";
    /// The request's leader epoch is newer than this broker knows.
    UnknownLeaderEpoch = 75, "UNKNOWN_LEADER_EPOCH";
    /// Attribute bits name no compression codec Kafka defines.
    UnsupportedCompressionType = 76, "UNSUPPORTED_COMPRESSION_TYPE";
    /// A broker request carried an epoch older than its registration's.
    StaleBrokerEpoch = 77, "STALE_BROKER_EPOCH";
    /// DeleteRecords asked for an offset beyond the high watermark.
    OffsetNotAvailable = 78, "OFFSET_NOT_AVAILABLE";
    /// The first JoinGroup carried no member id: retry with the one returned.
    MemberIdRequired = 79, "MEMBER_ID_REQUIRED";
    /// ElectLeaders PREFERRED: the preferred replica is not alive or not in
    /// sync, so it cannot lead.
    PreferredLeaderNotAvailable = 80, "PREFERRED_LEADER_NOT_AVAILABLE";
    /// The group already has `group.max.size` members.
    GroupMaxSizeReached = 81, "GROUP_MAX_SIZE_REACHED";
    /// Another member with the same `group.instance.id` replaced this one.
    FencedInstanceId = 82, "FENCED_INSTANCE_ID";
    /// ElectLeaders UNCLEAN: no live replica can lead.
    EligibleLeadersNotAvailable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE";
    /// ElectLeaders: the partition already has the leader asked for.
    ElectionNotNeeded = 84, "ELECTION_NOT_NEEDED";
    /// A reassignment was cancelled where none is in progress.
    NoReassignmentInProgress = 85, "NO_REASSIGNMENT_IN_PROGRESS";
    /// The group still subscribes to the topic whose offsets are to be deleted.
    GroupSubscribedToTopic = 86, "GROUP_SUBSCRIBED_TO_TOPIC";
    /// A record inside a batch is malformed.
    InvalidRecord = 87, "INVALID_RECORD";
    /// A request came sooner than its quota or interval allows (a client
    /// telemetry push before its push interval, KIP-714).
    ThrottlingQuotaExceeded = 89, "THROTTLING_QUOTA_EXCEEDED";
    /// A newer producer with the same transactional id exists.
    ProducerFenced = 90, "PRODUCER_FENCED";
    /// A SCRAM credential to delete or describe does not exist.
    ResourceNotFound = 91, "RESOURCE_NOT_FOUND";
    /// The same user appears twice in one SCRAM credentials request.
    DuplicateResource = 92, "DUPLICATE_RESOURCE";
    /// A SCRAM credential was refused (iterations out of range, empty name).
    UnacceptableCredential = 93, "UNACCEPTABLE_CREDENTIAL";
    /// The partition exists but the operation cannot run on it right now.
    InvalidUpdateVersion = 95, "INVALID_UPDATE_VERSION";
    /// A request named a topic id this broker does not know.
    UnknownTopicId = 100, "UNKNOWN_TOPIC_ID";
    /// A broker id is registered by another live incarnation.
    DuplicateBrokerRegistration = 101, "DUPLICATE_BROKER_REGISTRATION";
    /// A broker request came from a broker id the controller does not know.
    BrokerIdNotRegistered = 102, "BROKER_ID_NOT_REGISTERED";
    /// DescribeTransactions: no such transactional id.
    TransactionalIdNotFound = 105, "TRANSACTIONAL_ID_NOT_FOUND";
    /// An incremental fetch names topics by id and its session by name,
    /// or the other way round.
    FetchSessionTopicIdError = 106, "FETCH_SESSION_TOPIC_ID_ERROR";
    /// A new ISR names a replica that may not join it (fenced, or in
    /// controlled shutdown).
    IneligibleReplica = 107, "INELIGIBLE_REPLICA";
    /// A follower fetched below the leader's local log: that part is in
    /// tiered storage (KIP-405); the follower starts at the local start.
    OffsetMovedToTieredStorage = 109, "OFFSET_MOVED_TO_TIERED_STORAGE";
    /// The member epoch is ahead of, or unrelated to, the broker's.
    FencedMemberEpoch = 110, "FENCED_MEMBER_EPOCH";
    /// The static member's previous incarnation has not left yet.
    UnreleasedInstanceId = 111, "UNRELEASED_INSTANCE_ID";
    /// The server assignor named by the member is unknown.
    UnsupportedAssignor = 112, "UNSUPPORTED_ASSIGNOR";
    /// The member epoch is behind the broker's (commit with an old epoch).
    StaleMemberEpoch = 113, "STALE_MEMBER_EPOCH";
    /// A telemetry push carried a subscription id that is not (or no
    /// longer) the client's: it must ask for its subscription again.
    UnknownSubscriptionId = 117, "UNKNOWN_SUBSCRIPTION_ID";
    /// A telemetry push larger than `telemetry.max.bytes`.
    TelemetryTooLarge = 118, "TELEMETRY_TOO_LARGE";
    /// The broker holds no replica of the partition (AlterReplicaLogDirs).
    ReplicaNotAvailable = 9, "REPLICA_NOT_AVAILABLE";
    /// A log dir the broker does not have (AlterReplicaLogDirs).
    LogDirNotFound = 57, "LOG_DIR_NOT_FOUND";
    /// AddRaftVoter for a node that votes already (KIP-853).
    DuplicateVoter = 126, "DUPLICATE_VOTER";
    /// RemoveRaftVoter for a node that does not vote (KIP-853).
    VoterNotFound = 127, "VOTER_NOT_FOUND";
    /// A share acknowledgement names a record that is not acquired by the
    /// member (KIP-932): its lock ran out, or it was never delivered to it.
    InvalidRecordState = 121, "INVALID_RECORD_STATE";
    /// A share-partition state write made before an admin reset of the
    /// state (KIP-932's state epoch).
    FencedStateEpoch = 124, "FENCED_STATE_EPOCH";
    /// The share session is not in this broker's cache (KIP-932).
    ShareSessionNotFound = 122, "SHARE_SESSION_NOT_FOUND";
    /// The share session epoch is not the one the broker expects (KIP-932).
    InvalidShareSessionEpoch = 123, "INVALID_SHARE_SESSION_EPOCH";
    /// The broker's share session cache is full (KIP-932).
    ShareSessionLimitReached = 133, "SHARE_SESSION_LIMIT_REACHED";
    /// A KIP-848 member's `SubscribedTopicRegex` does not compile.
    InvalidRegularExpression = 128, "INVALID_REGULAR_EXPRESSION";
}

impl ErrorCode {
    /// The numeric code to put on the wire.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// Whether this is success (`None`).
    pub const fn is_ok(self) -> bool {
        matches!(self, ErrorCode::None)
    }

    /// Whether this is an error (anything but `None`).
    pub const fn is_err(self) -> bool {
        !self.is_ok()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            assert!(seen.insert(code.code()), "{code} listed twice");
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
        }
        assert_eq!(ErrorCode::from_code(-2), None);
        assert_eq!(ErrorCode::from_code(i16::MAX), None);
    }

    #[test]
    fn success_is_zero_and_display_is_kafkas_name() {
        assert_eq!(ErrorCode::None.code(), 0);
        assert!(ErrorCode::None.is_ok() && !ErrorCode::None.is_err());
        assert!(ErrorCode::UnknownServerError.is_err());
        assert_eq!(ErrorCode::UnknownServerError.code(), -1);
        assert_eq!(
            ErrorCode::UnknownTopicOrPartition.to_string(),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
    }
}
