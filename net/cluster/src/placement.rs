//! Replica placement: which brokers hold each new partition's replicas.
//!
//! This is Kafka's `AdminUtils.assignReplicasToBrokers` (the placement that
//! CreateTopics and CreatePartitions used before KRaft's striped placer, and
//! that the issue asks for), made pure: Kafka draws the start index and the
//! replica shift from `Random`; here they come in as a [`PlacementSeed`] that
//! the caller draws from its own seeded source, so a simulation reproduces.
//!
//! Rack-unaware: brokers sorted by id; partition `p`'s first replica is the
//! broker at index `(p + start) % n`, its `j`-th further replica the broker
//! at `(first + 1 + (shift + j) % (n - 1)) % n`, and `shift` grows by one
//! every `n` partitions so that replica sets do not repeat. Leaders (first
//! replicas) go round-robin, hence every broker leads `partitions / n` or one
//! more.
//!
//! Rack-aware (every broker has `broker.rack`): the same walk over the
//! brokers interleaved by rack ([`rack_alternated_broker_list`]), skipping a
//! broker whose rack already holds a replica while some rack holds none, so a
//! partition spans `min(racks, replication factor)` racks. When only some
//! brokers have a rack, rill places rack-unaware (Kafka's
//! `RackAwareMode.Safe`) rather than failing the request.
//!
//! [`validate_replica_assignment`] checks an explicit assignment
//! (CreateTopics' `assignments`, CreatePartitions' `assignments`) the way
//! KRaft's `ReplicationControlManager` does.

use std::collections::{BTreeMap, BTreeSet};

use engine::ErrorCode;

/// A broker's id (Kafka's `broker.id` / `node.id`, an `int32` on the wire).
pub type BrokerId = i32;

/// The two numbers Kafka draws at random for each placement.
///
/// Kafka draws both from `[0, brokers)` (or takes both equal to a fixed start
/// index); any value works here, it is reduced modulo the broker count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlacementSeed {
    /// Index (into the sorted or rack-alternated broker list) of partition
    /// 0's first replica.
    pub start_index: usize,
    /// Offset of the second replica from the first, before the growth every
    /// `n` partitions.
    pub shift: usize,
}

impl PlacementSeed {
    /// Kafka's `fixedStartIndex`: start and shift both equal to `index`.
    pub fn fixed(index: usize) -> Self {
        PlacementSeed {
            start_index: index,
            shift: index,
        }
    }
}

/// A live broker as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementBroker {
    /// Broker id.
    pub id: BrokerId,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

/// Why a placement or an explicit assignment was refused; each maps to the
/// Kafka error code CreateTopics / CreatePartitions answer with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Zero or negative partition count.
    #[error("number of partitions must be larger than 0, got {partitions}")]
    PartitionsNotPositive {
        /// The count asked for.
        partitions: i32,
    },
    /// Zero or negative replication factor.
    #[error("replication factor must be larger than 0, got {replication_factor}")]
    ReplicationFactorNotPositive {
        /// The factor asked for.
        replication_factor: i16,
    },
    /// More replicas per partition than live brokers.
    #[error("replication factor: {replication_factor} larger than available brokers: {brokers}")]
    ReplicationFactorTooLarge {
        /// The factor asked for.
        replication_factor: i16,
        /// Live brokers.
        brokers: usize,
    },
    /// An explicit assignment with no partition at all.
    #[error("the manual partition assignment lists no partition")]
    EmptyAssignment,
    /// A partition with an empty replica list.
    #[error("the manual partition assignment of partition {partition} has an empty replica list")]
    EmptyReplicaList {
        /// The partition.
        partition: i32,
    },
    /// A broker listed twice in one partition.
    #[error("the manual partition assignment of partition {partition} includes broker {broker_id} more than once")]
    DuplicateBroker {
        /// The partition.
        partition: i32,
        /// The repeated broker.
        broker_id: BrokerId,
    },
    /// A broker that is not registered.
    #[error("the manual partition assignment of partition {partition} includes broker {broker_id}, but no such broker is registered")]
    UnknownBroker {
        /// The partition.
        partition: i32,
        /// The unknown broker.
        broker_id: BrokerId,
    },
    /// Partitions with different replica counts.
    #[error("partition {partition} has {replicas} replica(s), inconsistent with the {expected} of the other partitions")]
    InconsistentReplicationFactor {
        /// The partition.
        partition: i32,
        /// Its replica count.
        replicas: usize,
        /// The count of the others (partition 0 or the first listed).
        expected: usize,
    },
    /// The same partition listed twice.
    #[error("found multiple manual partition assignments for partition {partition}")]
    DuplicatePartition {
        /// The partition.
        partition: i32,
    },
    /// CreatePartitions with a different number of replica lists than
    /// partitions added.
    #[error(
        "increasing the number of partitions by {added} but {assignments} assignments provided"
    )]
    AssignmentCountMismatch {
        /// Partitions added.
        added: i32,
        /// Replica lists given.
        assignments: usize,
    },
    /// Partition numbers that are not `first, first + 1, …` without gaps.
    #[error("partitions should be a consecutive integer sequence from {first}, but partition {missing} is missing")]
    NonConsecutivePartitions {
        /// Where the sequence must start.
        first: i32,
        /// The first number missing.
        missing: i32,
    },
}

impl PlacementError {
    /// The Kafka error code for the response.
    ///
    /// Counts map to `INVALID_PARTITIONS` / `INVALID_REPLICATION_FACTOR`
    /// (AdminUtils), everything about an explicit assignment to
    /// `INVALID_REPLICA_ASSIGNMENT` (KRaft's `validateManualPartitionAssignment`).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            PlacementError::PartitionsNotPositive { .. } => ErrorCode::InvalidPartitions,
            PlacementError::ReplicationFactorNotPositive { .. }
            | PlacementError::ReplicationFactorTooLarge { .. } => {
                ErrorCode::InvalidReplicationFactor
            }
            PlacementError::EmptyAssignment
            | PlacementError::EmptyReplicaList { .. }
            | PlacementError::DuplicateBroker { .. }
            | PlacementError::UnknownBroker { .. }
            | PlacementError::InconsistentReplicationFactor { .. }
            | PlacementError::DuplicatePartition { .. }
            | PlacementError::AssignmentCountMismatch { .. }
            | PlacementError::NonConsecutivePartitions { .. } => {
                ErrorCode::InvalidReplicaAssignment
            }
        }
    }
}

/// Kafka's `assignReplicasToBrokers`: replica lists for `partitions` new
/// partitions numbered from `start_partition_id` (0 for a new topic, the
/// current count for CreatePartitions). Element `k` of the result is
/// partition `start_partition_id + k`'s replicas, the first being the
/// preferred leader.
///
/// `brokers` are the live brokers, in any order (they are sorted by id, as
/// Kafka does); a broker id listed twice counts once.
pub fn assign_replicas_to_brokers(
    brokers: &[PlacementBroker],
    partitions: i32,
    replication_factor: i16,
    seed: PlacementSeed,
    start_partition_id: i32,
) -> Result<Vec<Vec<BrokerId>>, PlacementError> {
    if partitions <= 0 {
        return Err(PlacementError::PartitionsNotPositive { partitions });
    }
    if replication_factor <= 0 {
        return Err(PlacementError::ReplicationFactorNotPositive { replication_factor });
    }
    let by_id: BTreeMap<BrokerId, Option<&str>> = brokers
        .iter()
        .map(|broker| (broker.id, broker.rack.as_deref()))
        .collect();
    let replication_factor_count = usize::try_from(replication_factor).unwrap_or(usize::MAX);
    if replication_factor_count > by_id.len() {
        return Err(PlacementError::ReplicationFactorTooLarge {
            replication_factor,
            brokers: by_id.len(),
        });
    }
    assert!(
        start_partition_id >= 0,
        "partition ids start at 0: {start_partition_id}"
    );
    let racks: Option<BTreeMap<BrokerId, &str>> = by_id
        .iter()
        .map(|(&id, rack)| rack.map(|rack| (id, rack)))
        .collect();
    let assignment = match racks {
        Some(racks) if !racks.is_empty() => {
            let racks: BTreeMap<BrokerId, String> = racks
                .into_iter()
                .map(|(id, rack)| (id, rack.to_owned()))
                .collect();
            assign_rack_aware(
                &racks,
                partitions,
                replication_factor_count,
                seed,
                start_partition_id,
            )
        }
        // No broker has a rack, or only some do (Kafka's RackAwareMode.Safe).
        _ => {
            let ids: Vec<BrokerId> = by_id.keys().copied().collect();
            assign_rack_unaware(
                &ids,
                partitions,
                replication_factor_count,
                seed,
                start_partition_id,
            )
        }
    };
    assert_eq!(assignment.len(), usize::try_from(partitions).unwrap_or(0));
    for replicas in &assignment {
        assert_eq!(replicas.len(), replication_factor_count);
        assert!(
            has_no_duplicates(replicas),
            "placement repeated a broker: {replicas:?}"
        );
        assert!(replicas.iter().all(|id| by_id.contains_key(id)));
    }
    Ok(assignment)
}

/// Index of a further replica: Kafka's `replicaIndex`, the first replica's
/// index moved on by `1 + (shift + replica_index) % (n - 1)`, so never onto
/// the first replica itself.
fn replica_index(first_index: usize, shift: usize, replica_index: usize, brokers: usize) -> usize {
    assert!(brokers >= 2 && first_index < brokers);
    let step = 1 + (shift % (brokers - 1) + replica_index % (brokers - 1)) % (brokers - 1);
    (first_index + step) % brokers
}

/// The shift in effect for `partition`, reduced modulo `n - 1` (the only
/// way [`replica_index`] uses it): the seed's, plus one for every partition
/// id in `[start, partition]` that is a positive multiple of `n` (Kafka
/// increments it on reaching such a partition, counting from
/// `start_partition_id`, so that replica sets do not repeat every `n`
/// partitions).
fn shift_for(
    seed_shift: usize,
    start_partition_id: usize,
    partition: usize,
    brokers: usize,
) -> usize {
    assert!(partition >= start_partition_id && brokers >= 1);
    let modulus = (brokers - 1).max(1);
    let rounds = partition / brokers - start_partition_id / brokers;
    // The start itself counts only when it is a positive multiple of n.
    let start_bump =
        usize::from(start_partition_id > 0 && start_partition_id.is_multiple_of(brokers));
    (seed_shift % modulus + rounds + start_bump) % modulus
}

fn assign_rack_unaware(
    brokers: &[BrokerId],
    partitions: i32,
    replication_factor: usize,
    seed: PlacementSeed,
    start_partition_id: i32,
) -> Vec<Vec<BrokerId>> {
    let n = brokers.len();
    let start = usize::try_from(start_partition_id).unwrap_or(0);
    let count = usize::try_from(partitions).unwrap_or(0);
    let start_index = seed.start_index % n;
    (start..start + count)
        .map(|partition| {
            let first_index = (partition % n + start_index) % n;
            let shift = shift_for(seed.shift, start, partition, n);
            let mut replicas = Vec::with_capacity(replication_factor);
            replicas.push(brokers[first_index]);
            for j in 0..replication_factor - 1 {
                replicas.push(brokers[replica_index(first_index, shift, j, n)]);
            }
            replicas
        })
        .collect()
}

fn assign_rack_aware(
    racks: &BTreeMap<BrokerId, String>,
    partitions: i32,
    replication_factor: usize,
    seed: PlacementSeed,
    start_partition_id: i32,
) -> Vec<Vec<BrokerId>> {
    let rack_count = racks.values().collect::<BTreeSet<_>>().len();
    let arranged = rack_alternated_broker_list(racks);
    let n = arranged.len();
    assert_eq!(n, racks.len());
    let start = usize::try_from(start_partition_id).unwrap_or(0);
    let count = usize::try_from(partitions).unwrap_or(0);
    let start_index = seed.start_index % n;
    (start..start + count)
        .map(|partition| {
            let first_index = (partition % n + start_index) % n;
            let shift = shift_for(seed.shift, start, partition, n);
            let leader = arranged[first_index];
            let mut replicas = vec![leader];
            let mut racks_with_replicas: BTreeSet<&str> = BTreeSet::from([racks[&leader].as_str()]);
            let mut k = 0usize;
            for _ in 0..replication_factor - 1 {
                // Bounded: k walks the n - 1 other brokers in a cycle, and
                // within one cycle there is a broker in a rack without a
                // replica (if any rack lacks one) or an unused broker.
                let k_limit = k + n;
                loop {
                    assert!(k < k_limit, "rack-aware placement found no broker");
                    let broker = arranged[replica_index(first_index, shift * rack_count, k, n)];
                    let rack = racks[&broker].as_str();
                    k += 1;
                    let rack_ok = !racks_with_replicas.contains(rack)
                        || racks_with_replicas.len() == rack_count;
                    let broker_ok = !replicas.contains(&broker) || replicas.len() == n;
                    if rack_ok && broker_ok {
                        replicas.push(broker);
                        racks_with_replicas.insert(rack);
                        break;
                    }
                }
            }
            replicas
        })
        .collect()
}

/// The replication factor of an internal topic (`__consumer_offsets`,
/// `__transaction_state`): the configured one
/// (`offsets.topic.replication.factor`,
/// `transaction.state.log.replication.factor`, 3 by default) capped by the
/// live brokers, so that a one- or two-node cluster can still create them
/// (the issue asks for the cap; Kafka instead waits for enough brokers).
pub fn internal_topic_replication_factor(configured: i16, live_brokers: usize) -> i16 {
    assert!(
        configured > 0,
        "a replication factor is positive: {configured}"
    );
    let cap = i16::try_from(live_brokers).unwrap_or(i16::MAX).max(1);
    let factor = configured.min(cap);
    assert!(factor >= 1 && factor <= configured);
    factor
}

/// Kafka's `getRackAlternatedBrokerList`: the brokers of each rack in id
/// order, taken one rack at a time (racks in name order), e.g. racks
/// `a: 0 1 2`, `b: 3 4 5`, `c: 6 7 8` give `0 3 6 1 4 7 2 5 8`.
pub fn rack_alternated_broker_list(racks: &BTreeMap<BrokerId, String>) -> Vec<BrokerId> {
    let mut by_rack: BTreeMap<&str, std::collections::VecDeque<BrokerId>> = BTreeMap::new();
    // BTreeMap iteration is in broker id order, so each rack's list is sorted.
    for (&id, rack) in racks {
        by_rack.entry(rack.as_str()).or_default().push_back(id);
    }
    let mut result = Vec::with_capacity(racks.len());
    while result.len() < racks.len() {
        for brokers in by_rack.values_mut() {
            if let Some(id) = brokers.pop_front() {
                result.push(id);
            }
        }
    }
    assert_eq!(result.len(), racks.len());
    result
}

/// Checks an explicit replica assignment and returns the replica lists in
/// partition order (element `k` is partition `first_partition + k`).
///
/// The rules are KRaft's: at least one partition; every partition a
/// non-empty list of distinct, registered brokers; the same replica count
/// everywhere (`expected_replication_factor` when adding partitions to a
/// topic, else the first partition's); partition numbers exactly
/// `first_partition, first_partition + 1, …` with none repeated.
pub fn validate_replica_assignment(
    assignment: &[(i32, Vec<BrokerId>)],
    first_partition: i32,
    expected_replication_factor: Option<usize>,
    registered_brokers: &BTreeSet<BrokerId>,
) -> Result<Vec<Vec<BrokerId>>, PlacementError> {
    if assignment.is_empty() {
        return Err(PlacementError::EmptyAssignment);
    }
    let mut by_partition: BTreeMap<i32, &Vec<BrokerId>> = BTreeMap::new();
    let mut expected = expected_replication_factor;
    for (partition, replicas) in assignment {
        let partition = *partition;
        if by_partition.insert(partition, replicas).is_some() {
            return Err(PlacementError::DuplicatePartition { partition });
        }
        if replicas.is_empty() {
            return Err(PlacementError::EmptyReplicaList { partition });
        }
        let mut seen = BTreeSet::new();
        for &broker_id in replicas {
            if !registered_brokers.contains(&broker_id) {
                return Err(PlacementError::UnknownBroker {
                    partition,
                    broker_id,
                });
            }
            if !seen.insert(broker_id) {
                return Err(PlacementError::DuplicateBroker {
                    partition,
                    broker_id,
                });
            }
        }
        match expected {
            Some(expected) if expected != replicas.len() => {
                return Err(PlacementError::InconsistentReplicationFactor {
                    partition,
                    replicas: replicas.len(),
                    expected,
                });
            }
            Some(_) => {}
            None => expected = Some(replicas.len()),
        }
    }
    for (k, &partition) in by_partition.keys().enumerate() {
        let wanted = i32::try_from(k)
            .ok()
            .and_then(|k| first_partition.checked_add(k));
        if wanted != Some(partition) {
            return Err(PlacementError::NonConsecutivePartitions {
                first: first_partition,
                missing: wanted.unwrap_or(i32::MAX),
            });
        }
    }
    let result: Vec<Vec<BrokerId>> = by_partition.into_values().cloned().collect();
    assert!(result.iter().all(|replicas| has_no_duplicates(replicas)));
    Ok(result)
}

fn has_no_duplicates(replicas: &[BrokerId]) -> bool {
    replicas.iter().collect::<BTreeSet<_>>().len() == replicas.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unracked(ids: impl IntoIterator<Item = BrokerId>) -> Vec<PlacementBroker> {
        ids.into_iter()
            .map(|id| PlacementBroker { id, rack: None })
            .collect()
    }

    fn racked(pairs: &[(BrokerId, &str)]) -> Vec<PlacementBroker> {
        pairs
            .iter()
            .map(|&(id, rack)| PlacementBroker {
                id,
                rack: Some(rack.to_owned()),
            })
            .collect()
    }

    fn known(ids: impl IntoIterator<Item = BrokerId>) -> BTreeSet<BrokerId> {
        ids.into_iter().collect()
    }

    /// Kafka's AdminUtilsTest.testReplicaAssignment: 5 brokers, 10
    /// partitions, RF 3, fixed start index 0.
    #[test]
    fn rack_unaware_layout_is_kafkas() {
        let got = assign_replicas_to_brokers(&unracked(0..5), 10, 3, PlacementSeed::fixed(0), 0);
        let expected = vec![
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            vec![0, 2, 3],
            vec![1, 3, 4],
            vec![2, 4, 0],
            vec![3, 0, 1],
            vec![4, 1, 2],
        ];
        assert_eq!(got, Ok(expected));
    }

    #[test]
    fn brokers_are_sorted_by_id_and_ids_need_not_be_dense() {
        let shuffled = unracked([30, 10, 20, 10]);
        let got = assign_replicas_to_brokers(&shuffled, 3, 2, PlacementSeed::fixed(0), 0);
        // Sorted list [10, 20, 30]; shift 0: each partition's follower is the
        // next broker.
        assert_eq!(got, Ok(vec![vec![10, 20], vec![20, 30], vec![30, 10]]));
    }

    #[test]
    fn seed_moves_the_start_and_the_shift_separately() {
        let brokers = unracked(0..5);
        let seed = PlacementSeed {
            start_index: 2,
            shift: 1,
        };
        let got = assign_replicas_to_brokers(&brokers, 6, 3, seed, 0).unwrap();
        // Partition 0: first at index 2, followers 2 + 1 + (1 + j) % 4.
        assert_eq!(got[0], vec![2, 4, 0]);
        assert_eq!(got[1], vec![3, 0, 1]);
        // Partition 5 starts a new round: shift 2.
        assert_eq!(got[5], vec![2, 0, 1]);
        // A shift of n - 1 + 1 is the same as 1: only (shift mod n - 1) matters.
        let wrapped = PlacementSeed {
            start_index: 7,
            shift: 5,
        };
        assert_eq!(
            assign_replicas_to_brokers(&brokers, 6, 3, wrapped, 0).unwrap(),
            got
        );
    }

    /// Kafka counts the shift's growth from `startPartitionId`
    /// (CreatePartitions): partition 3 of 3 brokers is a multiple of n.
    #[test]
    fn start_partition_id_numbers_and_shifts_like_kafka() {
        let got = assign_replicas_to_brokers(&unracked(0..3), 2, 2, PlacementSeed::fixed(0), 3);
        assert_eq!(got, Ok(vec![vec![0, 2], vec![1, 0]]));
    }

    /// Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    #[test]
    fn rack_aware_layout_is_kafkas() {
        let racks: BTreeMap<BrokerId, String> = [
            (0, "rack1"),
            (1, "rack3"),
            (2, "rack3"),
            (3, "rack2"),
            (4, "rack2"),
            (5, "rack1"),
        ]
        .into_iter()
        .map(|(id, rack)| (id, rack.to_owned()))
        .collect();
        assert_eq!(rack_alternated_broker_list(&racks), vec![0, 3, 1, 5, 4, 2]);
        let mut without_5 = racks.clone();
        without_5.remove(&5);
        assert_eq!(rack_alternated_broker_list(&without_5), vec![0, 3, 1, 4, 2]);

        let brokers: Vec<PlacementBroker> = racks
            .iter()
            .map(|(&id, rack)| PlacementBroker {
                id,
                rack: Some(rack.clone()),
            })
            .collect();
        let got = assign_replicas_to_brokers(&brokers, 7, 3, PlacementSeed::fixed(0), 0);
        let expected = vec![
            vec![0, 3, 1],
            vec![3, 1, 5],
            vec![1, 5, 4],
            vec![5, 4, 2],
            vec![4, 2, 0],
            vec![2, 0, 3],
            vec![0, 4, 2],
        ];
        assert_eq!(got, Ok(expected));
    }

    #[test]
    fn rack_alternation_takes_one_broker_per_rack_per_round() {
        let racks: BTreeMap<BrokerId, String> = [
            (0, "a"),
            (1, "a"),
            (2, "a"),
            (3, "b"),
            (4, "b"),
            (5, "b"),
            (6, "c"),
            (7, "c"),
            (8, "c"),
        ]
        .into_iter()
        .map(|(id, rack)| (id, rack.to_owned()))
        .collect();
        assert_eq!(
            rack_alternated_broker_list(&racks),
            vec![0, 3, 6, 1, 4, 7, 2, 5, 8]
        );
    }

    #[test]
    fn some_brokers_without_a_rack_place_rack_unaware() {
        let mut brokers = racked(&[(0, "a"), (1, "a"), (2, "b")]);
        brokers.push(PlacementBroker { id: 3, rack: None });
        let mixed = assign_replicas_to_brokers(&brokers, 8, 2, PlacementSeed::fixed(1), 0);
        let plain = assign_replicas_to_brokers(&unracked(0..4), 8, 2, PlacementSeed::fixed(1), 0);
        assert_eq!(mixed, plain);
    }

    #[test]
    fn counts_are_checked_first() {
        let brokers = unracked(0..3);
        let seed = PlacementSeed::default();
        let zero_partitions = assign_replicas_to_brokers(&brokers, 0, 1, seed, 0).unwrap_err();
        assert_eq!(
            zero_partitions,
            PlacementError::PartitionsNotPositive { partitions: 0 }
        );
        assert_eq!(zero_partitions.error_code(), ErrorCode::InvalidPartitions);
        let zero_rf = assign_replicas_to_brokers(&brokers, 1, 0, seed, 0).unwrap_err();
        assert_eq!(zero_rf.error_code(), ErrorCode::InvalidReplicationFactor);
        let negative_rf = assign_replicas_to_brokers(&brokers, 1, -1, seed, 0).unwrap_err();
        assert_eq!(
            negative_rf.error_code(),
            ErrorCode::InvalidReplicationFactor
        );
        let too_large = assign_replicas_to_brokers(&brokers, 1, 4, seed, 0).unwrap_err();
        assert_eq!(
            too_large,
            PlacementError::ReplicationFactorTooLarge {
                replication_factor: 4,
                brokers: 3
            }
        );
        assert_eq!(too_large.error_code(), ErrorCode::InvalidReplicationFactor);
        assert_eq!(
            too_large.to_string(),
            "replication factor: 4 larger than available brokers: 3"
        );
        // A duplicated broker id is one broker.
        let duplicated = unracked([1, 1, 2]);
        assert!(assign_replicas_to_brokers(&duplicated, 1, 3, seed, 0).is_err());
        assert!(assign_replicas_to_brokers(&[], 1, 1, seed, 0).is_err());
    }

    #[test]
    fn a_valid_assignment_comes_back_in_partition_order() {
        let assignment = vec![(1, vec![2, 0]), (0, vec![0, 1]), (2, vec![1, 2])];
        let got = validate_replica_assignment(&assignment, 0, None, &known(0..3));
        assert_eq!(got, Ok(vec![vec![0, 1], vec![2, 0], vec![1, 2]]));
        // CreatePartitions: numbering from the current count, RF fixed.
        let added = vec![(3, vec![2, 1])];
        assert_eq!(
            validate_replica_assignment(&added, 3, Some(2), &known(0..3)),
            Ok(vec![vec![2, 1]])
        );
    }

    #[test]
    fn invalid_assignments_are_refused_with_kafkas_codes() {
        let brokers = known(0..3);
        type Case = (Vec<(i32, Vec<BrokerId>)>, Option<usize>, PlacementError);
        let cases: Vec<Case> = vec![
            (vec![], None, PlacementError::EmptyAssignment),
            (
                vec![(0, vec![])],
                None,
                PlacementError::EmptyReplicaList { partition: 0 },
            ),
            (
                vec![(0, vec![1, 1])],
                None,
                PlacementError::DuplicateBroker {
                    partition: 0,
                    broker_id: 1,
                },
            ),
            (
                vec![(0, vec![1, 7])],
                None,
                PlacementError::UnknownBroker {
                    partition: 0,
                    broker_id: 7,
                },
            ),
            (
                vec![(0, vec![0, 1]), (1, vec![2])],
                None,
                PlacementError::InconsistentReplicationFactor {
                    partition: 1,
                    replicas: 1,
                    expected: 2,
                },
            ),
            (
                vec![(0, vec![0])],
                Some(2),
                PlacementError::InconsistentReplicationFactor {
                    partition: 0,
                    replicas: 1,
                    expected: 2,
                },
            ),
            (
                vec![(0, vec![0]), (0, vec![1])],
                None,
                PlacementError::DuplicatePartition { partition: 0 },
            ),
            (
                vec![(0, vec![0]), (2, vec![1])],
                None,
                PlacementError::NonConsecutivePartitions {
                    first: 0,
                    missing: 1,
                },
            ),
            (
                vec![(1, vec![0])],
                None,
                PlacementError::NonConsecutivePartitions {
                    first: 0,
                    missing: 0,
                },
            ),
        ];
        for (assignment, expected_rf, error) in cases {
            let got = validate_replica_assignment(&assignment, 0, expected_rf, &brokers);
            assert_eq!(got, Err(error.clone()), "{assignment:?}");
            assert_eq!(error.error_code(), ErrorCode::InvalidReplicaAssignment);
        }
    }

    #[test]
    fn internal_topics_are_capped_by_the_live_brokers() {
        assert_eq!(internal_topic_replication_factor(3, 1), 1);
        assert_eq!(internal_topic_replication_factor(3, 2), 2);
        assert_eq!(internal_topic_replication_factor(3, 5), 3);
        // No live broker yet: 1, and placement will say what is missing.
        assert_eq!(internal_topic_replication_factor(3, 0), 1);
    }

    fn leader_counts(assignment: &[Vec<BrokerId>]) -> BTreeMap<BrokerId, usize> {
        let mut counts = BTreeMap::new();
        for replicas in assignment {
            *counts.entry(replicas[0]).or_default() += 1;
        }
        counts
    }

    proptest! {
        /// Every broker leads `partitions / n` or one more, and with a whole
        /// number of rounds every broker holds exactly as many replicas.
        #[test]
        fn rack_unaware_spreads_leaders_and_replicas_evenly(
            brokers in 1usize..9,
            rounds in 0usize..4,
            extra in 0usize..9,
            rf_pick in 0usize..9,
            start_index in 0usize..100,
            shift in 0usize..100,
        ) {
            let partitions = rounds * brokers + extra % brokers + 1;
            let rf = rf_pick % brokers + 1;
            let ids: Vec<BrokerId> = (0..brokers as i32).map(|i| i * 3 + 1).collect();
            let seed = PlacementSeed { start_index, shift };
            let got = assign_replicas_to_brokers(&unracked(ids.clone()), partitions as i32, rf as i16, seed, 0).unwrap();
            prop_assert_eq!(got.len(), partitions);
            let leaders = leader_counts(&got);
            let low = partitions / brokers;
            for id in &ids {
                let led = leaders.get(id).copied().unwrap_or(0);
                prop_assert!(led == low || led == low + 1, "broker {} leads {}", id, led);
            }
            for replicas in &got {
                prop_assert_eq!(replicas.len(), rf);
                prop_assert!(has_no_duplicates(replicas));
            }
            if partitions % brokers == 0 {
                let mut held = BTreeMap::new();
                for replicas in &got {
                    for id in replicas {
                        *held.entry(*id).or_insert(0usize) += 1;
                    }
                }
                for id in &ids {
                    prop_assert_eq!(held.get(id).copied().unwrap_or(0), partitions * rf / brokers);
                }
            }
        }

        /// Rack-aware: each partition spans min(racks, RF) racks, leaders
        /// stay balanced, and no broker repeats.
        #[test]
        fn rack_aware_spans_as_many_racks_as_it_can(
            rack_of in proptest::collection::vec(0u8..4, 1..10),
            partitions in 1i32..40,
            rf_pick in 0usize..10,
            start_index in 0usize..50,
            shift in 0usize..50,
        ) {
            let brokers: Vec<PlacementBroker> = rack_of
                .iter()
                .enumerate()
                .map(|(i, rack)| PlacementBroker { id: i as i32, rack: Some(format!("r{rack}")) })
                .collect();
            let rack_count = rack_of.iter().collect::<BTreeSet<_>>().len();
            let rf = rf_pick % brokers.len() + 1;
            let seed = PlacementSeed { start_index, shift };
            let got = assign_replicas_to_brokers(&brokers, partitions, rf as i16, seed, 0).unwrap();
            for replicas in &got {
                prop_assert!(has_no_duplicates(replicas));
                let spanned: BTreeSet<u8> = replicas.iter().map(|id| rack_of[*id as usize]).collect();
                prop_assert_eq!(spanned.len(), rf.min(rack_count), "{:?}", replicas);
            }
            let leaders = leader_counts(&got);
            let low = partitions as usize / brokers.len();
            for broker in &brokers {
                let led = leaders.get(&broker.id).copied().unwrap_or(0);
                prop_assert!(led == low || led == low + 1);
            }
        }
    }
}
