//! The shard-local log manager: the partitions one shard owns.
//!
//! A partition lives in `<data-dir>/<topic>-<partition>/` (in one of the
//! data dirs, see [`crate::log_dirs`]) with its segments,
//! `partition.metadata` (topic id, as Kafka keeps it) and `topic.config`
//! (the topic's overrides of the broker defaults, `name=value` lines). The
//! directory names alone tell every shard which topics exist and how many
//! partitions they have ([`scan_topics`]), so the broker needs no other
//! metadata store on a single node.
//!
//! A partition that fails to open is taken offline alone
//! ([`OfflinePartition`]): the shard's other partitions open and serve, as
//! Kafka keeps serving the log dirs that did not fail.

use crate::config::{EngineConfig, TopicConfig};
use crate::disk_space::{SpaceChange, SPACE_CHECK_INTERVAL};
use crate::error::{EngineError, FaultClass};
use crate::log::{LogContext, PartitionLog};
use crate::log_dirs::{find_partitions, move_partition_dir, recover_moves, FoundPartition};
use crate::segment::{sync_dir, write_file_synced, DeferredSyncs};
use crate::shard::shard_of;
use crate::types::TopicId;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

// Re-exported so `engine::manager::TopicPartition` (used by the `net/` crates) keeps working.
pub use crate::types::{is_valid_topic_name, TopicPartition};

/// Partitions a shard closes at once at shutdown.
const SHUTDOWN_CLOSE_CONCURRENCY: usize = 64;

/// Free space (above the reserve) before a partition that a failed disk
/// write took offline is reopened, at least.
const REOPEN_MIN_ROOM_BYTES: u64 = 1 << 20;

/// A topic as found on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicMeta {
    /// Partition count (highest partition directory + 1).
    pub partitions: i32,
    /// Kafka topic id.
    pub topic_id: TopicId,
    /// The topic's config (defaults plus stored overrides).
    pub config: TopicConfig,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u8::from_str_radix(s.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

fn read_topic_id(dir: &Path) -> Option<[u8; 16]> {
    let text = crate::disk::read_to_string(&dir.join("partition.metadata")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id:"))
        .and_then(|v| unhex(v.trim()))
}

fn read_overrides(dir: &Path) -> Vec<(String, String)> {
    crate::disk::read_to_string(&dir.join("topic.config"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn config_from_dir(dir: &Path, defaults: &TopicConfig) -> TopicConfig {
    let mut config = defaults.clone();
    for (name, value) in read_overrides(dir) {
        if let Err(e) = config.set(&name, &value) {
            tracing::warn!(dir = %dir.display(), error = %e, "ignoring a stored topic config");
        }
    }
    config
}

fn write_partition_files(
    dir: &Path,
    topic_id: [u8; 16],
    config: &TopicConfig,
    defaults: &TopicConfig,
) -> Result<(), EngineError> {
    write_file_synced(
        &dir.join("partition.metadata"),
        format!("version: 0\ntopic_id: {}\n", hex(&topic_id)).as_bytes(),
    )?;
    write_config_file(dir, config, defaults)
}

fn write_config_file(
    dir: &Path,
    config: &TopicConfig,
    defaults: &TopicConfig,
) -> Result<(), EngineError> {
    let text: String = config
        .overrides_against(defaults)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    write_file_synced(&dir.join("topic.config"), text.as_bytes())
}

/// Topics with partition count, id and config, from the partition
/// directories of every data dir (a partition in two dirs is an error),
/// once the log dir moves a crash cut short are finished or undone.
pub fn scan_topics(
    data_dirs: &[PathBuf],
    defaults: &TopicConfig,
) -> Result<BTreeMap<String, TopicMeta>, EngineError> {
    recover_moves(data_dirs)?;
    let mut topics: BTreeMap<String, TopicMeta> = BTreeMap::new();
    for FoundPartition { tp, dir, .. } in find_partitions(data_dirs)? {
        let entry = topics.entry(tp.topic.clone()).or_insert_with(|| TopicMeta {
            partitions: 0,
            topic_id: [0; 16],
            config: config_from_dir(&dir, defaults),
        });
        entry.partitions = entry.partitions.max(tp.partition + 1);
        if entry.topic_id == [0; 16] {
            if let Some(id) = read_topic_id(&dir) {
                entry.topic_id = id;
            }
        }
    }
    Ok(topics)
}

/// A partition of this shard found on disk whose open failed (a damaged
/// file: an unreadable pending truncation, a segment the disk cannot
/// read). It is not served and its files are left as they are (nothing
/// is guessed from a damaged record) until the broker restarts, as a
/// failed disk write keeps a partition offline ([`PartitionLog::is_offline`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflinePartition {
    /// The partition.
    pub tp: TopicPartition,
    /// Its directory.
    pub dir: PathBuf,
    /// The data dir holding it (its place in `EngineConfig::data_dirs`).
    pub dir_index: usize,
    /// Why its open failed.
    pub reason: String,
}

/// The partitions of one shard. Shard-local.
pub struct LogManager {
    ctx: Rc<LogContext>,
    shard_id: usize,
    shard_count: usize,
    logs: RefCell<HashMap<TopicPartition, Rc<PartitionLog>>>,
    /// The partitions whose open failed, by partition.
    offline: RefCell<BTreeMap<TopicPartition, OfflinePartition>>,
    /// The partitions whose files are being made (off the shard, see
    /// `create_in`): a second creation meanwhile waits for the first.
    creating: RefCell<HashSet<TopicPartition>>,
}

/// A partition marked as being created while this lives (the creation
/// may be dropped at an await: the mark goes with it).
struct Creating<'a> {
    set: &'a RefCell<HashSet<TopicPartition>>,
    tp: TopicPartition,
}

impl<'a> Creating<'a> {
    fn mark(set: &'a RefCell<HashSet<TopicPartition>>, tp: &TopicPartition) -> Self {
        set.borrow_mut().insert(tp.clone());
        Creating {
            set,
            tp: tp.clone(),
        }
    }
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().remove(&self.tp);
    }
}

impl LogManager {
    /// Opens (recovering) every partition of the data dirs that this
    /// shard owns, `open_concurrency` at a time, and starts the background
    /// retention task. Must run inside a glommio executor.
    ///
    /// A partition whose open fails is taken offline alone
    /// ([`OfflinePartition`], listed by [`LogManager::offline_partitions`]);
    /// the open itself fails only when the data dirs cannot be listed or
    /// the process runs short of something (EMFILE, ENOMEM).
    pub async fn open(
        config: EngineConfig,
        shard_id: usize,
        shard_count: usize,
    ) -> Result<Rc<LogManager>, EngineError> {
        let data_dirs = config.data_dirs();
        for dir in &data_dirs {
            crate::disk::create_dir_all(dir).map_err(|e| EngineError::io(dir, e))?;
        }
        crate::appender::prime_iopoll_probe(&config.data_dir).await?;
        let ctx = LogContext::for_shard(config, shard_count);
        let manager = Rc::new(LogManager {
            ctx: ctx.clone(),
            shard_id,
            shard_count,
            logs: RefCell::new(HashMap::new()),
            offline: RefCell::new(BTreeMap::new()),
            creating: RefCell::new(HashSet::new()),
        });
        let mine: Vec<_> = find_partitions(&data_dirs)?
            .into_iter()
            .filter(|f| shard_of(&f.tp.topic, f.tp.partition, shard_count) == shard_id)
            .inspect(|f| ctx.config.dir_load.add(f.dir_index))
            .collect();
        manager.open_found(mine).await?;
        tracing::info!(
            shard = shard_id,
            partitions = manager.logs.borrow().len(),
            offline = manager.offline.borrow().len(),
            "log manager open"
        );
        manager.spawn_background();
        Ok(manager)
    }

    /// Opens the partitions `found` on disk, `open_concurrency` at a time.
    ///
    /// One whose open fails goes offline ([`OfflinePartition`]) and the
    /// others open: its error is about its own files, and the shard's other
    /// partitions should not stop serving for it. Except a transient one
    /// (EMFILE, ENOMEM: [`FaultClass::Transient`]), which fails the whole
    /// open as before: the process ran short, the partition's files may
    /// well be sound, and a partition taken offline would stay unserved
    /// until a restart that the operator, told nothing, would not make.
    async fn open_found(&self, found: Vec<FoundPartition>) -> Result<(), EngineError> {
        for group in found.chunks(self.ctx.config.open_concurrency.max(1)) {
            let tasks: Vec<_> = group
                .iter()
                .cloned()
                .map(|f| {
                    let ctx = self.ctx.clone();
                    glommio::spawn_local(async move {
                        let config = config_from_dir(&f.dir, &ctx.config.topic_defaults);
                        let topic_id = read_topic_id(&f.dir).unwrap_or([0; 16]);
                        let (tp, dir) = (f.tp.clone(), f.dir.clone());
                        (f, PartitionLog::open(ctx, dir, tp, topic_id, config).await)
                    })
                })
                .collect();
            for task in tasks {
                match task.await {
                    (f, Ok(log)) => {
                        self.logs.borrow_mut().insert(f.tp, log);
                    }
                    (_, Err(e)) if e.fault_class() == FaultClass::Transient => return Err(e),
                    (f, Err(e)) => self.take_offline(f, &e),
                }
            }
        }
        Ok(())
    }

    /// Records `found` as offline for `error` (see [`OfflinePartition`]).
    fn take_offline(&self, found: FoundPartition, error: &EngineError) {
        tracing::error!(partition = %found.tp, dir = %found.dir.display(), error = %error, "partition cannot be opened: offline until the broker restarts; the others open");
        let offline = OfflinePartition {
            tp: found.tp.clone(),
            dir: found.dir,
            dir_index: found.dir_index,
            reason: error.to_string(),
        };
        self.offline.borrow_mut().insert(found.tp, offline);
    }

    /// The partitions of this shard whose open failed, sorted.
    pub fn offline_partitions(&self) -> Vec<OfflinePartition> {
        self.offline.borrow().values().cloned().collect()
    }

    /// The partitions of this shard that cannot take an append now: those
    /// in a data dir below its free-space reserve, and those offline. The
    /// broker tells the controller, which moves their leadership and ISR
    /// places to replicas that can (as KIP-858 does for a failed dir).
    pub fn unwritable_partitions(&self) -> Vec<TopicPartition> {
        let logs = self.logs.borrow();
        let full = (logs.values())
            .filter(|log| self.ctx.space_of(log.log_dir_index()).is_low())
            .map(|log| log.topic_partition().clone());
        let mut unwritable: Vec<TopicPartition> =
            full.chain(self.offline.borrow().keys().cloned()).collect();
        unwritable.sort();
        unwritable
    }

    /// Whether `tp`'s open failed (it has files here but no log).
    pub fn failed_to_open(&self, tp: &TopicPartition) -> bool {
        self.offline.borrow().contains_key(tp)
    }

    /// Engine-wide settings.
    pub fn config(&self) -> &EngineConfig {
        &self.ctx.config
    }

    /// The shard context (cache, stats).
    pub fn context(&self) -> &Rc<LogContext> {
        &self.ctx
    }

    /// This shard's id.
    pub fn shard_id(&self) -> usize {
        self.shard_id
    }

    /// How many shards the broker runs.
    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    /// The partition's log, when this shard has it.
    pub fn get(&self, tp: &TopicPartition) -> Option<Rc<PartitionLog>> {
        self.logs.borrow().get(tp).cloned()
    }

    /// The partitions of this shard, sorted.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        let mut v: Vec<_> = self.logs.borrow().keys().cloned().collect();
        v.sort();
        v
    }

    /// Creates a partition (its directory, metadata and first segment).
    pub async fn create_partition(
        &self,
        tp: TopicPartition,
        topic_id: TopicId,
        config: TopicConfig,
    ) -> Result<Rc<PartitionLog>, EngineError> {
        // A creation of the same partition in flight (its files are made
        // off the shard) is waited for: the caller is then told it exists,
        // with its log there, as when the first had finished.
        while self.creating.borrow().contains(&tp) {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        if self.logs.borrow().contains_key(&tp) {
            return Err(EngineError::PartitionExists {
                topic: tp.topic,
                partition: tp.partition,
            });
        }
        if let Some(offline) = self.offline.borrow().get(&tp) {
            // Its damaged files stay as they are: not reopened, not replaced.
            return Err(EngineError::io(
                &offline.dir,
                std::io::Error::other(format!("partition offline: {}", offline.reason)),
            ));
        }
        if !is_valid_topic_name(&tp.topic) || tp.partition < 0 {
            return Err(EngineError::InvalidConfig {
                name: String::from("topic"),
                value: tp.to_string(),
                reason: String::from("invalid topic name or partition"),
            });
        }
        // Kafka's placement: the data dir with the fewest partitions. A
        // directory of the partition already on disk (a delete that could
        // not finish, say) is used where it is, as with one dir: a second
        // copy elsewhere would stop the next start.
        let data_dirs = self.ctx.config.data_dirs();
        let load = &self.ctx.config.dir_load;
        let dir_index = match data_dirs
            .iter()
            .position(|d| crate::disk::is_dir(&d.join(tp.dir_name())))
        {
            Some(found) => {
                load.add(found);
                found
            }
            None => load.place(data_dirs.len()),
        };
        let data_dir = data_dirs
            .get(dir_index)
            .unwrap_or(&self.ctx.config.data_dir);
        let _creating = Creating::mark(&self.creating, &tp);
        let created = self.create_in(data_dir, tp, topic_id, config).await;
        if created.is_err() {
            load.remove(dir_index);
        }
        created
    }

    async fn create_in(
        &self,
        data_dir: &Path,
        tp: TopicPartition,
        topic_id: TopicId,
        config: TopicConfig,
    ) -> Result<Rc<PartitionLog>, EngineError> {
        let dir = data_dir.join(tp.dir_name());
        // Made off the shard: a directory and its files are blocking calls
        // (inode allocation, fsyncs) that, for thousands of partitions
        // created at once, held the shard for seconds, heartbeats and Raft
        // included, and got live brokers fenced.
        let (files_dir, parent) = (dir.clone(), data_dir.to_path_buf());
        let (files_config, defaults) = (config.clone(), self.ctx.config.topic_defaults.clone());
        crate::disk::off_thread(move || {
            crate::disk::create_dir_all(&files_dir).map_err(|e| EngineError::io(&files_dir, e))?;
            write_partition_files(&files_dir, topic_id, &files_config, &defaults)?;
            sync_dir(&parent)
        })
        .await?;
        let log = PartitionLog::open(self.ctx.clone(), dir, tp.clone(), topic_id, config).await?;
        self.logs.borrow_mut().insert(tp, log.clone());
        Ok(log)
    }

    /// Closes a partition and removes its directory (an offline one's too:
    /// deleting its topic is how its damaged files go).
    pub async fn delete_partition(&self, tp: &TopicPartition) -> Result<(), EngineError> {
        let log = self.logs.borrow_mut().remove(tp);
        let offline = self.offline.borrow_mut().remove(tp);
        let (dir, dir_index) = match (log, offline) {
            (Some(log), _) => {
                if let Err(e) = log.close().await {
                    tracing::warn!(partition = %tp, error = %e, "closing a deleted partition failed");
                }
                (log.dir().to_path_buf(), log.log_dir_index())
            }
            (None, Some(offline)) => (offline.dir, offline.dir_index),
            (None, None) => {
                return Err(EngineError::UnknownPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                })
            }
        };
        self.ctx.config.dir_load.remove(dir_index);
        // The partition's files are in whichever data dir holds it; removed
        // off the shard, as creations are made (see `create_in`).
        crate::disk::off_thread(move || {
            crate::disk::remove_dir_all(&dir).map_err(|e| EngineError::io(&dir, e))?;
            match dir.parent() {
                Some(data_dir) => sync_dir(data_dir),
                None => Ok(()),
            }
        })
        .await
    }

    /// Moves a partition to data dir `target` (AlterReplicaLogDirs): it
    /// closes, its directory is copied into the target dir and swapped in
    /// ([`move_partition_dir`], crash-safe), and it opens there. Meanwhile
    /// requests for it find no log (NOT_LEADER_OR_FOLLOWER, which clients
    /// and followers retry); a move that fails reopens it where it was.
    pub async fn move_partition(
        &self,
        tp: &TopicPartition,
        target: usize,
    ) -> Result<(), EngineError> {
        let Some(target_dir) = self.ctx.config.data_dirs().get(target).cloned() else {
            return Err(EngineError::InvalidConfig {
                name: String::from("log dir"),
                value: target.to_string(),
                reason: String::from("no such data dir"),
            });
        };
        while self.creating.borrow().contains(tp) {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        let Some(log) = self.get(tp).filter(|log| log.log_dir_index() != target) else {
            return match self.get(tp) {
                Some(_) => Ok(()),
                None => Err(EngineError::UnknownPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                }),
            };
        };
        let _moving = Creating::mark(&self.creating, tp);
        self.logs.borrow_mut().remove(tp);
        let (topic_id, config, from) = (log.topic_id(), log.config(), log.dir().to_path_buf());
        let from_index = log.log_dir_index();
        let closed = log.close().await;
        drop(log);
        let to = target_dir.join(tp.dir_name());
        let moved = match closed {
            Ok(()) => {
                let (from, to) = (from.clone(), to.clone());
                glommio::executor()
                    .spawn_blocking(move || move_partition_dir(&from, &to))
                    .await
            }
            Err(e) => Err(e),
        };
        // Opened wherever its directory is; with neither there (putting a
        // failed move back failed too) it stays closed, and the next start
        // puts it back (`recover_moves`).
        let dir = if moved.is_ok() && to.is_dir() {
            self.ctx.config.dir_load.remove(from_index);
            self.ctx.config.dir_load.add(target);
            to
        } else if from.is_dir() {
            from
        } else {
            return moved.and(Err(EngineError::io(
                &from,
                std::io::Error::other("a failed log dir move left the partition closed"),
            )));
        };
        let log = PartitionLog::open(self.ctx.clone(), dir, tp.clone(), topic_id, config).await?;
        self.logs.borrow_mut().insert(tp.clone(), log);
        moved
    }

    /// Replaces a partition's topic config and persists it.
    pub async fn alter_config(
        &self,
        tp: &TopicPartition,
        config: TopicConfig,
    ) -> Result<(), EngineError> {
        let Some(log) = self.get(tp) else {
            return Err(EngineError::UnknownPartition {
                topic: tp.topic.clone(),
                partition: tp.partition,
            });
        };
        write_config_file(log.dir(), &config, &self.ctx.config.topic_defaults)?;
        log.set_config(config);
        Ok(())
    }

    /// Flushes, checkpoints and closes every partition.
    ///
    /// Up to [`SHUTDOWN_CLOSE_CONCURRENCY`] partitions close at once, so
    /// their seals' syncs overlap, and their checkpoint files are synced
    /// together at the end (see [`DeferredSyncs`]): 10,000 partitions close
    /// in about a second rather than ten.
    pub async fn shutdown(&self) -> Result<(), EngineError> {
        use futures::StreamExt;
        let logs: Vec<_> = self.logs.borrow().values().cloned().collect();
        let first_error = RefCell::new(None);
        let deferred = DeferredSyncs::begin();
        futures::stream::iter(logs.iter())
            .for_each_concurrent(SHUTDOWN_CLOSE_CONCURRENCY, |log| {
                let first_error = &first_error;
                async move {
                    if let Err(e) = log.close().await {
                        tracing::error!(partition = %log.topic_partition(), error = %e, "close failed");
                        first_error.borrow_mut().get_or_insert(e);
                    }
                }
            })
            .await;
        let roots: Vec<&Path> = logs.iter().filter_map(|log| log.dir().parent()).collect();
        if let Err(e) = deferred.finish(roots) {
            tracing::error!(error = %e, "syncing the closed partitions' checkpoints failed");
            first_error.borrow_mut().get_or_insert(e);
        }
        match first_error.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One pass of retention and compaction over this shard's partitions.
    pub async fn run_cleanup_once(&self) -> usize {
        let logs: Vec<_> = self.logs.borrow().values().cloned().collect();
        let mut deleted = 0;
        for log in logs {
            match log.apply_retention() {
                Ok(n) => deleted += n,
                Err(e) => {
                    tracing::warn!(partition = %log.topic_partition(), error = %e, "retention failed")
                }
            }
            glommio::yield_if_needed().await;
        }
        // Kafka's cleaner takes the dirtiest log first; a tick cleans every
        // log that is due, in that order (overdue ones first).
        let mut due: Vec<_> = self
            .logs
            .borrow()
            .values()
            .filter_map(|log| Some((log.clone(), crate::compaction::candidate(log, false)?)))
            .collect();
        due.sort_by(|(_, a), (_, b)| {
            b.overdue
                .cmp(&a.overdue)
                .then(b.dirty_ratio.total_cmp(&a.dirty_ratio))
        });
        for (log, candidate) in due {
            if let Err(e) = crate::compaction::clean(&log, candidate).await {
                tracing::warn!(partition = %log.topic_partition(), error = %e, "compaction failed");
            }
        }
        deleted
    }

    /// Refreshes the shard's free-space flag of each data dir (see
    /// [`crate::disk_space`]); once a dir's space is above the reserve,
    /// reopens its partitions that a failed disk write took offline.
    pub async fn check_space_once(&self) {
        let config = &self.ctx.config;
        // Room for the reserve and a new segment's preallocation, or a
        // reopened partition would fail again at its next write (and each
        // reopen re-reads its active segment).
        let room = config.preallocate_bytes.max(REOPEN_MIN_ROOM_BYTES);
        for (dir_index, data_dir) in config.data_dirs().iter().enumerate() {
            let space = self.ctx.space_of(dir_index);
            match space.refresh(data_dir, config.min_free_bytes) {
                SpaceChange::BecameLow => tracing::warn!(
                    shard = self.shard_id,
                    dir = %data_dir.display(),
                    free_bytes = space.free_bytes(),
                    reserve_bytes = space.reserve_bytes(),
                    "data dir almost full: appends refused (KAFKA_STORAGE_ERROR) until space is freed"
                ),
                SpaceChange::Recovered => tracing::info!(
                    shard = self.shard_id,
                    dir = %data_dir.display(),
                    free_bytes = space.free_bytes(),
                    "data dir has space again: appends taken"
                ),
                SpaceChange::Same => {}
            }
            if !space.is_low() && space.free_bytes() >= space.reserve_bytes().saturating_add(room) {
                self.reopen_offline(dir_index).await;
            }
        }
    }

    /// Reopens each unreplicated partition a write that found no space
    /// took offline (a failing disk, EIO, keeps its partitions offline
    /// until the broker restarts, as Kafka keeps a failed log dir offline):
    /// it is closed as a crash would leave it and opened again
    /// (recovery keeps every whole batch on disk, which includes everything
    /// acknowledged). A replicated one is left offline: its replication
    /// state counted the lost tail, so it needs the broker's restart (its
    /// followers and leader election carry on meanwhile).
    async fn reopen_offline(&self, dir_index: usize) {
        let offline: Vec<Rc<PartitionLog>> = self
            .logs
            .borrow()
            .values()
            .filter(|log| {
                log.log_dir_index() == dir_index
                    && log.is_offline_for_space()
                    && log.replication_limit().is_none()
            })
            .cloned()
            .collect();
        for log in offline {
            let tp = log.topic_partition().clone();
            log.abandon();
            let dir = log.dir().to_path_buf();
            match PartitionLog::open(
                self.ctx.clone(),
                dir,
                tp.clone(),
                log.topic_id(),
                log.config(),
            )
            .await
            {
                Ok(reopened) => {
                    tracing::info!(partition = %tp, log_end_offset = reopened.log_end_offset(), "partition reopened after a disk error");
                    self.logs.borrow_mut().insert(tp, reopened);
                }
                Err(e) => {
                    tracing::warn!(partition = %tp, error = %e, "partition still offline: reopening failed")
                }
            }
        }
    }

    fn spawn_background(self: &Rc<Self>) {
        let space_weak = Rc::downgrade(self);
        glommio::spawn_local(async move {
            loop {
                let Some(manager) = space_weak.upgrade() else {
                    return;
                };
                manager.check_space_once().await;
                drop(manager);
                glommio::timer::sleep(SPACE_CHECK_INTERVAL).await;
            }
        })
        .detach();
        let weak = Rc::downgrade(self);
        let interval_ms = self.ctx.config.retention_check_interval_ms.max(10);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(interval_ms)).await;
                let Some(manager) = weak.upgrade() else {
                    return;
                };
                manager.run_cleanup_once().await;
            }
        })
        .detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let id = [7u8, 0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
        assert_eq!(unhex(&hex(&id)), Some(id));
        assert_eq!(unhex("zz"), None);
    }
}
