//! Import circles between a crate's top-level modules (`check-deps` runs it over fc-server).
//!
//! A module is a file `src/<name>.rs` or a directory `src/<name>/`; it depends on every other
//! module it names in a `crate::<name>` path, including grouped imports
//! (`use crate::{a, b::C}`). Comments are skipped. The crate root (`lib.rs`, `main.rs`) wires
//! the modules together and is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context;

/// The modules of the crate in `src` and the modules each one uses.
pub(crate) fn module_graph(src: &Path) -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let path = entry?.path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if path.is_dir() {
            let mut text = String::new();
            read_tree(&path, &mut text)?;
            texts.insert(name, text);
        } else if path.extension().is_some_and(|e| e == "rs") && name != "lib" && name != "main" {
            texts.insert(name, std::fs::read_to_string(&path)?);
        }
    }
    let names: BTreeSet<String> = texts.keys().cloned().collect();
    Ok(texts
        .iter()
        .map(|(module, text)| {
            let used = crate_paths(text)
                .into_iter()
                .filter(|m| m != module && names.contains(m))
                .collect();
            (module.clone(), used)
        })
        .collect())
}

fn read_tree(dir: &Path, out: &mut String) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_tree(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path)?);
            out.push('\n');
        }
    }
    Ok(())
}

/// The first segment of every `crate::` path in `text` (comments skipped).
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            // `$crate::` in a macro is the same crate.
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // A grouped import: the first segment of each top-level item.
                let mut depth = 0;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            found.extend(first_segment(&item));
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        item.push(c);
                    }
                }
                found.extend(first_segment(&item));
            } else {
                found.extend(first_segment(rest));
            }
        }
    }
    found
}

fn first_segment(path: &str) -> Option<String> {
    let ident: String = path
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty()).then_some(ident)
}

/// Every circle in `graph`, each as the modules along it (the first repeated at the end).
pub(crate) fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            found.push(circle);
            return;
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done, found);
        }
        path.pop();
        done.insert(node.to_string());
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::{crate_paths, cycles, module_graph};

    #[test]
    fn paths_and_grouped_imports() {
        let text =
            "use crate::a::B;\nuse crate::{c, d::{E, F}, g};\n// crate::h\nlet x = crate::i::f();";
        let found: Vec<String> = crate_paths(text).into_iter().collect();
        assert_eq!(found, ["a", "c", "d", "g", "i"]);
    }

    #[test]
    fn finds_a_circle_and_accepts_layers() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        std::fs::write(src.join("lib.rs"), "mod a; mod b; mod c;").unwrap();
        std::fs::write(src.join("a.rs"), "use crate::b::X;").unwrap();
        std::fs::create_dir(src.join("b")).unwrap();
        std::fs::write(src.join("b/mod.rs"), "mod inner;").unwrap();
        std::fs::write(src.join("b/inner.rs"), "use crate::c;").unwrap();
        std::fs::write(src.join("c.rs"), "fn f() {}").unwrap();
        assert!(cycles(&module_graph(src).unwrap()).is_empty());
        std::fs::write(src.join("c.rs"), "use crate::{a};").unwrap();
        let found = cycles(&module_graph(src).unwrap());
        assert_eq!(found, [["a", "b", "c", "a"]]);
    }

    #[test]
    fn fc_server_has_no_import_circle() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/fc-server/src");
        let graph = module_graph(&src).unwrap();
        assert!(graph.contains_key("conn") && graph.contains_key("command"));
        assert_eq!(cycles(&graph), Vec::<Vec<String>>::new());
    }
}
