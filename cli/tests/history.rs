//! `leaseq retention`, `history` and `item` on finished items, run as a
//! user would on an SQLite file (`--features sqlite`): the policy is set
//! and shown, flags not given keep their value and `--off` goes back to
//! keeping nothing; kept items are listed newest first with their results
//! and filtered by ending; `item` shows a kept item whole and says when an
//! item is neither in the queue nor kept. Bad arguments are usage errors
//! on any build.

mod common;

use common::leaseq;
use predicates::str::contains;

#[test]
fn retention_off_with_a_bound_is_a_usage_error() {
    leaseq()
        .args(["retention", "mail", "--off", "--completed-secs", "60"])
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
    leaseq()
        .args(["history", "mail", "--ending", "vanished"])
        .assert()
        .code(2)
        .stderr(contains("--ending"));
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::sync::Arc;
    use std::time::Duration;

    use leaseq::{Backend, BackendExt as _, Bytes, ClaimSpec, Keep, NewItem, QueueName, Retention};
    use predicates::prelude::*;
    use predicates::str::is_match;
    use serde_json::{json, Value};

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Runtime::new().expect("runtime")
    }

    fn json_of(cmd: &mut assert_cmd::Command) -> Value {
        let out = cmd.output().expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    }

    #[test]
    fn retention_is_set_shown_changed_by_parts_and_switched_off() {
        let db = common::SqliteFile::migrated("retention");
        db.leaseq()
            .args(["retention", "mail"])
            .assert()
            .success()
            .stdout(is_match(r"(?m)^completed\s+not kept$").expect("regex"))
            .stdout(is_match(r"(?m)^dead\s+kept until redriven or removed$").expect("regex"));
        db.leaseq()
            .args(["retention", "mail", "--completed-secs", "3600"])
            .args(["--completed-count", "10", "--dead-count", "5"])
            .assert()
            .success()
            .stdout(
                is_match(r"(?m)^completed\s+kept 3600 s, at most the newest 10$").expect("regex"),
            )
            .stdout(is_match(r"(?m)^cancelled\s+not kept$").expect("regex"));
        // A flag not given keeps its value; the store holds the policy for
        // every handle.
        let v =
            json_of(
                db.leaseq()
                    .args(["retention", "mail", "--cancelled-count", "3", "--json"]),
            );
        assert_eq!(
            v["completed"],
            json!({"kept": true, "max_age_secs": 3600, "max_count": 10})
        );
        assert_eq!(
            v["cancelled"],
            json!({"kept": true, "max_age_secs": null, "max_count": 3})
        );
        assert_eq!(v["dead"]["max_count"], json!(5));
        let rt = runtime();
        let backend = rt.block_on(leaseq::connect(&db.url)).expect("open");
        let queue = QueueName::new("mail").expect("name");
        let stored = rt
            .block_on(backend.history().expect("history").retention(&queue))
            .expect("retention");
        assert_eq!(stored.completed.max_count, Some(10));
        assert_eq!(stored.cancelled, Keep::count(3));

        db.leaseq()
            .args(["retention", "mail", "--off"])
            .assert()
            .success();
        let stored = rt
            .block_on(backend.history().expect("history").retention(&queue))
            .expect("retention");
        assert_eq!(stored, Retention::default());
    }

    #[test]
    fn history_lists_kept_items_newest_first_and_item_shows_one_whole() {
        let db = common::SqliteFile::migrated("history");
        let rt = runtime();
        let backend: Arc<dyn Backend> = rt.block_on(leaseq::connect(&db.url)).expect("open");
        let queue = QueueName::new("mail").expect("name");
        let history = backend.history().expect("history");
        rt.block_on(history.set_retention(&queue, Retention::default().completed(Keep::FOREVER)))
            .expect("set retention");
        let ids: Vec<_> = rt
            .block_on(backend.enqueue(&queue, vec![NewItem::new("first"), NewItem::new("second")]))
            .expect("enqueue")
            .into_iter()
            .map(|e| e.id)
            .collect();
        let spec = || ClaimSpec::new(1, Duration::from_secs(3600)).expect("spec");
        // The first acked without a result, the second a little later with
        // one, so the second is the newest.
        let first = rt
            .block_on(backend.claim(&queue, spec()))
            .expect("claim")
            .leases;
        rt.block_on(backend.ack(&first[0].key)).expect("ack");
        std::thread::sleep(Duration::from_millis(5));
        let second = rt
            .block_on(backend.claim(&queue, spec()))
            .expect("claim")
            .leases;
        rt.block_on(history.complete(&second[0].key, Bytes::from_static(b"sent 3 mails")))
            .expect("complete");
        let (a, b) = (ids[0].to_string(), ids[1].to_string());

        let listed = json_of(db.leaseq().args(["history", "mail", "--json"]));
        let listed = listed.as_array().expect("an array");
        let order: Vec<&str> = listed.iter().filter_map(|f| f["id"].as_str()).collect();
        assert_eq!(order, [b.as_str(), a.as_str()], "newest first");
        assert_eq!(listed[0]["result"], json!("sent 3 mails"));
        assert_eq!(listed[0]["ending"], json!("completed"));
        assert_eq!(listed[1]["result"], Value::Null);
        assert_eq!(listed[1]["payload"], json!("first"));
        db.leaseq()
            .args(["history", "mail"])
            .assert()
            .success()
            .stdout(contains("sent 3 mails"))
            .stdout(contains(b.as_str()));
        // A queue whose every item completed is still a queue.
        db.leaseq()
            .args(["stats", "mail"])
            .assert()
            .success()
            .stdout(is_match(r"(?m)^total\s+0$").expect("regex"))
            .stdout(is_match(r"(?m)^completed\s+2 ").expect("regex"));
        db.leaseq()
            .args(["history", "mail", "--ending", "cancelled"])
            .assert()
            .success()
            .stdout(contains("(no kept items; see `leaseq retention mail`)"));

        db.leaseq()
            .args(["item", "mail", "--id", &b])
            .assert()
            .success()
            .stdout(is_match(r"(?m)^state\s+completed$").expect("regex"))
            .stdout(is_match(r"(?m)^result\s+sent 3 mails$").expect("regex"))
            .stdout(is_match(r"(?m)^attempts\s+1$").expect("regex"));
        let v = json_of(db.leaseq().args(["item", "mail", "--id", &b, "--json"]));
        assert_eq!(
            (&v["queue"], &v["ending"]),
            (&json!("mail"), &json!("completed"))
        );

        // Purged: neither in the queue nor kept.
        rt.block_on(backend.admin().expect("admin").purge(&queue))
            .expect("purge");
        db.leaseq()
            .args(["item", "mail", "--id", &b])
            .assert()
            .code(3)
            .stderr(contains(format!("item {b} not found")));
        db.leaseq()
            .args(["history", "mail"])
            .assert()
            .success()
            .stdout(contains("no kept items").and(contains(b.as_str()).not()));
    }
}
