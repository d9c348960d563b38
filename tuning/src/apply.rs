//! `rill tune apply` and `rill tune revert`: writing the fixes of a report, and
//! restoring what was there before from a JSON backup.
//!
//! The backup is written *before* the first change, so a crash half-way through
//! `apply` can still be reverted. A second `apply` keeps the values recorded by
//! the first, so `revert` always goes back to the host as it was originally.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::check::Fix;
use crate::host::Host;
use crate::Error;

/// Default location of the backup file.
pub const DEFAULT_BACKUP_PATH: &str = "/var/lib/rill/tune-backup.json";

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupEntry {
    /// Host path written.
    pub path: String,
    /// Value before the first `apply`.
    pub previous: String,
    /// Value `apply` wrote.
    pub applied: String,
}

/// The backup file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backup {
    /// Changes in the order they were applied.
    pub entries: Vec<BackupEntry>,
}

/// What `apply`/`revert` did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Writes done (or planned): path and value.
    pub writes: Vec<Fix>,
    /// Writes that failed, with the error text; the others were still done.
    pub failures: Vec<(Fix, String)>,
}

/// Reads a backup file; a missing file is an empty backup.
pub fn load_backup(path: &Path) -> Result<Backup, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|source| Error::Backup {
            path: path.to_path_buf(),
            source,
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Backup::default()),
        Err(source) => Err(Error::Io {
            what: "reading backup",
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn save_backup(path: &Path, backup: &Backup) -> Result<(), Error> {
    let io_error = |source| Error::Io {
        what: "writing backup",
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_error)?;
    }
    let text = serde_json::to_string_pretty(backup).map_err(|source| Error::Backup {
        path: path.to_path_buf(),
        source,
    })?;
    // Write-then-rename so a crash never leaves a half-written backup.
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text).map_err(io_error)?;
    std::fs::rename(&temporary, path).map_err(io_error)
}

/// Applies `fixes` to the host, recording previous values in `backup_path`.
/// With `dry_run`, nothing is written (not even the backup).
pub fn apply(
    host: &Host,
    fixes: &[Fix],
    backup_path: &Path,
    dry_run: bool,
) -> Result<Outcome, Error> {
    let mut outcome = Outcome::default();
    if dry_run {
        outcome.writes = fixes.to_vec();
        return Ok(outcome);
    }
    let mut backup = load_backup(backup_path)?;
    for fix in fixes {
        match backup.entries.iter_mut().find(|e| e.path == fix.path) {
            // Keep the original previous value from the first apply.
            Some(entry) => entry.applied = fix.value.clone(),
            None => backup.entries.push(BackupEntry {
                path: fix.path.clone(),
                previous: fix.previous.clone(),
                applied: fix.value.clone(),
            }),
        }
    }
    save_backup(backup_path, &backup)?;
    for fix in fixes {
        match host.write(&fix.path, &fix.value) {
            Ok(()) => outcome.writes.push(fix.clone()),
            Err(error) => outcome.failures.push((fix.clone(), error.to_string())),
        }
    }
    Ok(outcome)
}

/// Restores every value recorded in `backup_path`, last change first; the
/// backup is removed once everything was restored.
pub fn revert(host: &Host, backup_path: &Path, dry_run: bool) -> Result<Outcome, Error> {
    let backup = load_backup(backup_path)?;
    let mut outcome = Outcome::default();
    for entry in backup.entries.iter().rev() {
        let write = Fix {
            path: entry.path.clone(),
            value: entry.previous.clone(),
            previous: entry.applied.clone(),
        };
        if dry_run {
            outcome.writes.push(write);
            continue;
        }
        match host.write(&write.path, &write.value) {
            Ok(()) => outcome.writes.push(write),
            Err(error) => outcome.failures.push((write, error.to_string())),
        }
    }
    if !dry_run && outcome.failures.is_empty() && backup_path.exists() {
        std::fs::remove_file(backup_path).map_err(|source| Error::Io {
            what: "removing backup",
            path: backup_path.to_path_buf(),
            source,
        })?;
    }
    Ok(outcome)
}
