//! Every broker setting rill reads, as data: name, type, default and what it
//! does. `rill docs config` writes `docs/configuration.md` from this table
//! and from the engine's topic-config table
//! (`engine::config::kafka_topic_configs`), whose broker synonyms
//! (`log.retention.ms`, `log.segment.bytes`, ...) are the broker-wide topic
//! defaults and are not repeated here.
//!
//! The table is kept true by tests: every key the parser matches by name is
//! in it (a scan of the parser's source), every key in it is accepted with
//! its example value, and a default given as a value leaves a default
//! broker unchanged when set explicitly.

/// A setting's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDefault {
    /// The value a broker without the key has: setting it changes nothing.
    Value(&'static str),
    /// What the broker does without the key, in words (no single value
    /// stands for it, or it depends on the host or other keys).
    Implied(&'static str),
}

/// The part of the broker a setting belongs to (a section of the reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeySection {
    /// Identity, listeners, topic creation, request limits.
    Broker,
    /// The metadata quorum and broker membership.
    Cluster,
    /// The group coordinator and the internal topics.
    Groups,
    /// Storage and the log cleaner (beyond the topic defaults).
    Storage,
    /// Connection limits.
    Connections,
    /// TLS.
    Tls,
    /// SASL.
    Sasl,
    /// ACLs.
    Authorizer,
    /// Tiered storage (KIP-405).
    Tiered,
    /// rill's own tuning (`rill.*`).
    Rill,
}

impl KeySection {
    /// Every section, in the reference's order.
    pub const ALL: [KeySection; 10] = [
        KeySection::Broker,
        KeySection::Cluster,
        KeySection::Groups,
        KeySection::Storage,
        KeySection::Connections,
        KeySection::Tls,
        KeySection::Sasl,
        KeySection::Authorizer,
        KeySection::Tiered,
        KeySection::Rill,
    ];

    /// The section's heading.
    pub fn title(self) -> &'static str {
        match self {
            KeySection::Broker => "Broker, listeners and topic creation",
            KeySection::Cluster => "Cluster membership and the metadata quorum",
            KeySection::Groups => "Consumer groups and internal topics",
            KeySection::Storage => "Storage and the log cleaner",
            KeySection::Connections => "Connection limits",
            KeySection::Tls => "TLS",
            KeySection::Sasl => "SASL",
            KeySection::Authorizer => "ACLs",
            KeySection::Tiered => "Tiered storage",
            KeySection::Rill => "rill's own tuning",
        }
    }
}

/// One broker setting.
#[derive(Debug, Clone, Copy)]
pub struct BrokerKey {
    /// The key, by Kafka's name where Kafka has one. `<listener>` and
    /// `<mechanism>` stand for a listener's name and a SASL mechanism.
    pub name: &'static str,
    /// Its section of the reference.
    pub section: KeySection,
    /// The value's type, as a user writes it.
    pub kind: &'static str,
    /// Its default.
    pub default: KeyDefault,
    /// A valid value (the tests set it).
    pub example: &'static str,
    /// What it does, and where rill differs from Kafka.
    pub meaning: &'static str,
}

const fn key(
    name: &'static str,
    section: KeySection,
    kind: &'static str,
    default: KeyDefault,
    example: &'static str,
    meaning: &'static str,
) -> BrokerKey {
    BrokerKey {
        name,
        section,
        kind,
        default,
        example,
        meaning,
    }
}

use KeyDefault::{Implied, Value};
use KeySection::*;

/// Every broker setting rill reads by name (the topic defaults aside).
pub const BROKER_KEYS: &[BrokerKey] = &[
    key("node.id", Broker, "int", Value("0"), "1", "This node's id (`broker.id` is a synonym)."),
    key("broker.id", Broker, "int", Value("0"), "1", "Synonym of `node.id`."),
    key("cluster.id", Broker, "string", Value("rill-cluster-0000000000"), "prod-1", "The cluster id clients see in Metadata and DescribeCluster (`rill.cluster.id` is a synonym). Kafka reads it from `kafka-storage format`; rill from the file."),
    key("rill.cluster.id", Broker, "string", Value("rill-cluster-0000000000"), "prod-1", "Synonym of `cluster.id`."),
    key("log.dirs", Broker, "comma list of paths", Value("./rill-data"), "/var/lib/rill/a,/var/lib/rill/b", "Data dirs; partitions are spread over them, and the first also keeps the broker-wide files. `--data-dir` overrides it."),
    key("log.dir", Broker, "comma list of paths", Value("./rill-data"), "/var/lib/rill", "Synonym of `log.dirs`."),
    key("listeners", Broker, "comma list of NAME://host:port", Value("PLAINTEXT://0.0.0.0:9092"), "PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093", "Client listeners. The first one is the one brokers reach each other on and must be PLAINTEXT. `--listen` overrides the first."),
    key("advertised.listeners", Broker, "comma list of NAME://host:port", Implied("each listener's address; for a wildcard bind, the host's name"), "PLAINTEXT://broker1.example:9092", "What Metadata tells clients to connect to, per listener."),
    key("listener.security.protocol.map", Broker, "comma list of NAME:PROTOCOL", Implied("a listener named after a protocol uses it"), "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL", "The security protocol of each named listener."),
    key("controller.listener.names", Broker, "comma list of names", Implied("none"), "CONTROLLER", "Listeners that serve the metadata quorum rather than clients. A voter listens where `controller.quorum.voters` says; a controller that joins a running quorum (AddRaftVoter) listens on its own controller listener in `listeners` (`CONTROLLER` when this is unset), or `--controller-listener`."),
    key("auto.create.topics.enable", Broker, "bool", Value("true"), "false", "Create a topic a client asks for in a Metadata request that allows it."),
    key("delete.topic.enable", Broker, "bool", Value("true"), "false", "Whether DeleteTopics is allowed."),
    key("transaction.partition.verification.enable", Broker, "bool", Value("true"), "false", "Before a transaction's first batch is written to a partition, its leader asks the transaction coordinator whether the partition is in the ongoing transaction (KIP-890 part 1), so a produce that arrives after its transaction ended is refused (INVALID_TXN_STATE) instead of opening a transaction nobody ends. Clients of transactions v2 (Produce v12) have the partition added this way whatever the setting."),
    key("num.partitions", Broker, "int, at least 1", Value("1"), "3", "Partitions of an auto-created topic."),
    key("default.replication.factor", Broker, "int", Value("1"), "3", "Replicas of an auto-created topic or of one created without a factor."),
    key("socket.request.max.bytes", Broker, "bytes", Value("104857600"), "52428800", "The largest request frame accepted; a larger one closes the connection."),
    key("max.connections", Broker, "int", Value("2147483647"), "10000", "Open connections allowed across the broker (also capped by the descriptor limit)."),
    key("max.incremental.fetch.session.cache.slots", Broker, "int, at least 0", Value("1000"), "2", "Incremental fetch sessions (KIP-227) the broker holds; rill splits them evenly over its shards, a session living on the shard of its connection. 0: every fetch is sessionless."),
    key("quota.window.num", Broker, "int, at least 1", Value("11"), "11", "Samples in a client quota's rate window."),
    key("quota.window.size.seconds", Broker, "int, at least 1", Value("1"), "1", "Length of one quota sample."),
    key("telemetry.max.bytes", Broker, "bytes, at least 1", Value("1048576"), "1048576", "The largest client telemetry push (KIP-714) accepted, as sent (compressed); a larger one gets TELEMETRY_TOO_LARGE."),
    key("controller.quorum.voters", Cluster, "comma list of id@host:port", Implied("none: a single node that is its own quorum"), "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097", "The metadata quorum's first voters and their controller listeners (`--controller-quorum-voters` overrides it). Once the metadata log exists, it records the voters: AddRaftVoter and RemoveRaftVoter change them without a config change."),
    key("controller.quorum.bootstrap.servers", Cluster, "comma list of host:port", Implied("none"), "127.0.0.1:9093,127.0.0.1:9095", "Kafka 3.9's way to find a dynamic quorum. rill finds a quorum of several controllers by `controller.quorum.voters`, ids included, and changes the voters with AddRaftVoter / RemoveRaftVoter: several servers here and no voters stop the start with that advice. One server (Kafka's single-node sample) is a single node; beside the voters the key is ignored."),
    key("process.roles", Cluster, "broker and/or controller", Implied("a voter is broker,controller; any other node a broker"), "broker,controller", "This node's roles. A voter may be controller-only (it votes but holds no partition and is not listed as a broker); a broker-only node observes the quorum."),
    key("broker.rack", Cluster, "string", Implied("none"), "rack-a", "The rack this broker registers with, shown in Metadata and DescribeCluster read by rack-aware assignors, used to spread a new partition's replicas over racks when every broker has one, and matched against a consumer's `client.rack` by `replica.selector.class`."),
    key("replica.selector.class", Cluster, "class name", Implied("none: consumers read from the leader"), "org.apache.kafka.common.replica.RackAwareReplicaSelector", "Fetch from the closest replica (KIP-392). With Kafka's `RackAwareReplicaSelector`, a leader tells a consumer whose `client.rack` matches a follower's `broker.rack` (and not its own) to read from that follower, which serves it up to its high watermark; the follower must be in the ISR and hold the offset. `LeaderSelector` or none: always the leader. Any other class stops the start."),
    key("cordoned.log.dirs", Cluster, "comma list of paths, or *", Implied("none"), "/var/lib/rill/b", "Data dirs that keep their partitions but get no new ones (KIP-1066); `*` cordons them all, and a broker whose dirs are all cordoned gets no new replicas. Dynamic per broker or for every broker (`kafka-configs.sh --entity-type brokers --alter --add-config cordoned.log.dirs=*`)."),
    key("leader.replication.throttled.rate", Cluster, "bytes/s", Value("9223372036854775807"), "10485760", "The most bytes/s this broker sends, as a leader, to followers out of the ISR of the partitions a topic's `leader.replication.throttled.replicas` names on it (KIP-73; what `kafka-reassign-partitions.sh --throttle` sets). In-sync followers are never throttled. Dynamic per broker or for every broker."),
    key("follower.replication.throttled.rate", Cluster, "bytes/s", Value("9223372036854775807"), "10485760", "The most bytes/s this broker fetches, as a follower out of the ISR, of the partitions a topic's `follower.replication.throttled.replicas` names on it (KIP-73). Dynamic per broker or for every broker."),
    key("broker.heartbeat.interval.ms", Cluster, "ms", Value("500"), "500", "How often a broker heartbeats to the controller (Kafka: 2000; rill fails over faster)."),
    key("broker.session.timeout.ms", Cluster, "ms", Value("2500"), "2500", "How long the controller waits for a heartbeat before it fences a broker (Kafka: 9000)."),
    key("server.max.startup.time.ms", Cluster, "ms", Value("9223372036854775807"), "600000", "How long a starting broker waits to be registered and unfenced by the active controller, which it is once it has caught up with the metadata log, before it stops with an error. Until then its client listeners are bound but it answers no request (connections wait in the kernel's queue), as a Kafka broker enables request processing only once unfenced. The default is Kafka's: no limit."),
    key("metadata.log.dir", Cluster, "path", Implied("the first data dir"), "/var/lib/rill/meta", "Where the metadata log lives. Put it on a disk of its own to keep it writable when the data disks fill."),
    key("auto.leader.rebalance.enable", Cluster, "bool", Value("true"), "false", "Move leadership back to preferred replicas (see `leader.imbalance.per.broker.percentage`)."),
    key("leader.imbalance.check.interval.seconds", Cluster, "s, at least 1", Value("300"), "60", "How often the controller checks for leadership imbalance."),
    key("leader.imbalance.per.broker.percentage", Cluster, "percent, 0 to 100", Value("10"), "20", "Per broker: the share of the partitions whose preferred (first) replica it is, but which another broker leads, above which the check moves them back to it (those where it is alive and in sync). 0: any one moves."),
    key("group.initial.rebalance.delay.ms", Groups, "ms", Value("3000"), "0", "How long a new classic group waits for more members before its first rebalance."),
    key("group.min.session.timeout.ms", Groups, "ms", Value("6000"), "6000", "Smallest session timeout a classic consumer may ask for."),
    key("group.max.session.timeout.ms", Groups, "ms", Value("1800000"), "1800000", "Largest session timeout a classic consumer may ask for."),
    key("group.max.size", Groups, "int", Value("2147483647"), "1000", "Members allowed in one group."),
    key("group.consumer.session.timeout.ms", Groups, "ms", Value("45000"), "45000", "Session timeout of KIP-848 (consumer protocol) members."),
    key("group.consumer.heartbeat.interval.ms", Groups, "ms", Value("5000"), "5000", "Heartbeat interval given to KIP-848 members."),
    key("group.consumer.migration.policy", Groups, "disabled, upgrade, downgrade or bidirectional", Value("bidirectional"), "upgrade", "Online moves of a live consumer group between the classic protocol and KIP-848: `upgrade` lets a KIP-848 member join a classic group (which turns KIP-848 and keeps hosting its classic members), `downgrade` turns a KIP-848 group whose KIP-848 members are all gone back to classic, `bidirectional` allows both, `disabled` neither (a classic member may not join a KIP-848 group then)."),
    key("group.consumer.min.session.timeout.ms", Groups, "ms", Value("45000"), "45000", "Smallest `consumer.session.timeout.ms` a KIP-848 group may set for itself."),
    key("group.consumer.max.session.timeout.ms", Groups, "ms", Value("60000"), "60000", "Largest `consumer.session.timeout.ms` a KIP-848 group may set for itself."),
    key("group.consumer.min.heartbeat.interval.ms", Groups, "ms", Value("5000"), "5000", "Smallest `consumer.heartbeat.interval.ms` a KIP-848 group may set for itself."),
    key("group.consumer.max.heartbeat.interval.ms", Groups, "ms", Value("15000"), "15000", "Largest `consumer.heartbeat.interval.ms` a KIP-848 group may set for itself."),
    key("group.share.session.timeout.ms", Groups, "ms", Value("45000"), "45000", "Session timeout of share group (KIP-932) members."),
    key("group.share.heartbeat.interval.ms", Groups, "ms", Value("5000"), "5000", "Heartbeat interval given to share group members."),
    key("group.share.min.session.timeout.ms", Groups, "ms", Value("45000"), "45000", "Smallest `share.session.timeout.ms` a share group may set for itself."),
    key("group.share.max.session.timeout.ms", Groups, "ms", Value("60000"), "60000", "Largest `share.session.timeout.ms` a share group may set for itself."),
    key("group.share.min.heartbeat.interval.ms", Groups, "ms", Value("5000"), "5000", "Smallest `share.heartbeat.interval.ms` a share group may set for itself."),
    key("group.share.max.heartbeat.interval.ms", Groups, "ms", Value("15000"), "15000", "Largest `share.heartbeat.interval.ms` a share group may set for itself."),
    key("group.share.max.size", Groups, "", Value("200"), "200", "Most members of one share group."),
    key("group.share.record.lock.duration.ms", Groups, "ms", Value("30000"), "30000", "How long a share consumer holds a record it was given before it goes to another."),
    key("group.share.min.record.lock.duration.ms", Groups, "ms", Value("15000"), "15000", "Shortest `share.record.lock.duration.ms` a share group may set for itself."),
    key("group.share.max.record.lock.duration.ms", Groups, "ms", Value("60000"), "60000", "Longest `share.record.lock.duration.ms` a share group may set for itself."),
    key("group.share.delivery.count.limit", Groups, "", Value("5"), "5", "Deliveries of one record to a share group before it is archived (2 to 10)."),
    key("group.share.delivery.attempt.limit", Groups, "", Value("5"), "5", "rill's first name for `group.share.delivery.count.limit`, still read."),
    key("group.share.partition.max.record.locks", Groups, "", Value("2000"), "2000", "Records of one partition a share group may hold in flight at once."),
    key("group.share.max.share.sessions", Groups, "", Value("2000"), "2000", "Share sessions (KIP-932) the broker keeps, split over its shards."),
    key("offsets.retention.minutes", Groups, "minutes", Value("10080"), "1440", "How long committed offsets of an empty group are kept."),
    key("offsets.retention.check.interval.ms", Groups, "ms", Value("600000"), "600000", "How often expired offsets are looked for."),
    key("offsets.topic.replication.factor", Groups, "int, at least 1", Value("3"), "3", "Replicas of `__consumer_offsets`, capped by the live brokers at creation."),
    key("transaction.state.log.replication.factor", Groups, "int, at least 1", Value("3"), "3", "Replicas of `__transaction_state` (one setting with the above in rill)."),
    key("offsets.topic.num.partitions", Groups, "int", Value("50"), "50", "Partitions of `__consumer_offsets`."),
    key("offsets.topic.segment.bytes", Groups, "bytes", Value("104857600"), "104857600", "`segment.bytes` of `__consumer_offsets`."),
    key("transaction.state.log.segment.bytes", Groups, "bytes", Value("104857600"), "104857600", "`segment.bytes` of `__transaction_state`."),
    key("log.retention.minutes", Storage, "minutes", Implied("see log.retention.ms"), "10080", "Broker-wide `retention.ms` in minutes (`log.retention.ms` wins)."),
    key("log.retention.hours", Storage, "hours", Implied("168, see log.retention.ms"), "168", "Broker-wide `retention.ms` in hours (`log.retention.ms` and `log.retention.minutes` win)."),
    key("log.roll.hours", Storage, "hours", Implied("168, see log.roll.ms"), "168", "Broker-wide `segment.ms` in hours (`log.roll.ms` wins)."),
    key("log.cleaner.dedupe.buffer.size", Storage, "bytes", Value("134217728"), "134217728", "Memory for the compaction cleaner's key map."),
    key("log.cleaner.io.max.bytes.per.second", Storage, "bytes per second", Value("1.7976931348623157E308"), "10485760", "Throttle of the cleaner's I/O (the default means none)."),
    key("log.retention.check.interval.ms", Storage, "ms", Value("300000"), "60000", "How often retention deletes expired segments."),
    key("max.connections.per.ip", Connections, "int", Value("2147483647"), "100", "Connections allowed from one address."),
    key("max.connections.per.ip.overrides", Connections, "comma list of address:count", Implied("none"), "127.0.0.1:1000", "Per-address exceptions to `max.connections.per.ip`."),
    key("connections.max.idle.ms", Connections, "ms, at least 1", Value("600000"), "600000", "An idle connection is closed after this."),
    key("queued.max.request.bytes", Connections, "bytes, or -1", Value("-1"), "104857600", "Bytes of requests read but not yet answered, across the broker; reading pauses above it."),
    key("rill.queued.max.request.bytes.per.connection", Connections, "bytes, or -1", Value("-1"), "16777216", "The same for one connection."),
    key("rill.cache.connection.max.bytes", Connections, "bytes, or -1", Value("-1"), "16777216", "Synonym of `rill.queued.max.request.bytes.per.connection`."),
    key("ssl.keystore.type", Tls, "PEM", Implied("PEM"), "PEM", "rill reads PEM only; another type stops the start with the key's name."),
    key("ssl.keystore.location", Tls, "path", Implied("none"), "/etc/rill/broker.pem", "One PEM file with the broker's key and certificate chain."),
    key("ssl.keystore.certificate.chain", Tls, "PEM text", Implied("none"), "-----BEGIN CERTIFICATE-----", "The certificate chain inline."),
    key("ssl.keystore.key", Tls, "PEM text", Implied("none"), "-----BEGIN PRIVATE KEY-----", "The private key inline."),
    key("ssl.certificate.location", Tls, "path", Implied("none"), "/etc/rill/cert.pem", "rill's own: the certificate chain as a file of its own."),
    key("ssl.key.location", Tls, "path", Implied("none"), "/etc/rill/key.pem", "rill's own: the private key as a file of its own."),
    key("ssl.truststore.type", Tls, "PEM", Implied("PEM"), "PEM", "rill reads PEM only."),
    key("ssl.truststore.location", Tls, "path", Implied("none"), "/etc/rill/ca.pem", "The CAs client certificates must chain to; on an SSL or SASL_SSL first listener of a cluster, also the other brokers' certificates."),
    key("ssl.truststore.certificates", Tls, "PEM text", Implied("none"), "-----BEGIN CERTIFICATE-----", "The same CAs inline."),
    key("ssl.endpoint.identification.algorithm", Tls, "https or empty", Implied("https"), "https", "For the brokers' own connections to each other on an SSL or SASL_SSL first listener: `https` makes each check that the other's certificate names its advertised host; empty checks the chain only. The truststore is the one the others' certificates must chain to, and the keystore is shown when another broker asks for a client certificate."),
    key("ssl.client.auth", Tls, "none, requested or required", Implied("none"), "required", "Whether clients must present a certificate (mutual TLS)."),
    key("ssl.enabled.protocols", Tls, "comma list", Implied("TLSv1.2,TLSv1.3"), "TLSv1.3", "TLS versions offered."),
    key("ssl.principal.mapping.rules", Tls, "DEFAULT and RULE:pattern/replacement/[LU] entries", Implied("DEFAULT"), "RULE:^CN=(.*?),OU=(.*)$/$1@$2/L,DEFAULT", "How a client certificate's subject (RFC 2253, e.g. `CN=alice,OU=eng`) becomes its principal name, as in Kafka: the first rule whose pattern matches the whole subject replaces it (`$1` for a group; `L`/`U` lower- or uppercase; `\\/` for a `/`); DEFAULT keeps the subject. A certificate no rule applies to is refused."),
    key("rill.ssl.handshake.timeout.ms", Tls, "ms, at least 1", Implied("10000"), "10000", "How long a client has to finish the TLS handshake."),
    key("sasl.enabled.mechanisms", Sasl, "comma list", Implied("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"), "PLAIN,SCRAM-SHA-512", "Mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER and GSSAPI (these two never offered unless named)."),
    key("listener.name.<listener>.sasl.enabled.mechanisms", Sasl, "comma list", Implied("sasl.enabled.mechanisms"), "PLAIN", "The same for one listener."),
    key("sasl.jaas.config", Sasl, "JAAS text", Implied("none"), "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";", "PLAIN users (`user_<name>=\"<password>\"`), and the unsecured OAUTHBEARER validator's options (`OAuthBearerLoginModule`: `unsecuredValidatorPrincipalClaimName`, `unsecuredValidatorScopeClaimName`, `unsecuredValidatorRequiredScope`, `unsecuredValidatorAllowableClockSkewMs`), and GSSAPI's keys (`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab=\"/etc/kafka/kafka.keytab\" principal=\"kafka/host@REALM\";`; `serviceName` too). SCRAM users live in the metadata log (AlterUserScramCredentials)."),
    key("listener.name.<listener>.<mechanism>.sasl.jaas.config", Sasl, "JAAS text", Implied("sasl.jaas.config"), "org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";", "The same for one listener and mechanism."),
    key("sasl.server.callback.handler.class", Sasl, "class name", Implied("the unsecured validator"), "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler", "OAUTHBEARER's token validator for every listener: Kafka's `OAuthBearerValidatorCallbackHandler` (signed tokens, checked against `sasl.oauthbearer.jwks.endpoint.url`) or `OAuthBearerUnsecuredValidatorCallbackHandler` (unsigned tokens, Kafka's default: development only)."),
    key("listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class", Sasl, "class name", Implied("sasl.server.callback.handler.class"), "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler", "The same for one listener."),
    key("sasl.oauthbearer.jwks.endpoint.url", Sasl, "https://, http:// or file: URL", Implied("none"), "https://idp.example.com/oauth2/v1/keys", "Where the identity provider's public keys (a JWKS) are: fetched at start (a failure stops it), then every refresh period and whenever a token names a key the set lacks. Needs a listener whose handler is `OAuthBearerValidatorCallbackHandler`."),
    key("sasl.oauthbearer.jwks.endpoint.refresh.ms", Sasl, "ms, at least 1", Value("3600000"), "600000", "How often the JWKS is fetched again."),
    key("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Sasl, "ms, at least 1", Value("100"), "100", "The first wait after a failed fetch; doubled after each failure."),
    key("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Sasl, "ms, at least 1", Value("10000"), "10000", "The longest wait between failed fetches."),
    key("sasl.oauthbearer.expected.audience", Sasl, "comma list", Implied("any"), "kafka,rill", "Audiences of which a signed token's `aud` must name one."),
    key("sasl.oauthbearer.expected.issuer", Sasl, "string", Implied("any"), "https://idp.example.com", "The `iss` a signed token must carry."),
    key("sasl.oauthbearer.sub.claim.name", Sasl, "claim name", Value("sub"), "client_id", "The claim of a signed token that names its principal (`User:<value>`)."),
    key("sasl.oauthbearer.scope.claim.name", Sasl, "claim name", Value("scope"), "scp", "The claim of a signed token that holds its scopes."),
    key("sasl.oauthbearer.clock.skew.seconds", Sasl, "seconds, 0 or more", Value("30"), "30", "Slack allowed on a signed token's `exp`, `iat` and `nbf`."),
    key("sasl.kerberos.service.name", Sasl, "string", Implied("none"), "kafka", "The Kerberos service clients ask tickets for (their `sasl.kerberos.service.name`). rill accepts a ticket for any principal of its keytab: keep only the broker's own there."),
    key("sasl.kerberos.principal.to.local.rules", Sasl, "DEFAULT and RULE:[n:format](match)s/from/to/g/[LU] entries", Value("DEFAULT"), "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//,DEFAULT", "How a Kerberos principal becomes its user name (`User:<name>`), as in Kafka: DEFAULT takes the first component in the default realm of krb5.conf (`KRB5_CONFIG`, else /etc/krb5.conf); a RULE formats the principal's components (`$0` realm, `$1`, `$2`), applies when `match` matches it whole, then substitutes. A principal no rule names is refused."),
    key("connections.max.reauth.ms", Sasl, "ms, 0 or more", Value("0"), "3600000", "How long a SASL session lives before the client must re-authenticate (0: forever)."),
    key("sasl.server.max.receive.size", Sasl, "bytes, at least 1", Value("524288"), "65536", "The largest request frame a SASL listener reads before the connection authenticates; a larger one closes it (an unauthenticated peer cannot make the broker buffer `socket.request.max.bytes`)."),
    key("rill.sasl.handshake.timeout.ms", Sasl, "ms, at least 1", Value("10000"), "10000", "How long a client has to finish SASL authentication."),
    key("rill.sasl.bootstrap.scram", Sasl, "SCRAM-SHA-512=[name=...,password=...];...", Implied("none"), "SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM users created at the first start (as `kafka-storage format --add-scram`)."),
    key("sasl.mechanism.inter.broker.protocol", Sasl, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", Implied("none"), "SCRAM-SHA-512", "How a broker logs in to the others when the first listener (the one brokers reach each other on) is SASL_PLAINTEXT or SASL_SSL, with the `username` and `password` of that mechanism's JAAS entry on the listener (`ScramLoginModule` or `PlainLoginModule`). Needed then in a cluster; a single node ignores it."),
    key("sasl.mechanism.controller.protocol", Sasl, "mechanism", Implied("none"), "PLAIN", "Accepted and ignored: the controller listener speaks rill's own protocol."),
    key("authorizer.class.name", Authorizer, "class name", Implied("none: every request is allowed"), "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "Turns ACL enforcement on. Kafka's StandardAuthorizer and AclAuthorizer names are accepted; any other stops the start."),
    key("super.users", Authorizer, "User:a;User:b", Implied("none"), "User:admin", "Principals allowed everything."),
    key("allow.everyone.if.no.acl.found", Authorizer, "bool", Value("false"), "true", "Allow requests on resources no ACL names."),
    key("rill.spin_before_park_us", Rill, "µs", Value("0"), "50", "How long an idle shard spins before it parks. Pays only where each shard has a core to itself."),
    key("rill.io_memory_bytes", Rill, "bytes", Value("2097152"), "4194304", "Locked I/O memory per shard (glommio's DMA buffers)."),
    key("rill.mesh_channel_capacity", Rill, "int", Value("1024"), "1024", "Slots of each queue between two shards."),
    key("rill.max.in.flight.requests.per.connection", Rill, "int, at least 1", Value("64"), "64", "Requests of one connection served at once (pipelining)."),
    key("rill.metadata.snapshot.interval.entries", Rill, "int, at least 1", Value("1024"), "1024", "Metadata log entries between snapshots."),
    key("rill.batch_cache_bytes", Rill, "bytes", Value("67108864"), "67108864", "Size of the cache of recently written batches that fetches are served from."),
    key("rill.cache.batch.max.bytes", Rill, "bytes", Implied("rill.batch_cache_bytes"), "67108864", "The batch cache's cap under the `rill.cache.*` names (wins over `rill.batch_cache_bytes`)."),
    key("rill.cache.index.max.bytes", Rill, "bytes", Value("67108864"), "67108864", "Memory for open segments' offset and time indexes."),
    key("rill.preallocate_bytes", Rill, "bytes", Value("33554432"), "33554432", "Each step of `fallocate` ahead of the active segment's writes."),
    key("rill.segment.recycle.max", Rill, "int", Value("2"), "0", "Files of deleted segments each partition keeps for its next segments, whose appends then change no file-system metadata; a roll with none at hand runs retention by size first. 0: off. None are kept while the data dir is below its free-space reserve."),
    key("rill.stream_min_bytes", Rill, "bytes", Implied("65536, or the chunk `rill iotune` measured"), "131072", "The smallest write the stream writer issues."),
    key("rill.io.properties.file", Rill, "path", Implied("io-properties.yaml in the data dir, then /etc/rill/io-properties.yaml"), "/etc/rill/io-properties.yaml", "The disk figures `rill iotune` wrote (`--io-properties` overrides it)."),
    key("rill.storage.min.free.bytes", Rill, "bytes", Implied("the smaller of 1 GiB and 5% of the disk"), "268435456", "Free space kept on each data dir: appends that would take it get KAFKA_STORAGE_ERROR (a full disk refuses writes; it never stops the broker)."),
    key("rill.fetch.send.path", Rill, "copy, sendfile or splice", Value("splice"), "sendfile", "How fetch responses leave (`fetch.send.path` and `--fetch-send-path` too)."),
    key("fetch.send.path", Rill, "copy, sendfile or splice", Value("splice"), "copy", "Synonym of `rill.fetch.send.path`."),
    key("rill.telemetry.max.clients", Rill, "int, at least 1", Value("1000"), "100", "Client instances whose pushed telemetry (KIP-714) the broker keeps and shows on /metrics, split evenly over its shards; past it the least recently pushed is dropped."),
    key("rill.flush.policy", Rill, "fsync, interval or os", Value("fsync"), "interval", "When an append is durable before it is acknowledged: fsync (group commit, the default), interval (Kafka's flush.ms / flush.messages) or os (the page cache, as Kafka's default)."),
    key("remote.log.storage.system.enable", Tiered, "bool", Value("false"), "false", "Turns tiered storage on (KIP-405): topics with `remote.storage.enable=true` upload sealed segments and keep only `local.retention.*` locally. Needs `rill.remote.storage.url`."),
    key("rill.remote.storage.url", Tiered, "URL", Implied("none"), "file:///var/lib/rill-remote", "The object store: `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix` or `file:///path`. Credentials come from the store's usual environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`), never from this file."),
    key("rill.remote.storage.endpoint", Tiered, "URL", Implied("the provider's"), "http://127.0.0.1:9000", "An S3-compatible store's endpoint (MinIO, Ceph, R2)."),
    key("rill.remote.storage.region", Tiered, "string", Implied("from the environment"), "eu-west-1", "The store's region."),
    key("rill.remote.storage.allow.http", Tiered, "bool", Value("false"), "true", "Allows plain HTTP to the endpoint (a store on loopback)."),
    key("remote.log.manager.task.interval.ms", Tiered, "ms, at least 1", Value("30000"), "1000", "How often each partition leader uploads sealed segments and expires remote ones (Kafka's copier and expiration thread pools are tasks on the shards)."),
    key("remote.log.manager.task.retry.backoff.ms", Tiered, "ms, at least 1", Value("500"), "1000", "The first wait after a failed upload or deletion."),
    key("remote.log.manager.task.retry.backoff.max.ms", Tiered, "ms, at least 1", Value("30000"), "60000", "The longest wait between retries."),
    key("remote.log.index.file.cache.total.size.bytes", Tiered, "bytes", Value("1073741824"), "268435456", "The cap on the cache of fetched remote indexes and log chunks (on `/metrics`)."),
    key("rill.remote.storage.chunk.bytes", Tiered, "bytes, at least 1", Value("4194304"), "1048576", "The unit a remote read fetches and caches."),
    key("rill.remote.storage.op.timeout.ms", Tiered, "ms, at least 1", Value("30000"), "10000", "One store call's limit; past it the call fails as unavailable (a fetch gets a retriable error, an upload retries)."),
    key("remote.fetch.max.wait.ms", Tiered, "ms, at least 1", Value("500"), "500", "The longest a fetch waits for its remote reads; past it the partition answers empty this time, and the read goes on filling the cache for the next fetch."),
    key("remote.log.manager.copy.max.bytes.per.second", Tiered, "bytes/s, at least 1", Value("9223372036854775807"), "104857600", "The broker's upload rate (over `remote.log.manager.copy.quota.window.*`); past it uploads wait for a later round."),
    key("remote.log.manager.fetch.max.bytes.per.second", Tiered, "bytes/s, at least 1", Value("9223372036854775807"), "104857600", "The broker's remote read rate (over `remote.log.manager.fetch.quota.window.*`); past it a fetch's remote reads wait up to `remote.fetch.max.wait.ms`, then answer empty."),
    key("remote.log.manager.copy.quota.window.num", Tiered, "count, at least 1", Value("11"), "11", "The samples the upload rate is measured over."),
    key("remote.log.manager.copy.quota.window.size.seconds", Tiered, "s, at least 1", Value("1"), "1", "Each sample's length."),
    key("remote.log.manager.fetch.quota.window.num", Tiered, "count, at least 1", Value("11"), "11", "The samples the remote read rate is measured over."),
    key("remote.log.manager.fetch.quota.window.size.seconds", Tiered, "s, at least 1", Value("1"), "1", "Each sample's length."),
    key("remote.log.storage.manager.class.name", Tiered, "empty", Implied("none"), "", "Kafka's plug-in class: rill has its own store, so any class name stops the start."),
    key("remote.log.metadata.manager.class.name", Tiered, "empty", Implied("none"), "", "Kafka's plug-in class: rill keeps the remote log metadata in the metadata quorum, so any class name stops the start."),
];

/// Kafka broker keys accepted and ignored: they name a mechanism rill does
/// not have (a thread pool, ZooKeeper) or a value it takes from elsewhere.
pub const IGNORED_KAFKA_KEYS: &[&str] = &[
    "num.network.threads",
    "num.io.threads",
    "num.recovery.threads.per.data.dir",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "queued.max.requests",
    "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions",
    "inter.broker.listener.name",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "log.cleaner.enable",
    "log.cleaner.threads",
    "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
];

/// The table's entry for `name`, matching `<listener>` and `<mechanism>`
/// against one dot-free segment each.
pub fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|key| matches(key.name, name))
}

/// Whether `name` is `pattern` with each `<...>` segment filled in.
fn matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('.').collect();
    let given: Vec<&str> = name.split('.').collect();
    pattern.len() == given.len()
        && pattern
            .iter()
            .zip(&given)
            .all(|(p, g)| (p.starts_with('<') && p.ends_with('>') && !g.is_empty()) || p == g)
}

#[cfg(test)]
mod tests;
