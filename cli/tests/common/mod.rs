//! What the CLI test files share: the binary with a clean environment, and
//! a fresh SQLite file to run it on. Each test file is its own crate and
//! uses only part of this.
#![allow(dead_code)]

use assert_cmd::Command;

/// The `leaseq` binary, with no backend or log filter from the environment.
pub(crate) fn leaseq() -> Command {
    let mut cmd = Command::cargo_bin("leaseq").expect("the leaseq binary");
    cmd.env_remove("LEASEQ_BACKEND").env_remove("RUST_LOG");
    cmd
}

/// A fresh SQLite database file in a directory of its own, removed (with
/// its WAL and shared-memory files) when dropped.
#[derive(Debug)]
pub(crate) struct SqliteFile {
    dir: std::path::PathBuf,
    /// The `sqlite://` URL of the file (not created until first opened).
    pub(crate) url: String,
}

impl SqliteFile {
    /// A new file; `what` names the test in the directory's name.
    pub(crate) fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "leaseq-cli-{what}-{}-{}",
            std::process::id(),
            leaseq_testkit::env::tag()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("sqlite://{}", dir.join("jobs.db").display());
        SqliteFile { dir, url }
    }

    /// A new file with the schema in place (`leaseq migrate`).
    pub(crate) fn migrated(what: &str) -> Self {
        let db = Self::new(what);
        db.leaseq().arg("migrate").assert().success();
        db
    }

    /// The binary pointed at this file.
    pub(crate) fn leaseq(&self) -> Command {
        let mut cmd = leaseq();
        cmd.args(["--backend", &self.url]);
        cmd
    }
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
