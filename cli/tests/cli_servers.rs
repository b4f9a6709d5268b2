//! The `leaseq` binary against real servers, for the backends compiled in
//! (`--features redis` / `fred` / `postgres`). Each test names its server
//! with `LEASEQ_REDIS_URL` / `LEASEQ_DATABASE_URL` (defaults: the local
//! ones); without a server it says so and skips, unless `CI=true`, where
//! that is a failure.
#![cfg(any(feature = "redis", feature = "fred", feature = "postgres"))]

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::{contains, is_match};

fn leaseq(url: &str) -> Command {
    let mut cmd = Command::cargo_bin("leaseq").expect("the leaseq binary");
    cmd.env_remove("RUST_LOG").args(["--backend", url]);
    cmd
}

/// True when the server answers; otherwise skips loudly (fails under CI).
fn reachable(url: &str) -> bool {
    let out = leaseq(url).arg("migrate").output().expect("run leaseq");
    let probe = if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    leaseq_testkit::env::require_server("server", url, probe)
}

/// The flag that puts a run in a namespace of its own on `url`'s server.
fn namespace_flag(url: &str) -> &'static str {
    if url.starts_with("postgres") {
        "--schema"
    } else {
        "--prefix"
    }
}

/// A namespace (schema or key prefix) of its own, removed when dropped.
struct Namespace {
    url: String,
    name: String,
}

impl Namespace {
    fn new(url: &str, tag: &str) -> Self {
        let name = format!("lq_{tag}_{}", leaseq_testkit::env::tag());
        Namespace {
            url: url.to_string(),
            name,
        }
    }

    /// `leaseq --backend URL --schema|--prefix NAME`.
    fn leaseq(&self) -> Command {
        let mut cmd = leaseq(&self.url);
        cmd.args([namespace_flag(&self.url), &self.name]);
        cmd
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.url.starts_with("postgres") {
            leaseq_testkit::pg_schema::drop_schema_blocking(&self.url, &self.name);
        } else {
            leaseq_testkit::redis_prefix::delete_prefix(&self.url, &self.name);
        }
    }
}

fn admin_round_trip(url: &str) {
    if !reachable(url) {
        return;
    }
    let ns = Namespace::new(url, "cli_admin");
    let leaseq = |_: &str| ns.leaseq();
    // The report names the schema or prefix it set up, not only the URL.
    let kind = if url.starts_with("postgres") {
        "schema"
    } else {
        "prefix"
    };
    leaseq(url)
        .arg("migrate")
        .assert()
        .success()
        .stdout(contains(format!("({kind} {})", ns.name)))
        .stdout(contains("up to date"));
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
    // Without a queue: every queue of the namespace that holds items.
    leaseq(url).arg("stats").assert().success().stdout(
        is_match(format!(
            r"^queue\s+ready\s+scheduled\s+leased\s+dead\s+total\n{queue}\s+2\s+0\s+0\s+0\s+2\n$"
        ))
        .expect("regex"),
    );
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

    // One exit code for an unknown (empty) queue, whatever the command.
    for args in [
        &["stats", "nosuch"][..],
        &["peek", "nosuch"],
        &["dead", "list", "nosuch"],
        &["dead", "redrive", "nosuch"],
        &["reap", "nosuch"],
        &["purge", "nosuch", "--yes"],
    ] {
        leaseq(url)
            .args(args)
            .assert()
            .code(3)
            .stderr(contains("queue \"nosuch\" not found"));
    }
    leaseq(url)
        .args(["reap", "nosuch", "--allow-empty"])
        .assert()
        .success()
        .stdout(contains("requeued 0, dead 0, repaired 0"));
    leaseq(url)
        .args(["stats", "nosuch", "--allow-empty"])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^total\s+0$").expect("regex"));

    // Options: a negative priority, a payload that starts with '-', a
    // payload from standard input; bad values are usage errors.
    leaseq(url)
        .args(["enqueue", &queue, "-5", "--priority", "-3"])
        .assert()
        .success()
        .stdout(is_match(r"^\d+\n$").expect("regex"));
    leaseq(url)
        .args(["enqueue", &queue, "--file", "-"])
        .write_stdin(vec![b'x'; 300_000])
        .assert()
        .success();
    leaseq(url)
        .args(["enqueue", &queue, "x", "--max-attempts", "0"])
        .assert()
        .code(2)
        .stderr(contains("max_attempts is 0"));
    leaseq(url)
        .args(["peek", &queue])
        .assert()
        .success()
        .stdout(contains("-5"));
    leaseq(url)
        .args(["purge", &queue])
        .write_stdin("y\n")
        .assert()
        .code(2)
        .stderr(contains("without --yes"));
    leaseq(url)
        .args(["purge", &queue, "--yes"])
        .assert()
        .success()
        .stdout(contains("purged 2 items"));

    // `purge --forget` deletes the queue whole: items, limits, and an
    // empty queue's limits too; ids go on rising.
    let enqueue_one = |payload: &str| -> u64 {
        let out = leaseq(url)
            .args(["enqueue", &queue, payload])
            .output()
            .expect("run");
        let text = String::from_utf8(out.stdout).expect("utf-8");
        text.trim().parse().expect("an id")
    };
    let mut before = enqueue_one("a");
    // A queue with an item, then one with none left (only its limits).
    for (purge_first, items) in [(false, 1), (true, 0)] {
        leaseq(url)
            .args(["limits", "set", &queue, "--concurrency", "2"])
            .assert()
            .success();
        if purge_first {
            leaseq(url)
                .args(["purge", &queue, "--yes"])
                .assert()
                .success();
        }
        leaseq(url)
            .args(["purge", &queue, "--forget", "--yes"])
            .assert()
            .success()
            .stdout(contains(format!(
                "deleted queue {queue} and its {items} items"
            )));
        leaseq(url)
            .args(["limits", "show", &queue])
            .assert()
            .success()
            .stdout(contains("concurrency  none"));
        leaseq(url).args(["stats", &queue]).assert().code(3);
        let after = enqueue_one("b");
        assert!(
            after > before,
            "id {after} after the delete, {before} before"
        );
        before = after;
    }
    leaseq(url)
        .args(["purge", &queue, "--forget", "--yes"])
        .assert()
        .success();

    // The namespace separates: the same queue under the default one is unknown.
    leaseq(url)
        .args(["enqueue", &queue, "z"])
        .assert()
        .success();
    let plain = |_: &str| leaseq_plain(url);
    plain(url).args(["stats", &queue]).assert().code(3);
    let sep = if url.contains('?') { '&' } else { '?' };
    let key = if url.starts_with("postgres") {
        "schema"
    } else {
        "prefix"
    };
    leaseq_plain(&format!("{url}{sep}{key}={}", ns.name))
        .args(["stats", &queue])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^ready\s+1$").expect("regex"));
}

/// `cancel`, `pause`/`resume`, `run-now` and `workers` on a server.
fn control_round_trip(url: &str) {
    if !reachable(url) {
        return;
    }
    let ns = Namespace::new(url, "cli_control");
    ns.leaseq().arg("migrate").assert().success();
    let queue = format!("cli-control-{}", std::process::id());
    let enqueue = |args: &[&str]| -> String {
        let out = ns
            .leaseq()
            .args(["enqueue", &queue])
            .args(args)
            .output()
            .expect("run");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    };
    let (now, later) = (enqueue(&["a"]), enqueue(&["b", "--delay-ms", "3600000"]));

    ns.leaseq().args(["pause", &queue]).assert().success();
    ns.leaseq()
        .args(["stats", &queue])
        .assert()
        .success()
        .stdout(contains(format!(
            "paused: claims get nothing until `leaseq resume {queue}`"
        )));
    ns.leaseq()
        .arg("stats")
        .assert()
        .success()
        .stdout(is_match(format!(r"(?m)^{queue}\s+1\s+1\s+0\s+0\s+2  paused$")).expect("regex"));
    ns.leaseq().args(["resume", &queue]).assert().success();
    ns.leaseq()
        .args(["stats", &queue])
        .assert()
        .success()
        .stdout(contains("paused").not());

    ns.leaseq()
        .args(["run-now", &queue, "--id", &later])
        .assert()
        .success()
        .stdout(contains(format!("moved item {later} of {queue} to ready")));
    ns.leaseq()
        .args(["run-now", &queue, "--all"])
        .assert()
        .success()
        .stdout(contains("moved 0 scheduled items"));
    ns.leaseq()
        .args(["cancel", &queue, "--id", &now])
        .assert()
        .success()
        .stdout(contains(format!(
            "cancelled item {now} of {queue} now (it was ready)"
        )));
    ns.leaseq()
        .args(["cancel", &queue, "--id", &now])
        .assert()
        .code(3);
    ns.leaseq().arg("workers").assert().success();
}

/// `retention`, `events`, `history` and `item` on a server, all through
/// the binary: `events` (another process) hears an enqueue and a cancel
/// made by other processes, and the cancelled item is kept and shown.
fn history_round_trip(url: &str) {
    if !reachable(url) {
        return;
    }
    let ns = Namespace::new(url, "cli_history");
    ns.leaseq().arg("migrate").assert().success();
    let queue = format!("cli-history-{}", std::process::id());
    ns.leaseq()
        .args(["retention", &queue, "--cancelled-count", "10"])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^cancelled\s+the newest 10 kept$").expect("regex"));

    let follower = Follower::start(&ns, &queue, 2);
    let out = ns
        .leaseq()
        .args(["enqueue", &queue, "hello"])
        .output()
        .expect("run");
    let id = String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    ns.leaseq()
        .args(["cancel", &queue, "--id", &id])
        .assert()
        .success();
    let heard = follower.finish();
    let lines: Vec<&str> = heard.lines().collect();
    assert_eq!(lines.len(), 2, "two events: {heard}");
    assert!(
        lines[0].contains(&id) && lines[0].contains("enqueued"),
        "{heard}"
    );
    assert!(
        lines[1].contains(&id) && lines[1].contains("cancelled"),
        "{heard}"
    );

    ns.leaseq()
        .args(["history", &queue, "--ending", "cancelled"])
        .assert()
        .success()
        .stdout(contains(id.as_str()).and(contains("hello")));
    ns.leaseq()
        .args(["item", &queue, "--id", &id])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^state\s+cancelled$").expect("regex"));
}

/// `leaseq events QUEUE --count N` running as a process of its own.
struct Follower {
    child: std::process::Child,
}

impl Follower {
    /// Starts it and waits until it follows the queue (it says so on
    /// stderr once subscribed).
    fn start(ns: &Namespace, queue: &str, count: u32) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("leaseq"))
            .env_remove("RUST_LOG")
            .args(["--backend", &ns.url, namespace_flag(&ns.url), &ns.name])
            .args(["events", queue, "--count", &count.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn leaseq events");
        let stderr = child.stderr.take().expect("stderr");
        let mut first = String::new();
        std::io::BufReader::new(stderr)
            .read_line(&mut first)
            .expect("read stderr");
        assert!(
            first.contains("following the events"),
            "leaseq events said: {first:?}"
        );
        Follower { child }
    }

    /// Its output once it printed its events and ended (killed and failed
    /// after a minute).
    fn finish(mut self) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match self.child.try_wait().expect("wait") {
                Some(status) => {
                    assert!(status.success(), "leaseq events ended with {status}");
                    break;
                }
                None if std::time::Instant::now() > deadline => {
                    let _ = self.child.kill();
                    panic!("leaseq events did not print its events within a minute");
                }
                None => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
        let mut out = String::new();
        use std::io::Read;
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read stdout");
        out
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `leaseq --backend URL` with no namespace flag.
fn leaseq_plain(url: &str) -> Command {
    leaseq(url)
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
fn control_commands_on_redis() {
    control_round_trip(&redis_url());
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[test]
fn history_and_events_commands_on_redis() {
    history_round_trip(&redis_url());
}

#[cfg(any(feature = "redis", feature = "fred"))]
/// A queue written in Redis key layout 1 (one hash per item) is refused by
/// admin commands until `leaseq migrate` converts it; then its item is
/// there, in its state, with its payload.
#[cfg(feature = "redis")]
#[test]
fn migrate_on_redis_converts_queues_in_the_old_layout() {
    let url = redis_url();
    if !reachable(&url) {
        return;
    }
    let ns = Namespace::new(&url, "cli_migrate");
    let redis = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-u", &url])
            .args(args)
            .output()
            .expect("run redis-cli");
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    };
    let tag = format!("{{{}:old}}", ns.name);
    redis(&[
        "HSET",
        &format!("{tag}:item:1"),
        "p",
        "hello",
        "pri",
        "0",
        "att",
        "0",
        "max",
        "3",
        "st",
        "ready",
        "enq",
        "1000",
    ]);
    redis(&["ZADD", &format!("{tag}:ready"), "0", "00000000000000000001"]);
    redis(&["SET", &format!("{tag}:seq"), "1"]);
    redis(&["HSET", &format!("{{{}:_}}:queues", ns.name), "old", "t"]);
    ns.leaseq()
        .args(["peek", "old"])
        .assert()
        .failure()
        .stderr(contains("key layout 1"));
    ns.leaseq()
        .arg("migrate")
        .assert()
        .success()
        .stdout(contains("old: 1 items converted to key layout 2"))
        .stdout(contains("up to date"));
    ns.leaseq()
        .args(["stats", "old"])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^ready\s+1$").expect("regex"));
    ns.leaseq()
        .args(["peek", "old"])
        .assert()
        .success()
        .stdout(contains("hello"));
    ns.leaseq()
        .arg("migrate")
        .assert()
        .success()
        .stdout(contains("old: ").not());
}

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
fn control_commands_on_postgres() {
    control_round_trip(&postgres_url());
}

#[cfg(feature = "postgres")]
#[test]
fn history_and_events_commands_on_postgres() {
    history_round_trip(&postgres_url());
}

#[cfg(feature = "postgres")]
#[test]
fn demo_on_postgres_loses_nothing_and_acks_nothing_twice() {
    demo(&postgres_url());
}

/// A role with SELECT only (no CREATE, no writes) runs stats, peek and
/// dead list: admin commands never migrate or write to the schema.
#[cfg(feature = "postgres")]
#[test]
fn a_read_only_role_can_inspect_queues() {
    let url = postgres_url();
    if !reachable(&url) {
        return;
    }
    let ns = Namespace::new(&url, "cli_ro");
    ns.leaseq().arg("migrate").assert().success();
    ns.leaseq()
        .args(["enqueue", "ro-q", "one"])
        .assert()
        .success();
    let role = format!("leaseq_ro_{}", std::process::id());
    let psql = |sql: &str| {
        let ok = std::process::Command::new("psql")
            .args([url.as_str(), "-v", "ON_ERROR_STOP=1", "-qc", sql])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "psql failed: {sql}");
    };
    psql(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"
    ));
    psql(&format!(
        "GRANT USAGE ON SCHEMA {s} TO {role}; GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {role}",
        s = ns.name
    ));
    let ro_url = url.replacen("postgres@", &format!("{role}@"), 1);
    let ro = |args: &[&str]| {
        let mut cmd = leaseq(&ro_url);
        cmd.args(["--schema", &ns.name]).args(args);
        cmd
    };
    ro(&["stats", "ro-q"])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^ready\s+1$").expect("regex"));
    ro(&["peek", "ro-q"])
        .assert()
        .success()
        .stdout(contains("one"));
    ro(&["dead", "list", "ro-q"])
        .assert()
        .success()
        .stdout(contains("(no items)"));
    // A write names its real cause.
    ro(&["enqueue", "ro-q", "two"])
        .assert()
        .code(1)
        .stderr(contains("permission denied"));
    psql(&format!("DROP OWNED BY {role}; DROP ROLE {role}"));
}
