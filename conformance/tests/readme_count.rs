//! README.md and docs/testing.md state how many checks the suite has;
//! this keeps them true.

#[test]
fn the_readme_counts_every_check() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the workspace root");
    let n = leaseq_conformance::CHECKS.len();
    let stated = format!("(`conformance/`): {n} checks");
    assert!(readme.contains(&stated), "README.md should say {stated:?}");
    let testing =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/testing.md"))
            .expect("docs/testing.md");
    assert!(
        testing.contains(&stated),
        "docs/testing.md should say {stated:?}"
    );
    let table = format!("{n}/{n} checks");
    assert_eq!(
        readme.matches(&table).count(),
        5,
        "each of the five backends' rows in README.md should say {table:?}"
    );
}
