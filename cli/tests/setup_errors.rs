//! Setup mistakes are reported with their fix: a SQLite file that does
//! not exist (or whose directory does not), a PostgreSQL schema never
//! migrated, a password or a role the server refuses, a database it does
//! not have.

mod common;

use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;

#[cfg(feature = "sqlite")]
#[test]
fn a_missing_sqlite_file_says_how_to_create_it() {
    let db = common::SqliteFile::new("missing");
    db.leaseq()
        .args(["stats", "q"])
        .assert()
        .code(2)
        .stderr(contains("no database file at"))
        .stderr(contains(format!("`leaseq migrate --backend {}`", db.url)));
    // Which then works.
    db.leaseq().arg("migrate").assert().success();
    db.leaseq()
        .args(["stats", "q", "--allow-empty"])
        .assert()
        .success();

    let nowhere = format!(
        "{}/no-such-dir/jobs.db",
        db.url.trim_end_matches("/jobs.db")
    );
    common::leaseq()
        .args(["--backend", &nowhere, "migrate"])
        .assert()
        .code(2)
        .stderr(contains("no-such-dir does not exist"));
}

#[cfg(feature = "postgres")]
#[test]
fn a_schema_without_tables_says_run_leaseq_migrate() {
    let guard = leaseq_testkit::pg_schema::SchemaGuard::fresh(
        &leaseq_testkit::env::database_url(),
        "unmigrated",
    );
    let out = common::leaseq()
        .args(["--backend", &guard.url, "--schema", &guard.schema])
        .args(["stats", "q"])
        .output()
        .expect("run leaseq");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reached = if stderr.contains("cannot reach") {
        Err(stderr.to_string())
    } else {
        Ok(())
    };
    if !leaseq_testkit::env::require_server("postgres", &guard.url, reached) {
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("has no leaseq tables: run `leaseq migrate`"),
        "{stderr}"
    );
}

/// Runs `leaseq stats q` on `url`, a PostgreSQL server that answers with a
/// refusal: its stderr, once it ended with exit code 1. `None` when no
/// server answers and that may be skipped (see `require_server`).
#[cfg(feature = "postgres")]
fn refused_by_postgres(url: &str) -> Option<String> {
    let out = common::leaseq()
        .args(["--backend", url, "stats", "q"])
        .output()
        .expect("run leaseq");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let reached = if stderr.contains("cannot reach") && !stderr.contains("does not exist") {
        Err(stderr.clone())
    } else {
        Ok(())
    };
    let server = leaseq_testkit::env::database_url();
    if !leaseq_testkit::env::require_server("postgres", &server, reached) {
        return None;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the postgres backend refused"), "{stderr}");
    Some(stderr)
}

/// A database the server does not have is refused (not "cannot reach":
/// the server answered), with what to do.
#[cfg(feature = "postgres")]
#[test]
fn a_missing_postgres_database_says_create_it() {
    let url = leaseq_testkit::env::database_url();
    let Some((server, _db)) = url.rsplit_once('/') else {
        panic!("a database URL: {url}");
    };
    let Some(stderr) = refused_by_postgres(&format!("{server}/leaseq_no_such_database")) else {
        return;
    };
    assert!(stderr.contains("create it (`createdb`)"), "{stderr}");
}

/// A role the server does not know is refused too, with what to check.
#[cfg(feature = "postgres")]
#[test]
fn an_unknown_postgres_role_says_check_the_user() {
    let url = leaseq_testkit::env::database_url();
    let Some((_, rest)) = url.split_once("://") else {
        panic!("a database URL: {url}");
    };
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let Some(stderr) = refused_by_postgres(&format!("postgres://leaseq_no_such_role@{host}"))
    else {
        return;
    };
    assert!(
        stderr.contains("role \"leaseq_no_such_role\" does not exist")
            && stderr.contains("`createuser`"),
        "{stderr}"
    );
}

#[cfg(feature = "redis")]
#[test]
fn a_refused_redis_password_says_authentication_failed() {
    let url = leaseq_testkit::env::redis_url().replacen("redis://", "redis://app:wrong@", 1);
    common::leaseq()
        .args(["--backend", &url, "stats", "q"])
        .assert()
        .code(1)
        .stderr(contains(
            "authentication failed: check the user and password",
        ))
        .stderr(contains("backend unavailable").not());
}
