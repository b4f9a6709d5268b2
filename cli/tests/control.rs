//! `leaseq cancel`, `pause`, `resume` and `run-now`, run as a user would:
//! on an SQLite file (`--features sqlite`) a waiting item is cancelled at
//! once and a leased one is asked to stop (`item` shows the request and the
//! job's progress); a paused queue leases nothing and `stats` says so until
//! `resume`; `run-now` moves Scheduled items to Ready, one or all. Unknown
//! ids are exit code 3, an item not Scheduled is 4, and bad arguments are
//! usage errors on any build.

mod common;

use common::leaseq;
use predicates::str::contains;

#[test]
fn run_now_needs_either_an_id_or_all() {
    leaseq()
        .args(["run-now", "jobs"])
        .assert()
        .code(2)
        .stderr(contains("--id"));
    leaseq()
        .args(["run-now", "jobs", "--id", "7", "--all"])
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
}

#[test]
fn a_cancel_id_that_is_not_a_number_is_a_usage_error() {
    leaseq()
        .args(["cancel", "jobs", "--id", "seven"])
        .assert()
        .code(2)
        .stderr(contains("--id"));
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::sync::Arc;
    use std::time::Duration;

    use leaseq::{Backend, BackendExt as _, ClaimSpec, Error, ItemId, NewItem, QueueName};
    use predicates::prelude::*;
    use predicates::str::is_match;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Runtime::new().expect("runtime")
    }

    fn enqueue(
        rt: &tokio::runtime::Runtime,
        backend: &Arc<dyn Backend>,
        queue: &QueueName,
        items: Vec<NewItem>,
    ) -> Vec<ItemId> {
        rt.block_on(backend.enqueue(queue, items))
            .expect("enqueue")
            .into_iter()
            .map(|e| e.id)
            .collect()
    }

    fn claim(
        rt: &tokio::runtime::Runtime,
        backend: &Arc<dyn Backend>,
        queue: &QueueName,
    ) -> leaseq::Claimed {
        let spec = ClaimSpec::new(1, Duration::from_secs(3600)).expect("spec");
        rt.block_on(backend.claim(queue, spec)).expect("claim")
    }

    #[test]
    fn cancel_ends_a_waiting_item_now_and_asks_a_leased_one_to_stop() {
        let db = common::SqliteFile::migrated("cancel");
        let rt = runtime();
        let backend = rt.block_on(leaseq::connect(&db.url)).expect("open");
        let queue = QueueName::new("mail").expect("name");
        let ids = enqueue(
            &rt,
            &backend,
            &queue,
            vec![NewItem::new("a"), NewItem::new("b")],
        );
        let lease = claim(&rt, &backend, &queue)
            .leases
            .pop()
            .expect("a's lease");
        assert_eq!(lease.id(), ids[0]);
        let (a, b) = (ids[0].to_string(), ids[1].to_string());

        db.leaseq()
            .args(["cancel", "mail", "--id", &b])
            .assert()
            .success()
            .stdout(contains(format!(
                "cancelled item {b} of mail now (it was ready)"
            )));
        db.leaseq()
            .args(["cancel", "mail", "--id", &b])
            .assert()
            .code(3)
            .stderr(contains(format!("item {b} not found in queue \"mail\"")));

        // The leased one: progress not UTF-8 shows as hex, then text.
        let control = backend.control().expect("control");
        rt.block_on(control.progress(&lease.key, vec![0xff, 0x01].into()))
            .expect("progress");
        db.leaseq()
            .args(["item", "mail", "--id", &a])
            .assert()
            .success()
            .stdout(contains("(2 bytes, not UTF-8, as hex) ff01"))
            .stdout(contains("cancel ").not());
        rt.block_on(control.progress(&lease.key, "step 2 of 3".into()))
            .expect("progress");
        db.leaseq()
            .args(["cancel", "mail", "--id", &a])
            .assert()
            .success()
            .stdout(contains(format!("cancel requested for item {a} of mail")));
        db.leaseq()
            .args(["item", "mail", "--id", &a])
            .assert()
            .success()
            .stdout(is_match(r"(?m)^progress\s+step 2 of 3$").expect("regex"))
            .stdout(is_match(r"(?m)^cancel\s+requested").expect("regex"));
        let out = db
            .leaseq()
            .args(["item", "mail", "--id", &a, "--json"])
            .output()
            .expect("run");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            (&v["progress"], &v["cancel_requested"]),
            (&serde_json::json!("step 2 of 3"), &serde_json::json!(true))
        );
        // The listing marks it too.
        db.leaseq()
            .args(["peek", "mail", "--state", "leased"])
            .assert()
            .success()
            .stdout(is_match(format!(r"(?m)^\s+{a} leased!")).expect("regex"))
            .stdout(contains("! cancel requested"));
        // A second cancel asks again; the ack ends it, cancelled.
        db.leaseq()
            .args(["cancel", "mail", "--id", &a])
            .assert()
            .success()
            .stdout(contains("cancel requested"));
        rt.block_on(backend.ack(&lease.key)).expect("ack");
        assert!(matches!(
            rt.block_on(backend.item(&queue, ids[0])),
            Err(Error::NotFound { .. })
        ));
        db.leaseq()
            .args(["cancel", "mail", "--id", "999999"])
            .assert()
            .code(3);
    }

    #[test]
    fn a_paused_queue_leases_nothing_and_says_so_until_resumed() {
        let db = common::SqliteFile::migrated("pause");
        let rt = runtime();
        let backend = rt.block_on(leaseq::connect(&db.url)).expect("open");
        let queue = QueueName::new("mail").expect("name");
        enqueue(&rt, &backend, &queue, vec![NewItem::new("a")]);

        db.leaseq()
            .args(["pause", "mail"])
            .assert()
            .success()
            .stdout(contains("paused mail"));
        let claimed = claim(&rt, &backend, &queue);
        assert!(claimed.paused && claimed.leases.is_empty(), "{claimed:?}");
        db.leaseq()
            .args(["stats", "mail"])
            .assert()
            .success()
            .stdout(contains(
                "paused: claims get nothing until `leaseq resume mail`",
            ));
        db.leaseq()
            .arg("stats")
            .assert()
            .success()
            .stdout(is_match(r"(?m)^mail\s+1\s+0\s+0\s+0\s+1  paused$").expect("regex"));
        db.leaseq()
            .args(["stats", "mail", "--json"])
            .assert()
            .success()
            .stdout(contains(r#""paused":true"#));
        // Pausing again changes nothing; an empty paused queue is known.
        db.leaseq().args(["pause", "mail"]).assert().success();
        db.leaseq().args(["pause", "idle"]).assert().success();
        db.leaseq()
            .args(["stats", "idle"])
            .assert()
            .success()
            .stdout(contains("paused"));

        db.leaseq()
            .args(["resume", "mail"])
            .assert()
            .success()
            .stdout(contains("resumed mail"));
        assert_eq!(claim(&rt, &backend, &queue).leases.len(), 1);
        db.leaseq()
            .args(["stats", "mail"])
            .assert()
            .success()
            .stdout(contains("paused").not());
    }

    #[test]
    fn run_now_moves_scheduled_items_to_ready_one_or_all() {
        let db = common::SqliteFile::migrated("run_now");
        let rt = runtime();
        let backend = rt.block_on(leaseq::connect(&db.url)).expect("open");
        let queue = QueueName::new("mail").expect("name");
        let later = |p: &str| NewItem::new(p.to_owned()).delay(Duration::from_secs(3600));
        let ids = enqueue(
            &rt,
            &backend,
            &queue,
            vec![later("a"), later("b"), later("c"), NewItem::new("d")],
        );
        let (a, d) = (ids[0].to_string(), ids[3].to_string());

        db.leaseq()
            .args(["run-now", "mail", "--id", &a])
            .assert()
            .success()
            .stdout(contains(format!("moved item {a} of mail to ready")));
        db.leaseq()
            .args(["run-now", "mail", "--id", &a])
            .assert()
            .code(4)
            .stderr(contains(format!(
                "item {a} of queue \"mail\" is ready, not scheduled"
            )));
        db.leaseq()
            .args(["run-now", "mail", "--id", &d])
            .assert()
            .code(4);
        db.leaseq()
            .args(["run-now", "mail", "--id", "999999"])
            .assert()
            .code(3);
        db.leaseq()
            .args(["run-now", "mail", "--all"])
            .assert()
            .success()
            .stdout(contains("moved 2 scheduled items of mail to ready"));
        let stats = rt.block_on(backend.stats(&queue)).expect("stats");
        assert_eq!((stats.ready, stats.scheduled), (4, 0));
        db.leaseq()
            .args(["run-now", "nowhere", "--all"])
            .assert()
            .code(3);
    }
}
