//! The modules of each backend form a DAG: a backend's sibling modules
//! (the files of `mttl-comm/src/backend/NAME/` other than `mod.rs`) never
//! import each other in a cycle. A child module may use what its parent
//! (`mod.rs`) defines, such as the backend's struct it adds `impl` blocks
//! to; only references from one sibling to another count.
//!
//! A reference is a path `super::SIBLING` (or `super::{.., SIBLING::.., ..}`),
//! or `crate::backend::NAME::SIBLING`, outside comments and test modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each sibling module of the backend in `dir`, with the siblings it refers to.
fn sibling_graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut sources = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("a backend folder") {
        let path = entry.expect("a folder entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && stem != "mod" {
            let text = std::fs::read_to_string(&path).expect("a source file");
            sources.insert(stem.to_owned(), code_of(&text));
        }
    }
    let names: BTreeSet<String> = sources.keys().cloned().collect();
    let backend = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let absolute = format!("crate::backend::{backend}::");
    sources
        .iter()
        .map(|(module, code)| {
            let refs = super_paths(code)
                .into_iter()
                .chain(paths_after(code, &absolute))
                .filter(|first| names.contains(first) && first != module)
                .collect();
            (module.clone(), refs)
        })
        .collect()
}

/// `text` without comments and without its `#[cfg(test)]` modules (in
/// which `super` is the module itself).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            // A test module runs to the line closing it at its own indent.
            let indent = line.len() - trimmed.len();
            let close = format!("{}}}", " ".repeat(indent));
            for inner in lines.by_ref() {
                if inner == close {
                    break;
                }
            }
            continue;
        }
        let without_comment = match trimmed.find("//") {
            Some(0) => "",
            _ => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

/// The first segment of every path that starts with `super::`, braces
/// included: `super::{a::X, b}` gives `a` and `b`.
fn super_paths(code: &str) -> Vec<String> {
    paths_after(code, "super::")
}

/// The first segment after every `prefix` (a path ending in `::`) that
/// starts a path, braces included.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            found.push(first_segment(rest));
        }
    }
    found
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A cycle of `graph`, as the modules along it, if it has one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn backend_folders() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend");
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("src/backend")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    folders
}

#[test]
fn every_backends_modules_form_a_dag() {
    let folders = backend_folders();
    assert!(
        folders.iter().any(|f| f.ends_with("tcp")) && folders.iter().any(|f| f.ends_with("mpi")),
        "the backend folders were not found: {folders:?}"
    );
    let cycles: Vec<String> = folders
        .iter()
        .filter_map(|dir| {
            let cycle = find_cycle(&sibling_graph(dir))?;
            Some(format!("{}: {}", dir.display(), cycle.join(" -> ")))
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "modules importing each other in a cycle:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn references_between_siblings_are_found() {
    let code = code_of(
        "use super::frame::Header;\n\
         use super::{sends::{Out, In}, Peer, progress};\n\
         // use super::liveness::X;\n\
         fn f() { super::auth::check(); }\n\
         #[cfg(test)]\n\
         mod tests {\n    use super::super::bootstrap;\n}\n",
    );
    let mut found = super_paths(&code);
    found.sort();
    assert_eq!(found, ["Peer", "auth", "frame", "progress", "sends"]);
    let absolute = paths_after(
        "use crate::backend::tcp::{frame::Header, liveness};",
        "crate::backend::tcp::",
    );
    assert_eq!(absolute, ["frame", "liveness"]);
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(find_cycle(&graph).expect("a cycle"), ["a", "b", "c", "a"]);
}
