//! `redrive_item` on an item that goes Dead at that moment (its final
//! attempt failed): each call answers whether it moved the item, never a
//! database error, and the item ends where the answers say.
//!
//! The update the call makes is built from the row as the statement's
//! snapshot saw it (Leased) while the lock it waited for hands it the row
//! Dead; PostgreSQL checks the table's constraints on the row built from the
//! old version before it redoes the update on the new one, so that row must
//! pass them too.

mod common;

use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Backend, BackendExt, ItemState, NewItem, QueueName};
use tokio::sync::Barrier;

const REDRIVERS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redrive_item_racing_the_final_failure_answers() {
    let Some(db) = common::TestDb::new("rdrace").await else {
        return;
    };
    let b = Arc::new(db.backend.clone());
    let q = QueueName::new("q").expect("q");
    let mut errors = Vec::new();
    for round in 0..60 {
        let id = b
            .enqueue(&q, vec![NewItem::new("x").max_attempts(1)])
            .await
            .expect("enqueue")[0]
            .id;
        let lease = b
            .claim_up_to(&q, 1, Duration::from_secs(60))
            .await
            .expect("claim")
            .leases
            .pop()
            .expect("one lease");
        let start = Arc::new(Barrier::new(REDRIVERS + 1));
        let failing = {
            let (b, start, key) = (b.clone(), start.clone(), lease.key.clone());
            tokio::spawn(async move {
                start.wait().await;
                b.fail(&key, "boom").await
            })
        };
        let redrives: Vec<_> = (0..REDRIVERS)
            .map(|_| {
                let (b, start, q) = (b.clone(), start.clone(), q.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    b.redrive_item(&q, id).await
                })
            })
            .collect();
        failing
            .await
            .expect("join")
            .expect("the fail of a live lease");
        let mut moved = 0;
        for r in redrives {
            match r.await.expect("join") {
                Ok(true) => moved += 1,
                Ok(false) => {}
                Err(e) => errors.push(format!("round {round}: {e}")),
            }
        }
        let state = b.item(&q, id).await.expect("item").state;
        let want = if moved == 1 {
            ItemState::Ready
        } else {
            ItemState::Dead
        };
        assert!(moved <= 1, "round {round}: {moved} redrives moved one item");
        assert_eq!(state, want, "round {round}: {moved} redrives answered true");
        b.purge(&q).await.expect("purge");
    }
    assert!(
        errors.is_empty(),
        "{} redrive_item calls failed racing the item's final failure, e.g. {}",
        errors.len(),
        errors[0]
    );
}
