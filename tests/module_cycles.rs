//! No two modules of one crate import each other: for each workspace
//! crate, the top-level modules named in `crate::<module>` paths of each
//! module's code (comments left out) must form no pair that names each
//! other. A module's own submodules may use it (`super::`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `.rs` files under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate's top-level modules and, for each, the others it names.
fn uses(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(src).expect("src").flatten() {
        let path = entry.path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if path.is_dir() || (stem != "lib" && stem != "main") {
            modules.insert(stem.to_owned());
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &modules {
        let mut sources = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            files(&dir, &mut sources);
        }
        let file = src.join(format!("{module}.rs"));
        if file.is_file() {
            sources.push(file);
        }
        let named = out.entry(module.clone()).or_default();
        for path in sources {
            let source = std::fs::read_to_string(&path).expect("a source file");
            // Code only: a doc link is no import.
            let text: String = source
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for (i, _) in text.match_indices("crate::") {
                let rest = &text[i + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains(&name) && &name != module {
                    named.insert(name);
                }
            }
        }
    }
    out
}

#[test]
fn no_two_modules_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest.find("members = [").expect("members") + "members = [".len();
    let end = start + manifest[start..].find(']').expect("the list's end");
    let mut crates: Vec<&str> = manifest[start..end]
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    crates.push(".");
    let mut cycles = Vec::new();
    for krate in crates {
        let src = root.join(krate).join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = uses(&src);
        for (a, named) in &graph {
            for b in named {
                if a < b && graph.get(b).is_some_and(|n| n.contains(a)) {
                    cycles.push(format!("{krate}: {a} <-> {b}"));
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other: {cycles:?}"
    );
}
