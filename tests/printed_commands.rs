//! Every `cargo run …` / `cargo test …` printed in README.md, docs/**/*.md
//! and the examples' header comments works when pasted at the workspace
//! root: the package it names exists, and so do the example, binary, test
//! and features it names (read from `cargo metadata`); an example's
//! required features are turned on; without `-p` the command acts on the
//! default members, which must hold what it names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One workspace package, as `cargo metadata` describes it.
#[derive(Debug)]
struct Package {
    name: String,
    features: BTreeSet<String>,
    /// The features `default` turns on (a command has them unless it
    /// passes `--no-default-features`).
    default_features: BTreeSet<String>,
    /// (kind, name, required features) per target.
    targets: Vec<(String, String, Vec<String>)>,
}

impl Package {
    fn target(&self, kind: &str, name: &str) -> Option<&[String]> {
        self.targets
            .iter()
            .find(|(k, n, _)| k == kind && n == name)
            .map(|(_, _, req)| req.as_slice())
    }
}

#[derive(Debug)]
struct Workspace {
    packages: Vec<Package>,
    default_members: Vec<String>,
}

fn workspace(root: &Path) -> Workspace {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {out:?}");
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let packages: Vec<Package> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| Package {
            name: p["name"].as_str().expect("name").to_owned(),
            features: p["features"]
                .as_object()
                .map(|f| f.keys().cloned().collect())
                .unwrap_or_default(),
            default_features: strings(&p["features"]["default"]).into_iter().collect(),
            targets: p["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .flat_map(|t| {
                    let name = t["name"].as_str().unwrap_or_default().to_owned();
                    let req = strings(&t["required-features"]);
                    strings(&t["kind"])
                        .into_iter()
                        .map(move |k| (k, name.clone(), req.clone()))
                })
                .collect(),
        })
        .collect();
    let id_to_name = |id: &str| {
        meta["packages"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["id"] == id))
            .and_then(|p| p["name"].as_str())
            .map(str::to_owned)
    };
    let default_members = meta["workspace_default_members"]
        .as_array()
        .expect("workspace_default_members (cargo 1.71 or later)")
        .iter()
        .filter_map(|id| id.as_str().and_then(id_to_name))
        .collect();
    Workspace {
        packages,
        default_members,
    }
}

/// The Markdown files checked: README.md and every `.md` under docs/.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                files.push(path);
            }
        }
    }
    files
}

/// The `//!` header of each example, as text.
fn example_headers(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .flatten()
    {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&path).expect("read example");
            let header: Vec<&str> = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .map(|l| l.trim_start_matches("//!").trim_start())
                .collect();
            out.push((path, header.join("\n")));
        }
    }
    out
}

/// The cargo commands in `text`: inline code spans (which may wrap over a
/// line break) that hold `cargo run` / `cargo test`, and lines of code
/// blocks, or bare lines (example headers), that start with one (after
/// `$ ` or environment assignments).
fn commands_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut prose = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            prose.push('\n');
            continue;
        }
        if let Some(cmd) = bare_command(line) {
            found.push(cmd);
            prose.push('\n');
            continue;
        }
        if !in_fence {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    for (i, span) in prose.split('`').enumerate() {
        if i % 2 == 1 {
            let span = span.replace('\n', " ");
            if let Some(at) = cargo_at(&span) {
                found.push(span[at..].to_owned());
            }
        }
    }
    found
}

/// Where `cargo run` / `cargo test` starts in `s`.
fn cargo_at(s: &str) -> Option<usize> {
    ["cargo run", "cargo test"]
        .iter()
        .filter_map(|c| s.find(c))
        .min()
}

/// A line that is a command: optional `$ ` and `VAR=value` words, then
/// `cargo run` or `cargo test`.
fn bare_command(line: &str) -> Option<String> {
    let mut rest = line.trim_start().trim_start_matches("$ ");
    while let Some((word, tail)) = rest.split_once(' ') {
        if word.contains('=') && !word.starts_with('-') {
            rest = tail.trim_start();
        } else {
            break;
        }
    }
    (rest.starts_with("cargo run") || rest.starts_with("cargo test")).then(|| rest.to_owned())
}

/// What a command names.
#[derive(Debug, Default)]
struct Named {
    packages: Vec<String>,
    workspace: bool,
    all_features: bool,
    no_default_features: bool,
    features: Vec<String>,
    examples: Vec<String>,
    bins: Vec<String>,
    tests: Vec<String>,
}

fn parse(cmd: &str) -> Named {
    let mut named = Named::default();
    let words: Vec<&str> = cmd
        .split_whitespace()
        .skip(2)
        .take_while(|w| !matches!(*w, "--" | "#" | "&&" | "|" | ";" | "\\"))
        .collect();
    let mut i = 0;
    while i < words.len() {
        let (flag, inline) = match words[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (words[i], None),
        };
        let mut value = || {
            inline.clone().or_else(|| {
                i += 1;
                words.get(i).map(|w| w.trim_matches(['"', '\'']).to_owned())
            })
        };
        match flag {
            "-p" | "--package" => named.packages.extend(value()),
            "--workspace" | "--all" => named.workspace = true,
            "--all-features" => named.all_features = true,
            "--no-default-features" => named.no_default_features = true,
            "-F" | "--features" => named.features.extend(
                value()
                    .unwrap_or_default()
                    .split([',', ' '])
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned),
            ),
            "--example" => named.examples.extend(value()),
            "--bin" => named.bins.extend(value()),
            "--test" => named.tests.extend(value()),
            _ => {}
        }
        i += 1;
    }
    named
}

/// What is wrong with `cmd`, if anything.
fn problems(ws: &Workspace, cmd: &str) -> Vec<String> {
    let named = parse(cmd);
    let mut wrong = Vec::new();
    let package = |name: &str| ws.packages.iter().find(|p| p.name == name);
    for p in &named.packages {
        if package(p).is_none() {
            wrong.push(format!("no package {p:?} in the workspace"));
        }
    }
    // The packages the command acts on.
    let scope: Vec<&Package> = if named.workspace {
        ws.packages.iter().collect()
    } else if named.packages.is_empty() {
        ws.default_members
            .iter()
            .filter_map(|n| package(n))
            .collect()
    } else {
        named.packages.iter().filter_map(|n| package(n)).collect()
    };
    let mut features_of_scope: BTreeSet<String> = if named.no_default_features {
        BTreeSet::new()
    } else {
        scope
            .iter()
            .flat_map(|p| p.default_features.iter().cloned())
            .collect()
    };
    for f in &named.features {
        match f.split_once('/') {
            Some((p, feat)) => {
                if !package(p).is_some_and(|p| p.features.contains(feat)) {
                    wrong.push(format!("no feature {f:?}"));
                }
            }
            None => {
                if !scope.iter().any(|p| p.features.contains(f)) {
                    wrong.push(format!(
                        "no feature {f:?} in {:?}",
                        scope.iter().map(|p| &p.name).collect::<Vec<_>>()
                    ));
                }
                features_of_scope.insert(f.clone());
            }
        }
    }
    for (kind, names) in [
        ("example", &named.examples),
        ("bin", &named.bins),
        ("test", &named.tests),
    ] {
        for name in names {
            let found = scope.iter().find_map(|p| p.target(kind, name));
            match found {
                None => wrong.push(format!(
                    "no {kind} target {name:?} in {:?}{}",
                    scope.iter().map(|p| &p.name).collect::<Vec<_>>(),
                    if named.packages.is_empty() {
                        " (the default members: add -p)"
                    } else {
                        ""
                    }
                )),
                Some(required) if !named.all_features => {
                    for r in required {
                        if !features_of_scope.contains(r) {
                            wrong.push(format!("{kind} {name:?} needs `--features {r}`"));
                        }
                    }
                }
                Some(_) => {}
            }
        }
    }
    wrong
}

#[test]
fn every_printed_cargo_command_names_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = workspace(root);
    let mut sources: Vec<(PathBuf, String)> = markdown_files(root)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read markdown");
            (p, text)
        })
        .collect();
    sources.extend(example_headers(root));
    let mut checked = 0;
    let mut failures = Vec::new();
    for (path, text) in &sources {
        for cmd in commands_in(text) {
            checked += 1;
            for why in problems(&ws, &cmd) {
                failures.push(format!("{}: `{cmd}`: {why}", path.display()));
            }
        }
    }
    assert!(
        checked >= 10,
        "only {checked} commands found: is the parser blind?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The checker itself: the mistakes it exists for are caught.
#[test]
fn the_checker_catches_what_fails_when_pasted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = workspace(root);
    let bad = [
        "cargo run --example producer_worker",
        "cargo run -p leaseq --example no_such_example",
        "cargo run -p leaseq --example sqlite_durable",
        "cargo run -p leaseq --no-default-features --example producer_worker",
        "cargo run -p no-such-package",
        "cargo run -p leaseq --example typed_job --features no_such_feature",
        "cargo test -p leaseq --test no_such_test",
    ];
    for cmd in bad {
        assert!(!problems(&ws, cmd).is_empty(), "{cmd} passed");
    }
    let good = [
        "cargo run -p leaseq --example producer_worker",
        "cargo run -p leaseq --example sqlite_durable --features sqlite",
        "cargo run --release --features redis -- demo --backend redis://127.0.0.1:6379",
        "cargo test --workspace --all-features",
    ];
    for cmd in good {
        assert_eq!(problems(&ws, cmd), Vec::<String>::new(), "{cmd}");
    }
    assert_eq!(
        commands_in(
            "see `cargo run -p\nleaseq --example x` and\n```sh\n$ FOO=1 cargo test -p y\n```\n"
        ),
        vec!["cargo test -p y", "cargo run -p leaseq --example x"]
    );
}
