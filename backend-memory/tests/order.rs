//! Claim order, delays and inspection.

mod common;

use leaseq_core::BackendExt as _;
use std::time::Duration;

use common::{fixture, items};
use leaseq_core::{Backend, ItemId, ItemState, NewItem, QueueStats};

#[tokio::test]
async fn fifo_within_a_priority_and_higher_priority_first() {
    let f = fixture();
    let ids = f
        .push(vec![
            NewItem::new("a").priority(1),
            NewItem::new("b"),
            NewItem::new("c").priority(5),
            NewItem::new("d").priority(1),
            NewItem::new("e"),
            NewItem::new("f").priority(-3),
        ])
        .await;
    let leases = f.claim(2).await;
    let got: Vec<_> = leases.iter().map(|l| l.payload.clone()).collect();
    assert_eq!(got, ["c", "a"]);
    assert_eq!(leases[0].id().get(), ids[2]);
    let rest: Vec<_> = f
        .claim(10)
        .await
        .iter()
        .map(|l| l.payload.clone())
        .collect();
    assert_eq!(rest, ["d", "b", "e", "f"]);
    assert!(f.claim(10).await.is_empty());
    f.assert_consistent().await;
}

#[tokio::test]
async fn fifo_holds_across_many_batches() {
    let f = fixture();
    let mut all = Vec::new();
    for batch in 0..10 {
        let v = (0..100)
            .map(|i| NewItem::new(format!("{batch}-{i}")))
            .collect();
        all.extend(f.push(v).await);
    }
    let mut claimed = Vec::new();
    while claimed.len() < all.len() {
        claimed.extend(f.claim_ids(37).await);
    }
    assert_eq!(claimed, all);
}

#[tokio::test]
async fn delayed_items_are_scheduled_until_due() {
    let f = fixture();
    let ids = f
        .push(vec![
            NewItem::new("later").delay(Duration::from_secs(10)),
            NewItem::new("now"),
            NewItem::new("soon").delay(Duration::from_secs(5)),
        ])
        .await;
    let stats = f.backend.stats(&f.queue).await.expect("stats");
    assert_eq!(
        stats,
        QueueStats {
            ready: 1,
            scheduled: 2,
            leased: 0,
            dead: 0,
            paused: false,
            completed: Some(0),
        }
    );
    assert_eq!(f.claim_ids(10).await, [ids[1]]);
    assert!(f.claim(10).await.is_empty());

    f.clock.advance(Duration::from_secs(5));
    let stats = f.backend.stats(&f.queue).await.expect("stats");
    assert_eq!(
        (stats.ready, stats.scheduled),
        (1, 1),
        "a due item counts as ready"
    );
    assert_eq!(f.claim_ids(10).await, [ids[2]]);

    f.clock.advance(Duration::from_secs(5));
    assert_eq!(f.claim_ids(10).await, [ids[0]]);
    f.assert_consistent().await;
}

#[tokio::test]
async fn due_items_keep_enqueue_order_among_ready_ones() {
    let f = fixture();
    let ids = f
        .push(vec![
            NewItem::new("first").delay(Duration::from_millis(1)),
            NewItem::new("second"),
        ])
        .await;
    f.clock.advance(Duration::from_millis(1));
    assert_eq!(f.claim_ids(10).await, ids);
}

#[tokio::test]
async fn sub_millisecond_delay_is_never_shortened() {
    let f = fixture();
    f.push(vec![NewItem::new("x").delay(Duration::from_micros(10))])
        .await;
    assert!(f.claim(1).await.is_empty());
    f.clock.advance(Duration::from_millis(1));
    assert_eq!(f.claim(1).await.len(), 1);
}

#[tokio::test]
async fn peek_lists_each_state_in_index_order() {
    let f = fixture();
    let ids = f
        .push(vec![
            NewItem::new("r1"),
            NewItem::new("r2").priority(2),
            NewItem::new("s1").delay(Duration::from_secs(20)),
            NewItem::new("s2").delay(Duration::from_secs(10)),
            NewItem::new("l1").priority(9),
            NewItem::new("d1").priority(8),
        ])
        .await;
    let leased = f.claim(2).await;
    f.backend
        .fail(&leased[1].key, "broken")
        .await
        .expect("fail");
    let peek = |state| {
        let f = &f;
        async move {
            let v = f.backend.peek(&f.queue, state, 10).await.expect("peek");
            v.iter().map(|i| (i.id.get(), i.state)).collect::<Vec<_>>()
        }
    };
    use ItemState::*;
    assert_eq!(peek(Ready).await, [(ids[1], Ready), (ids[0], Ready)]);
    assert_eq!(
        peek(Scheduled).await,
        [(ids[3], Scheduled), (ids[2], Scheduled)]
    );
    assert_eq!(peek(Leased).await, [(ids[4], Leased)]);
    assert_eq!(peek(Dead).await, [(ids[5], Dead)]);
    let limited = f.backend.peek(&f.queue, Ready, 1).await.expect("peek");
    assert_eq!(limited.len(), 1);

    let dead = f
        .backend
        .item(&f.queue, ItemId::new(ids[5]))
        .await
        .expect("item");
    assert_eq!(dead.last_error.as_deref(), Some("broken"));
    assert_eq!((dead.attempts, dead.payload.as_ref()), (1, b"d1".as_ref()));
    let sched = f
        .backend
        .item(&f.queue, ItemId::new(ids[3]))
        .await
        .expect("item");
    assert_eq!(
        sched.due_at,
        Some(f.clock_now().saturating_add(Duration::from_secs(10)))
    );
    let lease = f
        .backend
        .item(&f.queue, ItemId::new(ids[4]))
        .await
        .expect("item");
    assert_eq!(lease.due_at, Some(leased[0].expires_at));
    let missing = f.backend.item(&f.queue, ItemId::new(999)).await;
    assert!(matches!(missing, Err(leaseq_core::Error::NotFound { .. })));
}

#[tokio::test]
async fn unknown_queues_are_empty_not_errors() {
    let f = fixture();
    let other = leaseq_core::QueueName::new("nothing-here").expect("name");
    assert_eq!(
        f.backend.stats(&other).await.expect("stats"),
        QueueStats {
            completed: Some(0),
            ..QueueStats::default()
        }
    );
    assert!(f
        .backend
        .claim(&other, common::spec(5))
        .await
        .expect("claim")
        .leases
        .is_empty());
    assert!(f
        .backend
        .peek(&other, ItemState::Ready, 5)
        .await
        .expect("peek")
        .is_empty());
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .purge(&other)
            .await
            .expect("purge"),
        0
    );
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .redrive(&other, 5)
            .await
            .expect("redrive"),
        0
    );
    assert_eq!(f.backend.reap(&other).await.expect("reap").recovered(), 0);
}

#[tokio::test]
async fn queues_are_independent_and_clones_share_them() {
    let f = fixture();
    let other = leaseq_core::QueueName::new("other").expect("name");
    f.push(items(&["a", "b"])).await;
    let clone = f.backend.clone();
    clone.enqueue(&other, items(&["x"])).await.expect("enqueue");
    assert_eq!(f.backend.stats(&other).await.expect("stats").ready, 1);
    assert_eq!(clone.stats(&f.queue).await.expect("stats").ready, 2);
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .purge(&f.queue)
            .await
            .expect("purge"),
        2
    );
    assert_eq!(clone.stats(&other).await.expect("stats").ready, 1);
    assert_eq!(
        clone.stats(&f.queue).await.expect("stats"),
        QueueStats {
            completed: Some(0),
            ..QueueStats::default()
        }
    );
}

impl common::Fixture {
    fn clock_now(&self) -> leaseq_core::Timestamp {
        use leaseq_core::Clock;
        self.clock.now()
    }
}
