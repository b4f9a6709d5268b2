//! `leaseq limits set|show|clear`, run as a user would: on an SQLite file
//! (`--features sqlite`) and on Redis (`--features redis` or `fred`, with
//! `LEASEQ_REDIS_URL` or the local server); bad input everywhere.

mod common;

use common::leaseq;
use predicates::str::contains;

#[test]
fn a_bad_rate_or_no_change_is_a_usage_error() {
    for args in [
        vec!["limits", "set", "q", "--rate", "5"],
        vec!["limits", "set", "q", "--rate", "0/1s"],
        vec!["limits", "set", "q", "--rate", "5/1d"],
        vec!["limits", "set", "q"],
        vec![
            "limits",
            "set",
            "q",
            "--concurrency",
            "3",
            "--no-concurrency",
        ],
    ] {
        leaseq().args(&args).assert().code(2);
    }
}

#[test]
fn limits_on_memory_are_refused_as_in_process() {
    leaseq()
        .args(["--backend", "memory://", "limits", "show", "q"])
        .assert()
        .code(2)
        .stderr(contains("memory://"));
}

/// Sets, changes one limit, shows, refuses a concurrency of 0, clears.
#[allow(dead_code)]
fn round_trip(url: &str, extra: &[&str]) {
    let run = |args: &[&str]| {
        let mut cmd = leaseq();
        cmd.args(["--backend", url]).args(extra).args(args);
        cmd.assert()
    };
    run(&["limits", "show", "mail"])
        .success()
        .stdout(contains("concurrency  none"))
        .stdout(contains("rate         none"));
    run(&[
        "limits",
        "set",
        "mail",
        "--concurrency",
        "3",
        "--rate",
        "5/1s",
    ])
    .success()
    .stdout(contains("concurrency  3 leased at once"))
    .stdout(contains("rate         5/1s"));
    // A limit not named keeps its value.
    run(&["limits", "set", "mail", "--rate", "100/250ms"])
        .success()
        .stdout(contains("concurrency  3 leased at once"))
        .stdout(contains("rate         100/250ms"));
    run(&["limits", "set", "mail", "--concurrency", "0"])
        .code(2)
        .stderr(contains("concurrency"));
    run(&["limits", "set", "mail", "--no-concurrency"])
        .success()
        .stdout(contains("concurrency  none"))
        .stdout(contains("rate         100/250ms"));
    run(&["limits", "show", "other"])
        .success()
        .stdout(contains("rate         none"));
    run(&["limits", "clear", "mail"]).success();
    run(&["limits", "show", "mail"])
        .success()
        .stdout(contains("rate         none"));
}

#[cfg(feature = "sqlite")]
#[test]
fn limits_round_trip_on_sqlite() {
    let db = common::SqliteFile::migrated("limits");
    round_trip(&db.url, &[]);
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[test]
fn limits_round_trip_on_redis() {
    let url = leaseq_testkit::env::redis_url();
    let prefix = format!("lq_limits_{}", leaseq_testkit::env::tag());
    let probe = leaseq()
        .args([
            "--backend",
            &url,
            "--prefix",
            &prefix,
            "limits",
            "show",
            "mail",
        ])
        .output()
        .expect("run leaseq");
    let reachable = if probe.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&probe.stderr).into_owned())
    };
    if !leaseq_testkit::env::require_server("Redis", &url, reachable) {
        return;
    }
    round_trip(&url, &["--prefix", &prefix]);
    leaseq_testkit::redis_prefix::delete_prefix(&url, &prefix);
}
