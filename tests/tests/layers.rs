//! Layers without cycles (issue 40): reads the source of every product crate (host-abi,
//! mcpapp-plugin, gateway-host; not tests, bench or fuzz) and checks the imports between its files.
//!
//! The graph is file-level. A file depends on another when its code names a path into it:
//! `use crate::…`, `use super::…`, `use self::…`, an inline `crate::a::b::Item`, or a path through
//! a module that a `use` brought in or a `mod` declared (`use crate::a; … a::b::Item`). Comments,
//! string literals and `#[cfg(test)]` items (`mod tests { … }`, test-only files) are not imports.
//! A path to an item of a folder's `mod.rs` is a dependency on that `mod.rs`; naming a module
//! alone (`use crate::a;`) is not, its uses (`a::Item`) are. A module's paths into its own
//! submodules are the module tree, not imports (the parent is its children's outline; the children
//! importing the parent's items is what counts). A crate's root (lib.rs) is its
//! outline — it declares the modules and re-exports what others need — so its own paths are not
//! edges; paths into it (`crate::BoxError`) are. gateway-host's main.rs is a crate of its own and
//! only reaches the library through its public paths.
//!
//! The checks, by the names ARCHITECTURE.md's invariants cite:
//! - [`no_import_cycles`]: no product crate has a cycle of file imports; each cycle (strongly
//!   connected component) is named by its files.
//! - [`module_layers_point_down`]: the module's folders are layers, `export` > `apps` > `upstream` >
//!   `runtime`; a file imports files of its own layer or of layers below, never above. The crate
//!   root (lib.rs, the exported root module) stands with `export`.
//! - [`runtime_is_the_ground`]: the module's `runtime/` imports nothing outside `runtime/`.
//! - [`host_entry_points_are_leaves`]: in gateway-host, nothing imports serve.rs or commands.rs
//!   but commands.rs and boundary_check.rs (main.rs, the binary, is out of the library's reach).
//! - [`results_are_shaped_for_the_model_in_one_place`]: the notes that stand for content a model
//!   is not shown are written by `tools/model_view.rs` only.
//! - [`host_folders_point_down`]: the host's folders are layers too, `http` > `chat` | `install` >
//!   `tools` | `config` > `module`: a file imports its own folder or folders below it, never one
//!   above it nor a sibling of its rank. The files at the crate's root (metrics, parse_count,
//!   logging…) are shared ground and not ranked.
//!
//! Run: `cargo test --release -p gateway-e2e --test layers` (no build of the products needed).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["upstream", "process"]`; the root is `[]`.
type ModPath = Vec<String>;

/// The product crates, by folder.
const PRODUCT_CRATES: [&str; 3] = ["host-abi", "mcpapp-plugin", "gateway-host"];

/// The module's layers, top first.
const MODULE_LAYERS: [&str; 4] = ["export", "apps", "upstream", "runtime"];

/// The host's folders by rank, top first: `chat` and `install` share a rank, as do `tools` and
/// `config` (neither of a pair imports the other).
const HOST_LAYERS: [(&str, usize); 6] = [("http", 0), ("chat", 1), ("install", 1), ("tools", 2), ("config", 2), ("module", 3)];

// ---------------------------------------------------------------------------------------------
// The checks

#[test]
fn no_import_cycles() {
    let mut report = String::new();
    for name in PRODUCT_CRATES {
        let graph = Graph::of_crate(name);
        for component in graph.cycles() {
            let files: Vec<&str> = component.iter().map(|m| graph.files[m].as_str()).collect();
            writeln!(report, "cycle in {name}: {}", files.join(", ")).unwrap();
            for from in &component {
                for to in graph.edges[from].iter().filter(|to| component.contains(*to)) {
                    writeln!(report, "    {} -> {}", graph.files[from], graph.files[to]).unwrap();
                }
            }
        }
    }
    assert!(report.is_empty(), "file imports form cycles:\n{report}");
}

#[test]
fn module_layers_point_down() {
    let graph = Graph::of_crate("mcpapp-plugin");
    let mut report = String::new();
    for (from, targets) in &graph.edges {
        let Some(from_rank) = module_layer(from) else {
            writeln!(report, "{} is in none of the layers {MODULE_LAYERS:?}", graph.files[from]).unwrap();
            continue;
        };
        for to in targets {
            let Some(to_rank) = module_layer(to) else { continue };
            if to_rank < from_rank {
                writeln!(
                    report,
                    "{} ({}) imports {} ({}), a layer above it",
                    graph.files[from], MODULE_LAYERS[from_rank], graph.files[to], MODULE_LAYERS[to_rank]
                )
                .unwrap();
            }
        }
    }
    assert!(report.is_empty(), "the module's layers are export > apps > upstream > runtime:\n{report}");
}

#[test]
fn runtime_is_the_ground() {
    let graph = Graph::of_crate("mcpapp-plugin");
    let runtime = MODULE_LAYERS.iter().position(|l| *l == "runtime");
    let mut report = String::new();
    for (from, targets) in graph.edges.iter().filter(|(from, _)| module_layer(from) == runtime) {
        for to in targets.iter().filter(|to| module_layer(to) != runtime) {
            writeln!(report, "{} imports {}", graph.files[from], graph.files[to]).unwrap();
        }
    }
    assert!(report.is_empty(), "the module's runtime/ imports no other layer:\n{report}");
}

#[test]
fn host_entry_points_are_leaves() {
    let graph = Graph::of_crate("gateway-host");
    let entry_points = [path(&["serve"]), path(&["commands"])];
    let may_import = [path(&["commands"]), path(&["boundary_check"])];
    for m in &entry_points {
        assert!(graph.files.contains_key(m), "gateway-host has no {m:?} module: update this test");
    }
    let mut report = String::new();
    for (from, targets) in graph.edges.iter().filter(|(from, _)| !may_import.contains(from)) {
        for to in targets.iter().filter(|to| entry_points.contains(to)) {
            writeln!(report, "{} imports {}", graph.files[from], graph.files[to]).unwrap();
        }
    }
    assert!(report.is_empty(), "only the commands start the gateway:\n{report}");
}

#[test]
fn host_folders_point_down() {
    let graph = Graph::of_crate("gateway-host");
    let folder = |m: &ModPath| HOST_LAYERS.iter().find(|(f, _)| m.first().map(String::as_str) == Some(*f)).copied();
    for (f, _) in HOST_LAYERS {
        assert!(graph.files.keys().any(|m| m.first().map(String::as_str) == Some(f)), "gateway-host has no {f}/ folder: update this test");
    }
    let mut report = String::new();
    for (from, targets) in &graph.edges {
        let Some((from_folder, from_rank)) = folder(from) else { continue };
        for to in targets {
            let Some((to_folder, to_rank)) = folder(to) else { continue };
            if to_folder != from_folder && to_rank <= from_rank {
                writeln!(report, "{} ({from_folder}/) imports {} ({to_folder}/), not a folder below it", graph.files[from], graph.files[to]).unwrap();
            }
        }
    }
    assert!(report.is_empty(), "the host's folders are layers, http > chat > tools | config > module:\n{report}");
}

/// The layer of a module file, as an index into [`MODULE_LAYERS`] (the root stands with `export`).
fn module_layer(m: &ModPath) -> Option<usize> {
    match m.first() {
        None => Some(0),
        Some(folder) => MODULE_LAYERS.iter().position(|l| l == folder),
    }
}

fn path(segments: &[&str]) -> ModPath {
    segments.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// The graph

struct Graph {
    /// Every product file of the crate, by module path, as a path from the repository's root.
    files: BTreeMap<ModPath, String>,
    /// Who imports whom (no self-edges).
    edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

impl Graph {
    fn of_crate(name: &str) -> Graph {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let src = repo.join(name).join("src");
        let mut sources = Vec::new();
        collect_rs(&src, &mut sources);
        assert!(!sources.is_empty(), "no source under {}", src.display());
        let mut files = BTreeMap::new();
        for file in sources {
            let rel = file.strip_prefix(&src).unwrap();
            if rel == Path::new("main.rs") {
                continue; // the binary: a crate of its own
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let shown = file.strip_prefix(&repo).unwrap().display().to_string();
            files.insert(module_path_of(rel), (shown, text));
        }
        Graph::build(files)
    }

    /// `files`: module path → (the path shown, the source).
    fn build(files: BTreeMap<ModPath, (String, String)>) -> Graph {
        let scanned: BTreeMap<ModPath, Scan> = files.iter().map(|(m, (_, text))| (m.clone(), scan(m, text))).collect();
        // Files declared under `#[cfg(test)]` (`mod tests;`, `mod test_support;`) are test code.
        let test_only: Vec<ModPath> = scanned.values().flat_map(|s| s.test_modules.iter().cloned()).collect();
        let product = |m: &ModPath| !test_only.iter().any(|t| m.starts_with(t));
        let modules: BTreeSet<ModPath> = files.keys().filter(|m| product(m)).cloned().collect();
        let mut edges = BTreeMap::new();
        for (m, s) in scanned.iter().filter(|(m, _)| product(m)) {
            let mut targets = BTreeSet::new();
            if !m.is_empty() {
                for (path, whole_module_is_alias) in s.resolved_paths() {
                    if whole_module_is_alias && modules.contains(&path) {
                        continue; // `use crate::a;`: only what names a::… depends on a
                    }
                    let file = (0..=path.len()).rev().map(|i| path[..i].to_vec()).find(|p| modules.contains(p));
                    // A module naming its own submodules (`mod x;` … `x::f()`) is the module tree,
                    // not an import: the parent is its children's outline.
                    if let Some(file) = file.filter(|f| !f.starts_with(m)) {
                        targets.insert(file);
                    }
                }
            }
            edges.insert(m.clone(), targets);
        }
        let files = files.into_iter().filter(|(m, _)| product(m)).map(|(m, (shown, _))| (m, shown)).collect();
        Graph { files, edges }
    }

    /// The strongly connected components of more than one file (Tarjan's algorithm).
    fn cycles(&self) -> Vec<Vec<ModPath>> {
        struct Tarjan<'a> {
            edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
            index: BTreeMap<&'a ModPath, usize>,
            low: BTreeMap<&'a ModPath, usize>,
            stack: Vec<&'a ModPath>,
            on_stack: BTreeSet<&'a ModPath>,
            found: Vec<Vec<ModPath>>,
        }
        impl<'a> Tarjan<'a> {
            fn visit(&mut self, v: &'a ModPath) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in &self.edges[v] {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    loop {
                        let w = self.stack.pop().unwrap();
                        self.on_stack.remove(w);
                        component.push(w.clone());
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        self.found.push(component);
                    }
                }
            }
        }
        let mut t = Tarjan {
            edges: &self.edges,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for v in self.edges.keys() {
            if !t.index.contains_key(v) {
                t.visit(v);
            }
        }
        t.found.sort();
        t.found
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `runtime/executor.rs` → `[runtime, executor]`, `http/mod.rs` → `[http]`, `lib.rs` → `[]`.
fn module_path_of(rel: &Path) -> ModPath {
    let mut segments: ModPath = rel.with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(segments.last().map(String::as_str), Some("mod")) || segments == ["lib"] {
        segments.pop();
    }
    segments
}

// ---------------------------------------------------------------------------------------------
// Reading one file

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// What one file names, before it is resolved against the crate's files.
#[derive(Default)]
struct Scan {
    /// `use` leaves and inline paths, made absolute: (path, is a `use` of a whole module whose
    /// items are named elsewhere).
    paths: Vec<(ModPath, bool)>,
    /// Paths that start with a name brought in by `use` or declared by `mod`, resolved after the
    /// whole file is read (a `use` may come after its first use): (the module they are in, path).
    relative: Vec<(ModPath, Vec<String>)>,
    /// Names a `use` binds to a path (`use crate::a::b` binds `b`; `as c` binds `c`).
    aliases: BTreeMap<String, ModPath>,
    /// Modules declared with `mod x;` or `mod x { … }`, absolute.
    declared: BTreeSet<ModPath>,
    /// Modules declared under `#[cfg(test)]`, absolute.
    test_modules: Vec<ModPath>,
}

impl Scan {
    fn resolved_paths(&self) -> Vec<(ModPath, bool)> {
        let mut out = self.paths.clone();
        for (scope, segments) in &self.relative {
            let head = &segments[0];
            let child = [scope.clone(), vec![head.clone()]].concat();
            let base = if self.declared.contains(&child) {
                child
            } else if let Some(alias) = self.aliases.get(head) {
                alias.clone()
            } else {
                continue; // a local name or another crate
            };
            out.push(([base, segments[1..].to_vec()].concat(), false));
        }
        out
    }
}

/// Reads a file of module `file_module`: what its code (not its comments, strings or test items)
/// names.
fn scan(file_module: &ModPath, text: &str) -> Scan {
    let toks = tokens(&strip_comments_and_strings(text));
    let mut s = Scan::default();
    // The inline modules we are in: (module path, brace depth at which it closes).
    let mut scopes: Vec<(ModPath, usize)> = vec![(file_module.clone(), usize::MAX)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let scope = scopes.last().unwrap().0.clone();
        match &toks[i] {
            Tok::Punct('#') if toks.get(i + 1) == Some(&Tok::Punct('[')) => {
                let end = matching(&toks, i + 1);
                let is_cfg_test = toks[i + 2..end] == tokens("cfg(test)")[..];
                i = end + 1;
                if is_cfg_test {
                    // Skip the item the attribute applies to (after any further attributes).
                    while toks.get(i) == Some(&Tok::Punct('#')) {
                        i = matching(&toks, i + 1) + 1;
                    }
                    if let (Some(Tok::Ident(kw)), Some(Tok::Ident(name))) = (toks.get(i), toks.get(i + 1)) {
                        if kw == "mod" {
                            s.test_modules.push([scope.clone(), vec![name.clone()]].concat());
                        }
                    }
                    i = item_end(&toks, i);
                }
                continue;
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    let module = [scope.clone(), vec![name.clone()]].concat();
                    s.declared.insert(module.clone());
                    if toks.get(i + 2) == Some(&Tok::Punct('{')) {
                        depth += 1;
                        scopes.push((module, depth));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let end = (i..toks.len()).find(|&j| toks[j] == Tok::Punct(';')).unwrap_or(toks.len());
                let mut leaves = Vec::new();
                use_tree(&toks[i + 1..end], &mut Vec::new(), &mut leaves);
                for leaf in leaves {
                    let Some(abs) = absolute(&scope, &leaf.path) else {
                        if !leaf.path.is_empty() {
                            s.relative.push((scope.clone(), leaf.path.clone()));
                        }
                        continue;
                    };
                    if let Some(name) = leaf.binds {
                        s.aliases.insert(name, abs.clone());
                    }
                    s.paths.push((abs, !leaf.glob));
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(kw) if kw == "in" && i >= 2 && toks[i - 1] == Tok::Punct('(') && toks[i - 2] == Tok::Ident("pub".into()) => {
                // `pub(in crate::a)`: a visibility, not an import.
                i += 1;
                while matches!(toks.get(i), Some(Tok::Ident(_) | Tok::PathSep)) {
                    i += 1;
                }
                continue;
            }
            Tok::Ident(head) if toks.get(i + 1) == Some(&Tok::PathSep) && toks.get(i.wrapping_sub(1)) != Some(&Tok::PathSep) => {
                let mut segments = vec![head.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::PathSep) {
                    match toks.get(j + 1) {
                        Some(Tok::Ident(next)) => segments.push(next.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                match absolute(&scope, &segments) {
                    Some(abs) => s.paths.push((abs, false)),
                    None => s.relative.push((scope.clone(), segments)),
                }
                i = j;
                continue;
            }
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if scopes.last().unwrap().1 == depth {
                    scopes.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    s
}

/// A path that starts with `crate`, `self` or `super`, made absolute; `None` for any other.
fn absolute(scope: &ModPath, segments: &[String]) -> Option<ModPath> {
    let (mut base, mut rest) = match segments.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &segments[1..]),
        Some("self") => (scope.clone(), &segments[1..]),
        Some("super") => (scope.clone(), segments),
        _ => return None,
    };
    while rest.first().map(String::as_str) == Some("super") {
        base.pop();
        rest = &rest[1..];
    }
    Some([base, rest.to_vec()].concat())
}

struct UseLeaf {
    path: Vec<String>,
    /// The name it binds, when it binds one (not for `*` or `as _`).
    binds: Option<String>,
    glob: bool,
}

/// Expands a `use` tree (`a::{b, c::d as e, f::*}`) into its leaves.
fn use_tree(toks: &[Tok], prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    let mut i = 0;
    let start = prefix.len();
    if toks.first() == Some(&Tok::PathSep) {
        return; // `::other_crate::…`
    }
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(id) if id == "as" => {
                let alias = match toks.get(i + 1) {
                    Some(Tok::Ident(a)) if a != "_" => Some(a.clone()),
                    _ => None,
                };
                let mut path = prefix.clone();
                if path.last().map(String::as_str) == Some("self") {
                    path.pop();
                }
                out.push(UseLeaf { path, binds: alias, glob: false });
                prefix.truncate(start);
                return;
            }
            Tok::Ident(id) => prefix.push(id.clone()),
            Tok::PathSep => {}
            Tok::Punct('*') => {
                out.push(UseLeaf { path: prefix.clone(), binds: None, glob: true });
                prefix.truncate(start);
                return;
            }
            Tok::Punct('{') => {
                let end = matching(toks, i);
                let inner = &toks[i + 1..end];
                let mut from = 0;
                let mut nested = 0;
                for (j, t) in inner.iter().enumerate() {
                    match t {
                        Tok::Punct('{') => nested += 1,
                        Tok::Punct('}') => nested -= 1,
                        Tok::Punct(',') if nested == 0 => {
                            use_tree(&inner[from..j], prefix, out);
                            from = j + 1;
                        }
                        _ => {}
                    }
                }
                use_tree(&inner[from..], prefix, out);
                prefix.truncate(start);
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if prefix.len() > start {
        let mut path = prefix.clone();
        if path.last().map(String::as_str) == Some("self") {
            path.pop();
        }
        let binds = path.last().cloned();
        out.push(UseLeaf { path, binds, glob: false });
    }
    prefix.truncate(start);
}

/// The index of the bracket closing the one at `open`.
fn matching(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

/// Where the item starting at `i` ends (just past its `;` or its body's closing brace).
fn item_end(toks: &[Tok], mut i: usize) -> usize {
    while i < toks.len() {
        match toks[i] {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('{') => return matching(toks, i) + 1,
            Tok::Punct('(' | '[') => i = matching(toks, i) + 1,
            _ => i += 1,
        }
    }
    i
}

fn tokens(code: &str) -> Vec<Tok> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Tok::PathSep);
            i += 2;
            continue;
        }
        if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if !c.is_whitespace() && c != '$' {
            out.push(Tok::Punct(c));
        }
        i += 1;
    }
    out
}

/// The code with comments (doc comments too), string and character literals blanked out.
fn strip_comments_and_strings(text: &str) -> String {
    code_and_literals(text).0
}

/// `text` without comments and with each string literal as `""` (as
/// [`strip_comments_and_strings`]), and each literal's text (escapes as written) with the byte
/// offset of its `""` in the code.
fn code_and_literals(text: &str) -> (String, Vec<(usize, String)>) {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut literals = Vec::new();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if !prev_ident && matches!(c[i], 'r' | 'b' | 'c') && raw_string_start(&c, i).is_some() {
            let (hashes, quote) = raw_string_start(&c, i).unwrap();
            i = quote + 1;
            let start = i;
            while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'))) {
                i += 1;
            }
            literals.push((out.len(), c[start..i.min(c.len())].iter().collect()));
            i += 1 + hashes;
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            let start = i;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            literals.push((out.len(), c[start..i.min(c.len())].iter().collect()));
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // '\n', '\'', '\u{1F600}'
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    (out, literals)
}

/// The string literals of a file's product code: those inside `#[cfg(test)]` items left out.
fn product_literals(text: &str) -> Vec<String> {
    product_code(text).1
}

/// A file's product code: its code as [`code_and_literals`] gives it with the `#[cfg(test)]`
/// items cut out, and the string literals of what is left.
fn product_code(text: &str) -> (String, Vec<String>) {
    let (code, literals) = code_and_literals(text);
    let bytes = code.as_bytes();
    let mut tests = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        // The item ends at its `;` or at the brace closing its first `{`, whichever comes first.
        let mut i = at + "#[cfg(test)]".len();
        while i < bytes.len() && bytes[i] != b';' && bytes[i] != b'{' {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'{' {
            let mut depth = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        tests.push(at..i);
    }
    let in_test = |at: &usize| tests.iter().any(|t| t.contains(at));
    let kept = code.char_indices().filter(|(at, _)| !in_test(at)).map(|(_, c)| c).collect();
    (kept, literals.into_iter().filter(|(at, _)| !in_test(at)).map(|(_, text)| text).collect())
}

/// At a raw string (`r"…"`, `r#"…"#`, `br"…"`), the number of `#` and the index of its `"`.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if matches!(c[j], 'b' | 'c') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    (c.get(j + hashes) == Some(&'"')).then_some((hashes, j + hashes))
}

/// ARCHITECTURE.md: no file but `tools/model_view.rs` shapes a tool result for a model. What
/// shaping writes and nothing else has a reason to — the notes standing for content the model is
/// not shown (`[link to resource …]`, `[image content (…) not shown]`, `[resource … (…)]`) — is
/// written by that file's code and by no other product code of any product crate (the issue
/// that asked for one owner found two of them writing different notes).
#[test]
fn results_are_shaped_for_the_model_in_one_place() {
    const NOTES: [&str; 4] = ["[link to resource", "[resource link", "not shown]", "[resource "];
    const SHAPER: &str = "gateway-host/src/tools/model_view.rs";
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let (mut elsewhere, mut in_shaper) = (Vec::new(), 0);
    for name in PRODUCT_CRATES {
        for shown in Graph::of_crate(name).files.values() {
            let text = std::fs::read_to_string(repo.join(shown)).unwrap();
            for literal in product_literals(&text) {
                if NOTES.iter().any(|note| literal.contains(note)) {
                    if shown == SHAPER { in_shaper += 1 } else { elsewhere.push(format!("{shown}: \"{literal}\"")) }
                }
            }
        }
    }
    assert!(in_shaper >= 3, "{SHAPER} no longer writes the notes this check looks for: update NOTES");
    assert!(elsewhere.is_empty(), "a tool result is shaped for a model outside {SHAPER}:\n{}", elsewhere.join("\n"));
}

/// ARCHITECTURE.md: a tool call's arguments are read in one place, `tools/arguments.rs`. The
/// gate and the short way ask it whether a request's are plain, `/mcp` takes them out of a
/// request through it (both its ways), the tool registry puts them in an app's request through
/// it, the chat has it parse what a model wrote. So no other product code of the host names the
/// member — the literal `"arguments"` or rmcp's typed field `.arguments` — but where the word
/// means something else: a server's or an app's command line, and the text of a model's function
/// call on the OpenAI wire (which the chat hands to `arguments::parse`).
#[test]
fn a_tool_calls_arguments_are_read_in_one_place() {
    const READER: &str = "gateway-host/src/tools/arguments.rs";
    const OTHER_MEANINGS: [&str; 6] = [
        "gateway-host/src/commands.rs",          // a command line, shown
        "gateway-host/src/config/workspace.rs",  // a standard server's command line
        "gateway-host/src/install/",             // an installed app's command line
        "gateway-host/src/module/payloads.rs",   // an app's command line, as the module describes it
        "gateway-host/src/chat/provider.rs",     // the OpenAI wire's function call text
        "gateway-host/src/chat/agent.rs",        // that text, handed to `arguments::parse`
    ];
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let (mut elsewhere, mut in_reader) = (Vec::new(), 0);
    for shown in Graph::of_crate("gateway-host").files.values() {
        if OTHER_MEANINGS.iter().any(|other| shown.starts_with(other)) {
            continue;
        }
        let (code, literals) = product_code(&std::fs::read_to_string(repo.join(shown)).unwrap());
        let named = literals.iter().filter(|l| *l == "arguments").count()
            + code.match_indices(".arguments").filter(|(at, m)| !code[at + m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')).count();
        if shown == READER {
            in_reader += named;
        } else if named > 0 {
            elsewhere.push(format!("{shown}: {named}"));
        }
    }
    assert!(in_reader >= 2, "{READER} no longer names the member this check looks for");
    assert!(elsewhere.is_empty(), "a tool call's arguments are read outside {READER} (times named):\n{}", elsewhere.join("\n"));
}

/// The literals of product code, test items left out.
#[test]
fn product_literals_leave_out_test_items_and_comments() {
    let text = r##"
        // "in a comment"
        fn f() -> &'static str { "product" }
        #[cfg(test)]
        mod tests { fn g() { let _ = "test {"; } }
        #[cfg(test)]
        use x::{y, z};
        const C: &str = r#"raw "product""#;
    "##;
    assert_eq!(product_literals(text), ["product", r#"raw "product""#]);
    let (code, _) = product_code(text);
    assert!(code.contains("fn f()") && code.contains("const C") && !code.contains("mod tests") && !code.contains("use x"), "{code}");
}

// ---------------------------------------------------------------------------------------------
// The reader on small examples

fn graph_of(files: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
    let files = files
        .iter()
        .map(|(rel, text)| (module_path_of(Path::new(rel)), (rel.to_string(), text.to_string())))
        .collect();
    let graph = Graph::build(files);
    graph
        .edges
        .iter()
        .map(|(from, to)| {
            let mut to: Vec<String> = to.iter().map(|t| graph.files[t].clone()).collect();
            to.sort();
            (graph.files[from].clone(), to)
        })
        .collect()
}

#[test]
fn reader_counts_code_not_comments_strings_or_tests() {
    let g = graph_of(&[
        ("lib.rs", "pub mod a; pub mod b; #[cfg(test)] mod test_support; pub type E = ();"),
        (
            "a/mod.rs",
            r##"//! Uses crate::b::X in a doc comment.
            /* crate::b::Y */
            pub mod inner;
            const S: &str = "crate::b::X";
            const R: &str = r#"use crate::b::X;"#;
            const C: char = '"';
            pub struct Item;
            #[cfg(test)]
            mod tests { use crate::b::X; }
            #[cfg(test)]
            fn helper() -> crate::b::X { todo!() }
            "##,
        ),
        ("a/inner.rs", "use super::Item; fn f<'a>(x: &'a str) -> crate::E {}"),
        ("b.rs", "use crate::a; pub struct X; fn f() -> a::inner::Z { todo!() }"),
        ("test_support.rs", "use crate::b::X;"),
    ]);
    assert_eq!(g["a/mod.rs"], Vec::<String>::new(), "comments, strings and test items are not imports");
    assert_eq!(g["a/inner.rs"], ["a/mod.rs", "lib.rs"], "an item of a mod.rs, an item of the root");
    assert_eq!(g["b.rs"], ["a/inner.rs"], "through a used module; the test-only file is no product");
    assert!(!g.contains_key("test_support.rs"));
}

#[test]
fn reader_resolves_use_trees_super_and_declared_children() {
    let g = graph_of(&[
        ("lib.rs", "mod x; mod y;"),
        ("x/mod.rs", "mod p; mod q; pub fn go() { p::f(); } pub(in crate::x) struct S; fn h() { for _ in crate::y::all() {} }"),
        ("x/p.rs", "use super::{q::{self, T as U}, super::y::*};"),
        ("x/q.rs", "pub mod inline { use super::super::p::Z; } fn g() { self::inline::h() }"),
        ("y.rs", "use crate::x as renamed; fn f() { renamed::go() }"),
    ]);
    assert_eq!(g["x/mod.rs"], ["y.rs"], "a parent naming its children is the module tree; `pub(in …)` is no import");
    assert_eq!(g["x/p.rs"], ["x/q.rs", "y.rs"]);
    assert_eq!(g["x/q.rs"], ["x/p.rs"], "super inside an inline module; self:: is the file itself");
    assert_eq!(g["y.rs"], ["x/mod.rs"]);
}
