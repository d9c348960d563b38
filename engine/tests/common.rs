//! Shared helpers of the engine's integration tests.
#![allow(dead_code)]

use engine::batch::{BatchBuilder, Compression};
use engine::{EngineConfig, FlushPolicy, LogManager, TopicConfig, TopicPartition};
use std::future::Future;
use std::path::Path;
use std::rc::Rc;

/// Runs `fut` on a fresh glommio executor sized for the default memlock limit.
pub fn run<T>(fut: impl Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::default()
        .io_memory(1 << 20)
        .make()
        .expect("executor starts")
        .run(fut)
}

/// A batch of `count` records `key-i` / `value-i` (offsets are assigned by the log).
pub fn batch(first: usize, count: usize, timestamp_ms: i64) -> Vec<u8> {
    batch_with(first, count, timestamp_ms, Compression::None)
}

/// Same with a codec.
pub fn batch_with(first: usize, count: usize, timestamp_ms: i64, codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, codec);
    for i in 0..count {
        let key = format!("key-{}", first + i);
        let value = format!("value-{}", first + i);
        builder.push(
            i as i32,
            timestamp_ms + i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[],
        );
    }
    builder.build().expect("batch builds")
}

/// An engine config for a temp dir.
pub fn config(dir: &Path, policy: FlushPolicy) -> EngineConfig {
    let mut config = EngineConfig::new(dir);
    config.flush_policy = policy;
    config.retention_check_interval_ms = 3_600_000;
    // Stream from the first whole block on: the tests' small appends then
    // take the streamed-write path (64 KiB by default) all the time.
    config.stream_min_bytes = 4096;
    config
}

/// Opens a manager and creates (or gets) partition 0 of `topic`.
pub async fn open_log(
    config: EngineConfig,
    topic: &str,
    topic_config: TopicConfig,
) -> (Rc<LogManager>, Rc<engine::PartitionLog>) {
    let manager = LogManager::open(config, 0, 1).await.expect("manager opens");
    let tp = TopicPartition::new(topic, 0);
    let log = match manager.get(&tp) {
        Some(log) => log,
        None => manager
            .create_partition(tp, [1; 16], topic_config)
            .await
            .expect("partition created"),
    };
    (manager, log)
}

/// Appends `records` and waits until the log's flush policy is met.
pub async fn append_durable(
    log: &engine::PartitionLog,
    mut records: Vec<u8>,
) -> engine::AppendResult {
    let r = log.append(&mut records, 0).unwrap();
    log.wait_durable(r.last_offset).await.unwrap();
    r
}

/// Keys of all records readable from `offset`, with their offsets.
pub async fn read_all(log: &engine::PartitionLog, mut offset: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    loop {
        let result = log
            .read(offset, 1 << 20, engine::log::ReadMode::Copy)
            .await
            .expect("read");
        let engine::ReadData::Bytes(bytes) = result.data else {
            break;
        };
        for item in engine::batch::batches(&bytes) {
            let (header, range) = item.expect("whole batches");
            for record in engine::batch::records(&bytes[range]).expect("records parse") {
                let o = header.base_offset + i64::from(record.offset_delta);
                if o >= offset {
                    let key = String::from_utf8(record.key.map(|k| k.to_vec()).unwrap_or_default())
                        .expect("utf8");
                    out.push((o, key));
                }
            }
            offset = header.last_offset() + 1;
        }
    }
    out
}
