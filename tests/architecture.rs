//! ARCHITECTURE.md's crate table names every workspace member: a crate
//! added to the workspace and not to the table fails here.

#[test]
fn the_crate_table_names_every_workspace_member() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).expect("Cargo.toml");
    let architecture =
        std::fs::read_to_string(format!("{root}/ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let start = manifest.find("members = [").expect("a members list") + "members = [".len();
    let end = start + manifest[start..].find(']').expect("the list's end");
    let members: Vec<&str> = manifest[start..end]
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    assert!(members.len() >= 10, "parsed too few members: {members:?}");
    let missing: Vec<&&str> = members
        .iter()
        .filter(|m| !architecture.contains(&format!("| `{m}/` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "workspace members missing from ARCHITECTURE.md's crate table: {missing:?}"
    );
    let package = |dir: &str| -> String {
        let toml = std::fs::read_to_string(format!("{root}/{dir}/Cargo.toml")).expect("manifest");
        let line = toml
            .lines()
            .find(|l| l.starts_with("name = "))
            .expect("a package name");
        line.trim_start_matches("name = ")
            .trim_matches('"')
            .to_owned()
    };
    for m in &members {
        let name = package(m);
        assert!(
            architecture.contains(&format!("| `{name}` | `{m}/` |")),
            "ARCHITECTURE.md's crate table should have the row | `{name}` | `{m}/` |"
        );
    }
}
