//! `leaseq schedules list|add|remove|run`, run as a user would: on an
//! SQLite file (`--features sqlite`), and the refusals on any build.

use assert_cmd::Command;
use predicates::str::{contains, is_match};

fn leaseq() -> Command {
    let mut cmd = Command::cargo_bin("leaseq").expect("the leaseq binary");
    cmd.env_remove("LEASEQ_BACKEND").env_remove("RUST_LOG");
    cmd
}

#[test]
fn schedules_need_a_shared_backend() {
    leaseq()
        .args(["schedules", "list"])
        .assert()
        .code(2)
        .stderr(contains("memory:// lives inside one process"));
}

#[test]
fn a_schedule_needs_a_cadence() {
    leaseq()
        .args(["schedules", "add", "s", "q", "payload"])
        .assert()
        .code(2)
        .stderr(contains("--cron"));
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;

    /// A fresh database file, removed when dropped.
    struct Db(std::path::PathBuf);

    impl Db {
        fn new(tag: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "leaseq-cli-{tag}-{}-{}.db",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0)
            ));
            let db = Db(path);
            db.leaseq().arg("migrate").assert().success();
            db
        }

        fn leaseq(&self) -> Command {
            let mut cmd = leaseq();
            cmd.args(["--backend", &format!("sqlite://{}", self.0.display())]);
            cmd
        }
    }

    impl Drop for Db {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = self.0.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        }
    }

    #[test]
    fn add_list_change_remove() {
        let db = Db::new("schedules");
        db.leaseq()
            .args(["schedules", "list"])
            .assert()
            .success()
            .stdout(contains("no schedules"));
        db.leaseq()
            .args(["schedules", "add", "nightly", "reports", "{}"])
            .args(["--cron", "0 3 * * *", "--tz", "Europe/Berlin"])
            .args(["--missed", "enqueue-latest"])
            .assert()
            .success()
            .stdout(contains("revision 1"));
        // The same definition again changes nothing.
        db.leaseq()
            .args(["schedules", "add", "nightly", "reports", "{}"])
            .args(["--cron", "0 3 * * *", "--tz", "Europe/Berlin"])
            .args(["--missed", "enqueue-latest"])
            .assert()
            .success()
            .stdout(contains("revision 1"));
        // A change raises the revision.
        db.leaseq()
            .args(["schedules", "add", "nightly", "reports", "{}"])
            .args(["--cron", "0 4 * * *", "--tz", "Europe/Berlin"])
            .assert()
            .success()
            .stdout(contains("revision 2"));
        db.leaseq()
            .args(["schedules", "list"])
            .assert()
            .success()
            .stdout(
                is_match(r#"(?m)^nightly\s+reports\s+2\s+-\s+cron "0 4 \* \* \*" Europe/Berlin missed=skip$"#)
                    .expect("regex"),
            );
        db.leaseq()
            .args(["schedules", "remove", "nightly"])
            .assert()
            .success();
        db.leaseq()
            .args(["schedules", "remove", "nightly"])
            .assert()
            .code(2)
            .stderr(contains("no schedule named nightly"));
        db.leaseq()
            .args(["schedules", "list"])
            .assert()
            .success()
            .stdout(contains("no schedules"));
    }

    #[test]
    fn bad_definitions_are_usage_errors() {
        let db = Db::new("bad-schedules");
        for args in [
            vec!["--cron", "not a cron"],
            vec!["--cron", "* * * * *", "--tz", "Mars/Olympus"],
            vec!["--every-ms", "0"],
            vec!["--every-ms", "1000", "--missed", "sometimes"],
        ] {
            db.leaseq()
                .args(["schedules", "add", "s", "q", "x"])
                .args(&args)
                .assert()
                .code(2);
        }
        db.leaseq()
            .args(["schedules", "list"])
            .assert()
            .success()
            .stdout(contains("no schedules"));
    }
}
