//! `leaseq dead redrive <queue> --id <ID>`, run as a user would: on an
//! SQLite file (`--features sqlite`) the item named moves and nothing else;
//! an item in another state (exit code 4) and an id the queue does not hold
//! (exit code 3) change nothing; without `--id` or `--limit` every Dead
//! item moves, past one batch. Bad ids are usage errors on any build.

mod common;

use common::leaseq;
use predicates::str::contains;

#[test]
fn an_id_that_is_not_a_number_is_a_usage_error() {
    leaseq()
        .args(["dead", "redrive", "jobs", "--id", "seven"])
        .assert()
        .code(2)
        .stderr(contains("--id"));
}

#[test]
fn an_id_and_a_limit_together_are_a_usage_error() {
    leaseq()
        .args(["dead", "redrive", "jobs", "--id", "7", "--limit", "3"])
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::sync::Arc;
    use std::time::Duration;

    use leaseq::{Backend, ClaimSpec, ItemId, ItemState, NewItem, QueueName};
    use predicates::prelude::*;
    use predicates::str::is_match;

    use super::*;

    /// The queue as this test sets it up through the library: `a` and `b`
    /// Dead (in that order), `c` Leased under `lease`, `d` Ready.
    struct Setup {
        backend: Arc<dyn Backend>,
        queue: QueueName,
        ids: [ItemId; 4],
        lease: leaseq::Lease,
    }

    async fn setup(url: &str) -> Setup {
        let backend = leaseq::connect(url).await.expect("open the file");
        let queue = QueueName::new("mail").expect("name");
        let ids: Vec<ItemId> = backend
            .enqueue(
                &queue,
                ["a", "b", "c"].into_iter().map(NewItem::new).collect(),
            )
            .await
            .expect("enqueue")
            .into_iter()
            .map(|e| e.id)
            .collect();
        let spec = ClaimSpec::new(3, Duration::from_secs(3600)).expect("spec");
        let mut leases = backend.claim(&queue, spec).await.expect("claim").leases;
        assert_eq!(leases.len(), 3);
        let lease = leases.pop().expect("c's lease");
        for l in &leases {
            backend.fail(&l.key, "boom").await.expect("fail");
        }
        let d = backend
            .enqueue(&queue, vec![NewItem::new("d")])
            .await
            .expect("enqueue d")[0]
            .id;
        Setup {
            backend,
            queue,
            ids: [ids[0], ids[1], ids[2], d],
            lease,
        }
    }

    #[test]
    fn redrive_by_id_moves_that_item_alone() {
        let db = common::SqliteFile::new("redrive");
        db.leaseq().arg("migrate").assert().success();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let s = rt.block_on(setup(&db.url));
        let [a, b, c, d] = s.ids;
        let state = |id: ItemId| rt.block_on(s.backend.item(&s.queue, id)).expect("item");

        // The younger of the two deaths moves; the older stays Dead.
        db.leaseq()
            .args(["dead", "redrive", "mail", "--id", &b.to_string()])
            .assert()
            .success()
            .stdout(contains(format!("redrove item {b} of mail back to ready")));
        let moved = state(b);
        assert_eq!((moved.state, moved.attempts), (ItemState::Ready, 0));
        assert_eq!(state(a).state, ItemState::Dead);
        let row = |id: ItemId| is_match(format!(r"(?m)^\s*{id} dead ")).expect("regex");
        db.leaseq()
            .args(["dead", "list", "mail"])
            .assert()
            .success()
            .stdout(row(a))
            .stdout(row(b).not());

        // Not Dead: exit code 4, the state named, nothing changed.
        for (id, said) in [
            (b, "is ready, not dead"),
            (c, "is leased, not dead"),
            (d, "is ready, not dead"),
        ] {
            db.leaseq()
                .args(["dead", "redrive", "mail", "--id", &id.to_string()])
                .assert()
                .code(4)
                .stdout(predicates::str::is_empty())
                .stderr(contains(format!("item {id} of queue \"mail\" {said}")));
        }
        assert_eq!(state(c).state, ItemState::Leased);
        rt.block_on(s.backend.ack(&s.lease.key))
            .expect("the lease the refusal left alone still acks");

        // Not in the queue (acked now, or never handed out): exit code 3.
        for id in [c.to_string(), "9999999".to_string()] {
            db.leaseq()
                .args(["dead", "redrive", "mail", "--id", &id])
                .assert()
                .code(3)
                .stderr(contains(format!("item {id} not found in queue \"mail\"")));
        }
        assert_eq!(state(a).state, ItemState::Dead);

        // Without --id it still redrives the oldest deaths.
        db.leaseq()
            .args(["dead", "redrive", "mail"])
            .assert()
            .success()
            .stdout(contains("redrove 1 dead items"));
        assert_eq!(state(a).state, ItemState::Ready);
    }

    /// More Dead items than one batch (1,000) and than the old default
    /// limit (100): all move, and the total is reported.
    #[test]
    fn redrive_without_a_limit_moves_every_dead_item() {
        const N: usize = 1_150;
        let db = common::SqliteFile::new("redrive-all");
        db.leaseq().arg("migrate").assert().success();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let (backend, queue) = rt.block_on(async {
            let backend = leaseq::connect(&db.url).await.expect("open the file");
            let queue = QueueName::new("bulk").expect("name");
            for chunk in (0..N).collect::<Vec<_>>().chunks(500) {
                let items = chunk
                    .iter()
                    .map(|i| NewItem::new(i.to_string()).max_attempts(1))
                    .collect();
                backend.enqueue(&queue, items).await.expect("enqueue");
            }
            // Leases of 1 ms on the last attempt: the reap kills them all.
            while backend.stats(&queue).await.expect("stats").ready > 0 {
                let spec = ClaimSpec::new(1_000, Duration::from_millis(1)).expect("spec");
                // Dropped: the leases are meant to expire.
                let _ = backend.claim(&queue, spec).await.expect("claim");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            while backend.stats(&queue).await.expect("stats").leased > 0 {
                backend.reap(&queue).await.expect("reap");
            }
            (backend, queue)
        });
        let stats =
            |rt: &tokio::runtime::Runtime| rt.block_on(backend.stats(&queue)).expect("stats");
        assert_eq!(stats(&rt).dead, N as u64);

        db.leaseq()
            .args(["dead", "redrive", "bulk", "--limit", "100"])
            .assert()
            .success()
            .stdout(contains("redrove 100 dead items of bulk"));
        db.leaseq()
            .args(["dead", "redrive", "bulk"])
            .assert()
            .success()
            .stdout(contains(format!("redrove {} dead items of bulk", N - 100)));
        let after = stats(&rt);
        assert_eq!((after.dead, after.ready), (0, N as u64));
    }
}
