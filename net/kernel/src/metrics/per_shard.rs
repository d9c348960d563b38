//! Series with one sample per shard (label `shard`), read from each shard's
//! [`ShardMetrics`] by a table of families and readers.

use super::registry::{Declared, Family, Value};
use super::{ShardMetrics, Shards};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// The label of a per-shard series.
pub(super) const SHARD: &[&str] = &["shard"];

/// One per-shard family and how to read it from a shard's metrics.
#[derive(Debug)]
pub(super) struct PerShard {
    pub(super) family: Family,
    pub(super) read: fn(&ShardMetrics) -> i64,
}

impl PerShard {
    pub(super) const fn counter(
        name: &'static str,
        help: &'static str,
        read: fn(&ShardMetrics) -> i64,
    ) -> Self {
        PerShard {
            family: Family::counter(name, help, SHARD),
            read,
        }
    }

    pub(super) const fn gauge(
        name: &'static str,
        help: &'static str,
        read: fn(&ShardMetrics) -> i64,
    ) -> Self {
        PerShard {
            family: Family::gauge(name, help, SHARD),
            read,
        }
    }
}

/// A collector of one table of per-shard families.
#[derive(Debug)]
pub(super) struct ShardTable {
    pub(super) shards: Shards,
    pub(super) table: &'static [PerShard],
}

impl Collector for ShardTable {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        for series in self.table {
            let samples = self
                .shards
                .iter()
                .map(|(shard, m)| (vec![shard.to_string()], Value::Int((series.read)(m))));
            series.family.encode(&mut encoder, samples)?;
        }
        Ok(())
    }
}

impl Declared for ShardTable {
    fn families(&self) -> Vec<&'static Family> {
        self.table.iter().map(|series| &series.family).collect()
    }
}
