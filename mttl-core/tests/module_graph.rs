//! The layers of mttl-core hold: the graph of references between its
//! top-level modules (`context`, `thread`, `sync`, `runtime`, ...) has no
//! cycle, so the context sits below the services and the services below the
//! router (see `docs/architecture.md`).
//!
//! How the graph is built:
//!
//! 1. Every `src/**/*.rs` file belongs to the top-level module named by its
//!    first path component under `src/` (`src/global/owner.rs` to `global`,
//!    `src/sync.rs` to `sync`); `lib.rs` is the crate root and left out.
//! 2. Comments are stripped (doc links are not dependencies).
//! 3. Each `crate::NAME` in the code, and each name at the top level of a
//!    `crate::{A, B::c, ...}` group, is an edge from the file's module to
//!    `NAME`, when `NAME` is a top-level module and not the file's own.
//! 4. A depth-first search looks for a cycle; the test prints it if found.
//!
//! The files of `thread` get the same check among themselves
//! ([`thread_files_form_layers`]): `super::NAME` in a file is an edge to the
//! sibling file `NAME`, or to `mod.rs` for any other item; `mod.rs` has an
//! edge to every file it declares. Unit tests (from a file's first
//! `#[cfg(test)]` on, and `tests.rs`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Edges between top-level modules, each with one file that makes it.
type Graph = BTreeMap<String, BTreeMap<String, PathBuf>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments (line and doc comments) and without
/// the contents of string literals.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_str = false;
                    out.push('"');
                }
                '\n' => out.push('\n'),
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push('"');
            }
            '\'' => {
                // A char literal such as '"' or '\'' must not open a string;
                // a lifetime ('a) has no closing quote within two chars.
                out.push('\'');
                let rest: String = chars.clone().take(3).collect();
                if let Some(escaped) = rest.strip_prefix('\\') {
                    if let Some(end) = escaped.find('\'') {
                        for _ in 0..end + 2 {
                            chars.next();
                        }
                        out.push('\'');
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                    out.push('\'');
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level names a file refers to through `crate::`.
fn referenced(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` or part of a longer name
        }
        let rest_trim = rest.trim_start();
        if let Some(group) = rest_trim.strip_prefix('{') {
            // The names at depth 1 of `crate::{...}`.
            let mut depth = 1;
            let mut start_of_item = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => start_of_item = true,
                    c if c.is_whitespace() => {}
                    _ if depth == 1 && start_of_item => {
                        start_of_item = false;
                        let name = ident_at(&group[i..]);
                        if !name.is_empty() {
                            names.insert(name.to_string());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(rest_trim);
            if !name.is_empty() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let module_of = |path: &Path| -> Option<String> {
        let rel = path.strip_prefix(&src).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        (name != "lib").then(|| name.to_string())
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f)).collect();
    let mut graph = Graph::new();
    for m in &modules {
        graph.entry(m.clone()).or_default();
    }
    for file in &files {
        let Some(from) = module_of(file) else {
            continue;
        };
        let code = strip_comments(&fs::read_to_string(file).expect("a source file"));
        for to in referenced(&code) {
            if to != from && modules.contains(&to) {
                let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
                graph
                    .get_mut(&from)
                    .expect("every module has a node")
                    .entry(to)
                    .or_insert(rel);
            }
        }
    }
    graph
}

/// A cycle in `graph`, as the modules along it (the first repeated last).
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        graph: &Graph,
        node: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::OnPath);
        path.push(node.to_string());
        for next in graph[node].keys() {
            match marks[next.as_str()] {
                Mark::OnPath => {
                    let from = path.iter().position(|m| m == next).expect("on the path");
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(graph, next, marks, path) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks: BTreeMap<String, Mark> = graph.keys().map(|k| (k.clone(), Mark::New)).collect();
    for node in graph.keys() {
        if marks[node.as_str()] == Mark::New {
            let mut path = Vec::new();
            if let Some(c) = visit(graph, node, &mut marks, &mut path) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn top_level_modules_form_a_dag() {
    let graph = module_graph();
    if let Some(cycle) = find_cycle(&graph) {
        let mut why = format!("mttl-core's modules have a cycle: {}\n", cycle.join(" -> "));
        for pair in cycle.windows(2) {
            let file = &graph[&pair[0]][&pair[1]];
            why.push_str(&format!(
                "  {} -> {}: in src/{}\n",
                pair[0],
                pair[1],
                file.display()
            ));
        }
        panic!("{why}");
    }
}

#[test]
fn thread_does_not_reach_the_runtime() {
    let reached = reach(&module_graph(), "thread");
    assert!(
        !reached.contains("runtime") && !reached.contains("context"),
        "thread reaches {reached:?}"
    );
}

#[test]
fn the_checker_sees_groups_and_paths() {
    let code = strip_comments(
        "use crate::{a, b::{c, d}, e as f};\n\
         // crate::commented\n\
         let s = \"crate::quoted\";\n\
         let c = '\"'; crate::g::h();\n\
         $crate::macro_path;",
    );
    let names: Vec<_> = referenced(&code).into_iter().collect();
    assert_eq!(names, ["a", "b", "e", "g"]);
    let mut graph = Graph::new();
    for (from, to) in [("x", "y"), ("y", "z"), ("z", "x")] {
        graph
            .entry(from.into())
            .or_default()
            .insert(to.into(), PathBuf::new());
    }
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["x".into(), "y".into(), "z".into(), "x".into()])
    );
    graph.get_mut("z").expect("z").clear();
    assert_eq!(find_cycle(&graph), None);
}

/// The modules `module` reaches, directly or not.
fn reach(graph: &Graph, module: &str) -> BTreeSet<String> {
    let mut reached = BTreeSet::new();
    let mut todo = vec![module.to_string()];
    while let Some(m) = todo.pop() {
        let Some(edges) = graph.get(&m) else {
            continue;
        };
        for next in edges.keys() {
            if reached.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    reached
}

#[test]
fn only_the_crate_root_names_the_router() {
    let graph = module_graph();
    let callers: Vec<_> = graph
        .iter()
        .filter(|(_, edges)| edges.contains_key("runtime"))
        .map(|(m, edges)| format!("{m} (src/{})", edges["runtime"].display()))
        .collect();
    assert!(callers.is_empty(), "the router is imported by {callers:?}");
}

#[test]
fn the_context_reaches_no_service() {
    let graph = module_graph();
    assert!(graph.contains_key("context"), "there is no context module");
    let services = ["sync", "invoke", "global", "coll", "watchdog", "runtime"];
    let reached = reach(&graph, "context");
    let bad: Vec<_> = services.iter().filter(|s| reached.contains(**s)).collect();
    assert!(bad.is_empty(), "the context reaches {bad:?}");
}

/// The graph of the files of `src/thread/` (see the module docs).
fn thread_graph() -> Graph {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/thread");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let stem = |f: &Path| {
        f.file_stem()
            .and_then(|s| s.to_str())
            .expect("a file name")
            .to_string()
    };
    let files: Vec<_> = files.into_iter().filter(|f| stem(f) != "tests").collect();
    let modules: BTreeSet<String> = files.iter().map(|f| stem(f)).collect();
    let mut graph = Graph::new();
    for m in &modules {
        let edges = graph.entry(m.clone()).or_default();
        if m == "mod" {
            for child in modules.iter().filter(|c| *c != "mod") {
                edges.insert(child.clone(), PathBuf::from("thread/mod.rs"));
            }
        }
    }
    for file in &files {
        let from = stem(file);
        if from == "mod" {
            continue;
        }
        let text = fs::read_to_string(file).expect("a source file");
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let code = strip_comments(text);
        let mut rest = code.as_str();
        while let Some(at) = rest.find("super::") {
            rest = &rest[at + "super::".len()..];
            let name = ident_at(rest);
            let to = if modules.contains(name) && name != "mod" {
                name.to_string()
            } else {
                "mod".to_string()
            };
            if to != from {
                let rel = PathBuf::from(format!("thread/{from}.rs"));
                graph
                    .get_mut(&from)
                    .expect("every file has a node")
                    .entry(to)
                    .or_insert(rel);
            }
        }
    }
    graph
}

#[test]
fn thread_files_form_layers() {
    let graph = thread_graph();
    if let Some(cycle) = find_cycle(&graph) {
        panic!("thread's files have a cycle: {}", cycle.join(" -> "));
    }
    let reached = reach(&graph, "sched");
    assert!(
        !reached.contains("mod"),
        "sched reaches the API: {reached:?}"
    );
}
