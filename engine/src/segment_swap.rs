//! Swapping a cleaned segment in, crash-safely, the way Kafka does:
//!
//! 1. the cleaner thread writes `<base>.log.cleaned` and its
//!    `.index.cleaned` / `.timeindex.cleaned`, each synced (a crash now
//!    leaves `.cleaned` files, which recovery deletes: the old segment
//!    stands);
//! 2. the shard renames the indexes' `.cleaned` to `.swap`, then
//!    `<base>.log.cleaned` to `<base>.log.swap`: that rename is the commit
//!    point: from here on recovery finishes the swap (before it, it deletes
//!    the index `.swap` files);
//! 3. each `.swap` is renamed over its file, the `.log` last (an index
//!    whose `.swap` is missing is deleted, so recovery rebuilds it from the
//!    new log rather than trust one describing the old bytes);
//! 4. the directory is synced, on the cleaner thread.
//!
//! A kill at any point thus leaves either the old or the new segment whole,
//! never a mix and never neither. [`recover`] runs at partition open before
//! the segments are listed.

use crate::error::EngineError;
use crate::segment::{parse_file_name, sync_dir};
use std::path::{Path, PathBuf};

/// The segment files a swap moves; the `.log` last (it commits the swap).
const EXTENSIONS: [&str; 3] = ["index", "timeindex", "log"];

/// `<base>.log.cleaned` next to `<base>.log`.
pub fn cleaned_path(log_path: &Path) -> PathBuf {
    cleaned_path_of(log_path, "log")
}

/// `<base>.<extension>.cleaned` next to `<base>.log`.
pub fn cleaned_path_of(log_path: &Path, extension: &str) -> PathBuf {
    log_path.with_extension(format!("{extension}.cleaned"))
}

/// `<base>.<extension>.swap` next to `<base>.log`.
fn swap_path_of(log_path: &Path, extension: &str) -> PathBuf {
    log_path.with_extension(format!("{extension}.swap"))
}

/// Removes the `.cleaned` files of the segment at `log_path` (a pass that
/// failed or whose segment changed meanwhile).
pub fn discard(log_path: &Path) {
    for extension in EXTENSIONS {
        let _ = crate::disk::remove_file(&cleaned_path_of(log_path, extension));
    }
}

/// Steps 2 and 3 for one segment: its `.cleaned` files replace its files.
/// Renames only (the files were synced by the cleaner thread); the caller
/// syncs the directory afterwards ([`sync_dir`], off the shard): a crash
/// before that leaves the old or the new names, both whole.
pub fn swap_in(log_path: &Path) -> Result<(), EngineError> {
    for extension in EXTENSIONS {
        let cleaned = cleaned_path_of(log_path, extension);
        let swap = swap_path_of(log_path, extension);
        crate::disk::rename(&cleaned, &swap).map_err(|e| EngineError::io(&swap, e))?;
    }
    finish_swap(log_path)
}

/// Moves the `.swap` files over the segment's files, the `.log` last; an
/// index without its `.swap` (a crash between the renames... or none
/// written) is removed, so recovery rebuilds it from the new log.
fn finish_swap(log_path: &Path) -> Result<(), EngineError> {
    for extension in EXTENSIONS {
        let swap = swap_path_of(log_path, extension);
        let target = log_path.with_extension(extension);
        match crate::disk::rename(&swap, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && extension != "log" => {
                match crate::disk::remove_file(&target) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(EngineError::io(&target, e)),
                }
            }
            Err(e) => return Err(EngineError::io(&target, e)),
        }
    }
    Ok(())
}

/// At open: deletes half-written `.cleaned` files, completes the swaps a
/// crash interrupted after their `.log.swap` existed (the commit point), and
/// deletes index `.swap` files of swaps that never reached it. Returns how
/// many `.cleaned` files it discarded and how many swaps it completed.
pub fn recover(dir: &Path) -> Result<(usize, usize), EngineError> {
    let names: Vec<String> = match crate::disk::read_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(EngineError::io(dir, e)),
    };
    let mut discarded = 0;
    let mut completed = 0;
    // Completed swaps first: they take their index `.swap` files along.
    for name in &names {
        if let Some(base) = parse_file_name(name, "log.swap") {
            finish_swap(&dir.join(crate::segment::file_name(base, "log")))?;
            completed += 1;
        }
    }
    for name in &names {
        let leftover = EXTENSIONS.iter().any(|ext| {
            parse_file_name(name, &format!("{ext}.cleaned")).is_some()
                || (*ext != "log" && parse_file_name(name, &format!("{ext}.swap")).is_some())
        });
        if leftover {
            let path = dir.join(name);
            match crate::disk::remove_file(&path) {
                Ok(()) => discarded += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(EngineError::io(&path, e)),
            }
        }
    }
    if discarded + completed > 0 {
        tracing::info!(dir = %dir.display(), discarded, completed, "recovered interrupted log cleaning");
        sync_dir(dir)?;
    }
    Ok((discarded, completed))
}
