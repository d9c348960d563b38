//! Metric families declared once: name, type, HELP and label names. The
//! collectors encode their samples through these declarations into a
//! prometheus-client [`Registry`], and [`MetricsRegistry::families`] lists
//! them (for docs and tests).
//!
//! The text is Prometheus' text format 0.0.4 (prometheus-client's
//! `prometheus_text` encoder). prometheus-client has no summary type: a
//! [`Kind::Summary`] family is encoded as three untyped families (the
//! quantiles, `_sum`, `_count`), and [`MetricsRegistry::render`] then
//! rewrites their descriptors into one `# TYPE name summary`, so scrapers
//! see the summary the text format defines.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt;

/// The quantiles a summary family shows.
const QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];

/// What a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows; its name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Quantiles with `_sum` and `_count` (see the module doc for how it
    /// is written).
    Summary,
}

impl Kind {
    /// The Prometheus name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        }
    }
}

/// One metric family as declared: its name as exposed, its kind, HELP and
/// label names (in the order they are written).
#[derive(Debug, PartialEq, Eq)]
pub struct Family {
    /// The exposed name (a counter's ends in `_total`).
    pub name: &'static str,
    /// Counter, gauge or summary.
    pub kind: Kind,
    /// The HELP text.
    pub help: &'static str,
    /// Label names; every sample has a value for each.
    pub labels: &'static [&'static str],
}

/// One sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A signed integer (gauges may go below zero).
    Int(i64),
    /// A float (seconds).
    Float(f64),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl Value {
    fn encode(self, wire: MetricType, metric: &mut MetricEncoder) -> fmt::Result {
        match (wire, self) {
            (MetricType::Counter, Value::Int(v)) => {
                let v = u64::try_from(v).unwrap_or(0);
                metric.encode_counter::<NoLabelSet, _, u64>(&v, None)
            }
            (MetricType::Counter, Value::Float(v)) => {
                metric.encode_counter::<NoLabelSet, _, f64>(&v, None)
            }
            (_, Value::Int(v)) => metric.encode_gauge(&v),
            (_, Value::Float(v)) => metric.encode_gauge(&v),
        }
    }
}

/// One sample: its label values (one per label name) and value.
pub type Sample = (Vec<String>, Value);

impl Family {
    /// A counter (`name` ends in `_total`).
    pub const fn counter(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Family {
            name,
            kind: Kind::Counter,
            help,
            labels,
        }
    }

    /// A gauge.
    pub const fn gauge(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Family {
            name,
            kind: Kind::Gauge,
            help,
            labels,
        }
    }

    /// A summary of latencies in seconds (label `quantile`).
    pub const fn summary(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            kind: Kind::Summary,
            help,
            labels: &["quantile"],
        }
    }

    /// Every sample name the family writes (a summary's `_sum` and
    /// `_count` too).
    pub fn exposed_names(&self) -> Vec<String> {
        match self.kind {
            Kind::Summary => vec![
                self.name.to_string(),
                format!("{}_sum", self.name),
                format!("{}_count", self.name),
            ],
            Kind::Counter | Kind::Gauge => vec![self.name.to_string()],
        }
    }

    /// Writes the family's HELP, TYPE and `samples` (a counter or gauge).
    pub fn encode(
        &self,
        encoder: &mut DescriptorEncoder,
        samples: impl IntoIterator<Item = Sample>,
    ) -> fmt::Result {
        let (name, wire) = match self.kind {
            // prometheus-client appends `_total` to a counter's name.
            Kind::Counter => (
                self.name.strip_suffix("_total").unwrap_or(self.name),
                MetricType::Counter,
            ),
            Kind::Gauge => (self.name, MetricType::Gauge),
            Kind::Summary => (self.name, MetricType::Unknown),
        };
        debug_assert!(self.kind != Kind::Counter || self.name.ends_with("_total"));
        let mut metric = encoder.encode_descriptor(name, self.help, None, wire)?;
        for (values, value) in samples {
            debug_assert_eq!(values.len(), self.labels.len(), "{}", self.name);
            let labels: Vec<(&str, String)> = self.labels.iter().copied().zip(values).collect();
            value.encode(wire, &mut metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// Writes a summary family of microsecond latencies, in seconds: the
    /// quantiles, `_sum` and `_count`, each an untyped family until
    /// [`MetricsRegistry::render`] retypes them.
    pub fn encode_summary(
        &self,
        encoder: &mut DescriptorEncoder,
        latency_us: &hdrhistogram::Histogram<u64>,
    ) -> fmt::Result {
        debug_assert_eq!(self.kind, Kind::Summary);
        let quantiles = QUANTILES.iter().map(|&q| {
            let value_s = latency_us.value_at_quantile(q) as f64 / 1e6;
            (vec![format!("{q}")], Value::Float(value_s))
        });
        self.encode(encoder, quantiles)?;
        let sum_s = latency_us.mean() * latency_us.len() as f64 / 1e6;
        let sum = format!("{}_sum", self.name);
        encoder
            .encode_descriptor(&sum, self.help, None, MetricType::Unknown)?
            .encode_gauge(&sum_s)?;
        let count = format!("{}_count", self.name);
        encoder
            .encode_descriptor(&count, self.help, None, MetricType::Unknown)?
            .encode_gauge(&latency_us.len())
    }
}

/// A collector that names the families it writes.
pub trait Declared: Collector {
    /// The families [`Collector::encode`] writes, in order.
    fn families(&self) -> Vec<&'static Family>;
}

/// A prometheus-client registry that remembers the families of the
/// collectors registered with it.
#[derive(Debug, Default)]
pub struct MetricsRegistry {
    registry: Registry,
    families: Vec<&'static Family>,
}

impl MetricsRegistry {
    /// Registers `collector` and its families.
    pub fn register(&mut self, collector: impl Declared) {
        self.families.extend(collector.families());
        self.registry.register_collector(Box::new(collector));
    }

    /// Every family registered, in registration order.
    pub fn families(&self) -> &[&'static Family] {
        &self.families
    }

    /// The collectors' samples as Prometheus text (format 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        let summaries: Vec<&str> = (self.families.iter())
            .filter(|family| family.kind == Kind::Summary)
            .map(|family| family.name)
            .collect();
        retype_summaries(&out, &summaries)
    }
}

/// `text` with each summary's untyped descriptors made one summary
/// descriptor: `# TYPE name summary`, and no descriptor of its own for
/// `name_sum` and `name_count` (their samples stay).
fn retype_summaries(text: &str, summaries: &[&str]) -> String {
    let described = |line: &str, prefix: &str| -> Option<String> {
        let name = line.strip_prefix(prefix)?.split(' ').next()?;
        Some(name.to_owned())
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let descriptor = described(line, "# TYPE ").or_else(|| described(line, "# HELP "));
        if let Some(name) = descriptor {
            let base = name
                .strip_suffix("_sum")
                .or_else(|| name.strip_suffix("_count"));
            if base.is_some_and(|base| summaries.contains(&base)) {
                continue;
            }
            if summaries.contains(&name.as_str()) && line.starts_with("# TYPE ") {
                out.push_str(&format!("# TYPE {name} summary\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_get_one_summary_descriptor() {
        let text = "# HELP lat_seconds Latency.\n# TYPE lat_seconds untyped\n\
                    lat_seconds{quantile=\"0.5\"} 0.1\n\
                    # HELP lat_seconds_sum Latency.\n# TYPE lat_seconds_sum untyped\n\
                    lat_seconds_sum 3\n\
                    # HELP lat_seconds_count Latency.\n# TYPE lat_seconds_count untyped\n\
                    lat_seconds_count 30\n\
                    # HELP other_count A gauge.\n# TYPE other_count gauge\nother_count 1\n";
        let out = retype_summaries(text, &["lat_seconds"]);
        assert_eq!(
            out,
            "# HELP lat_seconds Latency.\n# TYPE lat_seconds summary\n\
             lat_seconds{quantile=\"0.5\"} 0.1\nlat_seconds_sum 3\nlat_seconds_count 30\n\
             # HELP other_count A gauge.\n# TYPE other_count gauge\nother_count 1\n"
        );
    }
}
