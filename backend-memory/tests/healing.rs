//! Self-healing, test hooks, and bad input that writes nothing.

mod common;

use leaseq_core::BackendExt as _;
use std::time::Duration;

use common::{fixture, items, spec, TTL};
use leaseq_core::{Backend, Bounds, Error, ItemId, ItemState, NewItem, QueueName};

#[tokio::test]
async fn a_dangling_ready_entry_is_removed_reported_and_skipped() {
    let f = fixture();
    let ids = f.push(items(&["a", "b"])).await;
    let hooks = f.backend.test_hooks().expect("hooks");
    hooks
        .plant_dangling_ready(&f.queue, ItemId::new(777))
        .await
        .expect("plant");
    let snap = hooks.snapshot(&f.queue).await.expect("snapshot");
    assert_eq!(
        snap.indexes[&ItemState::Ready][0],
        ItemId::new(777),
        "planted at the head"
    );
    assert_eq!(snap.violations().len(), 1);

    let claimed = f.backend.claim(&f.queue, spec(2)).await.expect("claim");
    let got: Vec<_> = claimed.leases.iter().map(|l| l.id().get()).collect();
    assert_eq!(got, ids, "the claim still returns every available item");
    assert_eq!(claimed.repairs.len(), 1);
    assert_eq!(
        (claimed.repairs[0].index, claimed.repairs[0].id),
        (ItemState::Ready, ItemId::new(777))
    );
    f.assert_consistent().await;
}

#[tokio::test]
async fn a_duplicate_entry_for_a_live_item_is_removed_without_touching_the_item() {
    let f = fixture();
    let ids = f.push(items(&["a"])).await;
    let hooks = f.backend.test_hooks().expect("hooks");
    hooks
        .plant_dangling_ready(&f.queue, ItemId::new(ids[0]))
        .await
        .expect("plant");
    let claimed = f.backend.claim(&f.queue, spec(5)).await.expect("claim");
    assert_eq!(claimed.leases.len(), 1);
    assert_eq!(claimed.leases[0].attempts, 1);
    assert_eq!(claimed.repairs.len(), 1);
    f.assert_consistent().await;
    assert!(f.claim(5).await.is_empty());
}

#[tokio::test]
async fn only_dangling_entries_yield_an_empty_claim_and_a_clean_index() {
    let f = fixture();
    let hooks = f.backend.test_hooks().expect("hooks");
    for id in 1..=3 {
        hooks
            .plant_dangling_ready(&f.queue, ItemId::new(1000 + id))
            .await
            .expect("plant");
    }
    let claimed = f.backend.claim(&f.queue, spec(1)).await.expect("claim");
    assert!(claimed.leases.is_empty());
    assert_eq!(claimed.repairs.len(), 3);
    f.assert_consistent().await;
}

#[tokio::test]
async fn expire_leases_and_make_due_keep_the_indexes_consistent() {
    let f = fixture();
    f.push(vec![
        NewItem::new("a"),
        NewItem::new("b"),
        NewItem::new("s").delay(Duration::from_secs(60)),
    ])
    .await;
    let ls = f.claim(2).await;
    let hooks = f.backend.test_hooks().expect("hooks");
    assert_eq!(hooks.expire_leases(&f.queue).await.expect("expire"), 2);
    assert_eq!(hooks.expire_leases(&f.queue).await.expect("expire"), 0);
    f.assert_consistent().await;
    let now = f.backend.now().await.expect("now");
    assert_eq!(
        f.backend
            .item(&f.queue, ls[0].id())
            .await
            .expect("item")
            .due_at,
        Some(now)
    );
    f.backend
        .ack(&ls[0].key)
        .await
        .expect("expired but not reaped: still acks");
    assert_eq!(f.backend.reap(&f.queue).await.expect("reap").requeued, 1);

    assert_eq!(hooks.make_due(&f.queue).await.expect("due"), 1);
    f.assert_consistent().await;
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").ready, 2);
    assert_eq!(f.claim(5).await.len(), 2);
}

#[tokio::test]
async fn snapshot_lists_every_index_and_item() {
    let f = fixture();
    let ids = f
        .push(vec![
            NewItem::new("r"),
            NewItem::new("s").delay(TTL),
            NewItem::new("l").priority(1),
        ])
        .await;
    f.claim(1).await;
    let snap = f
        .backend
        .test_hooks()
        .expect("hooks")
        .snapshot(&f.queue)
        .await
        .expect("snap");
    let id = ItemId::new;
    assert_eq!(snap.indexes[&ItemState::Ready], [id(ids[0])]);
    assert_eq!(snap.indexes[&ItemState::Scheduled], [id(ids[1])]);
    assert_eq!(snap.indexes[&ItemState::Leased], [id(ids[2])]);
    assert!(snap.indexes[&ItemState::Dead].is_empty());
    assert_eq!(snap.items, ids.iter().copied().map(id).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_bad_batch_is_rejected_and_writes_nothing() {
    let f = fixture();
    let f = common::Fixture {
        backend: f.backend.with_limits(Bounds {
            max_payload_bytes: 4,
        }),
        ..f
    };
    let bad_batches = vec![
        vec![NewItem::new("ok").dedup_key("k"), NewItem::new("too long")],
        vec![NewItem::new("ok"), NewItem::new("x").max_attempts(0)],
        vec![NewItem::new("ok"), NewItem::new("x").dedup_key("")],
        vec![
            NewItem::new("ok"),
            NewItem::new("x").delay(leaseq_core::limits::MAX_DELAY * 2),
        ],
        vec![NewItem::new("ok"); leaseq_core::limits::MAX_ENQUEUE_BATCH + 1],
    ];
    for batch in bad_batches {
        let err = f
            .backend
            .enqueue(&f.queue, batch)
            .await
            .expect_err("rejected");
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").total(), 0);
    let after = f
        .backend
        .enqueue(&f.queue, vec![NewItem::new("ok").dedup_key("k")])
        .await
        .expect("ok");
    assert!(
        !after[0].deduplicated,
        "the rejected batch took no dedup key"
    );
    assert!(f
        .backend
        .enqueue(&f.queue, Vec::new())
        .await
        .expect("empty")
        .is_empty());
    assert_eq!(f.backend.capabilities().bounds.max_payload_bytes, 4);
}

#[tokio::test]
async fn capabilities_say_full_but_not_durable_or_shared() {
    let f = fixture();
    let caps = f.backend.capabilities();
    assert!(!caps.durable && !caps.shared);
    assert!(caps.dedup && caps.priorities && caps.delays && caps.atomic_batch);
    assert_eq!(caps.order, leaseq_core::Order::Global);
    assert!(f.backend.test_hooks().is_some());
    // A handle made for production has no hooks.
    assert!(leaseq_memory::MemoryBackend::new().test_hooks().is_none());
    assert!(format!("{:?}", f.backend).contains("MemoryBackend"));
    let _ = QueueName::new("x");
}

#[tokio::test]
async fn emptied_queues_are_forgotten_and_ids_never_come_back() {
    use leaseq_core::{BackendExt, ClaimSpec};
    let clock = leaseq_core::ManualClock::new();
    let b = leaseq_memory::MemoryBackend::with_clock(std::sync::Arc::new(clock.clone()));
    let ttl = std::time::Duration::from_secs(30);
    let mut last = 0;
    let mut traced = Vec::new();
    for i in 0..2_000 {
        let q = QueueName::new(format!("dyn-{i}")).expect("name");
        let id = b.push(&q, "x").await.expect("enqueue");
        assert!(id.get() > last, "id {id} handed out again (last {last})");
        last = id.get();
        let how = match i % 3 {
            0 => {
                assert_eq!(b.admin().expect("admin").purge(&q).await.expect("purge"), 1);
                "purge"
            }
            n => {
                let c = b
                    .claim(&q, ClaimSpec::new(1, ttl).expect("spec"))
                    .await
                    .expect("claim");
                if n == 1 {
                    b.ack(&c.leases[0].key).await.expect("ack");
                    "ack"
                } else {
                    let keys = [c.leases[0].key.clone()];
                    let acked = b.ack_many(&keys).await.expect("ack_many");
                    assert!(acked.iter().all(Result::is_ok));
                    "ack_many"
                }
            }
        };
        // An ack leaves its finishing trace (for settling a lost reply),
        // which keeps the queue until the trace expires; a purge leaves none.
        if how != "purge" {
            traced.push(q.clone());
        }
        assert_eq!(
            b.queues_in_memory(),
            traced.len(),
            "a queue emptied by {how} stays in memory beyond its traces"
        );
        // A wait on a queue nobody uses leaves nothing behind either.
        b.wait_for_work(&q, std::time::Duration::ZERO).await;
    }
    // Once the traces have expired, the queues they kept are forgotten.
    clock.advance(leaseq_core::limits::FINISH_MEMORY + std::time::Duration::from_secs(1));
    for q in &traced {
        b.wait_for_work(q, std::time::Duration::ZERO).await;
    }
    assert_eq!(b.queues_in_memory(), 0, "emptied queues stay in memory");
    // A queue that still holds an item is kept.
    let kept = QueueName::new("kept").expect("name");
    b.push(&kept, "y").await.expect("enqueue");
    b.admin()
        .expect("admin")
        .purge(&QueueName::new("other").expect("name"))
        .await
        .expect("purge");
    assert_eq!(b.queues_in_memory(), 1);
}
