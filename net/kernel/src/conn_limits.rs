//! Limits against abusive clients, Kafka's names: `max.connections.per.ip`
//! (with `max.connections.per.ip.overrides`), `connections.max.idle.ms`,
//! the request bytes read and not yet answered (`queued.max.request.bytes`
//! for the broker, `rill.queued.max.request.bytes.per.connection`), and a
//! rate limit on the log line each bad request causes (every bad frame
//! still counts in `rill_protocol_errors_total`).
//!
//! Why: a client that opens connections in a loop, holds them open without
//! a request, or sends garbage must not take descriptors, memory or the
//! log from everyone else. `max.connections` (whole broker) is kept by the
//! accept loop; this file holds what it needs per address.

use crate::error::ConfigError;
use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The settings, with Kafka's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimitsConfig {
    /// `max.connections.per.ip`: open connections from one address.
    pub max_per_ip: usize,
    /// `max.connections.per.ip.overrides`: `address:count` pairs.
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// `connections.max.idle.ms`: a connection with no request or response
    /// for this long is closed.
    pub max_idle_ms: u64,
    /// `queued.max.request.bytes`: request bytes read and not yet answered,
    /// the whole broker (shared evenly by the shards); `None` (Kafka's -1):
    /// no limit.
    pub queued_max_request_bytes: Option<u64>,
    /// `rill.queued.max.request.bytes.per.connection`: the same for one
    /// connection; `None`: no limit.
    pub queued_max_request_bytes_per_connection: Option<u64>,
}

impl Default for ConnectionLimitsConfig {
    fn default() -> Self {
        ConnectionLimitsConfig {
            max_per_ip: 2_147_483_647,
            per_ip_overrides: HashMap::new(),
            max_idle_ms: 600_000,
            queued_max_request_bytes: None,
            queued_max_request_bytes_per_connection: None,
        }
    }
}

impl ConnectionLimitsConfig {
    /// Applies one broker setting if it is one of these; `Ok(false)` when
    /// `name` is not.
    pub fn apply(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let number = |value: &str| {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| ConfigError::invalid(name, value, "not a number in range"))
        };
        match name {
            "max.connections.per.ip" => {
                self.max_per_ip = usize::try_from(number(value)?)
                    .map_err(|_| ConfigError::invalid(name, value, "too large"))?;
            }
            "max.connections.per.ip.overrides" => {
                self.per_ip_overrides = parse_overrides(name, value)?;
            }
            "connections.max.idle.ms" => {
                self.max_idle_ms = number(value)?;
                if self.max_idle_ms == 0 {
                    return Err(ConfigError::invalid(name, value, "at least 1"));
                }
            }
            // `rill.cache.connection.max.bytes` is the per-connection cap
            // under the name of rill's other memory caps (`rill.cache.*`).
            "queued.max.request.bytes"
            | "rill.queued.max.request.bytes.per.connection"
            | "rill.cache.connection.max.bytes" => {
                let limit = match value.trim().parse::<i64>() {
                    Ok(-1) => None,
                    Ok(n) if n > 0 => Some(n as u64),
                    _ => {
                        return Err(ConfigError::invalid(
                            name,
                            value,
                            "-1 (no limit) or a positive byte count",
                        ))
                    }
                };
                if name == "queued.max.request.bytes" {
                    self.queued_max_request_bytes = limit;
                } else {
                    self.queued_max_request_bytes_per_connection = limit;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The limit for connections from `ip`.
    pub fn limit_for(&self, ip: IpAddr) -> usize {
        self.per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.max_per_ip)
    }

    /// `connections.max.idle.ms` as a duration.
    pub fn max_idle(&self) -> Duration {
        Duration::from_millis(self.max_idle_ms)
    }
}

/// `1.2.3.4:10,::1:5`: each entry's count follows its last `:`.
fn parse_overrides(name: &str, value: &str) -> Result<HashMap<IpAddr, usize>, ConfigError> {
    let mut out = HashMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry.rsplit_once(':').and_then(|(address, count)| {
            let address = address.trim_start_matches('[').trim_end_matches(']');
            Some((address.parse().ok()?, count.trim().parse().ok()?))
        });
        let Some((address, count)) = parsed else {
            return Err(ConfigError::invalid(
                name,
                value,
                "expected address:count entries separated by commas",
            ));
        };
        out.insert(address, count);
    }
    Ok(out)
}

/// Open connections per client address, shared by every shard (touched
/// once per accept and close, never on the request path).
#[derive(Debug, Default)]
pub struct PerIpConnections {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One counted connection; uncounted when dropped.
#[derive(Debug)]
pub struct IpSlot {
    counts: Arc<PerIpConnections>,
    ip: IpAddr,
}

impl PerIpConnections {
    /// Counts a connection from `ip` unless `limit` are already open.
    pub fn try_acquire(counts: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<IpSlot> {
        let mut open = counts.open.lock().unwrap_or_else(|p| p.into_inner());
        let count = open.entry(ip).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(IpSlot {
            counts: counts.clone(),
            ip,
        })
    }

    /// Connections open from `ip` now.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// At most one line per `every` for a kind of event; the lines left out
/// are counted and said in the next one. Shard-local.
#[derive(Debug)]
pub struct LogLimiter {
    every: Duration,
    last: Cell<Option<Instant>>,
    suppressed: Cell<u64>,
}

impl LogLimiter {
    /// A limiter of one line per `every`.
    pub const fn new(every: Duration) -> Self {
        LogLimiter {
            every,
            last: Cell::new(None),
            suppressed: Cell::new(0),
        }
    }

    /// `Some(suppressed since the last line)` when a line may be logged
    /// now; `None` (and one more suppressed) otherwise.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        match self.last.get() {
            Some(last) if now.duration_since(last) < self.every => {
                self.suppressed.set(self.suppressed.get() + 1);
                None
            }
            _ => {
                self.last.set(Some(now));
                Some(self.suppressed.replace(0))
            }
        }
    }
}

/// A budget of request bytes read and not yet answered: reading a frame
/// takes its size, the answer leaving gives it back, and a reader finding
/// the budget spent waits. A frame larger than the whole budget takes all
/// of it (it is let through alone rather than never). Unlimited: nothing is
/// counted.
#[derive(Debug, Clone)]
pub struct RequestBytes {
    budget: Option<(std::rc::Rc<glommio::sync::Semaphore>, u64)>,
}

impl RequestBytes {
    /// A budget of `limit` bytes, or none.
    pub fn new(limit: Option<u64>) -> RequestBytes {
        RequestBytes {
            budget: limit.map(|l| (std::rc::Rc::new(glommio::sync::Semaphore::new(l)), l)),
        }
    }

    /// Waits until `bytes` are free and takes them until the returned
    /// permit is dropped; `None` at once when unlimited (or closed).
    pub async fn take(&self, bytes: usize) -> Option<glommio::sync::StaticPermit> {
        let (semaphore, limit) = self.budget.as_ref()?;
        let units = (bytes as u64).clamp(1, *limit);
        semaphore.acquire_static_permit(units).await.ok()
    }

    /// Bytes taken now (0 when unlimited).
    pub fn in_use(&self) -> u64 {
        self.budget
            .as_ref()
            .map_or(0, |(semaphore, limit)| limit - semaphore.available())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_holds_readers_until_bytes_come_back() {
        let mut config = ConnectionLimitsConfig::default();
        assert!(config.apply("queued.max.request.bytes", "-1").unwrap());
        assert_eq!(config.queued_max_request_bytes, None);
        assert!(config.apply("queued.max.request.bytes", "0").is_err());
        assert!(config
            .apply("rill.queued.max.request.bytes.per.connection", "100")
            .unwrap());
        let limit = config.queued_max_request_bytes_per_connection;
        glommio::LocalExecutorBuilder::default()
            .io_memory(1 << 20)
            .make()
            .unwrap()
            .run(async move {
                assert!(RequestBytes::new(None).take(1 << 30).await.is_none());
                let budget = RequestBytes::new(limit);
                let first = budget.take(60).await;
                assert_eq!(budget.in_use(), 60);
                let done = std::rc::Rc::new(Cell::new(false));
                let waiter = {
                    let (budget, done) = (budget.clone(), done.clone());
                    glommio::spawn_local(async move {
                        let held = budget.take(60).await;
                        done.set(true);
                        held
                    })
                };
                glommio::timer::sleep(Duration::from_millis(20)).await;
                assert!(!done.get(), "60 + 60 bytes fit a budget of 100");
                drop(first);
                let second = waiter.await;
                assert!(done.get());
                // A frame larger than the whole budget takes all of it.
                drop(second);
                let big = budget.take(1000).await;
                assert_eq!(budget.in_use(), 100);
                drop(big);
                assert_eq!(budget.in_use(), 0);
            });
    }

    #[test]
    fn settings_parse_with_kafka_names() {
        let mut config = ConnectionLimitsConfig::default();
        assert!(config.apply("max.connections.per.ip", "3").unwrap());
        assert!(config
            .apply("max.connections.per.ip.overrides", "10.0.0.1:7, [::1]:2")
            .unwrap());
        assert!(config.apply("connections.max.idle.ms", "500").unwrap());
        assert!(!config.apply("max.connections", "9").unwrap());
        assert_eq!(config.limit_for("10.0.0.1".parse().unwrap()), 7);
        assert_eq!(config.limit_for("::1".parse().unwrap()), 2);
        assert_eq!(config.limit_for("10.0.0.2".parse().unwrap()), 3);
        assert_eq!(config.max_idle(), Duration::from_millis(500));
        assert!(config
            .apply("max.connections.per.ip.overrides", "host")
            .is_err());
        assert!(config.apply("connections.max.idle.ms", "0").is_err());
        assert!(config.apply("max.connections.per.ip", "-1").is_err());
    }

    #[test]
    fn per_ip_slots_are_counted_and_given_back() {
        let counts = Arc::new(PerIpConnections::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let first = PerIpConnections::try_acquire(&counts, ip, 2).unwrap();
        let _second = PerIpConnections::try_acquire(&counts, ip, 2).unwrap();
        assert!(PerIpConnections::try_acquire(&counts, ip, 2).is_none());
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(PerIpConnections::try_acquire(&counts, other, 2).is_some());
        drop(first);
        assert_eq!(counts.open_from(ip), 1);
        assert!(PerIpConnections::try_acquire(&counts, ip, 2).is_some());
    }

    #[test]
    fn the_limiter_admits_one_line_per_period_and_counts_the_rest() {
        let limiter = LogLimiter::new(Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(limiter.admit(start), Some(0));
        assert_eq!(limiter.admit(start + Duration::from_millis(10)), None);
        assert_eq!(limiter.admit(start + Duration::from_millis(20)), None);
        assert_eq!(limiter.admit(start + Duration::from_secs(2)), Some(2));
    }
}
