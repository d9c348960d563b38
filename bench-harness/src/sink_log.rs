//! The null-sink's optional log (`rill-bench null-sink --sync-dir DIR`):
//! the simplest durable server, a reference for a broker under `fsync`.
//!
//! Every produced partition's records are appended to one file per
//! partition under DIR and made durable with `fdatasync` before the
//! produce is answered. Each partition has a writer thread doing group
//! commit: it takes everything queued since its last sync, writes it
//! (buffered, through the page cache) and syncs once for all of it. No
//! index, no CRC check, no batch cache, no rolling: what is left is the
//! cost of writing and syncing the bytes, which a server that discards
//! them never pays. It is not a lower bound: its page-cache writes cost
//! more per GB than O_DIRECT at a high rate (docs/efficiency.md;
//! `bench-harness/scripts/disk_cpu_floor.py` measures the disk's own
//! floor).

use crate::error::{BenchError, Result};
use bytes::Bytes;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use tokio::sync::oneshot;

/// The outcome of one append's sync: an I/O error as text (it is sent to
/// every request the failed sync covered).
pub type Synced = oneshot::Receiver<std::result::Result<(), String>>;

/// One partition's records, answered once a sync covers them.
struct Append {
    records: Bytes,
    done: oneshot::Sender<std::result::Result<(), String>>,
}

/// Per-partition files under one directory, each with its writer thread.
#[derive(Debug)]
pub struct SinkLog {
    dir: PathBuf,
    writers: Mutex<HashMap<(String, i32), mpsc::Sender<Append>>>,
}

impl SinkLog {
    /// Creates `dir` (and its parents) if missing.
    pub fn open(dir: PathBuf) -> Result<SinkLog> {
        std::fs::create_dir_all(&dir)?;
        Ok(SinkLog {
            dir,
            writers: Mutex::default(),
        })
    }

    /// Queues `records` for `topic`/`partition`; the receiver completes
    /// when an `fdatasync` covering them has returned.
    pub fn append(&self, topic: &str, partition: i32, records: Bytes) -> Result<Synced> {
        let (done, synced) = oneshot::channel();
        let mut writers = self
            .writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (topic.to_string(), partition);
        let writer = match writers.get(&key) {
            Some(writer) => writer.clone(),
            None => {
                let writer = self.start_writer(topic, partition)?;
                writers.insert(key, writer.clone());
                writer
            }
        };
        writer.send(Append { records, done }).map_err(|_| {
            BenchError::Other(format!("sink log writer of {topic}-{partition} ended"))
        })?;
        Ok(synced)
    }

    fn start_writer(&self, topic: &str, partition: i32) -> Result<mpsc::Sender<Append>> {
        // Kafka topic names are [a-zA-Z0-9._-]; the sink checks nothing,
        // so anything else (a '/') is replaced to stay inside the dir.
        let name: String = topic
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.dir.join(format!("{name}-{partition}.log"));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let (sender, appends) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("sink-log-{partition}"))
            .spawn(move || group_commit(file, appends))?;
        Ok(sender)
    }
}

/// Writes and syncs whatever is queued, one `fdatasync` per round, until
/// every sender is gone.
fn group_commit(mut file: File, appends: mpsc::Receiver<Append>) {
    while let Ok(first) = appends.recv() {
        let mut round = vec![first];
        round.extend(appends.try_iter());
        let outcome = round
            .iter()
            .try_for_each(|append| file.write_all(&append.records))
            .and_then(|()| file.sync_data())
            .map_err(|error| error.to_string());
        for append in round {
            // The request may have gone (connection closed): nothing to tell.
            let _ = append.done.send(outcome.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_land_in_one_file_per_partition_once_synced() {
        let dir = tempfile::tempdir().unwrap();
        let log = SinkLog::open(dir.path().join("sink")).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let waits = vec![
            log.append("t", 0, Bytes::from_static(b"abc")).unwrap(),
            log.append("t", 0, Bytes::from_static(b"def")).unwrap(),
            log.append("t", 1, Bytes::from_static(b"xy")).unwrap(),
        ];
        for synced in waits {
            rt.block_on(synced).unwrap().unwrap();
        }
        let read = |name: &str| std::fs::read(dir.path().join("sink").join(name)).unwrap();
        assert_eq!(read("t-0.log"), b"abcdef");
        assert_eq!(read("t-1.log"), b"xy");
        // A name that would leave the directory stays in it.
        let synced = log.append("../up", 2, Bytes::from_static(b"z")).unwrap();
        rt.block_on(synced).unwrap().unwrap();
        assert_eq!(read(".._up-2.log"), b"z");
    }
}
