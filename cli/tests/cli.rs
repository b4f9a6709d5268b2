//! The `leaseq` binary, run as a user would.

mod common;

use common::leaseq;
use predicates::prelude::*;
use predicates::str::{contains, is_match};

fn verdict_line(name: &str, value: u64) -> impl Predicate<str> {
    is_match(format!(r"(?m)^\s+{name}\s+{value}$")).expect("regex")
}

/// `cmd` running the demo of 3,000 items with 3% of the workers crashing,
/// asserted to pass: every item acked once, none lost.
fn assert_crashing_demo_passes(mut cmd: assert_cmd::Command) -> assert_cmd::assert::Assert {
    cmd.args([
        "demo",
        "--items",
        "3000",
        "--workers",
        "4",
        "--crash-rate",
        "0.03",
    ])
    .args(["--lease-ms", "300", "--duration", "300", "--no-progress"])
    .assert()
    .success()
    .stdout(verdict_line("enqueued", 3000))
    .stdout(verdict_line("acked twice", 0))
    .stdout(verdict_line("lost", 0))
    .stdout(contains("PASS"))
}

#[test]
fn demo_acks_every_item_once_and_loses_none() {
    assert_crashing_demo_passes(leaseq())
        .stdout(contains("throughput"))
        .stdout(contains("p99"));
}

/// The same on an SQLite file: workers aborted mid-call (the demo's
/// crashes) must leave no transaction open on the file's one writer
/// connection, or the acks after it are never committed and the verdict
/// counts items left in the queue.
#[cfg(feature = "sqlite")]
#[test]
fn demo_on_sqlite_acks_every_item_once_and_loses_none() {
    let db = common::SqliteFile::new("demo");
    assert_crashing_demo_passes(db.leaseq());
}

/// Output piped into a reader that stops early (`| head`) ends the tool
/// quietly with 141, as SIGPIPE would, not with a panic.
#[test]
fn a_closed_stdout_ends_the_tool_quietly() {
    let bin = assert_cmd::cargo::cargo_bin("leaseq");
    let mut child = std::process::Command::new(bin)
        .args([
            "demo",
            "--items",
            "200",
            "--crash-rate",
            "0",
            "--no-progress",
        ])
        .env_remove("LEASEQ_BACKEND")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn leaseq");
    // The reader goes away before the report is printed.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

#[test]
fn demo_without_crashes_acks_everything_through_workers() {
    leaseq()
        .args([
            "demo",
            "--items",
            "500",
            "--workers",
            "2",
            "--crash-rate",
            "0",
        ])
        .args(["--duration", "300", "--no-progress"])
        .assert()
        .success()
        .stdout(verdict_line("acked", 500))
        .stdout(contains("0 workers killed"));
}

#[test]
fn a_crash_rate_outside_zero_to_one_is_refused() {
    leaseq()
        .args(["demo", "--crash-rate", "2"])
        .assert()
        .code(2)
        .stderr(contains("outside [0, 1)"));
}

#[test]
fn zero_items_is_refused() {
    leaseq()
        .args(["demo", "--items", "0"])
        .assert()
        .code(2)
        .stderr(contains("--items"));
}

#[test]
fn an_unknown_command_is_a_usage_error() {
    leaseq()
        .arg("frobnicate")
        .assert()
        .code(2)
        .stderr(contains("unrecognized subcommand"));
}

#[test]
fn a_bad_backend_url_says_what_is_wrong() {
    leaseq()
        .args(["--backend", "mysql://localhost/db", "stats", "q"])
        .assert()
        .code(2)
        .stderr(contains("unknown scheme \"mysql\""));
    leaseq()
        .args(["--backend", "localhost:6379", "stats", "q"])
        .assert()
        .code(2)
        .stderr(contains("expected SCHEME://"));
}

#[cfg(not(any(feature = "redis", feature = "fred")))]
#[test]
fn a_backend_left_out_of_the_build_names_its_feature() {
    leaseq()
        .args(["--backend", "redis://127.0.0.1:6379", "stats", "q"])
        .assert()
        .code(2)
        .stderr(contains("--features redis"));
}

#[cfg(feature = "postgres")]
#[test]
fn an_unreachable_postgres_server_is_a_clear_error() {
    leaseq()
        .args([
            "--backend",
            "postgres://postgres@127.0.0.1:1/test",
            "stats",
            "q",
        ])
        .assert()
        .code(1)
        .stderr(contains("cannot reach the postgres backend"));
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[test]
fn an_unreachable_redis_server_is_a_clear_error() {
    leaseq()
        .args(["--backend", "redis://127.0.0.1:1", "stats", "q"])
        .assert()
        .code(1)
        .stderr(contains("cannot reach the redis backend"));
}

#[test]
fn a_bad_queue_name_is_a_usage_error() {
    leaseq()
        .args(["stats", "a b"])
        .assert()
        .code(2)
        .stderr(contains("queue name"));
}

#[test]
fn admin_commands_refuse_the_one_shot_memory_backend() {
    for args in [
        &["stats", "jobs"][..],
        &["stats"],
        &["enqueue", "jobs", "a", "b"],
        &["peek", "jobs"],
        &["dead", "list", "jobs"],
        &["dead", "redrive", "jobs"],
        &["dead", "redrive", "jobs", "--id", "1"],
        &["reap", "jobs"],
        &["purge", "jobs", "--yes"],
        &["migrate"],
    ] {
        leaseq()
            .args(args)
            .assert()
            .code(2)
            .stdout(predicates::str::is_empty())
            .stderr(contains("memory:// lives inside one process"));
    }
}

#[test]
fn enqueue_checks_its_options_before_connecting() {
    leaseq()
        .args(["enqueue", "jobs", "a", "b", "--dedup-key", "k"])
        .assert()
        .code(2)
        .stderr(contains("single payload"));
    leaseq()
        .args(["enqueue", "jobs", "a", "--file", "x"])
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
}

#[test]
fn peek_rejects_an_unknown_state() {
    leaseq()
        .args(["peek", "jobs", "--state", "done", "--allow-empty"])
        .assert()
        .code(2)
        .stderr(contains("unknown state"));
}

/// README's install line names this package's path, its binary and only
/// features it has, so a user who copies it gets the tool.
#[test]
fn the_readme_install_line_installs_this_tool() {
    let readme = include_str!("../../README.md");
    let manifest = include_str!("../Cargo.toml");
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo install "))
        .expect("README has an install line");
    let words: Vec<&str> = line.split_whitespace().collect();
    let path = words
        .iter()
        .position(|w| *w == "--path")
        .map(|i| words[i + 1]);
    assert_eq!(path, Some("cli"), "{line}");
    assert!(line.contains("binary: leaseq"), "{line}");
    assert!(manifest.contains("[[bin]]\nname = \"leaseq\""));
    let features = words
        .iter()
        .position(|w| *w == "--features")
        .map(|i| words[i + 1])
        .expect("the line names features");
    let table = manifest
        .split("[features]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [features] table");
    for feature in features.split(',') {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(&format!("{feature} = "))),
            "README installs with feature {feature:?}, which cli/Cargo.toml does not have"
        );
    }
}

/// `leaseq events` on SQLite says up front that it hears only its own
/// process, which for a command of its own means nothing another process
/// does.
#[cfg(feature = "sqlite")]
#[test]
fn events_on_sqlite_say_they_hear_only_their_own_process() {
    let db = common::SqliteFile::migrated("events");
    db.leaseq()
        .args(["events", "q", "--count", "0"])
        .assert()
        .success()
        .stderr(contains("following the events of q"))
        .stderr(contains(
            "on SQLite only this process's own changes are told",
        ));
}
