//! `io-properties.yaml`, in Seastar's format, which `rill iotune` writes and
//! rill reads to size its I/O scheduler:
//!
//! ```yaml
//! disks:
//!   - mountpoint: /var/lib/rill
//!     read_iops: 123
//!     read_bandwidth: 456
//!     write_iops: 789
//!     write_bandwidth: 1011
//! ```
//!
//! Bandwidths are bytes per second, IOPS are 4 KiB operations per second. The
//! format is small enough to write and parse by hand; comments (`#`) carry the
//! extra figures iotune measured (fdatasync latency) without breaking readers.

use std::path::Path;

use crate::Error;

/// The measured properties of every disk rill uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoProperties {
    /// One entry per mountpoint.
    pub disks: Vec<DiskProperties>,
}

/// The measured properties of one disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskProperties {
    /// Mountpoint of the filesystem measured.
    pub mountpoint: String,
    /// Random 4 KiB read operations per second.
    pub read_iops: u64,
    /// Sequential read bandwidth, bytes per second.
    pub read_bandwidth: u64,
    /// Random 4 KiB write operations per second.
    pub write_iops: u64,
    /// Sequential write bandwidth, bytes per second.
    pub write_bandwidth: u64,
}

/// Renders the file; `comments` go first, one `# ` line each.
pub fn to_yaml(properties: &IoProperties, comments: &[String]) -> String {
    let mut out = String::new();
    for comment in comments {
        out.push_str(&format!("# {comment}\n"));
    }
    out.push_str("disks:\n");
    for disk in &properties.disks {
        out.push_str(&format!("  - mountpoint: {}\n", disk.mountpoint));
        out.push_str(&format!("    read_iops: {}\n", disk.read_iops));
        out.push_str(&format!("    read_bandwidth: {}\n", disk.read_bandwidth));
        out.push_str(&format!("    write_iops: {}\n", disk.write_iops));
        out.push_str(&format!("    write_bandwidth: {}\n", disk.write_bandwidth));
    }
    out
}

/// Parses the file's text; `path` is only used in error messages.
pub fn from_yaml(text: &str, path: &Path) -> Result<IoProperties, Error> {
    let error = |line: usize, message: String| Error::IoPropertiesFormat {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut properties = IoProperties::default();
    let mut seen_disks_key = false;
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw.split('#').next().unwrap_or("").trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if line.trim() == "disks:" {
            seen_disks_key = true;
            continue;
        }
        if !seen_disks_key {
            return Err(error(line_number, "expected `disks:` first".into()));
        }
        let trimmed = line.trim_start();
        let (starts_item, field) = match trimmed.strip_prefix("- ") {
            Some(rest) => (true, rest.trim_start()),
            None => (false, trimmed),
        };
        if starts_item {
            properties.disks.push(DiskProperties::default());
        }
        let Some(disk) = properties.disks.last_mut() else {
            return Err(error(line_number, "field outside a `- ` list item".into()));
        };
        let Some((key, value)) = field.split_once(':') else {
            return Err(error(
                line_number,
                format!("expected `key: value`, got {field:?}"),
            ));
        };
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| error(line_number, format!("{key}: not an integer: {value:?}")))
        };
        match key.trim() {
            "mountpoint" => disk.mountpoint = value.to_string(),
            "read_iops" => disk.read_iops = number()?,
            "read_bandwidth" => disk.read_bandwidth = number()?,
            "write_iops" => disk.write_iops = number()?,
            "write_bandwidth" => disk.write_bandwidth = number()?,
            // Unknown keys are allowed: newer Seastar files carry more fields.
            _ => {}
        }
    }
    if !seen_disks_key {
        return Err(error(1, "missing `disks:`".into()));
    }
    if let Some(disk) = properties.disks.iter().find(|d| d.mountpoint.is_empty()) {
        return Err(error(0, format!("a disk has no mountpoint: {disk:?}")));
    }
    Ok(properties)
}

/// Reads and parses an io-properties file.
pub fn load(path: &Path) -> Result<IoProperties, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: "reading",
        path: path.to_path_buf(),
        source,
    })?;
    from_yaml(&text, path)
}

/// Writes an io-properties file.
pub fn save(path: &Path, properties: &IoProperties, comments: &[String]) -> Result<(), Error> {
    std::fs::write(path, to_yaml(properties, comments)).map_err(|source| Error::Io {
        what: "writing",
        path: path.to_path_buf(),
        source,
    })
}

/// Where `rill serve` looks for the file when it is not named: the data
/// dir's `io-properties.yaml` (where `rill iotune --data-dir` puts it), then
/// this one.
pub const SYSTEM_FILE: &str = "/etc/rill/io-properties.yaml";

/// The file name `rill serve` looks for in the data dir.
pub const FILE_NAME: &str = "io-properties.yaml";

/// The entry for `data_dir`: the one whose mountpoint is the longest prefix
/// of it (by path components, after resolving links where the path exists),
/// else the only entry; `None` when several entries name other disks.
pub fn entry_for<'a>(properties: &'a IoProperties, data_dir: &Path) -> Option<&'a DiskProperties> {
    let dir = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    let best = properties
        .disks
        .iter()
        .filter(|d| dir.starts_with(&d.mountpoint) || data_dir.starts_with(&d.mountpoint))
        .max_by_key(|d| Path::new(&d.mountpoint).components().count());
    match best {
        Some(disk) => Some(disk),
        None if properties.disks.len() == 1 => properties.disks.first(),
        None => None,
    }
}

/// What `rill serve` uses: the file `explicit` names (it must exist), else
/// `<data_dir>/io-properties.yaml`, else [`SYSTEM_FILE`]; `Ok(None)` when
/// none exists. A file that does not parse, or that has no entry for the
/// data dir, is an error (the broker refuses to start on it).
pub fn find(
    explicit: Option<&Path>,
    data_dir: &Path,
) -> Result<Option<(std::path::PathBuf, DiskProperties)>, Error> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => {
            let candidates = [
                data_dir.join(FILE_NAME),
                Path::new(SYSTEM_FILE).to_path_buf(),
            ];
            match candidates.into_iter().find(|p| p.exists()) {
                Some(path) => path,
                None => return Ok(None),
            }
        }
    };
    let properties = load(&path)?;
    match entry_for(&properties, data_dir) {
        Some(disk) => Ok(Some((path, disk.clone()))),
        None => Err(Error::IoPropertiesFormat {
            line: 0,
            message: format!(
                "no entry's mountpoint contains the data dir {} (mountpoints: {})",
                data_dir.display(),
                properties
                    .disks
                    .iter()
                    .map(|d| d.mountpoint.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            path,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let properties = IoProperties {
            disks: vec![DiskProperties {
                mountpoint: "/var/lib/rill".into(),
                read_iops: 123,
                read_bandwidth: 456,
                write_iops: 789,
                write_bandwidth: 1011,
            }],
        };
        let text = to_yaml(&properties, &["fdatasync p50 100 us".into()]);
        assert!(text.starts_with("# fdatasync"));
        assert!(text.contains("  - mountpoint: /var/lib/rill\n    read_iops: 123\n"));
        assert_eq!(from_yaml(&text, Path::new("x")).ok(), Some(properties));
    }

    #[test]
    fn seastar_sample_with_extra_keys_and_two_disks() {
        let text = "disks:\n  - mountpoint: /a\n    read_iops: 1\n    read_bandwidth: 2\n    write_iops: 3\n    write_bandwidth: 4\n    read_saturation_length: 8\n  - mountpoint: \"/b\"\n    read_iops: 5\n    read_bandwidth: 6\n    write_iops: 7\n    write_bandwidth: 8\n";
        let parsed = from_yaml(text, Path::new("x")).expect("parses");
        assert_eq!(parsed.disks.len(), 2);
        assert_eq!(parsed.disks[1].mountpoint, "/b");
        assert_eq!(parsed.disks[1].write_bandwidth, 8);
    }

    fn disk(mountpoint: &str, write_bandwidth: u64) -> DiskProperties {
        DiskProperties {
            mountpoint: mountpoint.into(),
            write_bandwidth,
            ..DiskProperties::default()
        }
    }

    #[test]
    fn the_longest_mountpoint_holding_the_data_dir_wins() {
        let properties = IoProperties {
            disks: vec![
                disk("/", 1),
                disk("/nonexistent/data", 2),
                disk("/nonexistent", 3),
            ],
        };
        let entry = entry_for(&properties, Path::new("/nonexistent/data/rill"));
        assert_eq!(entry.map(|d| d.write_bandwidth), Some(2));
        // A prefix by components, not by characters.
        let entry = entry_for(&properties, Path::new("/nonexistent/database"));
        assert_eq!(entry.map(|d| d.write_bandwidth), Some(3));
        let only = IoProperties {
            disks: vec![disk("/elsewhere", 4)],
        };
        assert_eq!(
            entry_for(&only, Path::new("/x")).map(|d| d.write_bandwidth),
            Some(4)
        );
        let two = IoProperties {
            disks: vec![disk("/a", 1), disk("/b", 2)],
        };
        assert!(entry_for(&two, Path::new("/x")).is_none());
    }

    #[test]
    fn find_prefers_the_named_file_then_the_data_dir() {
        let dir = tempfile::tempdir().expect("temp dir");
        let named = dir.path().join("named.yaml");
        save(
            &named,
            &IoProperties {
                disks: vec![disk("/", 7)],
            },
            &[],
        )
        .expect("save");
        let found = find(Some(&named), dir.path()).expect("parses");
        assert_eq!(
            found.map(|(p, d)| (p, d.write_bandwidth)),
            Some((named.clone(), 7))
        );
        let in_dir = dir.path().join(FILE_NAME);
        save(
            &in_dir,
            &IoProperties {
                disks: vec![disk("/", 8)],
            },
            &[],
        )
        .expect("save");
        let found = find(None, dir.path()).expect("parses");
        assert_eq!(
            found.map(|(p, d)| (p, d.write_bandwidth)),
            Some((in_dir.clone(), 8))
        );
        std::fs::write(
            &in_dir,
            "disks:\n  - mountpoint: /\n    write_bandwidth: fast\n",
        )
        .expect("write");
        let error = find(None, dir.path()).expect_err("malformed");
        assert!(
            error.to_string().contains(&in_dir.display().to_string()),
            "{error}"
        );
        assert!(find(Some(&dir.path().join("missing.yaml")), dir.path()).is_err());
    }

    #[test]
    fn bad_files_are_errors() {
        for text in [
            "",
            "read_iops: 1\n",
            "disks:\n    read_iops: 1\n",
            "disks:\n  - mountpoint: /a\n    read_iops: lots\n",
            "disks:\n  - read_iops: 1\n",
        ] {
            assert!(
                from_yaml(text, Path::new("x")).is_err(),
                "{text:?} accepted"
            );
        }
    }
}
