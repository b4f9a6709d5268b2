//! `leaseq workers`, run as a user would: on an SQLite file (`--features
//! sqlite`) it lists the live workers with the jobs each runs, as a table
//! and as JSON, and says so when there are none.
#![cfg(feature = "sqlite")]

mod common;

use std::time::Duration;

use leaseq::{BackendExt as _, ItemId, QueueName, RunningJob, WorkerEntry};
use predicates::str::{contains, is_match};

#[test]
fn workers_lists_each_live_worker_with_its_running_jobs() {
    let db = common::SqliteFile::migrated("workers");
    db.leaseq()
        .arg("workers")
        .assert()
        .success()
        .stdout("(no live workers)\n");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let backend = rt.block_on(leaseq::connect(&db.url)).expect("open");
    let now = rt.block_on(backend.now()).expect("now");
    let queue = QueueName::new("mail").expect("name");
    let mut entry = WorkerEntry::new("w-1", &queue, 4, now);
    entry.jobs.push(RunningJob {
        id: ItemId::new(17),
        attempt: 2,
        started_at: now.as_millis().saturating_sub(5_000),
    });
    let registry = backend.registry().expect("registry");
    rt.block_on(registry.register(&entry, Duration::from_secs(60)))
        .expect("register");

    db.leaseq()
        .arg("workers")
        .assert()
        .success()
        .stdout(
            is_match(r"(?m)^id\s+host\s+pid\s+queue\s+concurrency\s+running\s+expires$")
                .expect("regex"),
        )
        .stdout(
            is_match(format!(
                r"(?m)^w-1\s+\S+\s+{}\s+mail\s+4\s+1\s+in \d+s$",
                std::process::id()
            ))
            .expect("regex"),
        )
        .stdout(is_match(r"(?m)^  item 17 \(attempt 2\) started \d+s ago$").expect("regex"));
    let out = db
        .leaseq()
        .args(["workers", "--json"])
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v[0]["id"], "w-1");
    assert_eq!(v[0]["queue"], "mail");
    assert_eq!(v[0]["jobs"][0]["id"], "17");
    assert_eq!(v[0]["jobs"][0]["attempt"], 2);
    assert!(v[0]["expires_at_ms"].as_u64() > Some(now.as_millis()));

    rt.block_on(registry.deregister("w-1")).expect("deregister");
    db.leaseq()
        .arg("workers")
        .assert()
        .success()
        .stdout(contains("(no live workers)"));
}
