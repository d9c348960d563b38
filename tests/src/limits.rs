//! Structural limits for every crate of the workspace (issue #32 point 5),
//! checked by `tests/tests/limits.rs`:
//!
//! 1. no file-level import cycle in any crate target ([`cycle_problems`],
//!    with the graph of [`crate::layering`]);
//! 2. workspace crates depend down a declared layer order
//!    ([`layer_problems`]);
//! 3. no non-test function is longer than a limit ([`long_function_problems`]).
//!
//! The workspace is read the way Cargo reads it: the members of the root
//! `Cargo.toml` (globs such as `"net/*"` expand to the directories under it
//! that hold a `Cargo.toml`, less `exclude`), plus the root package. A
//! crate's sources are the files under its `src/`, and its module tree is
//! walked from each target root (`lib.rs`, `main.rs`, `bin/*.rs`) through the
//! `mod x;` declarations, so that a file declared only as `#[cfg(test)] mod
//! x;` is known to be test code. Each check returns its findings as lines;
//! an empty list is a pass.

use crate::layering::{cycles, file_import_graph, module_name, SourceFile};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Block, Item, Meta, Signature, Visibility};

/// A package of the workspace.
#[derive(Debug, Clone)]
pub struct Member {
    /// The package name (`[package] name`).
    pub name: String,
    /// The directory holding its `Cargo.toml`.
    pub dir: PathBuf,
    /// Its parsed `Cargo.toml`.
    pub manifest: toml::Table,
}

/// Reads and parses a `Cargo.toml`.
fn read_manifest(path: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.parse::<toml::Table>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether `name` matches a glob `pattern` of `*` and `?` wildcards.
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], name) || (!name.is_empty() && glob_match(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob_match(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => glob_match(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The directories a `members` entry names (globbed segment by segment);
/// only those holding a `Cargo.toml` are kept for a glob.
fn expand_member(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    let is_glob = pattern.contains(['*', '?']);
    for segment in pattern.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if !segment.contains(['*', '?']) {
            dirs = dirs.into_iter().map(|d| d.join(segment)).collect();
            continue;
        }
        let mut next = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if entry.path().is_dir() && glob_match(segment.as_bytes(), name.as_bytes()) {
                    next.push(entry.path());
                }
            }
        }
        next.sort();
        dirs = next;
    }
    if is_glob {
        dirs.retain(|d| d.join("Cargo.toml").is_file());
    }
    dirs
}

/// The packages of the workspace rooted at `root`: the expanded
/// `[workspace] members`, less `exclude`, plus the root package.
pub fn workspace_members(root: &Path) -> Result<Vec<Member>, String> {
    let manifest = read_manifest(&root.join("Cargo.toml"))?;
    let workspace = manifest.get("workspace").and_then(|w| w.as_table());
    let strings = |key: &str| -> Vec<String> {
        workspace
            .and_then(|w| w.get(key))
            .and_then(|m| m.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let excluded: BTreeSet<PathBuf> = strings("exclude")
        .iter()
        .map(|e| normalize(&root.join(e)))
        .collect();
    let mut dirs: Vec<PathBuf> = Vec::new();
    if manifest.contains_key("package") {
        dirs.push(root.to_path_buf());
    }
    for pattern in strings("members") {
        for dir in expand_member(root, &pattern) {
            let dir = normalize(&dir);
            if !excluded.contains(&dir) && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    let mut members = Vec::new();
    for dir in dirs {
        let manifest = read_manifest(&dir.join("Cargo.toml"))?;
        let name = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .ok_or_else(|| format!("{}/Cargo.toml: no [package] name", dir.display()))?
            .to_string();
        members.push(Member {
            name,
            dir,
            manifest,
        });
    }
    Ok(members)
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A dependency of one workspace package on another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalDependency {
    /// The package that depends.
    pub from: String,
    /// The package depended on.
    pub to: String,
    /// The manifest table it is declared in (`dependencies`,
    /// `build-dependencies`, `target.<cfg>.dependencies`).
    pub section: String,
}

/// The dependency tables of a manifest that count for layering, by name:
/// `[dependencies]` and `[build-dependencies]`, also under `[target.*]`.
/// `[dev-dependencies]` are left out: tests and benches may use any crate.
fn dependency_tables(manifest: &toml::Table) -> Vec<(String, toml::Table)> {
    let mut tables = Vec::new();
    let mut add = |prefix: String, table: &toml::Table| {
        for key in ["dependencies", "build-dependencies"] {
            if let Some(deps) = table.get(key).and_then(|d| d.as_table()) {
                tables.push((format!("{prefix}{key}"), deps.clone()));
            }
        }
    };
    add(String::new(), manifest);
    if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
        for (cfg, table) in targets {
            if let Some(table) = table.as_table() {
                add(format!("target.{cfg}."), table);
            }
        }
    }
    tables
}

/// The directory a dependency entry points to, if it is a path dependency
/// (directly, or through `workspace = true` and `[workspace.dependencies]`).
fn dependency_dir(
    root: &Path,
    root_manifest: &toml::Table,
    member: &Member,
    key: &str,
    entry: &toml::Value,
) -> Option<PathBuf> {
    let table = entry.as_table()?;
    if table.get("workspace").and_then(|w| w.as_bool()) == Some(true) {
        let shared = root_manifest
            .get("workspace")?
            .get("dependencies")?
            .get(key)?;
        let path = shared.get("path")?.as_str()?;
        return Some(normalize(&root.join(path)));
    }
    let path = table.get("path")?.as_str()?;
    Some(normalize(&member.dir.join(path)))
}

/// Every dependency of a workspace package on another one (dev-dependencies
/// left out, see [`dependency_tables`]).
pub fn internal_dependencies(
    root: &Path,
    members: &[Member],
) -> Result<Vec<InternalDependency>, String> {
    let root_manifest = read_manifest(&root.join("Cargo.toml"))?;
    let by_dir: BTreeMap<PathBuf, &str> = members
        .iter()
        .map(|m| (normalize(&m.dir), m.name.as_str()))
        .collect();
    let mut found = Vec::new();
    for member in members {
        for (section, deps) in dependency_tables(&member.manifest) {
            for (key, entry) in &deps {
                let Some(dir) = dependency_dir(root, &root_manifest, member, key, entry) else {
                    continue;
                };
                if let Some(to) = by_dir.get(&dir) {
                    found.push(InternalDependency {
                        from: member.name.clone(),
                        to: to.to_string(),
                        section: section.clone(),
                    });
                }
            }
        }
    }
    Ok(found)
}

/// Check 2: every member is in `layers` (package name → layer), and each
/// internal dependency points to a strictly lower layer. Entries of `layers`
/// naming no member are fine (crates yet to be made).
pub fn layer_problems(root: &Path, layers: &[(&str, u32)]) -> Vec<String> {
    let members = match workspace_members(root) {
        Ok(m) => m,
        Err(e) => return vec![e],
    };
    let layer: BTreeMap<&str, u32> = layers.iter().copied().collect();
    let mut problems = Vec::new();
    for member in &members {
        if !layer.contains_key(member.name.as_str()) {
            problems.push(format!(
                "workspace member `{}` ({}) has no layer: add it to the layer table",
                member.name,
                relative(root, &member.dir).display()
            ));
        }
    }
    let deps = match internal_dependencies(root, &members) {
        Ok(d) => d,
        Err(e) => return vec![e],
    };
    for dep in deps {
        let (Some(&from), Some(&to)) = (layer.get(dep.from.as_str()), layer.get(dep.to.as_str()))
        else {
            continue;
        };
        if to >= from {
            problems.push(format!(
                "`{}` (layer {from}) depends on `{}` (layer {to}) in [{}]: \
                 a crate may depend only on crates of a lower layer",
                dep.from, dep.to, dep.section
            ));
        }
    }
    problems
}

/// `path` shown relative to `root` where it lies under it.
fn relative(root: &Path, path: &Path) -> PathBuf {
    let shown = path.strip_prefix(root).unwrap_or(path);
    if shown.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        shown.to_path_buf()
    }
}

/// A file of a crate target's module tree.
#[derive(Debug, Clone)]
pub struct ModuleFile {
    /// The file.
    pub path: PathBuf,
    /// Its module path from the target root (`[]` for the root).
    pub module: Vec<String>,
    /// Declared only under `#[cfg(test)]` (itself or an enclosing module).
    pub test_only: bool,
}

/// A crate's sources: every `.rs` file under `src/` parsed, and the module
/// tree of each target.
pub struct CrateSources {
    /// Each file's text and syntax tree.
    pub parsed: BTreeMap<PathBuf, (String, syn::File)>,
    /// Per target root (`src/lib.rs`, …), the files of its module tree.
    pub targets: Vec<(PathBuf, Vec<ModuleFile>)>,
    /// Files that did not parse, with the reason.
    pub errors: Vec<String>,
}

impl CrateSources {
    /// The files no target declares as anything but test code: those
    /// declared only under `#[cfg(test)]`.
    pub fn test_only_files(&self) -> BTreeSet<PathBuf> {
        let mut test = BTreeSet::new();
        let mut non_test = BTreeSet::new();
        for (_, files) in &self.targets {
            for file in files {
                if file.test_only {
                    test.insert(file.path.clone());
                } else {
                    non_test.insert(file.path.clone());
                }
            }
        }
        test.difference(&non_test).cloned().collect()
    }
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Reads and parses a crate's `src/` and walks each target's module tree.
/// Every `.rs` file under `src/` is parsed, also one no target declares.
pub fn read_sources(src: &Path) -> CrateSources {
    let mut all = Vec::new();
    rust_files(src, &mut all);
    let mut parsed = BTreeMap::new();
    let mut errors = Vec::new();
    for path in all {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        match syn::parse_file(&text) {
            Ok(file) => {
                parsed.insert(path, (text, file));
            }
            Err(e) => {
                let at = e.span().start();
                errors.push(format!(
                    "{}:{}:{}: does not parse: {e}",
                    path.display(),
                    at.line,
                    at.column + 1
                ));
            }
        }
    }
    let mut roots: Vec<PathBuf> = vec![src.join("lib.rs"), src.join("main.rs")];
    let mut bins = Vec::new();
    rust_files(&src.join("bin"), &mut bins);
    roots.extend(bins.into_iter().filter(|p| {
        p.parent() == Some(&src.join("bin")) || p.file_name().is_some_and(|n| n == "main.rs")
    }));
    let targets = roots
        .into_iter()
        .filter(|r| parsed.contains_key(r))
        .map(|r| {
            let files = module_tree(&r, &parsed);
            (r, files)
        })
        .collect();
    CrateSources {
        parsed,
        targets,
        errors,
    }
}

/// Where the `mod x;` declarations of one file lead.
struct ModWalk<'a> {
    /// The directory of the declaring file (`#[path]` is relative to it).
    file_dir: PathBuf,
    out: &'a mut Vec<ModuleFile>,
}

impl ModWalk<'_> {
    /// Collects the file modules declared in `items`, inside inline modules
    /// too; `base` is where `mod x;` looks for `x.rs` and `x/mod.rs`.
    fn items(&mut self, items: &[Item], module: &[String], base: &Path, inline: bool, test: bool) {
        for item in items {
            let Item::Mod(declared) = item else {
                continue;
            };
            let name = declared.ident.to_string();
            let test = test || is_test_code(&declared.attrs);
            let mut child = module.to_vec();
            child.push(name.clone());
            if let Some((_, inner)) = &declared.content {
                self.items(inner, &child, &base.join(&name), true, test);
                continue;
            }
            let path = path_attribute(&declared.attrs).map(|p| {
                if inline {
                    base.join(p)
                } else {
                    self.file_dir.join(p)
                }
            });
            let found = path.into_iter().chain([
                base.join(format!("{name}.rs")),
                base.join(&name).join("mod.rs"),
            ]);
            if let Some(path) = found.into_iter().find(|p| p.is_file()) {
                self.out.push(ModuleFile {
                    path: normalize(&path),
                    module: child,
                    test_only: test,
                });
            }
        }
    }
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The files of the module tree rooted at `root`, following `mod x;`.
fn module_tree(root: &Path, parsed: &BTreeMap<PathBuf, (String, syn::File)>) -> Vec<ModuleFile> {
    let mut files = vec![ModuleFile {
        path: root.to_path_buf(),
        module: Vec::new(),
        test_only: false,
    }];
    let mut seen = BTreeSet::new();
    let mut next = 0;
    while next < files.len() {
        let file = files[next].clone();
        next += 1;
        if !seen.insert(file.path.clone()) {
            continue;
        }
        let Some((_, syntax)) = parsed.get(&file.path) else {
            continue;
        };
        let dir = file.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        // A root or `mod.rs` declares children beside it; `a.rs` under `a/`.
        let mod_rs = next == 1 || file.path.file_name().is_some_and(|n| n == "mod.rs");
        let base = if mod_rs {
            dir.clone()
        } else {
            dir.join(file.path.file_stem().unwrap_or_default())
        };
        let mut found = Vec::new();
        ModWalk {
            file_dir: dir,
            out: &mut found,
        }
        .items(&syntax.items, &file.module, &base, false, file.test_only);
        files.extend(found);
    }
    // A file reached both as test code and not counts as not.
    let mut by_path: BTreeMap<PathBuf, ModuleFile> = BTreeMap::new();
    for file in files {
        by_path
            .entry(file.path.clone())
            .and_modify(|f| f.test_only &= file.test_only)
            .or_insert(file);
    }
    by_path.into_values().collect()
}

/// Whether attributes mark test code: `#[cfg(test)]` (also inside
/// `cfg(all(…))`), or a test attribute (`#[test]`, `#[tokio::test]`).
pub fn is_test_code(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && match &attr.meta {
                Meta::List(list) => syn::parse2::<Meta>(list.tokens.clone())
                    .is_ok_and(|meta| cfg_requires_test(&meta)),
                _ => false,
            }
    })
}

/// Whether a cfg predicate holds only in test builds.
fn cfg_requires_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(path) => path.is_ident("test"),
        Meta::List(list) if list.path.is_ident("all") => list
            .parse_args_with(syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated)
            .is_ok_and(|parts| parts.iter().any(cfg_requires_test)),
        _ => false,
    }
}

/// Check 1: the import cycles of every crate target, one line each, and any
/// file that does not parse. With `parents_count`, a module's uses of its
/// own descendants are edges too (see [`file_import_graph`]); without, the
/// rules of [`crate::layering`] (a parent is its children's face).
pub fn cycle_problems(root: &Path, parents_count: bool) -> Vec<String> {
    let members = match workspace_members(root) {
        Ok(m) => m,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    for member in &members {
        let sources = read_sources(&member.dir.join("src"));
        problems.extend(sources.errors.iter().cloned());
        for (target, files) in &sources.targets {
            let files: Vec<SourceFile> = files
                .iter()
                .filter(|f| !f.test_only)
                .filter_map(|f| {
                    Some(SourceFile {
                        module: f.module.clone(),
                        text: sources.parsed.get(&f.path)?.0.clone(),
                    })
                })
                .collect();
            for cycle in cycles(&file_import_graph(&files, parents_count)) {
                let names: Vec<String> = cycle.iter().map(|m| module_name(m)).collect();
                problems.push(format!(
                    "{} ({}): {}",
                    member.name,
                    relative(root, target).display(),
                    names.join(" <-> ")
                ));
            }
        }
    }
    problems
}

/// A function over the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongFunction {
    /// The file, relative to the workspace root.
    pub path: PathBuf,
    /// The line of its signature's first token.
    pub line: usize,
    /// `name`, `Type::name` for a method, `outer::name` for a nested fn.
    pub name: String,
    /// Lines from the signature to the closing brace, inclusive.
    pub lines: usize,
}

/// Walks one file's syntax tree, measuring every non-test function.
struct FnLengths {
    max_lines: usize,
    /// Names of the enclosing impl type, trait and functions.
    scope: Vec<String>,
    found: Vec<(usize, String, usize)>,
}

impl FnLengths {
    /// Measures one function, then walks its body (for nested fns).
    fn function(&mut self, vis: Option<&Visibility>, sig: &Signature, block: Option<&Block>) {
        let Some(block) = block else {
            return;
        };
        let first = match vis {
            Some(v @ (Visibility::Public(_) | Visibility::Restricted(_))) => v.span(),
            _ => signature_start(sig),
        };
        let start = first.start().line;
        let end = block.brace_token.span.close().start().line;
        let lines = end + 1 - start;
        let mut name = self.scope.clone();
        name.push(sig.ident.to_string());
        if lines > self.max_lines {
            self.found.push((start, name.join("::"), lines));
        }
        self.scope.push(sig.ident.to_string());
        self.visit_block(block);
        self.scope.pop();
    }
}

/// The span of a signature's first token (`const`, `async`, `unsafe`,
/// `extern` or `fn`).
fn signature_start(sig: &Signature) -> proc_macro2::Span {
    if let Some(t) = &sig.constness {
        t.span
    } else if let Some(t) = &sig.asyncness {
        t.span
    } else if let Some(t) = &sig.unsafety {
        t.span
    } else if let Some(abi) = &sig.abi {
        abi.extern_token.span
    } else {
        sig.fn_token.span
    }
}

/// The name an impl block's methods are shown under: the self type's last
/// path segment.
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "_".to_string(), |s| s.ident.to_string()),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_string(),
    }
}

impl<'ast> Visit<'ast> for FnLengths {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_code(&item.attrs) {
            self.function(Some(&item.vis), &item.sig, Some(&item.block));
        }
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test_code(&item.attrs) {
            self.function(Some(&item.vis), &item.sig, Some(&item.block));
        }
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if !is_test_code(&item.attrs) {
            self.function(None, &item.sig, item.default.as_ref());
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_code(&item.attrs) {
            visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_test_code(&item.attrs) {
            self.scope.push(type_name(&item.self_ty));
            visit::visit_item_impl(self, item);
            self.scope.pop();
        }
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        if !is_test_code(&item.attrs) {
            self.scope.push(item.ident.to_string());
            visit::visit_item_trait(self, item);
            self.scope.pop();
        }
    }
}

/// The functions of one parsed file over `max_lines`: (line, name, lines).
pub fn long_functions_in(file: &syn::File, max_lines: usize) -> Vec<(usize, String, usize)> {
    let mut walk = FnLengths {
        max_lines,
        scope: Vec::new(),
        found: Vec::new(),
    };
    walk.visit_file(file);
    walk.found
}

/// The functions over `max_lines` in every member's `src/`, longest first,
/// and any file that does not parse.
pub fn long_functions(root: &Path, max_lines: usize) -> Result<Vec<LongFunction>, Vec<String>> {
    let members = workspace_members(root).map_err(|e| vec![e])?;
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for member in &members {
        let sources = read_sources(&member.dir.join("src"));
        errors.extend(sources.errors.iter().cloned());
        let test_only = sources.test_only_files();
        for (path, (_, syntax)) in &sources.parsed {
            if test_only.contains(path) {
                continue;
            }
            for (line, name, lines) in long_functions_in(syntax, max_lines) {
                found.push(LongFunction {
                    path: relative(root, path),
                    line,
                    name,
                    lines,
                });
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    found.sort_by(|a, b| (b.lines, &a.path, a.line).cmp(&(a.lines, &b.path, b.line)));
    Ok(found)
}

/// Check 3: every function over `max_lines`, one `path:line name (N lines)`
/// line each, longest first; or the files that do not parse.
pub fn long_function_problems(root: &Path, max_lines: usize) -> Vec<String> {
    match long_functions(root, max_lines) {
        Ok(found) => found
            .iter()
            .map(|f| {
                format!(
                    "{}:{} {} ({} lines)",
                    f.path.display(),
                    f.line,
                    f.name,
                    f.lines
                )
            })
            .collect(),
        Err(errors) => errors,
    }
}
