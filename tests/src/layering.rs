//! A file-level import graph of a crate's sources, and the cycles in it.
//!
//! DESIGN.md asks that the layers of `engine` and `net` run one way
//! (handlers → services → shard runtime → engine) with no import cycles. This
//! module reads a crate's `src/` the way a reviewer would: every `crate::…`,
//! `super::…`, `self::…` and child-module path names the file that defines
//! it, and each such reference is an edge. Cycles are the strongly connected
//! components of more than one file.
//!
//! What counts, and why:
//! - `pub use` lines are re-exports, not dependencies: a path that lands on a
//!   re-exported name is followed to the file that defines it, and the
//!   re-export line itself adds no edge (otherwise every `mod.rs` that
//!   re-exports a child's type would sit in a cycle with that child).
//! - A module's uses of its own descendants add no edge: a parent declares
//!   its children and is their face (`log/mod.rs` holds fields of the types
//!   its children define, and they implement its methods). The direction that
//!   counts is the child's use of its parent, and any use between siblings.
//! - Test code is left out (`#[cfg(test)]` items and files named `tests.rs`):
//!   tests may reach anywhere.
//! - Method calls are invisible to a path reader; the graph is about imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One source file: its module path (`["log", "append"]` for
/// `src/log/append.rs`; `[]` for `src/lib.rs`) and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Module path from the crate root.
    pub module: Vec<String>,
    /// The file's text.
    pub text: String,
}

/// Reads every `.rs` file under `src_dir` (a crate's `src/`), skipping test-only
/// files (`tests.rs`).
pub fn read_crate(src_dir: &Path) -> std::io::Result<Vec<SourceFile>> {
    let mut files = Vec::new();
    read_dir_into(src_dir, &[], &mut files)?;
    Ok(files)
}

fn read_dir_into(
    dir: &Path,
    prefix: &[String],
    files: &mut Vec<SourceFile>,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            let mut module = prefix.to_vec();
            module.push(name);
            read_dir_into(&path, &module, files)?;
            continue;
        }
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem == "tests" {
            continue;
        }
        let mut module = prefix.to_vec();
        if !(stem == "mod" || (prefix.is_empty() && (stem == "lib" || stem == "main"))) {
            module.push(stem.to_string());
        }
        files.push(SourceFile {
            module,
            text: std::fs::read_to_string(&path)?,
        });
    }
    Ok(())
}

/// Shows a module path as `crate::a::b`.
pub fn module_name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        format!("crate::{}", module.join("::"))
    }
}

/// The file-level import graph: module → the modules it uses. A module's
/// uses of its own descendants add no edge (see the module doc).
pub fn import_graph(files: &[SourceFile]) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    file_import_graph(files, false)
}

/// [`import_graph`], where with `parents_count` a module's uses of its
/// descendants are edges too (a `mod.rs` that uses `child::Type`, other than
/// in a `pub use` re-export, and a child that uses the parent's items close a
/// file-level cycle).
pub fn file_import_graph(
    files: &[SourceFile],
    parents_count: bool,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let stripped: Vec<(Vec<String>, String)> = files
        .iter()
        .map(|f| {
            (
                f.module.clone(),
                strip_tests(&strip_comments_and_strings(&f.text)),
            )
        })
        .collect();
    // Re-exports: (module, name) -> the absolute path it stands for.
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for (module, text) in &stripped {
        for statement in use_statements(text) {
            if !statement.public {
                continue;
            }
            for path in expand_use_tree(&statement.tree) {
                let Some(absolute) = absolute_path(module, &path, &modules) else {
                    continue;
                };
                let name = path.last().cloned().unwrap_or_default();
                reexports.insert((module.clone(), name), absolute);
            }
        }
    }
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, text) in &stripped {
        let edges = graph.entry(module.clone()).or_default();
        for path in referenced_paths(text) {
            let Some(absolute) = absolute_path(module, &path, &modules) else {
                continue;
            };
            if let Some(target) = defining_module(&absolute, &modules, &reexports) {
                let own = if parents_count {
                    target == *module
                } else {
                    target.starts_with(module)
                };
                if !own {
                    edges.insert(target);
                }
            }
        }
    }
    graph
}

/// The import cycles, in two views, each cycle its members sorted:
/// - files: strongly connected components of the file graph (more than one
///   file), which catches siblings that use each other and a child whose
///   use of its parent closes a loop through another module;
/// - modules: for each module, its child modules taken whole (a child with
///   everything under it is one node, an edge wherever any file under one
///   uses any file under another), which catches `a::x → b → a`: a module
///   tree whose parts lean on each other through a file the file view lets
///   pass, because the parent's use of its own child is no edge there.
pub fn cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    let mut found: BTreeSet<Vec<Vec<String>>> = strongly_connected(graph).into_iter().collect();
    let parents: BTreeSet<Vec<String>> = graph
        .keys()
        .flat_map(|m| (0..m.len()).map(move |n| m[..n].to_vec()))
        .collect();
    for parent in parents {
        let child_of = |m: &Vec<String>| -> Option<Vec<String>> {
            (m.len() > parent.len() && m.starts_with(&parent)).then(|| m[..=parent.len()].to_vec())
        };
        let mut collapsed: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (from, targets) in graph {
            let Some(from_child) = child_of(from) else {
                continue;
            };
            let edges = collapsed.entry(from_child.clone()).or_default();
            for target in targets {
                if let Some(to_child) = child_of(target) {
                    if to_child != from_child {
                        edges.insert(to_child);
                    }
                }
            }
        }
        found.extend(strongly_connected(&collapsed));
    }
    found.into_iter().collect()
}

/// The strongly connected components of more than one node, members sorted.
fn strongly_connected(
    graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Vec<Vec<Vec<String>>> {
    let nodes: Vec<&Vec<String>> = graph.keys().collect();
    let index_of: BTreeMap<&Vec<String>, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adjacency: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            graph[*n]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let mut components = tarjan(&adjacency);
    components.retain(|c| c.len() > 1);
    let mut named: Vec<Vec<Vec<String>>> = components
        .into_iter()
        .map(|c| {
            let mut members: Vec<Vec<String>> = c.into_iter().map(|i| nodes[i].clone()).collect();
            members.sort();
            members
        })
        .collect();
    named.sort();
    named
}

/// Tarjan's strongly connected components, iterative (no recursion limit).
fn tarjan(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adjacency.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next_index = 0;
    let mut components = Vec::new();
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (node, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[node] == usize::MAX {
                index[node] = next_index;
                low[node] = next_index;
                next_index += 1;
                stack.push(node);
                on_stack[node] = true;
            }
            if let Some(&next) = adjacency[node].get(*edge) {
                *edge += 1;
                if index[next] == usize::MAX {
                    work.push((next, 0));
                } else if on_stack[next] {
                    low[node] = low[node].min(index[next]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

/// Removes `//` and `/* */` comments and the contents of string and char
/// literals (so a path in a doc comment or a message is not an import).
fn strip_comments_and_strings(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(bytes.len(), |e| i + e);
            i = end;
        } else if let Some(body) = rest.strip_prefix("/*") {
            let end = body.find("*/").map_or(bytes.len(), |e| i + 2 + e + 2);
            i = end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|&c| c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let open_len = 2 + hashes;
            let end = rest[open_len..]
                .find(&close)
                .map_or(bytes.len(), |e| i + open_len + e + close.len());
            out.push_str("\"\"");
            i = end;
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = (j + 1).min(bytes.len());
        } else if bytes[i] == b'\'' && char_literal_len(rest).is_some() {
            out.push_str("' '");
            i += char_literal_len(rest).unwrap_or(1);
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a char literal starting at `rest` (`'a'`, `'\n'`, `'\''`),
/// or `None` for a lifetime.
fn char_literal_len(rest: &str) -> Option<usize> {
    let mut chars = rest.char_indices().skip(1);
    let (_, first) = chars.next()?;
    if first == '\\' {
        let close = rest[2..].find('\'')?;
        return Some(2 + close + 1);
    }
    let (at, second) = chars.next()?;
    (second == '\'').then_some(at + 1)
}

/// Removes items marked `#[cfg(test)]` (a `mod tests { … }` block, or one item).
fn strip_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // Skip to the item's end: its matching closing brace, or a `;` first.
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// A `use` statement: whether it re-exports, and its tree (`a::{b, c::d}`).
struct UseStatement {
    public: bool,
    tree: String,
}

fn use_statements(text: &str) -> Vec<UseStatement> {
    let mut statements = Vec::new();
    let mut search = 0;
    while let Some(found) = find_keyword(&text[search..], "use") {
        let at = search + found;
        let before = text[..at].trim_end();
        let public = before.ends_with("pub")
            || before.ends_with(')') && {
                // `pub(crate) use`
                before
                    .rfind("pub(")
                    .is_some_and(|p| !before[p..].contains(';'))
            };
        let Some(end) = text[at..].find(';') else {
            break;
        };
        let tree = compact_use_tree(&text[at + 3..at + end]);
        statements.push(UseStatement { public, tree });
        search = at + end + 1;
    }
    statements
}

/// A use tree without whitespace, but for the single spaces of an `as`
/// rename (`a::{b as c, d}` becomes `a::{b as c,d}`): a rename is not a
/// path segment, and a name holding the letters "as" (`base`, `task`) is
/// not a rename.
fn compact_use_tree(raw: &str) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(raw.len());
    for word in raw.split_whitespace() {
        if out.chars().next_back().is_some_and(is_word) && word.chars().next().is_some_and(is_word)
        {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Finds `word` as a whole word.
fn find_keyword(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before_ok = text[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let after_ok = text[at + word.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_whitespace());
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e` (segments).
fn expand_use_tree(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim_start_matches("::");
    let Some(open) = tree.find('{') else {
        let path: Vec<String> = tree
            .split(" as ")
            .next()
            .unwrap_or(tree)
            .split("::")
            .filter(|s| !s.is_empty() && *s != "*")
            .map(str::to_string)
            .collect();
        return vec![path];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut paths = Vec::new();
    for part in split_top_level(inner) {
        for mut sub in expand_use_tree(&part) {
            if sub.first().is_some_and(|s| s == "self") {
                sub.remove(0);
            }
            let mut full = prefix.clone();
            full.extend(sub);
            paths.push(full);
        }
    }
    paths
}

fn split_top_level(inner: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Every path a file names: its non-public `use` trees (expanded), and
/// `crate::`/`super::`/`self::`/child-module paths written inline.
fn referenced_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut without_uses = String::with_capacity(text.len());
    let mut search = 0;
    for statement in use_statements(text) {
        if !statement.public {
            paths.extend(expand_use_tree(&statement.tree));
        }
    }
    // Inline paths: blank the use statements out, then scan for `a::b` chains.
    while let Some(found) = find_keyword(&text[search..], "use") {
        let at = search + found;
        without_uses.push_str(&text[search..at]);
        let end = text[at..].find(';').map_or(text.len(), |e| at + e + 1);
        search = end;
    }
    without_uses.push_str(&text[search.min(text.len())..]);
    let bytes = without_uses.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let starts_word = (c.is_ascii_alphabetic() || c == '_')
            && (i == 0 || {
                let p = bytes[i - 1] as char;
                !(p.is_ascii_alphanumeric() || p == '_' || p == ':')
            });
        if !starts_word {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < bytes.len()
                && ((bytes[j] as char).is_ascii_alphanumeric() || bytes[j] == b'_')
            {
                j += 1;
            }
            segments.push(without_uses[start..j].to_string());
            if without_uses[j..].starts_with("::")
                && without_uses[j + 2..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            {
                j += 2;
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            paths.push(segments);
        }
        i = j.max(i + 1);
    }
    paths
}

/// Turns a path written in `module` into an absolute module path, or `None`
/// when it names another crate or the standard library.
fn absolute_path(
    module: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => {
            let mut full = module.to_vec();
            full.extend_from_slice(&path[1..]);
            Some(full)
        }
        "super" => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend_from_slice(rest);
            Some(base)
        }
        _ => {
            // A child module of this one (`use watch::OffsetWatch` in log/mod.rs),
            // or of the crate root when written in lib.rs.
            let mut child = module.to_vec();
            child.push(first.clone());
            if modules.contains(&child) {
                let mut full = module.to_vec();
                full.extend_from_slice(path);
                Some(full)
            } else {
                None
            }
        }
    }
}

/// The module that defines what `absolute` names: the longest module prefix,
/// following re-exports of the next segment.
fn defining_module(
    absolute: &[String],
    modules: &BTreeSet<Vec<String>>,
    reexports: &BTreeMap<(Vec<String>, String), Vec<String>>,
) -> Option<Vec<String>> {
    let mut current = absolute.to_vec();
    // Bounded: each step either shortens the path or follows one re-export.
    for _ in 0..64 {
        let prefix_len = (0..=current.len())
            .rev()
            .find(|&n| modules.contains(&current[..n].to_vec()))?;
        let module = current[..prefix_len].to_vec();
        let Some(next) = current.get(prefix_len) else {
            return Some(module);
        };
        match reexports.get(&(module.clone(), next.clone())) {
            Some(target) if target != &current[..=prefix_len] => {
                let mut followed = target.clone();
                followed.extend_from_slice(&current[prefix_len + 1..]);
                current = followed;
            }
            _ => return Some(module),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(module: &[&str], text: &str) -> SourceFile {
        SourceFile {
            module: module.iter().map(|s| s.to_string()).collect(),
            text: text.to_string(),
        }
    }

    fn names(cycles: &[Vec<Vec<String>>]) -> Vec<Vec<String>> {
        cycles
            .iter()
            .map(|c| c.iter().map(|m| module_name(m)).collect())
            .collect()
    }

    #[test]
    fn finds_a_cycle_through_use_and_inline_paths() {
        let files = vec![
            file(&[], "pub mod a; pub mod b; pub mod c;"),
            file(&["a"], "use crate::b::Thing;\nfn f() {}"),
            file(&["b"], "pub struct Thing; fn g() { crate::c::h(); }"),
            file(&["c"], "pub fn h() { super::a::f(); }"),
        ];
        let found = cycles(&import_graph(&files));
        assert_eq!(
            names(&found),
            vec![vec!["crate::a", "crate::b", "crate::c"]]
        );
    }

    #[test]
    fn one_way_layers_have_no_cycle() {
        let files = vec![
            file(&[], "pub mod a; pub mod b;"),
            file(&["a"], "use crate::b::{Thing, other::{X, Y}};"),
            file(&["b"], "pub struct Thing;"),
        ];
        assert!(cycles(&import_graph(&files)).is_empty());
    }

    #[test]
    fn reexports_comments_strings_and_tests_are_not_edges() {
        let files = vec![
            file(&[], "pub mod log; pub use log::Reader;"),
            file(
                &["log"],
                "mod read; pub use read::Reader;\npub struct Log;\n\
                 // crate::log::read::x in a comment\nfn f() { let s = \"crate::log::read::x\"; }\n\
                 #[cfg(test)]\nmod tests { use super::read::Reader; }",
            ),
            // The child uses its parent's type: one edge, child -> parent.
            file(
                &["log", "read"],
                "use crate::Log;\npub struct Reader;\nuse super::Log as L;",
            ),
        ];
        let graph = import_graph(&files);
        assert!(cycles(&graph).is_empty(), "{graph:?}");
        let parent: Vec<String> = vec!["log".into()];
        assert!(graph[&vec!["log".to_string(), "read".to_string()]].contains(&parent));
    }

    #[test]
    fn a_child_that_leans_on_a_module_leaning_on_its_parent_is_a_cycle() {
        let files = vec![
            file(&[], "pub mod txn; pub mod handlers;"),
            file(&["txn"], "mod execute; pub struct Request;"),
            file(
                &["txn", "execute"],
                "fn f() { crate::handlers::init::next_id(); }",
            ),
            file(&["handlers"], "pub mod init;"),
            file(
                &["handlers", "init"],
                "pub fn next_id() {} fn g(_: crate::txn::Request) {}",
            ),
        ];
        assert_eq!(
            names(&cycles(&import_graph(&files))),
            vec![vec!["crate::handlers", "crate::txn"]]
        );
    }

    #[test]
    fn a_path_through_a_reexport_reaches_the_defining_file() {
        let files = vec![
            file(&[], "pub mod types; pub mod a; pub use types::Tp;"),
            file(&["types"], "pub struct Tp; fn f() { crate::a::g(); }"),
            // Names the root re-export; the edge goes to `types`, closing a cycle.
            file(&["a"], "pub fn g() {} fn h(_: crate::Tp) {}"),
        ];
        assert_eq!(
            names(&cycles(&import_graph(&files))),
            vec![vec!["crate::a", "crate::types"]]
        );
    }

    fn edges(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>, from: &[&str]) -> Vec<String> {
        let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
        graph[&from].iter().map(|m| module_name(m)).collect()
    }

    #[test]
    fn use_forms_name_the_files_they_import() {
        let files = vec![
            file(
                &[],
                "pub mod base; pub mod task; pub mod net; pub mod deep; mod user;",
            ),
            file(&["base"], "pub struct B;"),
            file(&["task"], "pub struct T;"),
            file(&["deep"], "pub mod inner; pub mod other;"),
            file(&["deep", "inner"], "pub struct I;"),
            file(&["deep", "other"], "pub struct O;"),
            // `mod x;` is a declaration, not an import; nested groups, `as`
            // renames, `self::` and `super::` are.
            file(
                &["net"],
                "mod sub;\nuse crate::base::B as Base;\n\
                 use crate::{task::T, deep::{inner::{I}, other::O as Other}};\n\
                 pub use self::sub::S;",
            ),
            file(
                &["net", "sub"],
                "pub struct S; use super::super::base::{self as b};",
            ),
            file(&["user"], "use crate::net::S; fn f(_: super::task::T) {}"),
        ];
        let graph = import_graph(&files);
        assert_eq!(
            edges(&graph, &["net"]),
            vec![
                "crate::base",
                "crate::deep::inner",
                "crate::deep::other",
                "crate::task"
            ]
        );
        assert_eq!(edges(&graph, &["net", "sub"]), vec!["crate::base"]);
        // The `pub use` re-export is followed to the defining file.
        assert_eq!(
            edges(&graph, &["user"]),
            vec!["crate::net::sub", "crate::task"]
        );
        assert!(
            edges(&graph, &[]).is_empty(),
            "mod declarations are no edges"
        );
    }

    #[test]
    fn a_parent_using_its_children_is_not_a_cycle_but_siblings_are() {
        let files = vec![
            file(
                &["log"],
                "pub mod watch; mod append; use watch::OffsetWatch; pub struct Log;",
            ),
            file(
                &["log", "watch"],
                "pub struct OffsetWatch; fn f(_: &super::Log) {}",
            ),
            file(&["log", "append"], "fn g() { super::watch::OffsetWatch; }"),
        ];
        assert!(cycles(&import_graph(&files)).is_empty());
        let mut files = files;
        files[1].text.push_str(" fn h() { super::append::g(); }");
        assert_eq!(
            names(&cycles(&import_graph(&files))),
            vec![vec!["crate::log::append", "crate::log::watch"]]
        );
    }
}
