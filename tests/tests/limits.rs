//! Structural limits for every crate of the workspace (issue #32 point 5).
//! Each check reads the source tree, not the build, and fails with every
//! finding at once:
//!
//! 1. **No file-level import cycle in any crate.** The crates are the root
//!    `Cargo.toml`'s `[workspace] members` (a glob such as `"net/*"` expands
//!    to the directories under it holding a `Cargo.toml`; `exclude` is
//!    honoured) and the root package. Each target of a crate (`src/lib.rs`,
//!    `src/main.rs`, `src/bin/*.rs`) is walked through its `mod x;`
//!    declarations, and the graph of `rill_tests::layering` is built over
//!    its files: every `use crate::…`/`super::…`/`self::…` path (nested
//!    `{…}` groups expanded, `as` renames followed) and every inline path
//!    is an edge to the file defining what it names, `pub use` re-exports
//!    are followed to the defining file, and `mod x;` is no edge. Test code
//!    is left out. As in `tests/tests/layering.rs`, a module's use of its
//!    own descendants is no edge (a `mod.rs` is its children's face; the
//!    child's use of its parent and uses between siblings are what count),
//!    unless [`PARENTS_USING_CHILDREN_ARE_EDGES`] says otherwise.
//! 2. **Crates depend down a declared layer order** ([`LAYERS`]). Every
//!    dependency of one member on another in `[dependencies]` or
//!    `[build-dependencies]` (also under `[target.*]`), written as a path or
//!    as `workspace = true` resolving to a path, must point to a strictly
//!    lower layer. `[dev-dependencies]` may point anywhere: tests and benches
//!    may use any crate. A member missing from the table fails; a table entry
//!    naming no member is fine (a crate still to be split out).
//! 3. **No non-test function over [`MAX_FN_LINES`] lines** in any crate's
//!    `src/` (the root package's too).
//!
//! How the function check counts: each `.rs` file under `src/` is parsed
//! with `syn`; a function runs from the line of its signature's first token
//! — `pub`/`pub(crate)` if any, else `const`/`async`/`unsafe`/`extern`/`fn`;
//! attributes and doc comments above it do not count — to the line of its
//! closing brace, inclusive. Free functions, inherent and trait-impl
//! methods, trait default methods and functions nested in a body are each
//! counted (a nested fn also counts toward its outer one's lines); closures
//! are not functions, and functions written inside macro invocations
//! (`proptest! { … }`) are not seen. Left out: anything under a
//! `#[cfg(test)]` (or `cfg(all(test, …))`) item or module, `#[test]`-style
//! functions (any attribute whose last segment is `test`), and files that
//! are declared only as `#[cfg(test)] mod x;`. Files under `tests/`,
//! `benches/` and `examples/` are outside `src/` and not read. A file that
//! does not parse is a failure naming it. Findings read
//! `path:line name (N lines)`, longest first; a method shows as
//! `Type::name`, a nested fn as `outer::name`.
//!
//! The `selftest_*` tests below build small crates in a temp dir and check
//! that each check fails on a deliberate violation.

use rill_tests::limits::{cycle_problems, layer_problems, long_function_problems};
use std::path::{Path, PathBuf};

/// Whether a parent module's use of its own child (`use self::world::World`
/// in `sim/mod.rs` while `sim/world.rs` uses `super::SimConfig`) closes a
/// cycle. `false` keeps the rules of `rill_tests::layering`, under which
/// such façades are allowed; `true` also flags every module that uses a
/// child while a child uses it: 14 such loops on the pre-split tree, the
/// replication sim's among them, and `engine::log`, `net::handlers`,
/// `tuning::checks`.
const PARENTS_USING_CHILDREN_ARE_EDGES: bool = false;

/// The longest a non-test function may be, in lines.
const MAX_FN_LINES: usize = 80;

/// Each workspace package's layer: a crate may depend (outside
/// dev-dependencies) only on crates of a strictly lower layer.
const LAYERS: &[(&str, u32)] = &[
    // Beside the broker: storage, the host tuner, the load generator.
    ("rill-engine", 0),
    ("rill-tuning", 0),
    ("rill-bench", 0),
    // The object-store client of tiered storage: it imports no rill crate,
    // and the broker's crates will call it.
    ("rill-remote-storage", 0),
    // `rill admin`: a client built on the load generator's Kafka client.
    ("rill-admin", 1),
    // The pure cores.
    ("rill-cluster", 1),
    ("rill-coordinators", 1),
    // The security model reads the SCRAM credential type the metadata
    // image stores, so it sits above the cluster cores.
    ("rill-security", 2),
    ("rill-kernel", 3),
    ("rill-runtimes", 4),
    ("rill-api", 5),
    ("rill-server", 6),
    // The root package: the `rill` binary.
    ("rill", 7),
    ("rill-tests", 8),
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Fails with every problem, one a line, under `title`.
fn assert_none(title: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{title}: {} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn no_crate_has_a_file_level_import_cycle() {
    assert_none(
        "file-level import cycles",
        &cycle_problems(&workspace_root(), PARENTS_USING_CHILDREN_ARE_EDGES),
    );
}

#[test]
fn crates_depend_down_the_layer_order() {
    assert_none("crate layering", &layer_problems(&workspace_root(), LAYERS));
}

#[test]
fn no_function_is_over_the_line_limit() {
    assert_none(
        &format!("functions over {MAX_FN_LINES} lines"),
        &long_function_problems(&workspace_root(), MAX_FN_LINES),
    );
}

/// Writes `files` (path, text) under `dir`.
fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

/// A workspace with `a` (member), `libs/*` (glob) and a root package.
fn workspace(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    write_files(
        dir.path(),
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"a\", \"libs/*\"]\n\
                 [workspace.dependencies]\nb = { path = \"libs/b\", package = \"x-b\" }\n\
                 [package]\nname = \"x-root\"\n\
                 [dependencies]\nb.workspace = true\na = { path = \"a\", package = \"x-a\" }\n",
            ),
            ("src/main.rs", "fn main() {}\n"),
            ("a/Cargo.toml", "[package]\nname = \"x-a\"\n"),
            ("a/src/lib.rs", "pub mod one;\npub mod two;\n"),
            ("a/src/one.rs", "pub fn f() {}\n"),
            ("a/src/two.rs", "pub fn g() { crate::one::f(); }\n"),
            ("libs/b/Cargo.toml", "[package]\nname = \"x-b\"\n"),
            ("libs/b/src/lib.rs", "pub fn h() {}\n"),
            ("libs/notes/README", "not a crate\n"),
        ],
    );
    write_files(dir.path(), extra);
    dir
}

const TEST_LAYERS: &[(&str, u32)] = &[("x-a", 0), ("x-b", 0), ("x-root", 1), ("x-unmade", 2)];

#[test]
fn selftest_a_clean_workspace_passes_every_check() {
    let dir = workspace(&[]);
    assert_eq!(cycle_problems(dir.path(), true), Vec::<String>::new());
    assert_eq!(
        layer_problems(dir.path(), TEST_LAYERS),
        Vec::<String>::new()
    );
    assert_eq!(long_function_problems(dir.path(), 80), Vec::<String>::new());
}

#[test]
fn selftest_a_two_file_cycle_is_found() {
    let dir = workspace(&[("a/src/one.rs", "use super::two::g;\npub fn f() {}\n")]);
    let found = vec!["x-a (a/src/lib.rs): crate::one <-> crate::two"];
    assert_eq!(cycle_problems(dir.path(), false), found);
    assert_eq!(cycle_problems(dir.path(), true), found);
}

#[test]
fn selftest_a_parent_and_child_using_each_other_is_a_cycle_only_when_asked() {
    let dir = workspace(&[
        (
            "a/src/one.rs",
            "mod child;\nuse self::child::C;\npub struct P;\npub fn f(_: C) { crate::two::g(); }\n",
        ),
        (
            "a/src/one/child.rs",
            "pub struct C;\nfn g(_: super::P) {}\n",
        ),
        // A test-only file's imports are not edges.
        ("a/src/two.rs", "#[cfg(test)]\nmod t;\npub fn g() {}\n"),
        ("a/src/two/t.rs", "use crate::one::f;\n"),
    ]);
    assert_eq!(cycle_problems(dir.path(), false), Vec::<String>::new());
    assert_eq!(
        cycle_problems(dir.path(), true),
        vec!["x-a (a/src/lib.rs): crate::one <-> crate::one::child"]
    );
}

#[test]
fn selftest_an_upward_crate_dependency_is_found() {
    let dir = workspace(&[(
        "libs/b/Cargo.toml",
        "[package]\nname = \"x-b\"\n[dependencies]\na = { path = \"../../a\", package = \"x-a\" }\n\
         [dev-dependencies]\nroot = { path = \"../..\", package = \"x-root\" }\n",
    )]);
    // Same layer is not lower; the dev-dependency on the root is allowed.
    assert_eq!(
        layer_problems(dir.path(), TEST_LAYERS),
        vec![
            "`x-b` (layer 0) depends on `x-a` (layer 0) in [dependencies]: \
             a crate may depend only on crates of a lower layer"
        ]
    );
    let upward: &[(&str, u32)] = &[("x-a", 2), ("x-b", 0), ("x-root", 1)];
    let problems = layer_problems(dir.path(), upward);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("`x-root` (layer 1) depends on `x-a` (layer 2)"));
    assert!(problems[1].starts_with("`x-b` (layer 0) depends on `x-a` (layer 2)"));
}

#[test]
fn selftest_a_member_missing_from_the_layer_table_is_found() {
    let dir = workspace(&[
        ("libs/c/Cargo.toml", "[package]\nname = \"x-c\"\n"),
        ("libs/c/src/lib.rs", ""),
    ]);
    assert_eq!(
        layer_problems(dir.path(), TEST_LAYERS),
        vec!["workspace member `x-c` (libs/c) has no layer: add it to the layer table"]
    );
}

/// A function of `lines` lines in all, attributes and doc above not counted.
fn function(name: &str, lines: usize) -> String {
    let body = "    let _ = 1;\n".repeat(lines - 2);
    format!("/// Doc.\n#[inline]\npub fn {name}() {{\n{body}}}\n")
}

#[test]
fn selftest_an_80_line_function_passes_and_an_81_line_one_fails() {
    let text = format!("{}{}", function("fits", 80), function("too_long", 81));
    let dir = workspace(&[("libs/b/src/lib.rs", &text)]);
    // `fits` takes lines 3..=82; `too_long` starts after its doc and attribute.
    assert_eq!(
        long_function_problems(dir.path(), 80),
        vec!["libs/b/src/lib.rs:85 too_long (81 lines)"]
    );
}

#[test]
fn selftest_test_code_is_not_counted() {
    let lib = format!(
        "#[cfg(test)]\n{}#[test]\n{}#[cfg(test)]\nmod tests;\n\
         #[cfg(all(test, unix))]\nmod more {{\n{}}}\n",
        function("cfg_test_fn", 90),
        function("test_fn", 90),
        function("in_test_mod", 90),
    );
    let dir = workspace(&[
        ("libs/b/src/lib.rs", &lib),
        ("libs/b/src/tests.rs", &function("in_tests_file", 90)),
        // A tests file under the crate's tests/ is not in src/.
        ("libs/b/tests/it.rs", &function("integration", 90)),
    ]);
    assert_eq!(long_function_problems(dir.path(), 80), Vec::<String>::new());
    // The same file declared without cfg(test) is counted.
    let dir = workspace(&[
        ("libs/b/src/lib.rs", "mod tests;\n"),
        ("libs/b/src/tests.rs", &function("in_tests_file", 90)),
    ]);
    assert_eq!(
        long_function_problems(dir.path(), 80),
        vec!["libs/b/src/tests.rs:3 in_tests_file (90 lines)"]
    );
}

#[test]
fn selftest_methods_and_nested_fns_are_counted_on_their_own() {
    let inner = function("inner", 81).replace('\n', "\n    ");
    let text = format!(
        "pub struct S;\nimpl S {{\n    fn outer() {{\n    {inner}\n    }}\n}}\n\
         pub trait T {{\n{}}}\n",
        function("provided", 85).replace("pub fn", "fn")
    );
    let dir = workspace(&[("libs/b/src/lib.rs", &text)]);
    assert_eq!(
        long_function_problems(dir.path(), 80),
        vec![
            "libs/b/src/lib.rs:3 S::outer (86 lines)",
            "libs/b/src/lib.rs:93 T::provided (85 lines)",
            "libs/b/src/lib.rs:6 S::outer::inner (81 lines)",
        ]
    );
}

#[test]
fn selftest_a_file_that_does_not_parse_fails() {
    let dir = workspace(&[("libs/b/src/lib.rs", "pub fn broken( {\n")]);
    let problems = long_function_problems(dir.path(), 80);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("libs/b/src/lib.rs") && problems[0].contains("does not parse"),
        "{problems:?}"
    );
}
