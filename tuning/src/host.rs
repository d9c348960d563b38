//! Access to `/proc` and `/sys` through a root directory.
//!
//! Every read and write of host state goes through [`Host`], so a test can point
//! the whole crate at a fake tree in a temporary directory and run `apply` and
//! `revert` for real on plain files.

use std::path::{Path, PathBuf};

/// The host seen through a root directory (`/` in production).
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

impl Host {
    /// A host rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Host { root: root.into() }
    }

    /// True when this is the real machine, not a fake tree; some probes (an
    /// io_uring_setup call, canonicalizing the data dir) only make sense there.
    pub fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Maps an absolute host path (`/proc/sys/vm/swappiness`) under the root.
    pub fn path(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }

    /// Reads a file, trimmed; `None` when it is missing or unreadable, which the
    /// checks report as "skip" (VMs and containers lack many of these files).
    pub fn read(&self, host_path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(host_path))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Reads a file without trimming (multi-line tables).
    pub fn read_raw(&self, host_path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(host_path)).ok()
    }

    /// Names of the entries of a directory, sorted; empty when missing.
    pub fn list_dir(&self, host_path: &str) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(self.path(host_path)) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    /// True when the path exists under the root.
    pub fn exists(&self, host_path: &str) -> bool {
        self.path(host_path).exists()
    }

    /// The target of a symlink, as text; `None` when it is not a link.
    pub fn read_link(&self, host_path: &str) -> Option<String> {
        std::fs::read_link(self.path(host_path))
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    }

    /// Writes `value` to a host file, as `echo value > path` would (with the
    /// trailing newline, which every sysctl and sysfs attribute accepts).
    pub fn write(&self, host_path: &str, value: &str) -> Result<(), crate::Error> {
        let path = self.path(host_path);
        std::fs::write(&path, format!("{value}\n")).map_err(|source| crate::Error::Write {
            path,
            value: value.to_string(),
            source,
        })
    }
}
