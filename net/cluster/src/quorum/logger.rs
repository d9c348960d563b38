//! raft-rs logs through `slog`; rill logs through `tracing`. This drain
//! forwards each slog record to a `tracing` event (target `raft`) with its
//! key-value pairs folded into the message, so raft-rs's elections and
//! rejections show up beside the broker's own logs and obey its filter. We
//! build raft-rs without its default slog terminal logger.

use std::fmt::{self, Write as _};

use slog::{Drain, Level, OwnedKVList, Record, KV};

/// A root slog logger that forwards to `tracing`, tagged with the node id.
pub fn raft_logger(node_id: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!("raft_id" => node_id))
}

/// The slog drain that forwards to `tracing`.
#[derive(Debug, Clone, Copy)]
pub struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        // Formatting costs; skip it when tracing would drop the event.
        let enabled = match record.level() {
            Level::Critical | Level::Error => {
                tracing::enabled!(target: "raft", tracing::Level::ERROR)
            }
            Level::Warning => tracing::enabled!(target: "raft", tracing::Level::WARN),
            // raft-rs's info lines narrate every election step; the broker
            // logs the outcomes itself, so they are debug here.
            Level::Info => tracing::enabled!(target: "raft", tracing::Level::DEBUG),
            Level::Debug => tracing::enabled!(target: "raft", tracing::Level::DEBUG),
            Level::Trace => tracing::enabled!(target: "raft", tracing::Level::TRACE),
        };
        if !enabled {
            return Ok(());
        }
        let mut pairs = PairWriter(String::new());
        // A pair that fails to format is left out; the message still goes.
        let _ = record.kv().serialize(record, &mut pairs);
        let _ = values.serialize(record, &mut pairs);
        let message = record.msg();
        let pairs = pairs.0;
        match record.level() {
            Level::Critical | Level::Error => tracing::error!(target: "raft", "{message}{pairs}"),
            Level::Warning => tracing::warn!(target: "raft", "{message}{pairs}"),
            Level::Info => tracing::debug!(target: "raft", "{message}{pairs}"),
            Level::Debug => tracing::debug!(target: "raft", "{message}{pairs}"),
            Level::Trace => tracing::trace!(target: "raft", "{message}{pairs}"),
        }
        Ok(())
    }
}

/// Writes slog's key-value pairs as ` key=value`.
struct PairWriter(String);

impl slog::Serializer for PairWriter {
    fn emit_arguments(&mut self, key: slog::Key, value: &fmt::Arguments<'_>) -> slog::Result {
        write!(self.0, " {key}={value}").map_err(slog::Error::Fmt)
    }
}
