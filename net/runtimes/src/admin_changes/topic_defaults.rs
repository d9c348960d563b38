//! The topic defaults in force on a broker: the config file's `log.*`
//! settings, then the cluster-wide dynamic broker configs (resource `""`),
//! then this broker's own (Kafka's precedence; a topic's override comes on
//! top). The rule itself is the kernel's
//! ([`kernel::topic_defaults`]: the shards' topic tables apply it too);
//! this is this broker's, from the image its shard last saw.

use crate::Shard;
use engine::TopicConfig;
pub use kernel::topic_defaults::{effective_topic_defaults, BrokerConfigs};

/// [`effective_topic_defaults`] of this broker, from the image it last saw.
pub fn topic_defaults(shard: &Shard) -> TopicConfig {
    let image = shard.runtime().view.image();
    effective_topic_defaults(&shard.config, image.broker_configs())
}
