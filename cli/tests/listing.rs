//! What operators script against, on an SQLite file: `--json` on the
//! listing commands, RFC 3339 and relative times, `leaseq item`, the next
//! run of a schedule, `enqueue` past one batch, and a scheduler that logs
//! the ticks it fires.
#![cfg(feature = "sqlite")]

mod common;

use predicates::str::{contains, is_match};
use serde_json::Value;

/// Runs `leaseq ARGS` on `db`, expects success, and parses stdout as JSON.
fn json(db: &common::SqliteFile, args: &[&str]) -> Value {
    let out = db.leaseq().args(args).output().expect("run leaseq");
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out:?}"))
}

/// Whether `v` is an RFC 3339 time in UTC with milliseconds
/// (`2026-12-06T00:31:47.120Z`).
fn is_rfc3339(v: &Value) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    v.as_str().is_some_and(|s| {
        s.len() == shape.len()
            && s.chars().zip(shape.chars()).all(|(c, p)| match p {
                'd' => c.is_ascii_digit(),
                _ => c == p,
            })
    })
}

#[test]
fn enqueue_takes_more_than_one_batch_and_listings_speak_json() {
    let db = common::SqliteFile::migrated("listing");
    let payloads: Vec<String> = (0..2_500).map(|i| format!("job {i}")).collect();
    let out = db
        .leaseq()
        .args(["enqueue", "bulk"])
        .args(&payloads)
        .output()
        .expect("run leaseq");
    assert!(out.status.success(), "{out:?}");
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().expect("an id per line"))
        .collect();
    assert_eq!(ids.len(), 2_500);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in enqueue order");

    let stats = json(&db, &["stats", "bulk", "--json"]);
    assert_eq!(stats["queue"], "bulk");
    assert_eq!(
        (stats["ready"].as_u64(), stats["total"].as_u64()),
        (Some(2_500), Some(2_500))
    );
    let all = json(&db, &["stats", "--json"]);
    assert_eq!(all.as_array().map(Vec::len), Some(1), "{all}");
    assert_eq!(all[0]["queue"], "bulk");

    // A list cut at its --limit says so on stderr (the JSON stays whole);
    // a whole one says nothing.
    db.leaseq()
        .args(["peek", "bulk", "--limit", "3", "--json"])
        .assert()
        .success()
        .stderr(contains(
            "(the first 3 of 2500 ready items; `--limit 2500` shows them all)",
        ));
    db.leaseq()
        .args(["peek", "bulk", "--limit", "2500"])
        .assert()
        .success()
        .stderr("");
    let peeked = json(&db, &["peek", "bulk", "--limit", "3", "--json"]);
    let items = peeked.as_array().expect("an array");
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["id"], ids[0].to_string());
    assert_eq!(items[0]["payload"], "job 0");
    assert_eq!(items[0]["state"], "ready");
    assert!(is_rfc3339(&items[0]["enqueued_at"]), "{}", items[0]);
    assert!(items[0]["enqueued_at_ms"]
        .as_u64()
        .is_some_and(|ms| ms > 1_700_000_000_000));
    assert_eq!(
        json(&db, &["dead", "list", "bulk", "--json"]),
        Value::Array(vec![])
    );

    // One item whole, as JSON and as text.
    let id = ids[7].to_string();
    let one = json(&db, &["item", "bulk", "--id", &id, "--json"]);
    assert_eq!(
        (one["queue"].as_str(), one["payload"].as_str()),
        (Some("bulk"), Some("job 7"))
    );
    assert_eq!(one["due_at"], Value::Null);
    db.leaseq()
        .args(["item", "bulk", "--id", &id])
        .assert()
        .success()
        .stdout(contains("job 7"))
        .stdout(
            is_match(r"enqueued\s+\d{4}-\d{2}-\d{2}T[0-9:.]+Z \((now|\d+s ago)\)").expect("regex"),
        );
    db.leaseq()
        .args(["item", "bulk", "--id", "9999999"])
        .assert()
        .code(3)
        .stderr(contains("item 9999999 not found"));
    // The text table has the times too.
    db.leaseq()
        .args(["peek", "bulk", "--limit", "1"])
        .assert()
        .success()
        .stdout(contains("enqueued"))
        .stdout(is_match(r"(now|\ds ago)").expect("regex"));

    // A delayed item shows when it is due.
    db.leaseq()
        .args(["enqueue", "later", "x", "--delay-ms", "3600000"])
        .assert()
        .success();
    let later = json(&db, &["peek", "later", "--state", "scheduled", "--json"]);
    assert!(is_rfc3339(&later[0]["due_at"]), "{later}");
    db.leaseq()
        .args(["peek", "later", "--state", "scheduled"])
        .assert()
        .success()
        .stdout(contains("in 59m"));

    db.leaseq()
        .args(["limits", "set", "bulk", "--concurrency", "3"])
        .assert()
        .success();
    let limits = json(&db, &["limits", "show", "bulk", "--json"]);
    assert_eq!(
        (limits["concurrency"].as_u64(), &limits["rate"]),
        (Some(3), &Value::Null)
    );
}

#[test]
fn schedules_list_shows_the_next_run_and_a_scheduler_logs_fired_ticks() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let db = common::SqliteFile::migrated("schedules-next");
    db.leaseq()
        .args([
            "schedules",
            "add",
            "tick",
            "ticks",
            "hello",
            "--every-ms",
            "1000",
        ])
        .assert()
        .success();
    let listed = json(&db, &["schedules", "list", "--json"]);
    let row = &listed[0];
    assert_eq!(row["name"], "tick");
    assert!(is_rfc3339(&row["next_run"]), "{row}");
    let next = row["next_run_ms"].as_u64().expect("next run ms");
    assert_eq!(next % 1000, 0, "an interval ticks on its multiples");
    db.leaseq()
        .args(["schedules", "list"])
        .assert()
        .success()
        .stdout(contains("next run"))
        .stdout(is_match(r"\(in \ds\)|\(now\)").expect("regex"));

    // `schedules run` logs each fired tick at info level by default.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("leaseq"))
        .env_remove("RUST_LOG")
        .env_remove("LEASEQ_BACKEND")
        .args(["--backend", &db.url, "schedules", "run"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the scheduler");
    let stderr = child.stderr.take().expect("stderr");
    // A scheduler that never logs must not hang the test.
    let pid = child.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
    });
    let started = Instant::now();
    let mut fired = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("read stderr");
        if line.contains("fired") {
            fired = Some(line);
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let fired = fired.expect("no fired tick was logged");
    assert!(fired.contains("INFO") && fired.contains("tick"), "{fired}");
}
