//! The `leaseq` binary against real servers, for the backends compiled in
//! (`--features redis` / `fred` / `postgres`). Each test names its server
//! with `LEASEQ_REDIS_URL` / `LEASEQ_DATABASE_URL` (defaults: the local
//! ones); without a server it says so and skips, unless `CI=true`, where
//! that is a failure.
#![cfg(any(feature = "redis", feature = "fred", feature = "postgres"))]

use assert_cmd::Command;
use predicates::str::{contains, is_match};

fn leaseq(url: &str) -> Command {
    let mut cmd = Command::cargo_bin("leaseq").expect("the leaseq binary");
    cmd.env_remove("RUST_LOG").args(["--backend", url]);
    cmd
}

/// True when the server answers; otherwise skips loudly (fails under CI).
fn reachable(url: &str) -> bool {
    let out = leaseq(url)
        .args(["reap", "probe"])
        .output()
        .expect("run leaseq");
    let probe = if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    leaseq_testkit::env::require_server("server", url, probe)
}

fn admin_round_trip(url: &str) {
    if !reachable(url) {
        return;
    }
    let queue = format!("cli-admin-{}", std::process::id());
    leaseq(url)
        .args(["enqueue", &queue, "one", "two"])
        .assert()
        .success()
        .stdout(is_match(r"^\d+\n\d+\n$").expect("regex"));
    leaseq(url)
        .args(["stats", &queue])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^ready\s+2$").expect("regex"));
    leaseq(url)
        .args(["peek", &queue])
        .assert()
        .success()
        .stdout(contains("one"))
        .stdout(contains("two"));
    leaseq(url)
        .args(["dead", "list", &queue])
        .assert()
        .success()
        .stdout(contains("(no items)"));
    leaseq(url)
        .args(["dead", "redrive", &queue])
        .assert()
        .success()
        .stdout(contains("redrove 0"));
    leaseq(url)
        .args(["reap", &queue])
        .assert()
        .success()
        .stdout(contains("requeued 0"));
    leaseq(url)
        .args(["purge", &queue, "--yes"])
        .assert()
        .success()
        .stdout(contains("purged 2 items"));
    leaseq(url).args(["stats", &queue]).assert().code(3);
}

fn demo(url: &str) {
    if !reachable(url) {
        return;
    }
    leaseq(url)
        .args([
            "demo",
            "--items",
            "2000",
            "--workers",
            "4",
            "--crash-rate",
            "0.02",
        ])
        .args(["--lease-ms", "500", "--duration", "300", "--no-progress"])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^\s+acked twice\s+0$").expect("regex"))
        .stdout(is_match(r"(?m)^\s+lost\s+0$").expect("regex"))
        .stdout(contains("PASS"));
}

#[cfg(any(feature = "redis", feature = "fred"))]
fn redis_url() -> String {
    leaseq_testkit::env::redis_url()
}

#[cfg(feature = "postgres")]
fn postgres_url() -> String {
    leaseq_testkit::env::database_url()
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[test]
fn admin_commands_on_redis() {
    admin_round_trip(&redis_url());
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[test]
fn demo_on_redis_loses_nothing_and_acks_nothing_twice() {
    demo(&redis_url());
}

#[cfg(feature = "postgres")]
#[test]
fn admin_commands_on_postgres() {
    admin_round_trip(&postgres_url());
}

#[cfg(feature = "postgres")]
#[test]
fn demo_on_postgres_loses_nothing_and_acks_nothing_twice() {
    demo(&postgres_url());
}
