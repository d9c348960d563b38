//! `rill serve`'s I/O sizes: the io-properties file `rill iotune` wrote is
//! found and read by the caller (the `rill` binary, with the tuning crate,
//! which stands beside this crate, not below it) through an
//! [`IoPropertiesLookup`]; here its figures become the engine's sizes (see
//! [`engine::io_sizing`]), and one start line says each size and where it
//! came from.

use crate::config::BrokerConfig;
use engine::io_sizing::{self, DiskFigures, IoSizing};
use std::path::{Path, PathBuf};

/// The entry of an io-properties file that covers the data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredDisk {
    /// The file it was read from.
    pub file: PathBuf,
    /// The entry's mountpoint.
    pub mountpoint: String,
    /// Its figures.
    pub figures: DiskFigures,
}

/// (the file named by `--io-properties` / `rill.io.properties.file`, the
/// data dir) → the entry for the data dir, `Ok(None)` when no file exists
/// where rill looks, `Err(message)` when one exists but is unusable.
pub type IoPropertiesLookup = dyn Fn(Option<&Path>, &Path) -> Result<Option<MeasuredDisk>, String>;

/// A lookup that never finds a file (the built-in sizes).
pub fn no_io_properties(_: Option<&Path>, _: &Path) -> Result<Option<MeasuredDisk>, String> {
    Ok(None)
}

/// Sizes `config.engine`'s I/O from the file `lookup` finds, and logs the
/// one line that says so. `Err`: the file is unusable (the broker refuses to
/// start, as for any bad setting).
pub fn apply(config: &mut BrokerConfig, lookup: &IoPropertiesLookup) -> Result<(), String> {
    let measured = lookup(config.io_properties_file.as_deref(), &config.data_dir)?;
    let sizing = io_sizing::derive(measured.as_ref().map(|m| &m.figures), config.cores);
    apply_sizing(config, sizing);
    let source = match &measured {
        Some(m) => format!("{} (mountpoint {})", m.file.display(), m.mountpoint),
        None => format!(
            "defaults (no io-properties.yaml in {} or /etc/rill; `rill iotune` makes one)",
            config.data_dir.display()
        ),
    };
    let given = if config.stream_min_bytes_given {
        " (rill.stream_min_bytes)"
    } else {
        ""
    };
    tracing::info!(
        "io sizes: inflight_write_bytes={} per shard, stream_chunk_bytes={}{given}, read_ahead_bytes={} from {source}",
        sizing.inflight_write_bytes,
        config.engine.stream_min_bytes,
        sizing.read_ahead_bytes,
    );
    Ok(())
}

/// Puts `sizing` in the engine's config; a `rill.stream_min_bytes` given
/// explicitly keeps its value.
fn apply_sizing(config: &mut BrokerConfig, sizing: IoSizing) {
    config.engine.io = sizing;
    if !config.stream_min_bytes_given {
        config.engine.stream_min_bytes = sizing.stream_chunk_bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(write_bandwidth: u64) -> MeasuredDisk {
        MeasuredDisk {
            file: PathBuf::from("/x/io-properties.yaml"),
            mountpoint: "/".into(),
            figures: DiskFigures {
                read_bandwidth: 4_000_000_000,
                read_iops: 500_000,
                write_bandwidth,
                write_iops: 250_000,
            },
        }
    }

    #[test]
    fn the_file_sizes_the_engine_unless_the_chunk_is_given() {
        let mut config = BrokerConfig::defaults();
        config.cores = 2;
        apply(&mut config, &|_, _| Ok(Some(measured(2_000_000_000)))).expect("applies");
        let expected = io_sizing::derive(Some(&measured(2_000_000_000).figures), 2);
        assert_eq!(config.engine.io, expected);
        assert_eq!(config.engine.stream_min_bytes, expected.stream_chunk_bytes);

        let mut given = BrokerConfig::defaults();
        given.engine.stream_min_bytes = 12_345;
        given.stream_min_bytes_given = true;
        apply(&mut given, &|_, _| Ok(Some(measured(2_000_000_000)))).expect("applies");
        assert_eq!(given.engine.stream_min_bytes, 12_345);
    }

    #[test]
    fn no_file_keeps_the_defaults_and_a_bad_one_is_an_error() {
        let mut config = BrokerConfig::defaults();
        apply(&mut config, &no_io_properties).expect("applies");
        assert_eq!(config.engine.io, IoSizing::default());
        assert_eq!(
            config.engine.stream_min_bytes,
            io_sizing::defaults::STREAM_CHUNK_BYTES
        );
        let error = apply(&mut config, &|_, _| Err("bad.yaml:2: nope".into()));
        assert_eq!(error, Err("bad.yaml:2: nope".to_string()));
    }
}
