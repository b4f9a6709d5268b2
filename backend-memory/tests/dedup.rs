//! Dedup keys: held by an item until it is acked or purged.

mod common;

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::Duration;

use common::fixture;
use leaseq_core::{Backend, Enqueued, ItemId, NewItem};

fn keyed(payload: &'static str, key: &str) -> NewItem {
    NewItem::new(payload).dedup_key(key)
}

#[tokio::test]
async fn a_held_key_returns_the_holder_and_writes_nothing() {
    let f = fixture();
    let first = f
        .backend
        .enqueue(&f.queue, vec![keyed("a", "k")])
        .await
        .expect("enqueue");
    let second = f
        .backend
        .enqueue(&f.queue, vec![keyed("b", "k"), keyed("c", "other")])
        .await
        .expect("enqueue");
    assert_eq!(
        second[0],
        Enqueued {
            id: first[0].id,
            deduplicated: true
        }
    );
    assert!(!second[1].deduplicated);
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").ready, 2);
    let info = f.backend.item(&f.queue, first[0].id).await.expect("item");
    assert_eq!(
        (info.payload.as_ref(), info.dedup_key.as_deref()),
        (b"a".as_ref(), Some("k"))
    );
}

#[tokio::test]
async fn within_one_batch_the_first_item_with_a_key_wins() {
    let f = fixture();
    let out = f
        .backend
        .enqueue(
            &f.queue,
            vec![
                keyed("a", "k"),
                NewItem::new("plain"),
                keyed("b", "k"),
                keyed("c", "k"),
            ],
        )
        .await
        .expect("enqueue");
    assert!(!out[0].deduplicated && !out[1].deduplicated);
    assert_eq!(
        out[2],
        Enqueued {
            id: out[0].id,
            deduplicated: true
        }
    );
    assert_eq!(
        out[3],
        Enqueued {
            id: out[0].id,
            deduplicated: true
        }
    );
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").ready, 2);
}

#[tokio::test]
async fn the_key_is_held_while_leased_scheduled_and_dead_and_freed_by_ack() {
    let f = fixture();
    let id = f.push(vec![keyed("a", "k").max_attempts(1)]).await[0];
    let dup = |f: &common::Fixture| {
        let b = f.backend.clone();
        let q = f.queue.clone();
        async move {
            b.enqueue(&q, vec![keyed("again", "k")])
                .await
                .expect("enqueue")[0]
        }
    };
    let l = f.claim(1).await.remove(0);
    assert_eq!(
        dup(&f).await,
        Enqueued {
            id: ItemId::new(id),
            deduplicated: true
        }
    );
    f.backend.fail(&l.key, "x").await.expect("fail");
    assert!(
        dup(&f).await.deduplicated,
        "dead items still hold their key"
    );
    f.backend
        .admin()
        .expect("admin")
        .redrive(&f.queue, 1)
        .await
        .expect("redrive");
    let l = f.claim(1).await.remove(0);
    f.backend.release(&l.key, Duration::from_secs(3)).await.ok();
    let l = f
        .backend
        .peek(&f.queue, leaseq_core::ItemState::Dead, 1)
        .await
        .expect("peek");
    assert_eq!(l.len(), 1, "max_attempts 1: the release sent it dead");
    f.backend
        .admin()
        .expect("admin")
        .redrive(&f.queue, 1)
        .await
        .expect("redrive");
    let l = f.claim(1).await.remove(0);
    f.backend.ack(&l.key).await.expect("ack");
    let fresh = dup(&f).await;
    assert!(!fresh.deduplicated, "ack frees the key");
    assert_ne!(fresh.id.get(), id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_enqueues_with_one_key_create_one_item() {
    let f = Arc::new(fixture());
    let mut tasks = Vec::new();
    for i in 0..16 {
        let f = Arc::clone(&f);
        tasks.push(tokio::spawn(async move {
            let item = NewItem::new(format!("{i}")).dedup_key("once");
            f.backend
                .enqueue(&f.queue, vec![item])
                .await
                .expect("enqueue")[0]
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    assert_eq!(results.iter().filter(|e| !e.deduplicated).count(), 1);
    assert!(results.windows(2).all(|w| w[0].id == w[1].id));
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").total(), 1);
}
