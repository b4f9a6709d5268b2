//! `leaseq stats` without a queue: one line per queue that holds items,
//! under a header, on an SQLite file (`--features sqlite`); the server
//! backends run the same form in `cli_servers.rs`.
#![cfg(feature = "sqlite")]

mod common;

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::{contains, is_match};

fn leaseq(url: &str) -> Command {
    let mut cmd = common::leaseq();
    cmd.args(["--backend", url]);
    cmd
}

#[test]
fn stats_without_a_queue_lists_every_queue_that_holds_items() {
    let db = common::SqliteFile::new("stats");
    let url = db.url.clone();
    leaseq(&url).arg("migrate").assert().success();
    leaseq(&url)
        .arg("stats")
        .assert()
        .success()
        .stdout(is_match(r"^queue\s+ready\s+scheduled\s+leased\s+dead\s+total\n").expect("regex"))
        .stdout(contains("(no queues hold items)"));
    leaseq(&url)
        .args(["enqueue", "mail", "a", "b"])
        .assert()
        .success();
    leaseq(&url)
        .args(["enqueue", "billing", "x", "--delay-ms", "600000"])
        .assert()
        .success();
    leaseq(&url)
        .args(["enqueue", "gone", "y"])
        .assert()
        .success();
    leaseq(&url)
        .args(["purge", "gone", "--yes"])
        .assert()
        .success();
    // A header, then the queues by name with their counts per state.
    leaseq(&url)
        .arg("stats")
        .assert()
        .success()
        .stdout(
            is_match(
                r"^queue\s+ready\s+scheduled\s+leased\s+dead\s+total\nbilling\s+0\s+1\s+0\s+0\s+1\nmail\s+2\s+0\s+0\s+0\s+2\n$",
            )
            .expect("regex"),
        )
        .stdout(contains("gone").not());
    // With a queue, as before.
    leaseq(&url)
        .args(["stats", "mail"])
        .assert()
        .success()
        .stdout(is_match(r"(?m)^ready\s+2$").expect("regex"));
    leaseq(&url)
        .args(["stats", "--allow-empty"])
        .assert()
        .code(2);
}
