//! `leaseq schedules list|add|remove|run`, run as a user would: on an
//! SQLite file (`--features sqlite`), and the refusals on any build.

mod common;

use common::leaseq;
use predicates::str::contains;

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
    use predicates::str::is_match;

    use super::*;

    #[test]
    fn add_list_change_remove() {
        let db = common::SqliteFile::migrated("schedules");
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
                // Never fired; next at 04:00 in Berlin (03:00 or 02:00 UTC).
                is_match(
                    r#"(?m)^nightly\s+reports\s+2\s+-\s+\d{4}-\d\d-\d\dT0[23]:00:00\.000Z \(in [^)]+\)\s+cron "0 4 \* \* \*" Europe/Berlin missed=skip$"#,
                )
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
        let db = common::SqliteFile::migrated("bad-schedules");
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
