//! Every public check is in the suite's registry (`CHECKS`, what `suite!`
//! expands): a check written and not registered would compile and never
//! run. The checks are read from the source of `src/checks/`, one public
//! `async fn name(factory: &dyn BackendFactory)` per check.

use std::collections::BTreeSet;

fn declared_checks() -> BTreeSet<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks");
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("src/checks") {
        let path = entry.expect("entry").path();
        let module = path.file_stem().and_then(|s| s.to_str()).expect("name");
        if module == "mod" {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("source");
        // A signature may wrap, so each is read up to its closing paren.
        for (at, opening) in source.match_indices("\npub async fn ") {
            let rest = &source[at + opening.len()..];
            let params = rest.split(')').next().unwrap_or_default();
            if !params.contains("&dyn BackendFactory") {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(format!("{module}::{name}"));
        }
    }
    out
}

#[test]
fn every_public_check_is_registered() {
    let declared = declared_checks();
    assert!(declared.len() >= 100, "parsed too few checks: {declared:?}");
    let registered: BTreeSet<String> = leaseq_conformance::CHECKS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let missing: Vec<&String> = declared.difference(&registered).collect();
    assert!(
        missing.is_empty(),
        "public checks missing from the registry in src/lib.rs (__with_checks!): {missing:?}"
    );
    assert_eq!(
        registered.len(),
        leaseq_conformance::CHECKS.len(),
        "a check is registered twice"
    );
}
