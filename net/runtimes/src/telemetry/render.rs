//! The client metrics every shard holds, as Prometheus text (pure): one
//! family per metric name, every series labelled with `client_id` and
//! `client_instance_id` (and its own attributes).
//!
//! These families are named by the clients, not declared by the broker,
//! so they are written here rather than through the metrics registry
//! (whose families are declared once, for `docs/metrics.md`); the text
//! follows the same format (0.0.4) and is appended to the registry's.

use super::instances::{InstanceSnapshot, SeriesKind};
use super::otlp::CLIENT_LABELS;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One family's descriptor and sample lines.
#[derive(Default)]
struct FamilyText {
    help: String,
    /// `None` until a sample; `Some(None)` once two kinds were seen.
    kind: Option<Option<SeriesKind>>,
    samples: Vec<String>,
}

/// The instances of every shard, each kept once (a client whose
/// connection moved to another shard may be held by both until the old
/// copy goes silent: the one that pushed last wins).
pub fn merge(snapshots: Vec<InstanceSnapshot>) -> Vec<InstanceSnapshot> {
    let mut newest: BTreeMap<String, InstanceSnapshot> = BTreeMap::new();
    for snapshot in snapshots {
        match newest.get(&snapshot.instance_id) {
            Some(held) if held.pushed_ago_ms <= snapshot.pushed_ago_ms => {}
            _ => {
                newest.insert(snapshot.instance_id.clone(), snapshot);
            }
        }
    }
    newest.into_values().collect()
}

/// The text of `instances` (already merged).
pub fn render(instances: &[InstanceSnapshot]) -> String {
    let mut families: BTreeMap<&str, FamilyText> = BTreeMap::new();
    for instance in instances {
        for ((name, labels), series) in &instance.series {
            let family = families.entry(name).or_default();
            if family.help.is_empty() {
                family.help.clone_from(&series.help);
            }
            family.kind = match family.kind {
                None => Some(Some(series.kind)),
                Some(Some(kind)) if kind == series.kind => Some(Some(kind)),
                Some(_) => Some(None),
            };
            let mut line = format!(
                "{name}{{{}=\"{}\",{}=\"{}\"",
                CLIENT_LABELS[0],
                escape_label(&instance.client_id),
                CLIENT_LABELS[1],
                escape_label(&instance.instance_id)
            );
            for (label, value) in labels {
                let _ = write!(line, ",{label}=\"{}\"", escape_label(value));
            }
            let _ = write!(line, "}} {}", number(series.value));
            family.samples.push(line);
        }
    }
    let mut out = String::new();
    for (name, family) in families {
        let kind = match family.kind {
            Some(Some(SeriesKind::Gauge)) => "gauge",
            Some(Some(SeriesKind::Counter)) => "counter",
            _ => "untyped",
        };
        let help = if family.help.is_empty() {
            "A metric a client pushed (KIP-714)."
        } else {
            &family.help
        };
        let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for sample in family.samples {
            out.push_str(&sample);
            out.push('\n');
        }
    }
    out
}

/// A sample value as the text format writes one.
fn number(value: f64) -> String {
    if value.is_nan() {
        String::from("NaN")
    } else if value.is_infinite() {
        String::from(if value > 0.0 { "+Inf" } else { "-Inf" })
    } else {
        value.to_string()
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::instances::Series;

    fn instance(id: &str, client: &str, ago: u64, value: f64) -> InstanceSnapshot {
        let mut series = BTreeMap::new();
        series.insert(
            ("rill_client_q_avg".to_owned(), Vec::new()),
            Series {
                help: String::from("Queue time.\nIn ms."),
                kind: SeriesKind::Gauge,
                value,
            },
        );
        series.insert(
            (
                "rill_client_lat_max".to_owned(),
                vec![("node_id".to_owned(), "1".to_owned())],
            ),
            Series {
                help: String::new(),
                kind: SeriesKind::Gauge,
                value: 2.0,
            },
        );
        InstanceSnapshot {
            instance_id: id.to_owned(),
            client_id: client.to_owned(),
            pushed_ago_ms: ago,
            series,
        }
    }

    #[test]
    fn one_family_per_name_with_every_client_labelled() {
        let text = render(&merge(vec![
            instance("B", "app\"2", 5, 1.0),
            instance("A", "app1", 5, 0.5),
        ]));
        assert_eq!(
            text,
            "# HELP rill_client_lat_max A metric a client pushed (KIP-714).\n\
             # TYPE rill_client_lat_max gauge\n\
             rill_client_lat_max{client_id=\"app1\",client_instance_id=\"A\",node_id=\"1\"} 2\n\
             rill_client_lat_max{client_id=\"app\\\"2\",client_instance_id=\"B\",node_id=\"1\"} 2\n\
             # HELP rill_client_q_avg Queue time.\\nIn ms.\n\
             # TYPE rill_client_q_avg gauge\n\
             rill_client_q_avg{client_id=\"app1\",client_instance_id=\"A\"} 0.5\n\
             rill_client_q_avg{client_id=\"app\\\"2\",client_instance_id=\"B\"} 1\n"
        );
    }

    #[test]
    fn an_instance_on_two_shards_is_shown_once_from_its_last_push() {
        let merged = merge(vec![
            instance("A", "c", 900, 1.0),
            instance("A", "c", 10, 2.0),
        ]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].pushed_ago_ms, 10);
    }

    #[test]
    fn kinds_that_disagree_make_an_untyped_family() {
        let mut counter = instance("B", "c", 1, 1.0);
        for series in counter.series.values_mut() {
            series.kind = SeriesKind::Counter;
        }
        let text = render(&[instance("A", "c", 1, 1.0), counter]);
        assert!(
            text.contains("# TYPE rill_client_q_avg untyped\n"),
            "{text}"
        );
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
    }
}
