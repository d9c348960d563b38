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
