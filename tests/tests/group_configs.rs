//! Group configs as Kafka 4.x has them: a KIP-848 or share group sets its
//! own session timeout and heartbeat interval (`consumer.*`, `share.*`),
//! within the broker's `group.consumer.min/max.*` and `group.share.min/max.*`
//! bounds, and its members are told that interval. Values outside the
//! bounds are refused with INVALID_CONFIG in Kafka's words, and a broker
//! whose own values break its bounds does not start.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, GroupId, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rill_tests::kafka::create_topic;
use rill_tests::{data_dir, Broker};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");
const INVALID_CONFIG: i16 = 40;
const GROUP_RESOURCE: i8 = 32;

/// IncrementalAlterConfigs SETs on group `group`: the resource's code and
/// message.
fn alter_group(addr: SocketAddr, group: &str, configs: &[(&str, &str)]) -> (i16, String) {
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = GROUP_RESOURCE;
    resource.resource_name = StrBytes::from_string(group.to_string());
    for (name, value) in configs {
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(name.to_string());
        config.value = Some(StrBytes::from_string(value.to_string()));
        resource.configs.push(config);
    }
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources.push(resource);
    let response: IncrementalAlterConfigsResponse =
        rill_tests::raw::request(addr, ApiKey::IncrementalAlterConfigs, 1, &request)
            .expect("IncrementalAlterConfigs");
    let answer = &response.responses[0];
    let message = answer.error_message.as_ref().map(|m| m.to_string());
    (answer.error_code, message.unwrap_or_default())
}

/// The heartbeat interval a new member of `group` is given, once the
/// coordinator answers (a KIP-848 group, or a share group).
fn interval_given(addr: SocketAddr, group: &str, share: bool) -> i32 {
    let group_id = GroupId(StrBytes::from_string(group.to_string()));
    let topics = Some(vec![TopicName(StrBytes::from_static_str("t"))]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, interval) = if share {
            let mut r = ShareGroupHeartbeatRequest::default();
            (r.group_id, r.subscribed_topic_names) = (group_id.clone(), topics.clone());
            r.member_id = StrBytes::from_static_str("share-member");
            let answer: ShareGroupHeartbeatResponse =
                rill_tests::raw::request(addr, ApiKey::ShareGroupHeartbeat, 1, &r)
                    .expect("ShareGroupHeartbeat");
            (answer.error_code, answer.heartbeat_interval_ms)
        } else {
            let mut r = ConsumerGroupHeartbeatRequest::default();
            (r.group_id, r.subscribed_topic_names) = (group_id.clone(), topics.clone());
            r.rebalance_timeout_ms = 30_000;
            let answer: ConsumerGroupHeartbeatResponse =
                rill_tests::raw::request(addr, ApiKey::ConsumerGroupHeartbeat, 0, &r)
                    .expect("ConsumerGroupHeartbeat");
            (answer.error_code, answer.heartbeat_interval_ms)
        };
        // 14-16: the coordinator is still loading its partition.
        if !(14..=16).contains(&code) || Instant::now() > deadline {
            assert_eq!(code, 0, "{group}: heartbeat refused");
            return interval;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Group `group`'s config `name` as DescribeConfigs gives it, with its
/// source (5: a default, 8: the group's own). Raw: the rdkafka crate
/// refuses a response with a group config's source.
fn described(addr: SocketAddr, group: &str, name: &str) -> (String, i8) {
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = GROUP_RESOURCE;
    resource.resource_name = StrBytes::from_string(group.to_string());
    resource.configuration_keys = Some(vec![StrBytes::from_string(name.to_string())]);
    let mut request = DescribeConfigsRequest::default();
    request.resources.push(resource);
    let response: DescribeConfigsResponse =
        rill_tests::raw::request(addr, ApiKey::DescribeConfigs, 4, &request)
            .expect("DescribeConfigs");
    let config = (response.results.first())
        .and_then(|r| r.configs.first())
        .unwrap_or_else(|| panic!("{name} described: {response:?}"));
    let value = config.value.as_ref().map(|v| v.to_string());
    (value.unwrap_or_default(), config.config_source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_own_timeouts_reach_its_members_within_the_brokers_bounds() {
    let dir = data_dir();
    let broker = Broker::start(RILL, dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "t", 1, &[]).await;
    let own = [
        ("consumer.heartbeat.interval.ms", "8000"),
        ("consumer.session.timeout.ms", "50000"),
    ];
    assert_eq!(alter_group(broker.addr, "own", &own).0, 0);
    let share_own = [("share.heartbeat.interval.ms", "9000")];
    assert_eq!(alter_group(broker.addr, "share-own", &share_own).0, 0);
    // Outside Kafka's default bounds: refused, in Kafka's words.
    for (config, reason) in [
        (
            ("consumer.session.timeout.ms", "6000"),
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            ("share.record.lock.duration.ms", "2000"),
            "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms",
        ),
        (
            ("share.heartbeat.interval.ms", "16000"),
            "share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms",
        ),
    ] {
        let answer = alter_group(broker.addr, "own", &[config]);
        assert_eq!(answer, (INVALID_CONFIG, reason.to_owned()), "{config:?}");
    }
    assert_eq!(interval_given(broker.addr, "own", false), 8_000);
    assert_eq!(interval_given(broker.addr, "plain", false), 5_000);
    assert_eq!(interval_given(broker.addr, "share-own", true), 9_000);
    assert_eq!(interval_given(broker.addr, "share-plain", true), 5_000);
    let set = described(broker.addr, "own", "consumer.session.timeout.ms");
    assert_eq!(set, ("50000".to_owned(), 8));
    let default = described(broker.addr, "own", "share.session.timeout.ms");
    assert_eq!(default, ("45000".to_owned(), 5));
}

#[test]
fn a_brokers_own_value_outside_its_bounds_stops_the_start() {
    // librdkafka's test suite sets the bound along with the value, as Kafka
    // needs; the value alone is refused.
    rill_tests::assert_settings_refused(
        RILL,
        data_dir().path(),
        "group.share.record.lock.duration.ms=1000\n",
        &[
            "group.share.record.lock.duration.ms",
            "group.share.min.record.lock.duration.ms",
        ],
    );
}
