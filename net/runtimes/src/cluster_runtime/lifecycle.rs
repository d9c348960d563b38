//! The broker's side of its membership: register with the active
//! controller, then heartbeat every `broker.heartbeat.interval.ms`
//! reporting the metadata offset applied; register again when the
//! controller no longer knows this epoch (it was fenced, or the cluster
//! lost the registration). Runs on the metadata shard.
//!
//! The active controller is found from this node's own quorum member; when
//! that is this node, the request is handled in place, without a socket.

use super::active_controller;
use super::quorum::MetadataQuorum;
use super::rpc::{ControllerReply, ControllerRpc};
use super::transport;
use crate::Shard;
use engine::ErrorCode;
use std::rc::Rc;
use std::time::Duration;

/// Sends `request` to the active controller.
pub async fn call_controller(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    request: ControllerRpc,
) -> Result<ControllerReply, String> {
    let Some(leader) = quorum.leader() else {
        return Err(String::from("no active controller known"));
    };
    if leader == shard.config.broker_id {
        return Ok(active_controller::handle(quorum, shard, request).await);
    }
    let voter = quorum
        .controller_endpoint(shard, leader)
        .ok_or_else(|| format!("the active controller {leader}'s listener is not known"))?;
    transport::call_remote(&voter, &request).await
}

/// How long a request keeps looking for the active controller (an election
/// takes one to two seconds) before the client is told NOT_CONTROLLER.
const FIND_CONTROLLER_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `request` to the active controller, waiting through an election;
/// a refusal is the controller's Kafka error.
pub async fn call_controller_until_answered(
    shard: &Rc<Shard>,
    request: ControllerRpc,
) -> Result<ControllerReply, (ErrorCode, String)> {
    let Some(quorum) = shard.runtime().quorum.clone() else {
        return Err((
            ErrorCode::NotController,
            String::from("the metadata quorum runs on shard 0 only"),
        ));
    };
    let deadline = std::time::Instant::now() + FIND_CONTROLLER_TIMEOUT;
    loop {
        let outcome = call_controller(&quorum, shard, request.clone()).await;
        match outcome {
            Ok(ControllerReply::Error { code, message }) => {
                let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError);
                return Err((code, message));
            }
            Ok(ControllerReply::NotController { .. }) | Err(_) => {
                if std::time::Instant::now() >= deadline {
                    return Err((
                        ErrorCode::NotController,
                        format!("no active controller answered: {outcome:?}"),
                    ));
                }
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
            Ok(reply) => return Ok(reply),
        }
    }
}

/// Registers and heartbeats for the life of the broker.
pub async fn run(quorum: Rc<MetadataQuorum>, shard: Rc<Shard>) {
    let config = shard.config.clone();
    let interval = Duration::from_millis(config.cluster.heartbeat_interval_ms.max(10) as u64);
    let incarnation_id = quorum.incarnation_id();
    let register = ControllerRpc::Register {
        broker_id: config.broker_id,
        incarnation_id,
        listeners: config
            .listeners
            .iter()
            .map(|l| {
                (
                    l.name.clone(),
                    l.advertised_host.clone(),
                    u16::try_from(l.advertised_port).unwrap_or(0),
                )
            })
            .collect(),
        rack: config.cluster.rack.clone(),
        features: cluster::metadata::features::supported_by_this_binary()
            .into_iter()
            .map(|f| (f.name, f.min_level, f.max_level))
            .collect(),
    };
    while !quorum.shutting_down.get() {
        let broker_epoch = match call_controller(&quorum, &shard, register.clone()).await {
            Ok(ControllerReply::Registered { broker_epoch }) => {
                tracing::info!(broker_epoch, "registered with the active controller");
                quorum.broker_epoch.set(Some(broker_epoch));
                broker_epoch
            }
            outcome => {
                tracing::debug!(?outcome, "registration not done yet; retrying");
                glommio::timer::sleep(interval).await;
                continue;
            }
        };
        heartbeat_until_lost(&quorum, &shard, broker_epoch, interval).await;
    }
}

/// Heartbeats until the controller no longer knows `broker_epoch`.
async fn heartbeat_until_lost(
    quorum: &Rc<MetadataQuorum>,
    shard: &Rc<Shard>,
    broker_epoch: i64,
    interval: Duration,
) {
    let mut fenced = true;
    while !quorum.shutting_down.get() {
        let heartbeat = ControllerRpc::Heartbeat {
            broker_id: shard.config.broker_id,
            broker_epoch,
            metadata_offset: quorum.applied_offset(),
            want_shutdown: false,
            cordoned: apply_cordoned_dirs(shard),
            unwritable: unwritable_partitions(shard).await,
        };
        let sent = std::time::Instant::now();
        let reply = call_controller(quorum, shard, heartbeat).await;
        if sent.elapsed() > interval * 2 {
            tracing::warn!(
                took_ms = sent.elapsed().as_millis() as u64,
                "a heartbeat took more than two intervals to be answered"
            );
        }
        // A fenced broker answers no client until it is unfenced (see the
        // server's startup wait): while the controller answers that it is
        // still fenced, it reports its catch-up again at once rather than an
        // interval later, as Kafka's broker does while it starts.
        let mut pause = interval;
        match reply {
            Ok(ControllerReply::Heartbeat { is_fenced, .. }) => {
                if fenced && !is_fenced {
                    tracing::info!(broker_epoch, "unfenced: this broker is live in the cluster");
                }
                fenced = is_fenced;
                if is_fenced {
                    pause = FENCED_HEARTBEAT_INTERVAL.min(interval);
                }
            }
            Ok(ControllerReply::Error { code, message })
                if code == ErrorCode::StaleBrokerEpoch.code()
                    || code == ErrorCode::BrokerIdNotRegistered.code() =>
            {
                tracing::warn!(%message, "registration lost; registering again");
                return;
            }
            outcome => tracing::debug!(?outcome, "heartbeat not answered"),
        }
        glommio::timer::sleep(pause).await;
    }
}

/// The heartbeat interval of a fenced broker (Kafka's, 10 ms).
const FENCED_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(10);

/// The partitions of this broker that cannot take an append now (a full
/// data dir, an offline partition), asked of every shard, by topic id: the
/// controller moves their leadership and ISR places to replicas that can.
async fn unwritable_partitions(shard: &Rc<Shard>) -> Vec<([u8; 16], i32)> {
    let mut unwritable = Vec::new();
    for owner in 0..shard.count {
        if let Ok(partitions) = shard.call(owner, UnwritablePartitions).await {
            unwritable.extend(partitions);
        }
    }
    let topics = shard.topics.borrow();
    (unwritable.into_iter())
        .filter_map(|tp| Some((topics.get(&tp.topic)?.topic_id, tp.partition)))
        .collect()
}

/// One shard's unwritable partitions.
struct UnwritablePartitions;

impl kernel::call::OwnerCall<crate::ShardRuntime> for UnwritablePartitions {
    type Reply = Vec<engine::TopicPartition>;

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        shard.logs.unwritable_partitions()
    }
}

/// Applies `cordoned.log.dirs` as it stands now (the file, under any
/// dynamic value in the metadata) to the engine's placement of new
/// partitions; whether every data dir is cordoned, which the heartbeat
/// tells the controller. Run at each heartbeat, so a dynamic change holds
/// within one interval.
fn apply_cordoned_dirs(shard: &Rc<Shard>) -> bool {
    let image = shard.runtime().view.image();
    let list = kernel::cordon::effective_list(
        &shard.config.cluster.cordoned_log_dirs,
        image.broker_configs(),
        shard.config.broker_id,
    );
    let dirs = shard.config.data_dirs();
    let load = &shard.config.engine.dir_load;
    if load.set_cordoned(kernel::cordon::cordoned_flags(&list, &dirs)) {
        tracing::info!(cordoned = ?list, "cordoned log dirs changed");
    }
    load.all_cordoned(dirs.len())
}

/// How long a stopping broker waits for the controller to move its
/// leaderships away before it stops anyway.
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// Kafka's controlled shutdown: asks the active controller (a heartbeat
/// with `want_shutdown`) to move this broker's leaderships to other ISR
/// members and fence it, and waits until it did, so that clients find the
/// new leaders instead of timing out. A single node has nobody to hand
/// its partitions to and returns at once.
pub async fn controlled_shutdown(shard: &Rc<Shard>) {
    let Some(quorum) = shard.runtime().quorum.clone() else {
        return;
    };
    quorum.shutting_down.set(true);
    let Some(broker_epoch) = quorum.broker_epoch.get() else {
        return;
    };
    if shard.config.cluster.is_single_node() {
        return;
    }
    let request = ControllerRpc::Heartbeat {
        broker_id: shard.config.broker_id,
        broker_epoch,
        metadata_offset: quorum.applied_offset(),
        want_shutdown: true,
        cordoned: false,
        unwritable: Vec::new(),
    };
    let deadline = std::time::Instant::now() + CONTROLLED_SHUTDOWN_TIMEOUT;
    while std::time::Instant::now() < deadline {
        match call_controller(&quorum, shard, request.clone()).await {
            Ok(ControllerReply::Heartbeat {
                should_shut_down: true,
                ..
            }) => {
                tracing::info!("controlled shutdown: leaderships moved away");
                return;
            }
            outcome => tracing::debug!(?outcome, "controlled shutdown not done yet"),
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!("controlled shutdown timed out; stopping anyway");
}
