//! Log compaction for `cleanup.policy=compact`: keep the newest record per key.
//!
//! The cleaner reads the sealed segments (never the active one, so appends
//! are never blocked), builds a map from key to the newest offset, and
//! rewrites each sealed segment with only the records that are still the
//! newest for their key. Offsets are kept: a rewritten batch keeps its base
//! offset and each record its offset delta, exactly as Kafka's cleaner does.
//! Tombstones (null values) are dropped once their segment is older than
//! `delete.retention.ms`. Control batches and records without a key are kept.
//! A rewritten segment is written to `<base>.log.cleaned`, synced, and renamed
//! over the original, so a crash leaves either the old or the new segment.

use crate::batch::{self, BatchBuilder, BatchHeader};
use crate::error::EngineError;
use crate::log::{Maintenance, PartitionLog};
use crate::recovery::scan_segment;
use crate::segment::{sync_dir, Segment};
use std::collections::HashMap;
use std::rc::Rc;

/// What one compaction pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactionStats {
    /// Segments rewritten.
    pub segments_rewritten: usize,
    /// Records dropped.
    pub records_removed: usize,
}

/// Compacts the sealed segments of `log` once. It works through the log's
/// maintenance view (`log/maintenance.rs`) only.
pub async fn compact(log: &Rc<PartitionLog>) -> Result<CompactionStats, EngineError> {
    let log = log.maintenance();
    let config = log.topic_config();
    let now = log.now_ms();
    let sealed = log.sealed_segments();
    let hw = log.high_watermark();
    let sealed: Vec<_> = sealed
        .into_iter()
        .filter(|s| {
            let m = s.meta.borrow();
            m.next_offset <= hw && now - m.max_timestamp_ms.max(0) >= config.min_compaction_lag_ms
        })
        .collect();
    if sealed.is_empty() {
        return Ok(CompactionStats::default());
    }
    // Pass 1: newest offset per key over the sealed segments, and the
    // newest per key over the active segment (which wins over anything sealed).
    let mut newest: HashMap<Vec<u8>, i64> = HashMap::new();
    for segment in log.segments() {
        let bytes = read_segment(&segment).await?;
        for item in batch::batches(&bytes) {
            let (header, range) = item?;
            if header.is_control() {
                continue;
            }
            for record in batch::records(&bytes[range])? {
                if let Some(key) = record.key {
                    let offset = header.base_offset + i64::from(record.offset_delta);
                    newest.insert(key.to_vec(), offset);
                }
            }
        }
    }
    // Pass 2: rewrite.
    let mut stats = CompactionStats::default();
    for segment in sealed {
        let tombstones_expire =
            now - segment.meta.borrow().max_timestamp_ms.max(0) > config.delete_retention_ms;
        let bytes = read_segment(&segment).await?;
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut removed = 0usize;
        for item in batch::batches(&bytes) {
            let (header, range) = item?;
            let raw = &bytes[range];
            if header.is_control() {
                out.extend_from_slice(raw);
                continue;
            }
            let records = batch::records(raw)?;
            let keep: Vec<_> = records
                .iter()
                .filter(|r| {
                    let offset = header.base_offset + i64::from(r.offset_delta);
                    match &r.key {
                        None => true,
                        Some(k) => {
                            newest.get(k.as_ref()) == Some(&offset)
                                && !(r.value.is_none() && tombstones_expire)
                        }
                    }
                })
                .collect();
            if keep.len() == records.len() {
                out.extend_from_slice(raw);
                continue;
            }
            removed += records.len() - keep.len();
            if keep.is_empty() {
                continue;
            }
            out.extend_from_slice(&rebuild(&header, &keep)?);
        }
        if removed == 0 {
            continue;
        }
        replace_segment(&log, &segment, &out, &config).await?;
        stats.segments_rewritten += 1;
        stats.records_removed += removed;
    }
    Ok(stats)
}

fn rebuild(header: &BatchHeader, keep: &[&batch::Record]) -> Result<Vec<u8>, EngineError> {
    let mut builder = BatchBuilder::new(header.base_offset, header.compression()?)
        .producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.is_transactional(),
        )
        .partition_leader_epoch(header.partition_leader_epoch);
    for r in keep {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_deref()))
            .collect();
        builder.push(
            r.offset_delta,
            header.base_timestamp + r.timestamp_delta,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        );
    }
    let mut built = builder.build()?;
    // Keep LogAppendTime batches' timestamps as they were.
    if header.timestamp_type_log_append() {
        batch::set_log_append_time(&mut built, header.max_timestamp);
    }
    Ok(built)
}

async fn read_segment(segment: &Segment) -> Result<Vec<u8>, EngineError> {
    let size = segment.readable_bytes.get() as usize;
    if size == 0 {
        return Ok(Vec::new());
    }
    segment.read_bytes(0, size).await
}

async fn replace_segment(
    log: &Maintenance<'_>,
    old: &Rc<Segment>,
    bytes: &[u8],
    config: &crate::config::TopicConfig,
) -> Result<(), EngineError> {
    use std::io::Write;
    let final_path = old.log_path();
    let cleaned = final_path.with_extension("log.cleaned");
    {
        let mut file = std::fs::File::create(&cleaned).map_err(|e| EngineError::io(&cleaned, e))?;
        file.write_all(bytes)
            .map_err(|e| EngineError::io(&cleaned, e))?;
        file.sync_all().map_err(|e| EngineError::io(&cleaned, e))?;
    }
    let outcome = scan_segment(
        &cleaned,
        old.base_offset,
        old.base_offset,
        config.index_interval_bytes,
        old.meta.borrow().created_ms,
    )?;
    if let Some(reason) = outcome.stopped_because {
        let _ = std::fs::remove_file(&cleaned);
        return Err(EngineError::io(
            &cleaned,
            std::io::Error::other(format!("cleaned segment invalid: {reason}")),
        ));
    }
    let mut meta = outcome.meta;
    // The segment keeps its offset range even when its last records went.
    meta.next_offset = old.meta.borrow().next_offset;
    std::fs::rename(&cleaned, &final_path).map_err(|e| EngineError::io(&final_path, e))?;
    sync_dir(log.dir())?;
    let size = meta.size_bytes;
    let replacement = Rc::new(Segment::new(log.dir(), old.base_offset, meta, size));
    replacement.write_indexes()?;
    log.replace_segment(old, replacement);
    Ok(())
}
