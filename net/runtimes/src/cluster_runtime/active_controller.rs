//! The active controller's side of the brokers' requests, and its fencing
//! timer: each decision is one of `rill-cluster`'s pure
//! [`Controller`] functions over the committed image; its records are
//! proposed and the answer waits until they are committed, so a broker is
//! told "registered" only once the whole quorum knows it.
//!
//! Decisions run one at a time (`MetadataQuorum::decisions`), each reading
//! the image with every earlier decision committed. A decision's records go
//! in as separate entries; a leader lost in the middle may commit a prefix
//! of them, which the image accepts (each record is valid on its own) and
//! the broker's retry completes.

use super::quorum::MetadataQuorum;
use super::rpc::{ControllerReply, ControllerRpc};
use crate::Shard;
use cluster::metadata::{
    AclRecord, AlterPartitionRequest, BrokerHeartbeats, Controller, CreateTopicRequest,
    ElectionType, FeatureUpdate, MetadataError, MetadataImage, MetadataRecord, RemoteCopyRequest,
    RemoteSegmentState, RemoteSegmentTransition, ScramCredential, TopicAssignment, UpgradeType,
};
use cluster::placement::PlacementSeed;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// Answers a broker's request (on the metadata shard). Broker sessions
/// run on the monotonic clock (`Shard::monotonic_ms`, here and in the
/// fencing timer): a jump of the wall clock neither fences live brokers
/// nor keeps dead ones.
pub async fn handle(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    request: ControllerRpc,
) -> ControllerReply {
    if let Some(reply) = heartbeat_that_changes_nothing(quorum, shard, &request) {
        return reply;
    }
    if let Some(reply) = unwritable_isr_joiner(quorum, &request) {
        return reply;
    }
    // The quorum's own requests take their own path: a new voter's
    // catch-up must not hold every other decision back.
    let request = match super::membership::answer(quorum, shard, request).await {
        Ok(reply) => return reply,
        Err(request) => request,
    };
    let _decision = quorum.decisions.lock().await;
    if !quorum.is_leader() {
        return ControllerReply::NotController {
            leader: quorum.leader(),
        };
    }
    let image = quorum.image();
    let controller = Controller::new(&image, &quorum.controller_config);
    let now_ms = shard.monotonic_ms();
    let decided = if let Some(registration) = request.registration() {
        register(quorum, &controller, &registration, now_ms)
    } else if let Some(heartbeat) = request.heartbeat() {
        let mut heartbeats = quorum.heartbeats.borrow_mut();
        controller
            .heartbeat(&mut heartbeats, &heartbeat, now_ms)
            .map(|outcome| {
                let reply = ControllerReply::Heartbeat {
                    is_caught_up: outcome.is_caught_up,
                    is_fenced: outcome.is_fenced,
                    should_shut_down: outcome.should_shut_down,
                };
                (outcome.records, reply)
            })
    } else if let ControllerRpc::AllocateProducerIds {
        broker_id,
        broker_epoch,
    } = &request
    {
        allocate_producer_ids(&controller, *broker_id, *broker_epoch)
    } else if let ControllerRpc::ElectLeaders {
        election_type,
        partitions,
    } = &request
    {
        elect_leaders(&controller, *election_type, partitions.as_deref())
    } else if let ControllerRpc::UpdateFeatures {
        updates,
        validate_only,
    } = &request
    {
        update_features(&controller, updates, *validate_only)
    } else if let ControllerRpc::UnregisterBroker { broker_id } = &request {
        let mut heartbeats = quorum.heartbeats.borrow_mut();
        unregister_broker(&controller, &mut heartbeats, *broker_id)
    } else {
        // A topic change: answered with the offset it committed at.
        topic_change(&controller, &request)
            .map(|records| (records, ControllerReply::Committed { offset: 0 }))
    };
    match decided {
        Ok((records, reply)) => commit(quorum, shard, &records, reply).await,
        Err(e) => ControllerReply::error(e.error_code(), e.to_string()),
    }
}

/// BrokerRegistration: the records and the reply.
fn register(
    quorum: &MetadataQuorum,
    controller: &Controller<'_>,
    registration: &cluster::metadata::controller::BrokerRegistrationRequest,
    now_ms: i64,
) -> Result<(Vec<MetadataRecord>, ControllerReply), MetadataError> {
    let mut heartbeats = quorum.heartbeats.borrow_mut();
    if registration.incarnation_id == quorum.incarnation_id() {
        // This process's own broker (a voter's): the earlier incarnation
        // of its id was this node's previous process, which cannot run
        // beside it as the same voter. Its session is over rather than
        // waited out (a restarted single node would otherwise serve no
        // client for a whole session timeout).
        heartbeats.forget(registration.broker_id);
    }
    let outcome = controller.register_broker(&mut heartbeats, registration, now_ms)?;
    let reply = ControllerReply::Registered {
        broker_epoch: outcome.broker_epoch,
    };
    // The first registrations of a new cluster bring the cluster-level
    // minimum ISR (the fencing timer writes it too, for a cluster whose
    // brokers registered under a release without it), so a broker serves
    // clients only once it is set.
    let mut records = controller.cluster_min_insync_replicas();
    records.extend(outcome.records);
    Ok((records, reply))
}

/// An AlterPartition that would add to the ISR a broker whose last
/// heartbeat said it cannot append to the partition (a full data dir): it
/// is INELIGIBLE_REPLICA, as KIP-858 makes a replica on a failed dir, so a
/// leader that sees it caught up (nothing new came meanwhile) does not put
/// it straight back. It rejoins once its heartbeat no longer names it.
fn unwritable_isr_joiner(
    quorum: &MetadataQuorum,
    request: &ControllerRpc,
) -> Option<ControllerReply> {
    let ControllerRpc::AlterPartition {
        topic_id,
        partition,
        new_isr,
        ..
    } = request
    else {
        return None;
    };
    let unwritable = quorum
        .heartbeats
        .borrow()
        .unwritable_at(*topic_id, *partition);
    let current = quorum.with_image(|image| {
        (image.partition(topic_id, *partition)).map(|state| state.isr.clone())
    })?;
    let joiner = (new_isr.iter()).find(|b| unwritable.contains(b) && !current.contains(b))?;
    let error = MetadataError::IneligibleReplica {
        topic_id: *topic_id,
        partition: *partition,
        broker_id: *joiner,
    };
    Some(ControllerReply::error(
        error.error_code(),
        error.to_string(),
    ))
}

/// A heartbeat that needs no record (the common case: a live broker
/// staying live) is answered at once, without queueing behind the
/// decisions in flight. Those wait for their Raft commit, and a burst of
/// them (thousands of partitions created) held heartbeats back past
/// `broker.session.timeout.ms`: the fencing timer, next in the queue, then
/// fenced brokers whose heartbeats were waiting right behind it. Liveness
/// is the heartbeat's arrival; a heartbeat that would change the image
/// (unfence, controlled shutdown) or fail takes the decision path.
fn heartbeat_that_changes_nothing(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    request: &ControllerRpc,
) -> Option<ControllerReply> {
    let heartbeat = request.heartbeat()?;
    if !quorum.is_leader() {
        return None;
    }
    let outcome = quorum.with_image(|image| {
        let controller = Controller::new(image, &quorum.controller_config);
        let mut heartbeats = quorum.heartbeats.borrow_mut();
        controller.heartbeat(&mut heartbeats, &heartbeat, shard.monotonic_ms())
    });
    let outcome = outcome.ok()?;
    outcome
        .records
        .is_empty()
        .then_some(ControllerReply::Heartbeat {
            is_caught_up: outcome.is_caught_up,
            is_fenced: outcome.is_fenced,
            should_shut_down: outcome.should_shut_down,
        })
}

/// The records that make a config set (a topic's, a broker's) `wanted`
/// where it is `current` now: a delete for each key no longer wanted, a set
/// for each new or changed one (AlterConfigs replaces the whole set).
fn replace_configs<'a>(
    current: &BTreeMap<String, String>,
    wanted: impl IntoIterator<Item = &'a (String, String)>,
    mut alter: impl FnMut(&str, Option<&str>) -> Result<Vec<MetadataRecord>, MetadataError>,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let wanted: BTreeMap<&str, &str> = wanted
        .into_iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut records = Vec::new();
    for key in current.keys().filter(|k| !wanted.contains_key(k.as_str())) {
        records.extend(alter(key, None)?);
    }
    for (key, value) in &wanted {
        if current.get(*key).map(String::as_str) != Some(*value) {
            records.extend(alter(key, Some(value))?);
        }
    }
    Ok(records)
}

/// The records of a topic change.
fn topic_change(
    controller: &Controller<'_>,
    request: &ControllerRpc,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    match request {
        ControllerRpc::CreateTopic {
            name,
            topic_id,
            partitions,
            replication_factor,
            assignment,
            configs,
        } => controller.create_topic(&CreateTopicRequest {
            name: name.clone(),
            topic_id: *topic_id,
            assignment: topic_assignment(*partitions, *replication_factor, assignment),
            configs: configs.iter().cloned().collect(),
        }),
        ControllerRpc::DeleteTopic { name, topic_id } => {
            controller.delete_seen_topic(name, topic_id)
        }
        ControllerRpc::CreatePartitions {
            name,
            count,
            from_count,
            assignment,
        } => controller.grow_seen_topic(
            name,
            *from_count,
            *count,
            (!assignment.is_empty()).then_some(assignment.as_slice()),
            placement_seed(),
        ),
        ControllerRpc::SetTopicConfigs { .. }
        | ControllerRpc::SetBrokerConfigs { .. }
        | ControllerRpc::SetClientMetricsConfigs { .. }
        | ControllerRpc::SetGroupConfigs { .. } => config_change(controller, request),
        ControllerRpc::RemoteCopyStarted { .. }
        | ControllerRpc::RemoteSegmentState { .. }
        | ControllerRpc::RemoteTopicPurged { .. } => remote_log_change(controller, request),
        ControllerRpc::AlterPartition {
            broker_id,
            topic_id,
            partition,
            leader_epoch,
            partition_epoch,
            new_isr,
        } => controller
            .alter_partition(&AlterPartitionRequest {
                broker_id: *broker_id,
                broker_epoch: registered_epoch(controller.image, *broker_id),
                topic_id: *topic_id,
                partition: *partition,
                leader_epoch: *leader_epoch,
                partition_epoch: *partition_epoch,
                new_isr: new_isr.clone(),
            })
            .map(|outcome| outcome.records),
        ControllerRpc::AlterReassignment {
            topic,
            partition,
            target,
        } => controller.alter_reassignment(topic, *partition, target.as_deref()),
        ControllerRpc::AlterClientQuotas { .. }
        | ControllerRpc::AlterScramCredentials { .. }
        | ControllerRpc::CreateAcls { .. }
        | ControllerRpc::DeleteAcls { .. } => security_change(controller, request),
        ControllerRpc::Register { .. }
        | ControllerRpc::Heartbeat { .. }
        | ControllerRpc::AllocateProducerIds { .. }
        | ControllerRpc::ElectLeaders { .. }
        | ControllerRpc::UnregisterBroker { .. }
        | ControllerRpc::AddVoter { .. }
        | ControllerRpc::RemoveVoter { .. }
        | ControllerRpc::DescribeQuorum
        | ControllerRpc::UpdateFeatures { .. } => Err(MetadataError::InvalidRequest {
            reason: String::from("not a topic change"),
        }),
    }
}

/// The records of a config change of a topic, broker, client-metrics
/// subscription or group.
fn config_change(
    controller: &Controller<'_>,
    request: &ControllerRpc,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    match request {
        ControllerRpc::SetTopicConfigs { name, configs } => {
            set_topic_configs(controller, name, configs)
        }
        ControllerRpc::SetBrokerConfigs { broker, configs } => {
            set_broker_configs(controller, broker, configs)
        }
        ControllerRpc::SetClientMetricsConfigs { name, configs } => {
            set_client_metrics_configs(controller, name, configs)
        }
        ControllerRpc::SetGroupConfigs { group, configs } => {
            set_group_configs(controller, group, configs)
        }
        _ => Err(MetadataError::InvalidRequest {
            reason: String::from("not a config change"),
        }),
    }
}

/// A client-metrics subscription's whole set of configs (KIP-714).
fn set_client_metrics_configs(
    controller: &Controller<'_>,
    name: &str,
    configs: &[(String, String)],
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let current = (controller.image.client_metrics_configs())
        .get(name)
        .cloned()
        .unwrap_or_default();
    replace_configs(&current, configs, |key, value| {
        controller.alter_client_metrics_config(name, key, value)
    })
}

/// A group's whole set of configs.
fn set_group_configs(
    controller: &Controller<'_>,
    group: &str,
    configs: &[(String, String)],
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let current = (controller.image.group_configs().get(group))
        .cloned()
        .unwrap_or_default();
    replace_configs(&current, configs, |key, value| {
        controller.alter_group_config(group, key, value)
    })
}

/// UnregisterBroker: the broker's leaderships and ISR memberships move to
/// live replicas, then its registration goes. Kafka's controller does the
/// same for a broker that is still running; that broker's next heartbeat
/// is refused and it registers again, so an operator stops it first.
fn unregister_broker(
    controller: &Controller<'_>,
    heartbeats: &mut BrokerHeartbeats,
    broker_id: i32,
) -> Result<(Vec<MetadataRecord>, ControllerReply), MetadataError> {
    let records = controller.unregister_broker(heartbeats, broker_id)?;
    tracing::info!(
        broker_id,
        "UnregisterBroker removes a broker's registration"
    );
    Ok((records, ControllerReply::Committed { offset: 0 }))
}

/// AllocateProducerIds: the next block, taken for `broker_id`.
fn allocate_producer_ids(
    controller: &Controller<'_>,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<(Vec<MetadataRecord>, ControllerReply), MetadataError> {
    let (block, records) = controller.allocate_producer_ids(broker_id, broker_epoch)?;
    let reply = ControllerReply::ProducerIds {
        first: block.first,
        last: block.last,
    };
    Ok((records, reply))
}

/// UpdateFeatures: the new levels' records, all or none.
fn update_features(
    controller: &Controller<'_>,
    updates: &[(String, i16, i8)],
    validate_only: bool,
) -> Result<(Vec<MetadataRecord>, ControllerReply), MetadataError> {
    let mut asked = Vec::with_capacity(updates.len());
    for (name, level, upgrade_type) in updates {
        let upgrade_type = UpgradeType::from_code(*upgrade_type).ok_or_else(|| {
            MetadataError::InvalidFeatureUpdate {
                reason: format!("unknown upgrade type {upgrade_type} for {name}"),
            }
        })?;
        asked.push(FeatureUpdate {
            name: name.clone(),
            level: *level,
            upgrade_type,
        });
    }
    let records = controller.update_features(&asked, validate_only)?;
    for record in &records {
        tracing::info!(?record, "UpdateFeatures finalizes a feature level");
    }
    Ok((records, ControllerReply::Committed { offset: 0 }))
}

/// ElectLeaders: the elections' records, and the answers (sent once the
/// records are committed, with the offset).
fn elect_leaders(
    controller: &Controller<'_>,
    election_type: i8,
    partitions: Option<&[(String, Vec<i32>)]>,
) -> Result<(Vec<MetadataRecord>, ControllerReply), MetadataError> {
    let election =
        ElectionType::from_code(election_type).ok_or_else(|| MetadataError::InvalidRequest {
            reason: format!("unknown election type {election_type}"),
        })?;
    let outcome = controller.elect_leaders(election, partitions);
    for record in &outcome.records {
        if let MetadataRecord::PartitionChange(change) = record {
            tracing::info!(
                topic_id = ?change.topic_id,
                partition = change.partition,
                leader = ?change.leader,
                ?election,
                "ElectLeaders moves a leadership"
            );
        }
    }
    let results = outcome
        .results
        .into_iter()
        .map(|(topic, answers)| {
            let answers = answers
                .into_iter()
                .map(|a| (a.partition, a.error_code.code(), a.message))
                .collect();
            (topic, answers)
        })
        .collect();
    let reply = ControllerReply::Elected { offset: 0, results };
    Ok((outcome.records, reply))
}

/// A fresh random start and shift for placing a topic's replicas.
fn placement_seed() -> PlacementSeed {
    PlacementSeed {
        start_index: rand::random::<u16>() as usize,
        shift: rand::random::<u16>() as usize,
    }
}

/// A CreateTopic's replicas: the explicit `assignment` when it has one,
/// else `partitions` × `replication_factor` placed by the controller.
fn topic_assignment(
    partitions: i32,
    replication_factor: i16,
    assignment: &[(i32, Vec<i32>)],
) -> TopicAssignment {
    if assignment.is_empty() {
        TopicAssignment::Placed {
            partitions,
            replication_factor,
            seed: placement_seed(),
        }
    } else {
        TopicAssignment::Explicit(assignment.to_vec())
    }
}

/// The records that make topic `name`'s overrides exactly `configs`.
fn set_topic_configs(
    controller: &Controller<'_>,
    name: &str,
    configs: &[(String, String)],
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let current = controller
        .image
        .topic_by_name(name)
        .map(|topic| topic.configs.clone())
        .unwrap_or_default();
    replace_configs(&current, configs, |key, value| {
        controller.alter_topic_config(name, key, value)
    })
}

/// The records that make `broker`'s dynamic configs (`""`: every broker's
/// default) exactly `configs`.
fn set_broker_configs(
    controller: &Controller<'_>,
    broker: &str,
    configs: &[(String, String)],
) -> Result<Vec<MetadataRecord>, MetadataError> {
    let current = controller
        .image
        .broker_configs()
        .get(broker)
        .cloned()
        .unwrap_or_default();
    replace_configs(&current, configs, |key, value| {
        controller.alter_broker_config(broker, key, value)
    })
}

/// The epoch broker `broker_id` registered with (`-1`: not registered).
fn registered_epoch(image: &MetadataImage, broker_id: i32) -> i64 {
    image
        .broker(broker_id)
        .map_or(-1, |broker| broker.broker_epoch)
}

/// An AlterClientQuotas's changes with their values parsed: a value that
/// is not a number refuses the whole change.
fn parse_quota_changes(
    changes: &[(String, Option<String>)],
) -> Result<Vec<(String, Option<f64>)>, MetadataError> {
    let mut parsed = Vec::with_capacity(changes.len());
    for (key, value) in changes {
        let value = match value {
            None => None,
            Some(text) => Some(
                text.parse::<f64>()
                    .map_err(|_| MetadataError::InvalidConfig {
                        key: key.clone(),
                        value: Some(text.clone()),
                        reason: String::from("not a number"),
                    })?,
            ),
        };
        parsed.push((key.clone(), value));
    }
    Ok(parsed)
}

/// The records of a SCRAM credentials change: a delete of a credential
/// the image does not hold is dropped (the asking broker checked; a
/// concurrent delete won), as the image would refuse it.
fn scram_records(
    image: &MetadataImage,
    upserts: &[super::rpc::ScramUpsert],
    deletions: &[(String, u8)],
) -> Vec<MetadataRecord> {
    let mut records = Vec::with_capacity(upserts.len() + deletions.len());
    for (name, mechanism) in deletions {
        if image.scram_credential(name, *mechanism).is_some() {
            records.push(MetadataRecord::RemoveUserScramCredential {
                name: name.clone(),
                mechanism: *mechanism,
            });
        }
    }
    for (name, mechanism, salt, iterations, stored_key, server_key) in upserts {
        records.push(MetadataRecord::UserScramCredential {
            name: name.clone(),
            mechanism: *mechanism,
            credential: ScramCredential {
                salt: salt.clone(),
                iterations: *iterations,
                stored_key: stored_key.clone(),
                server_key: server_key.clone(),
            },
        });
    }
    records
}

/// Proposes `records` and answers `reply` once they are committed.
async fn commit(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    records: &[MetadataRecord],
    reply: ControllerReply,
) -> ControllerReply {
    let reply_at = |offset: u64| {
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        match reply {
            ControllerReply::Committed { .. } => ControllerReply::Committed { offset },
            ControllerReply::Elected { results, .. } => {
                ControllerReply::Elected { offset, results }
            }
            other => other,
        }
    };
    if records.is_empty() {
        return reply_at(quorum.applied_index());
    }
    let not_controller = || ControllerReply::NotController {
        leader: quorum.leader(),
    };
    let Some((committed, index)) = quorum.propose(shard, records) else {
        return not_controller();
    };
    match committed.await {
        Ok(true) => reply_at(index),
        _ => not_controller(),
    }
}

/// On the active controller, fences the brokers whose session expired,
/// every `leader.imbalance.check.interval.seconds` moves leaderships back
/// to preferred replicas (`auto.leader.rebalance.enable`), and completes
/// reassignments whose new replicas are in sync; runs on the metadata
/// shard for the life of the broker.
pub async fn run_fencing_timer(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>) {
    let cluster = &shard.config.cluster;
    let interval_ms = (cluster.session_timeout_ms / 5).max(50);
    let mut next_rebalance_ms = shard.monotonic_ms() + cluster.leader_imbalance_check_interval_ms;
    let mut skipped_late_round = false;
    loop {
        let wake_at_ms = shard.monotonic_ms() + interval_ms;
        glommio::timer::sleep(Duration::from_millis(interval_ms as u64)).await;
        if !quorum.is_leader() {
            continue;
        }
        // This shard was busy past a whole interval (a burst of metadata
        // to apply): heartbeats that arrived meanwhile may still sit in
        // their sockets, behind this timer. Judge sessions next round, once
        // they had their turn, rather than fence live brokers now; but
        // never two rounds running, so a dead broker is still fenced on a
        // shard that is always late.
        let late = shard.monotonic_ms() - wake_at_ms > interval_ms;
        if late && !skipped_late_round {
            skipped_late_round = true;
            continue;
        }
        skipped_late_round = false;
        let _decision = quorum.decisions.lock().await;
        let image = quorum.image();
        let now_ms = shard.monotonic_ms();
        let controller = Controller::new(&image, &quorum.controller_config);
        let fenced_records = fence_stale(&quorum, &controller, now_ms);
        let mut records = if !fenced_records.is_empty() {
            fenced_records
        } else if cluster.auto_leader_rebalance_enable && now_ms >= next_rebalance_ms {
            next_rebalance_ms = now_ms + cluster.leader_imbalance_check_interval_ms;
            let moves = controller.auto_leader_rebalance();
            if !moves.is_empty() {
                tracing::info!(
                    partitions = moves.len(),
                    "moving leaderships back to preferred replicas"
                );
            }
            moves
        } else {
            // A reassignment whose new replicas joined the ISR completes
            // in the AlterPartition that put them there; this catches the
            // rest (a leader lost in between, a restarted controller).
            controller.complete_reassignments()
        };
        // Once, on a cluster an older release made (a new one gets it
        // with its first registration).
        records.extend(controller.cluster_min_insync_replicas());
        if records.is_empty() {
            continue;
        }
        let _ = commit(
            &quorum,
            &shard,
            &records,
            ControllerReply::NotController { leader: None },
        )
        .await;
    }
}

/// The records that fence the brokers whose sessions expired, logged
/// with how long each was silent.
fn fence_stale(
    quorum: &MetadataQuorum,
    controller: &Controller<'_>,
    now_ms: i64,
) -> Vec<MetadataRecord> {
    let mut heartbeats = quorum.heartbeats.borrow_mut();
    let fenced_records = controller.fence_stale_brokers(&mut heartbeats, now_ms);
    let silent_ms: Vec<(i32, i64)> = fenced_records
        .iter()
        .filter_map(|record| match record {
            MetadataRecord::FenceBroker { broker_id, .. } => Some(*broker_id),
            _ => None,
        })
        .map(|id| {
            let last_ms = heartbeats.last_heartbeat_ms(id).unwrap_or(now_ms);
            (id, now_ms - last_ms)
        })
        .collect();
    if !silent_ms.is_empty() {
        tracing::warn!(
            brokers_silent_ms = ?silent_ms,
            "fencing brokers whose session expired"
        );
    }
    fenced_records
}

/// The active controller's connection to voter `node_id` was refused: no
/// process listens there, so the broker of that id is dead (or between a
/// crash and its restart). It is fenced now rather than after
/// `broker.session.timeout.ms`, so its leaderships move within a Raft
/// heartbeat interval of its death. A false alarm costs only a leadership
/// move: a live broker's next heartbeat unfences it. A stopped or cut-off
/// broker does not refuse connections and is still found by its session.
pub async fn fence_refused_peer(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>, node_id: i32) {
    if !quorum.is_leader() || !quorum.image().is_live(node_id) {
        return;
    }
    let _decision = quorum.decisions.lock().await;
    let image = quorum.image();
    let controller = Controller::new(&image, &quorum.controller_config);
    let records = {
        let mut heartbeats = quorum.heartbeats.borrow_mut();
        controller.fence_brokers_now(&mut heartbeats, &[node_id])
    };
    if records.is_empty() || !quorum.is_leader() {
        return;
    }
    tracing::warn!(
        broker = node_id,
        "fencing a broker whose controller listener refuses connections (its process is gone)"
    );
    let _ = commit(
        &quorum,
        &shard,
        &records,
        ControllerReply::NotController { leader: None },
    )
    .await;
}

/// The records of a tiered-storage change (remote log metadata).
fn remote_log_change(
    controller: &Controller<'_>,
    request: &ControllerRpc,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    match request {
        ControllerRpc::RemoteCopyStarted {
            broker_id,
            leader_epoch,
            topic_id,
            partition,
            segment_id,
            base_offset,
            end_offset,
            max_timestamp_ms,
            size_bytes,
            segment_leader_epochs,
        } => controller.remote_copy_started(&RemoteCopyRequest {
            topic_id: *topic_id,
            partition: *partition,
            segment_id: *segment_id,
            base_offset: *base_offset,
            end_offset: *end_offset,
            max_timestamp_ms: *max_timestamp_ms,
            size_bytes: *size_bytes,
            broker_id: *broker_id,
            leader_epoch: *leader_epoch,
            segment_leader_epochs: segment_leader_epochs.clone(),
        }),
        ControllerRpc::RemoteSegmentState {
            broker_id,
            leader_epoch,
            topic_id,
            partition,
            segment_id,
            state,
        } => {
            let state = RemoteSegmentState::from_id(*state).ok_or_else(|| {
                MetadataError::InvalidRequest {
                    reason: format!("no remote segment state {state}"),
                }
            })?;
            controller.remote_segment_transition(&RemoteSegmentTransition {
                broker_id: *broker_id,
                leader_epoch: *leader_epoch,
                topic_id: *topic_id,
                partition: *partition,
                segment_id: *segment_id,
                state,
            })
        }
        ControllerRpc::RemoteTopicPurged { topic_id } => controller.remote_topic_purged(topic_id),
        _ => Err(MetadataError::InvalidRequest {
            reason: String::from("not a remote log change"),
        }),
    }
}

/// The records of a quota, credential or ACL change.
fn security_change(
    controller: &Controller<'_>,
    request: &ControllerRpc,
) -> Result<Vec<MetadataRecord>, MetadataError> {
    match request {
        ControllerRpc::AlterClientQuotas { entity, changes } => {
            controller.alter_client_quotas(entity, &parse_quota_changes(changes)?)
        }
        ControllerRpc::AlterScramCredentials { upserts, deletions } => {
            Ok(scram_records(controller.image, upserts, deletions))
        }
        ControllerRpc::CreateAcls { acls } => {
            let acls: Vec<AclRecord> = acls.iter().map(AclRecord::from).collect();
            controller.create_acls(&acls)
        }
        ControllerRpc::DeleteAcls { ids } => Ok(controller.delete_acls(ids)),
        _ => Err(MetadataError::InvalidRequest {
            reason: String::from("not a quota, credential or ACL change"),
        }),
    }
}
