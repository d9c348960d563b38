//! Swapping a cleaned segment in, crash-safely, the way Kafka does:
//!
//! 1. the cleaner writes `<base>.log.cleaned` and syncs it (a crash now
//!    leaves a `.cleaned` file, which recovery deletes: the old segment
//!    stands);
//! 2. `.cleaned` is renamed to `<base>.log.swap`: from here on the new
//!    content is complete and durable, and recovery finishes the swap;
//! 3. the old segment's index files are removed (they describe the old
//!    bytes; recovery rebuilds missing ones) and `.swap` is renamed over
//!    `<base>.log`, which replaces the old file atomically;
//! 4. the directory is synced, then the new indexes are written.
//!
//! A kill at any point thus leaves either the old or the new segment whole,
//! never a mix and never neither. [`recover`] runs at partition open before
//! the segments are listed.

use crate::error::EngineError;
use crate::segment::{parse_file_name, sync_dir};
use std::path::{Path, PathBuf};

/// `<base>.log.cleaned` next to `<base>.log`.
pub fn cleaned_path(log_path: &Path) -> PathBuf {
    log_path.with_extension("log.cleaned")
}

/// `<base>.log.swap` next to `<base>.log`.
pub fn swap_path(log_path: &Path) -> PathBuf {
    log_path.with_extension("log.swap")
}

/// Steps 2 to 4 for one segment: `cleaned` becomes `log_path`.
pub fn swap_in(dir: &Path, log_path: &Path, cleaned: &Path) -> Result<(), EngineError> {
    let swap = swap_path(log_path);
    std::fs::rename(cleaned, &swap).map_err(|e| EngineError::io(&swap, e))?;
    finish_swap(log_path, &swap)?;
    sync_dir(dir)
}

/// Removes the stale indexes and renames the `.swap` over the `.log`.
fn finish_swap(log_path: &Path, swap: &Path) -> Result<(), EngineError> {
    for extension in ["index", "timeindex"] {
        let path = log_path.with_extension(extension);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(EngineError::io(&path, e)),
        }
    }
    std::fs::rename(swap, log_path).map_err(|e| EngineError::io(log_path, e))
}

/// At open: deletes half-written `.cleaned` files and completes the swaps
/// a crash interrupted. Returns how many of each it found.
pub fn recover(dir: &Path) -> Result<(usize, usize), EngineError> {
    let mut discarded = 0;
    let mut completed = 0;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(EngineError::io(dir, e)),
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if parse_file_name(&name, "log.cleaned").is_some() {
            std::fs::remove_file(&path).map_err(|e| EngineError::io(&path, e))?;
            discarded += 1;
        } else if let Some(base) = parse_file_name(&name, "log.swap") {
            let log_path = dir.join(crate::segment::file_name(base, "log"));
            finish_swap(&log_path, &path)?;
            completed += 1;
        }
    }
    if discarded + completed > 0 {
        tracing::info!(dir = %dir.display(), discarded, completed, "recovered interrupted log cleaning");
        sync_dir(dir)?;
    }
    Ok((discarded, completed))
}
