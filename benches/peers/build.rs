//! Records which leaseq sources the binary was built from: the commit of the
//! repository this crate sits in, and whether the leaseq crates had changes
//! not yet committed.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    const LEASEQ: [&str; 3] = [
        "../../queue-core",
        "../../backend-redis",
        "../../backend-postgres",
    ];
    for dir in LEASEQ {
        println!("cargo:rerun-if-changed={dir}");
    }
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    println!("cargo:rerun-if-changed=../../.git/logs/HEAD");
    let rev = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(LEASEQ);
    let dirty = git(&status).is_some_and(|s| !s.is_empty());
    println!(
        "cargo:rustc-env=LEASEQ_SOURCE_REV={rev}{}",
        if dirty { "+uncommitted" } else { "" }
    );
}
