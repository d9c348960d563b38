//! The client instances one shard knows, and their latest metrics (pure:
//! stepped with `now_ms` from a monotonic clock, no I/O).
//!
//! KIP-714's rules, as Kafka's `ClientMetricsManager` applies them:
//!
//! - GetTelemetrySubscriptions is throttled (THROTTLING_QUOTA_EXCEEDED)
//!   when it comes sooner than the push interval after the instance's last
//!   request, unless the last push failed with UNKNOWN_SUBSCRIPTION_ID or
//!   UNSUPPORTED_COMPRESSION_TYPE (the client was told to ask again) or the
//!   subscription changed since.
//! - A push is checked in Kafka's order: after a terminating push nothing
//!   more (INVALID_REQUEST); its subscription id must be the current one
//!   (UNKNOWN_SUBSCRIPTION_ID); it must come a push interval after the
//!   last push, unless it is the first since the client asked for its
//!   subscription (clients jitter the first push) or it is terminating
//!   (THROTTLING_QUOTA_EXCEEDED); its compression must be one offered
//!   (UNSUPPORTED_COMPRESSION_TYPE); its payload must fit
//!   `telemetry.max.bytes` (TELEMETRY_TOO_LARGE).
//!
//! Memory is bounded: at most `capacity` instances (the shard's share of
//! `rill.telemetry.max.clients`); a new one past it evicts the least
//! recently active (its last push, or its last request if it never
//! pushed), and one silent for [`SILENT_INTERVALS`] push intervals (at
//! least [`SILENT_MIN_MS`]) is dropped when next looked at. Each keeps at
//! most [`MAX_SERIES_PER_INSTANCE`] series. An evicted client that comes
//! back is simply a new instance: its subscription id is derived, not
//! stored, so its next push is accepted.

use super::subscription::Resolved;
use engine::ErrorCode;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A client instance id (a UUID's 16 bytes).
pub type InstanceId = [u8; 16];

/// An instance silent for this many push intervals is dropped.
pub const SILENT_INTERVALS: u64 = 3;
/// ... but never sooner than this, so that a scrape every 15–60 s still
/// sees a short-interval client that paused.
pub const SILENT_MIN_MS: u64 = 60_000;
/// Series kept per instance. A librdkafka producer sends about ten, plus
/// two per broker it talks to; 500 bounds the table at about
/// `capacity × 500 × ~200 B` (100 MB at 1000 clients) whatever a client pushes.
pub const MAX_SERIES_PER_INSTANCE: usize = 500;

/// How a series is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesKind {
    /// A gauge, or a sum that may go down: the latest value.
    Gauge,
    /// A monotonic sum: its cumulative value.
    Counter,
}

/// One series: its family name (sanitized) and label pairs (sanitized
/// names, sorted by name).
pub type SeriesKey = (String, Vec<(String, String)>);

/// A series' latest value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The HELP text (the metric's OTLP description).
    pub help: String,
    /// Gauge or counter.
    pub kind: SeriesKind,
    /// The value.
    pub value: f64,
}

/// One data point as decoded from a push.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Family name and labels.
    pub key: SeriesKey,
    /// HELP, kind and value.
    pub series: Series,
    /// A delta-temporality sum: added to the value held rather than
    /// replacing it.
    pub delta: bool,
}

/// What a push asks to be checked, beside its instance.
#[derive(Debug, Clone, Copy)]
pub struct PushCheck {
    /// The subscription id it carries.
    pub subscription_id: i32,
    /// Its `terminating` flag.
    pub terminating: bool,
    /// Whether its compression type is one offered.
    pub compression_offered: bool,
    /// Its payload's size as sent.
    pub payload_bytes: usize,
    /// `telemetry.max.bytes`.
    pub max_bytes: usize,
}

#[derive(Debug)]
struct Instance {
    client_id: String,
    subscription_id: i32,
    interval_ms: u64,
    last_get_ms: Option<u64>,
    last_push_ms: Option<u64>,
    active_ms: u64,
    terminating: bool,
    last_error: ErrorCode,
    series: BTreeMap<SeriesKey, Series>,
}

impl Instance {
    fn silent_expiry_ms(&self) -> u64 {
        (SILENT_INTERVALS * self.interval_ms).max(SILENT_MIN_MS)
    }
}

/// One instance's metrics as a snapshot for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSnapshot {
    /// Kafka's text form of the instance id.
    pub instance_id: String,
    /// Its client id.
    pub client_id: String,
    /// How long ago it last pushed (to keep the newest copy when a client
    /// moved between shards).
    pub pushed_ago_ms: u64,
    /// Its series.
    pub series: BTreeMap<SeriesKey, Series>,
}

/// The instances one shard knows. **Shard-local.**
#[derive(Debug)]
pub struct InstanceTable {
    capacity: usize,
    instances: HashMap<InstanceId, Instance>,
    /// (active_ms, id) of every instance: the least recently active first.
    by_activity: BTreeSet<(u64, InstanceId)>,
}

impl InstanceTable {
    /// An empty table holding at most `capacity` instances (0 keeps none:
    /// every request then sees a new instance, and no metrics are kept).
    pub fn new(capacity: usize) -> InstanceTable {
        InstanceTable {
            capacity,
            instances: HashMap::new(),
            by_activity: BTreeSet::new(),
        }
    }

    /// Instances held.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// GetTelemetrySubscriptions of instance `id` at `now_ms`, `resolved`
    /// being what its subscriptions ask now.
    pub fn get_subscriptions(
        &mut self,
        now_ms: u64,
        id: InstanceId,
        client_id: &str,
        resolved: &Resolved,
    ) -> Result<(), ErrorCode> {
        let instance = self.entry(now_ms, id, client_id, resolved);
        if instance.subscription_id != resolved.subscription_id {
            // What the client must push changed: it starts afresh, as
            // Kafka's re-created instance does.
            instance.subscription_id = resolved.subscription_id;
            instance.last_push_ms = None;
            instance.last_get_ms = None;
        }
        instance.interval_ms = interval(resolved);
        let last = instance.last_get_ms.max(instance.last_push_ms);
        let too_soon = last.is_some_and(|last| now_ms.saturating_sub(last) < instance.interval_ms);
        let told_to_ask = matches!(
            instance.last_error,
            ErrorCode::UnknownSubscriptionId | ErrorCode::UnsupportedCompressionType
        );
        if too_soon && !told_to_ask {
            return Err(ErrorCode::ThrottlingQuotaExceeded);
        }
        instance.last_get_ms = Some(now_ms);
        instance.last_error = ErrorCode::None;
        self.touch(id, now_ms);
        self.forget_if_no_room(id);
        Ok(())
    }

    /// Checks a push of instance `id` (module doc), recording its outcome;
    /// `Ok` means its payload should be decoded and [`Self::store`]d.
    pub fn check_push(
        &mut self,
        now_ms: u64,
        id: InstanceId,
        client_id: &str,
        resolved: &Resolved,
        push: PushCheck,
    ) -> Result<(), ErrorCode> {
        let instance = self.entry(now_ms, id, client_id, resolved);
        let outcome = Self::push_outcome(instance, now_ms, resolved, push);
        if let Err(code) = outcome {
            instance.last_error = code;
        }
        self.touch(id, now_ms);
        self.forget_if_no_room(id);
        outcome
    }

    /// A table of capacity 0 (a shard whose share of the cap is nothing)
    /// answers from a scratch instance and keeps none.
    fn forget_if_no_room(&mut self, id: InstanceId) {
        if self.capacity == 0 {
            self.remove(&id);
        }
    }

    fn push_outcome(
        instance: &mut Instance,
        now_ms: u64,
        resolved: &Resolved,
        push: PushCheck,
    ) -> Result<(), ErrorCode> {
        if instance.terminating {
            return Err(ErrorCode::InvalidRequest);
        }
        if push.subscription_id != resolved.subscription_id {
            return Err(ErrorCode::UnknownSubscriptionId);
        }
        instance.subscription_id = resolved.subscription_id;
        instance.interval_ms = interval(resolved);
        let first_since_get = instance.last_get_ms > instance.last_push_ms;
        let interval_passed = instance
            .last_push_ms
            .is_none_or(|last| now_ms.saturating_sub(last) >= instance.interval_ms);
        if !(first_since_get || interval_passed || push.terminating) {
            return Err(ErrorCode::ThrottlingQuotaExceeded);
        }
        instance.last_push_ms = Some(now_ms);
        if !push.compression_offered {
            return Err(ErrorCode::UnsupportedCompressionType);
        }
        instance.terminating = push.terminating;
        if push.payload_bytes > push.max_bytes {
            return Err(ErrorCode::TelemetryTooLarge);
        }
        instance.last_error = ErrorCode::None;
        Ok(())
    }

    /// Records that instance `id`'s accepted push could not be decoded.
    pub fn record_error(&mut self, id: InstanceId, code: ErrorCode) {
        if let Some(instance) = self.instances.get_mut(&id) {
            instance.last_error = code;
        }
    }

    /// Keeps a push's points as instance `id`'s latest series (those it did
    /// not push again are dropped; a delta sum adds to what was held).
    pub fn store(&mut self, id: InstanceId, points: Vec<Point>) {
        let Some(instance) = self.instances.get_mut(&id) else {
            return;
        };
        let mut series = BTreeMap::new();
        for point in points {
            if series.len() >= MAX_SERIES_PER_INSTANCE && !series.contains_key(&point.key) {
                continue;
            }
            let mut value = point.series;
            if point.delta {
                let held = instance.series.get(&point.key).map_or(0.0, |s| s.value);
                value.value += held;
            }
            series.insert(point.key, value);
        }
        instance.series = series;
    }

    /// The instances with series, for `/metrics`; drops the silent ones.
    pub fn snapshot(&mut self, now_ms: u64) -> Vec<InstanceSnapshot> {
        let silent: Vec<InstanceId> = (self.instances.iter())
            .filter(|(_, i)| now_ms.saturating_sub(i.active_ms) >= i.silent_expiry_ms())
            .map(|(id, _)| *id)
            .collect();
        for id in silent {
            self.remove(&id);
        }
        (self.instances.iter())
            .filter(|(_, i)| !i.series.is_empty())
            .map(|(id, i)| InstanceSnapshot {
                instance_id: kafka_uuid_text(*id),
                client_id: i.client_id.clone(),
                pushed_ago_ms: i
                    .last_push_ms
                    .map_or(u64::MAX, |at| now_ms.saturating_sub(at)),
                series: i.series.clone(),
            })
            .collect()
    }

    /// The instance `id`, made (and room made for it) if new.
    fn entry(
        &mut self,
        now_ms: u64,
        id: InstanceId,
        client_id: &str,
        resolved: &Resolved,
    ) -> &mut Instance {
        if !self.instances.contains_key(&id) {
            self.make_room(now_ms);
            self.by_activity.insert((now_ms, id));
        }
        self.instances.entry(id).or_insert_with(|| Instance {
            client_id: client_id.to_owned(),
            subscription_id: resolved.subscription_id,
            interval_ms: interval(resolved),
            last_get_ms: None,
            last_push_ms: None,
            active_ms: now_ms,
            terminating: false,
            last_error: ErrorCode::None,
            series: BTreeMap::new(),
        })
    }

    /// Drops the silent instances at the front, then the least recently
    /// active ones until a new one fits.
    fn make_room(&mut self, now_ms: u64) {
        while let Some(&(active_ms, oldest)) = self.by_activity.first() {
            let silent = self
                .instances
                .get(&oldest)
                .is_some_and(|i| now_ms.saturating_sub(active_ms) >= i.silent_expiry_ms());
            if !(silent || self.instances.len() >= self.capacity.max(1)) {
                break;
            }
            self.remove(&oldest);
        }
        assert!(self.instances.len() < self.capacity.max(1));
        assert_eq!(self.instances.len(), self.by_activity.len());
    }

    fn remove(&mut self, id: &InstanceId) {
        if let Some(instance) = self.instances.remove(id) {
            self.by_activity.remove(&(instance.active_ms, *id));
        }
    }

    /// Marks instance `id` active at `now_ms`.
    fn touch(&mut self, id: InstanceId, now_ms: u64) {
        if let Some(instance) = self.instances.get_mut(&id) {
            self.by_activity.remove(&(instance.active_ms, id));
            instance.active_ms = instance.active_ms.max(now_ms);
            self.by_activity.insert((instance.active_ms, id));
        }
        assert_eq!(self.instances.len(), self.by_activity.len());
    }
}

fn interval(resolved: &Resolved) -> u64 {
    u64::try_from(resolved.interval_ms).unwrap_or(0)
}

/// Kafka's text form of a UUID (`Uuid.toString()`): URL-safe base64 of its
/// 16 bytes, unpadded (22 characters).
pub fn kafka_uuid_text(id: InstanceId) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(id: i32, interval_ms: i32) -> Resolved {
        Resolved {
            subscription_id: id,
            interval_ms,
            metrics: vec![String::new()],
        }
    }

    fn push(subscription_id: i32) -> PushCheck {
        PushCheck {
            subscription_id,
            terminating: false,
            compression_offered: true,
            payload_bytes: 10,
            max_bytes: 100,
        }
    }

    fn gauge(name: &str, value: f64) -> Point {
        Point {
            key: (name.to_owned(), Vec::new()),
            series: Series {
                help: String::new(),
                kind: SeriesKind::Gauge,
                value,
            },
            delta: false,
        }
    }

    #[test]
    fn gets_and_pushes_follow_the_interval() {
        let mut t = InstanceTable::new(10);
        let r = resolved(5, 1000);
        let id = [1; 16];
        assert_eq!(t.get_subscriptions(0, id, "c", &r), Ok(()));
        // A second get within the interval is throttled.
        assert_eq!(
            t.get_subscriptions(10, id, "c", &r),
            Err(ErrorCode::ThrottlingQuotaExceeded)
        );
        // The first push after a get is accepted at once (clients jitter it).
        assert_eq!(t.check_push(300, id, "c", &r, push(5)), Ok(()));
        // The next one must wait the interval.
        assert_eq!(
            t.check_push(900, id, "c", &r, push(5)),
            Err(ErrorCode::ThrottlingQuotaExceeded)
        );
        assert_eq!(t.check_push(1300, id, "c", &r, push(5)), Ok(()));
        // A wrong subscription id; then the get it leads to is not throttled.
        assert_eq!(
            t.check_push(2300, id, "c", &r, push(6)),
            Err(ErrorCode::UnknownSubscriptionId)
        );
        assert_eq!(t.get_subscriptions(2301, id, "c", &r), Ok(()));
    }

    #[test]
    fn a_changed_subscription_is_asked_for_at_once() {
        let mut t = InstanceTable::new(10);
        let id = [1; 16];
        assert_eq!(
            t.get_subscriptions(0, id, "c", &resolved(5, 60_000)),
            Ok(())
        );
        assert_eq!(t.get_subscriptions(10, id, "c", &resolved(9, 1000)), Ok(()));
    }

    #[test]
    fn pushes_are_checked_in_kafkas_order() {
        let mut t = InstanceTable::new(10);
        let r = resolved(5, 1000);
        let id = [1; 16];
        t.get_subscriptions(0, id, "c", &r).unwrap();
        let mut big = push(5);
        big.payload_bytes = 101;
        assert_eq!(
            t.check_push(1, id, "c", &r, big),
            Err(ErrorCode::TelemetryTooLarge)
        );
        let mut odd = push(5);
        odd.compression_offered = false;
        assert_eq!(
            t.check_push(1001, id, "c", &r, odd),
            Err(ErrorCode::UnsupportedCompressionType)
        );
        // A terminating push is accepted even inside the interval...
        let mut last = push(5);
        last.terminating = true;
        assert_eq!(t.check_push(1002, id, "c", &r, last), Ok(()));
        // ... and nothing after it.
        assert_eq!(
            t.check_push(5000, id, "c", &r, push(5)),
            Err(ErrorCode::InvalidRequest)
        );
    }

    #[test]
    fn an_unknown_instance_pushing_its_derived_id_is_accepted() {
        // A client whose connection moved to another shard, or a broker
        // restart: the id is derived, so the new table accepts it.
        let mut t = InstanceTable::new(10);
        let r = resolved(5, 1000);
        assert_eq!(t.check_push(50, [3; 16], "c", &r, push(5)), Ok(()));
    }

    #[test]
    fn the_table_never_holds_more_than_its_capacity() {
        let mut t = InstanceTable::new(3);
        let r = resolved(5, 1000);
        for n in 0..10u8 {
            let id = [n; 16];
            t.get_subscriptions(u64::from(n), id, "c", &r).unwrap();
            t.store(id, vec![gauge("m", f64::from(n))]);
            assert!(t.len() <= 3);
        }
        // The three most recently active are the ones kept.
        let mut kept: Vec<String> = t.snapshot(10).into_iter().map(|s| s.instance_id).collect();
        kept.sort();
        let mut expected: Vec<String> = (7..10u8).map(|n| kafka_uuid_text([n; 16])).collect();
        expected.sort();
        assert_eq!(kept, expected);
        // A push makes an instance the most recent: the next new one evicts another.
        t.check_push(20, [7; 16], "c", &r, push(5)).unwrap();
        t.get_subscriptions(21, [42; 16], "c", &r).unwrap();
        assert_eq!(t.len(), 3);
        assert!(t
            .snapshot(22)
            .iter()
            .any(|s| s.instance_id == kafka_uuid_text([7; 16])));
    }

    #[test]
    fn a_table_without_room_keeps_nothing() {
        let mut t = InstanceTable::new(0);
        let r = resolved(5, 1000);
        assert_eq!(t.get_subscriptions(0, [1; 16], "c", &r), Ok(()));
        assert_eq!(t.check_push(1, [1; 16], "c", &r, push(5)), Ok(()));
        t.store([1; 16], vec![gauge("m", 1.0)]);
        assert!(t.is_empty());
        assert!(t.snapshot(2).is_empty());
    }

    #[test]
    fn silent_instances_are_dropped() {
        let mut t = InstanceTable::new(10);
        let r = resolved(5, 100_000);
        t.get_subscriptions(0, [1; 16], "c", &r).unwrap();
        t.store([1; 16], vec![gauge("m", 1.0)]);
        assert_eq!(t.snapshot(299_999).len(), 1);
        assert!(t.snapshot(300_000).is_empty());
        assert!(t.is_empty());
        // The floor: a 100 ms client is kept a minute.
        let fast = resolved(5, 100);
        t.get_subscriptions(0, [2; 16], "c", &fast).unwrap();
        t.store([2; 16], vec![gauge("m", 1.0)]);
        assert_eq!(t.snapshot(SILENT_MIN_MS - 1).len(), 1);
        assert!(t.snapshot(SILENT_MIN_MS).is_empty());
    }

    #[test]
    fn a_push_replaces_the_series_and_delta_sums_add_up() {
        let mut t = InstanceTable::new(10);
        let r = resolved(5, 1000);
        let id = [1; 16];
        t.get_subscriptions(0, id, "c", &r).unwrap();
        let mut delta = gauge("sent_total", 2.0);
        delta.series.kind = SeriesKind::Counter;
        delta.delta = true;
        t.store(id, vec![gauge("a", 1.0), delta.clone()]);
        t.store(id, vec![delta]);
        let snapshot = t.snapshot(1);
        let series = &snapshot[0].series;
        assert_eq!(series.len(), 1, "{series:?}");
        assert_eq!(series[&("sent_total".to_owned(), Vec::new())].value, 4.0);
        // At most MAX_SERIES_PER_INSTANCE series are kept.
        let many = (0..MAX_SERIES_PER_INSTANCE + 5).map(|n| gauge(&format!("m{n}"), 0.0));
        t.store(id, many.collect());
        assert_eq!(t.snapshot(2)[0].series.len(), MAX_SERIES_PER_INSTANCE);
    }

    #[test]
    fn instance_ids_read_as_kafka_writes_them() {
        assert_eq!(kafka_uuid_text([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(kafka_uuid_text([0xff; 16]), "_____________________w");
    }
}
