//! Command-line workload options: a built-in name or a file, then per-field
//! overrides.

use crate::error::Result;
use crate::workload::{
    parse_acks, parse_bytes, Assignor, Compression, GroupProtocol, KeyDistribution, MessageSize,
    StartOffset, Workload,
};
use clap::Args;
use std::path::PathBuf;

/// Workload selection and overrides shared by `run` and `compare`.
#[derive(Debug, Clone, Default, Args)]
pub struct WorkloadArgs {
    /// Built-in workload: 1-topic-16-partitions-1kb, max-rate-100b, backlog-drain.
    #[arg(long)]
    pub workload: Option<String>,
    /// YAML (.yaml/.yml) or TOML (.toml) workload file.
    #[arg(long)]
    pub workload_file: Option<PathBuf>,
    #[arg(long)]
    pub topics: Option<u32>,
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Replicas per partition (CreateTopics replication_factor).
    #[arg(long)]
    pub replication_factor: Option<i16>,
    /// Topic config min.insync.replicas (acks=all is refused below it).
    #[arg(long)]
    pub min_insync_replicas: Option<u32>,
    /// Message size: `1024`, `1kb`, or a uniform range `100..2000`.
    #[arg(long)]
    pub message_size: Option<String>,
    #[arg(long, value_enum)]
    pub keys: Option<KeyArg>,
    /// Distinct keys for `--keys random` and `zipf`.
    #[arg(long)]
    pub key_space: Option<u64>,
    #[arg(long)]
    pub producers: Option<u32>,
    #[arg(long)]
    pub consumers: Option<u32>,
    /// Total target rate in messages per second; 0 = as fast as possible.
    #[arg(long)]
    pub rate: Option<u64>,
    /// all, 1 or 0.
    #[arg(long)]
    pub acks: Option<String>,
    #[arg(long, value_enum)]
    pub compression: Option<CompressionArg>,
    /// Batch size, e.g. 128kb.
    #[arg(long)]
    pub batch_size: Option<String>,
    #[arg(long)]
    pub linger_ms: Option<u64>,
    #[arg(long)]
    pub max_in_flight: Option<u32>,
    #[arg(long)]
    pub warmup_s: Option<u64>,
    #[arg(long)]
    pub duration_s: Option<u64>,
    #[arg(long)]
    pub backlog_mb: Option<u64>,
    #[arg(long)]
    pub from_earliest: bool,
    #[arg(long)]
    pub topic_prefix: Option<String>,
    /// Consumers join this consumer group.
    #[arg(long)]
    pub consumer_group: Option<String>,
    /// Client-side assignor of a classic group: range, roundrobin, sticky.
    #[arg(long)]
    pub assignor: Option<String>,
    /// classic, consumer (KIP-848) or share (KIP-932 share group).
    #[arg(long, value_enum)]
    pub group_protocol: Option<GroupProtocolArg>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GroupProtocolArg {
    Classic,
    Consumer,
    Share,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KeyArg {
    None,
    RoundRobin,
    Random,
    Zipf,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl From<KeyArg> for KeyDistribution {
    fn from(arg: KeyArg) -> Self {
        match arg {
            KeyArg::None => KeyDistribution::None,
            KeyArg::RoundRobin => KeyDistribution::RoundRobin,
            KeyArg::Random => KeyDistribution::Random,
            KeyArg::Zipf => KeyDistribution::Zipf,
        }
    }
}

impl From<CompressionArg> for Compression {
    fn from(arg: CompressionArg) -> Self {
        match arg {
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
}

impl From<GroupProtocolArg> for GroupProtocol {
    fn from(arg: GroupProtocolArg) -> Self {
        match arg {
            GroupProtocolArg::Classic => GroupProtocol::Classic,
            GroupProtocolArg::Consumer => GroupProtocol::Consumer,
            GroupProtocolArg::Share => GroupProtocol::Share,
        }
    }
}

impl WorkloadArgs {
    /// Built-in or file (or the default), then overrides, then validation.
    pub fn resolve(&self) -> Result<Workload> {
        let mut workload = match (&self.workload, &self.workload_file) {
            (_, Some(path)) => Workload::from_file(path)?,
            (Some(name), None) => Workload::builtin(name)?,
            (None, None) => Workload::default(),
        };
        // In flag order, so that the first bad flag is the one reported.
        self.apply_layout(&mut workload)?;
        self.apply_producing(&mut workload)?;
        self.apply_consuming(&mut workload)?;
        workload.validate()?;
        Ok(workload)
    }

    /// Overrides of the topics, messages, keys and client counts.
    fn apply_layout(&self, workload: &mut Workload) -> Result<()> {
        if let Some(v) = self.topics {
            workload.topics = v;
        }
        if let Some(v) = self.partitions {
            workload.partitions_per_topic = v;
        }
        if let Some(v) = self.replication_factor {
            workload.replication_factor = v;
        }
        if let Some(v) = self.min_insync_replicas {
            workload.min_insync_replicas = Some(v);
        }
        if let Some(v) = &self.message_size {
            workload.message_size = MessageSize::parse(v)?;
        }
        if let Some(v) = self.keys {
            workload.key_distribution = v.into();
        }
        if let Some(v) = self.key_space {
            workload.key_space = v;
        }
        if let Some(v) = self.producers {
            workload.producers_per_topic = v;
        }
        if let Some(v) = self.consumers {
            workload.consumers_per_topic = v;
        }
        if let Some(v) = &self.topic_prefix {
            workload.topic_prefix = v.clone();
        }
        Ok(())
    }

    /// Overrides of the producers' rate, acks, compression and batching.
    fn apply_producing(&self, workload: &mut Workload) -> Result<()> {
        if let Some(v) = self.rate {
            workload.producer_rate_msgs_per_s = v;
        }
        if let Some(v) = &self.acks {
            workload.acks = parse_acks(v)?;
        }
        if let Some(v) = self.compression {
            workload.compression = v.into();
        }
        if let Some(v) = &self.batch_size {
            workload.batch_size_bytes = parse_bytes(v)? as u32;
        }
        if let Some(v) = self.linger_ms {
            workload.linger_ms = v;
        }
        if let Some(v) = self.max_in_flight {
            workload.max_in_flight_per_producer = v;
        }
        Ok(())
    }

    /// Overrides of the run's phases and of how the consumers read.
    fn apply_consuming(&self, workload: &mut Workload) -> Result<()> {
        if let Some(v) = self.warmup_s {
            workload.warmup_duration_s = v;
        }
        if let Some(v) = self.duration_s {
            workload.test_duration_s = v;
        }
        if let Some(v) = self.backlog_mb {
            workload.consumer_backlog_size_mb = v;
        }
        if self.from_earliest {
            workload.consumer_start = StartOffset::Earliest;
        }
        if let Some(v) = &self.consumer_group {
            workload.consumer_group = Some(v.clone());
        }
        if let Some(v) = &self.assignor {
            workload.assignor = Assignor::from_name(v)?;
        }
        if let Some(v) = self.group_protocol {
            workload.group_protocol = v.into();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_on_top_of_builtin() {
        let args = WorkloadArgs {
            workload: Some("max-rate-100b".into()),
            partitions: Some(3),
            acks: Some("1".into()),
            compression: Some(CompressionArg::Zstd),
            duration_s: Some(3),
            message_size: Some("200..300".into()),
            replication_factor: Some(3),
            min_insync_replicas: Some(2),
            ..WorkloadArgs::default()
        };
        let workload = args.resolve().unwrap();
        assert_eq!(workload.name, "max-rate-100b");
        assert_eq!(workload.partitions_per_topic, 3);
        assert_eq!(workload.acks, 1);
        assert_eq!(workload.compression, Compression::Zstd);
        assert_eq!(workload.test_duration_s, 3);
        assert_eq!(workload.replication_factor, 3);
        assert_eq!(workload.min_insync_replicas, Some(2));
        assert_eq!(workload.producer_rate_msgs_per_s, 0); // from the built-in
        assert_eq!(
            workload.message_size,
            MessageSize::Uniform {
                min_bytes: 200,
                max_bytes: 300
            }
        );
    }

    #[test]
    fn file_workload_and_invalid_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.toml");
        std::fs::write(&path, "name = \"f\"\ntopics = 2\n").unwrap();
        let args = WorkloadArgs {
            workload_file: Some(path),
            ..WorkloadArgs::default()
        };
        assert_eq!(args.resolve().unwrap().topics, 2);
        let bad = WorkloadArgs {
            acks: Some("7".into()),
            ..WorkloadArgs::default()
        };
        assert!(bad.resolve().is_err());
    }
}
