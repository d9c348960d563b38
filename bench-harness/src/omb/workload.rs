//! The OpenMessaging Benchmark's workload and Kafka-driver YAML files, as
//! OMB reads them (its `Workload` class and `driver-kafka`'s config), with
//! OMB's field names and defaults. `translate` turns them into a rill-bench
//! workload.

use crate::error::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// OMB's key distributors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KeyDistributor {
    /// No key.
    #[default]
    NoKey,
    /// Keys in turn over the partitions.
    KeyRoundRobin,
    /// A random key per message.
    RandomNano,
}

fn one_f64() -> f64 {
    1.0
}

fn one_u64() -> u64 {
    1
}

/// An OMB workload file (`workloads/*.yaml` in OMB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OmbWorkload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    #[serde(default)]
    pub key_distributor: KeyDistributor,
    pub message_size: u32,
    #[serde(default)]
    pub use_randomized_payloads: bool,
    #[serde(default)]
    pub random_bytes_ratio: f64,
    #[serde(default)]
    pub randomized_payload_pool_size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_file: Option<String>,
    pub subscriptions_per_topic: u32,
    pub producers_per_topic: u32,
    pub consumer_per_subscription: u32,
    pub producer_rate: u64,
    #[serde(default, rename = "consumerBacklogSizeGB")]
    pub consumer_backlog_size_gb: u64,
    #[serde(default = "one_f64")]
    pub backlog_drain_ratio: f64,
    pub test_duration_minutes: u64,
    #[serde(default = "one_u64")]
    pub warmup_duration_minutes: u64,
}

/// OMB's Kafka driver file (`driver-kafka/*.yaml`): client configs as
/// Java properties text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OmbKafkaDriver {
    pub name: String,
    #[serde(default)]
    pub driver_class: String,
    #[serde(default = "one_i16")]
    pub replication_factor: i16,
    #[serde(default)]
    pub reset: bool,
    #[serde(default)]
    pub topic_config: String,
    #[serde(default)]
    pub common_config: String,
    #[serde(default)]
    pub producer_config: String,
    #[serde(default)]
    pub consumer_config: String,
}

fn one_i16() -> i16 {
    1
}

fn read_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path)?;
    serde_yaml::from_str(&text).map_err(|error| BenchError::WorkloadFile {
        path: path.display().to_string(),
        message: error.to_string(),
    })
}

impl OmbWorkload {
    /// Reads an OMB workload file.
    pub fn from_file(path: &Path) -> Result<OmbWorkload> {
        read_yaml(path)
    }

    /// The workload as OMB YAML.
    pub fn to_yaml(&self) -> Result<String> {
        serde_yaml::to_string(self).map_err(|error| BenchError::Workload(error.to_string()))
    }
}

impl OmbKafkaDriver {
    /// Reads an OMB Kafka driver file.
    pub fn from_file(path: &Path) -> Result<OmbKafkaDriver> {
        read_yaml(path)
    }

    /// `bootstrap.servers` of the common config, if given.
    pub fn bootstrap(&self) -> Option<String> {
        properties(&self.common_config).remove("bootstrap.servers")
    }
}

/// Java properties text (`key=value` lines, `#` comments) as a map.
pub fn properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('!'))
        .filter_map(|line| line.split_once(['=', ':']))
        .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
        .collect()
}
