//! The layers of `engine` and `net` run one way: no file-level import cycle
//! (DESIGN.md, "Inside net, layers run one way"). A new cycle fails here with
//! the files that form it.

use rill_tests::layering::{cycles, import_graph, module_name, read_crate};
use std::path::Path;

fn assert_no_cycles(crate_src: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_src);
    let files = read_crate(&root).expect("crate sources readable");
    assert!(
        files.len() > 5,
        "{crate_src}: found only {} files",
        files.len()
    );
    let found = cycles(&import_graph(&files));
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| module_name(m))
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "{crate_src} has {} import cycle(s):\n{}",
        found.len(),
        shown.join("\n")
    );
}

#[test]
fn engine_has_no_import_cycles() {
    assert_no_cycles("engine/src");
}

#[test]
fn net_has_no_import_cycles() {
    assert_no_cycles("net/src");
}

/// The layer of a net module, from the bottom (0) up; the test below checks
/// that every import points to the same layer or a lower one.
fn net_layer(module: &[String]) -> usize {
    match module.first().map(String::as_str) {
        // The shard runtime: state, the owner call, the mesh, and the
        // plain modules it is made of.
        None
        | Some(
            "shard" | "call" | "mesh" | "services" | "topics" | "metrics" | "sendpath" | "config"
            | "error" | "frame" | "fetch_response" | "cluster_config" | "conn_limits" | "security"
            | "listen" | "fatal",
        ) => 0,
        // Services: partition routing, the topic controller, the coordinators
        // (pure cores and runtimes), producer ids.
        Some(
            "routing"
            | "controller"
            | "group"
            | "group_runtime"
            | "txn"
            | "txn_runtime"
            | "producer_ids"
            | "quotas"
            | "cluster_runtime"
            | "replication_runtime",
        ) => 1,
        Some("handlers") => 2,
        // The process around them: accept, read frames, /metrics, start.
        Some(_) => 3,
    }
}

#[test]
fn net_layers_import_downward_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("net/src");
    let files = read_crate(&root).expect("crate sources readable");
    let graph = import_graph(&files);
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for target in targets {
            if net_layer(target) > net_layer(from) {
                upward.push(format!("{} -> {}", module_name(from), module_name(target)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that point up a layer (shard runtime < services < handlers < serve):\n{}",
        upward.join("\n")
    );
    // The runtime names no service: the sample below would fail if it did.
    assert_eq!(net_layer(&["mesh".to_string()]), 0);
    assert_eq!(net_layer(&["txn_runtime".to_string()]), 1);
}
