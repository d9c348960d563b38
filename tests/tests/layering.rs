//! Inside each crate, files import one way: no file-level import cycle
//! (DESIGN.md, "Crates depend downward only"). A new cycle fails here with
//! the files that form it. Between crates, Cargo itself refuses a cycle.

use rill_tests::layering::{cycles, import_graph, module_name, read_crate};
use std::path::Path;

fn assert_no_cycles(crate_src: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_src);
    let files = read_crate(&root).expect("crate sources readable");
    assert!(
        files.len() > 2,
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
fn broker_crates_have_no_import_cycles() {
    for krate in [
        "security",
        "coordinators",
        "kernel",
        "runtimes",
        "api",
        "server",
        "remote-storage",
    ] {
        assert_no_cycles(&format!("net/{krate}/src"));
    }
}

/// The layer of a module of the API layer (`net/api`), from the bottom up.
fn api_layer(module: &[String]) -> usize {
    match module.first().map(String::as_str) {
        None | Some("frame" | "fetch_response" | "produce_scan") => 0,
        Some("handlers") => 1,
        // Connections and the fuzzing entry points drive the handlers.
        Some(_) => 2,
    }
}

#[test]
fn api_layer_imports_downward_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("net/api/src");
    let files = read_crate(&root).expect("crate sources readable");
    let graph = import_graph(&files);
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for target in targets {
            if api_layer(target) > api_layer(from) {
                upward.push(format!("{} -> {}", module_name(from), module_name(target)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that point up a layer (frame, fetch_response, produce_scan < handlers < connection):\n{}",
        upward.join("\n")
    );
    // The check sees the handlers' own imports: the registry is one of them.
    assert!(graph.keys().any(|m| api_layer(m) == 1));
}
