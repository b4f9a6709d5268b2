//! Every transition out of Leased is fenced by the lease's token.

mod common;

use leaseq_core::BackendExt as _;
use std::time::Duration;

use common::{fixture, items, TTL};
use leaseq_core::{
    Backend, Error, ItemId, ItemState, LeaseKey, LeaseToken, LeaseTtl, NewItem, Released,
};

fn ttl(d: Duration) -> LeaseTtl {
    LeaseTtl::new(d).expect("ttl")
}

#[tokio::test]
async fn claim_leases_with_fresh_tokens_attempts_and_expiry() {
    let f = fixture();
    let id = f.push(items(&["a"])).await[0];
    let now = f.backend.now().await.expect("now");
    let l1 = f.claim(1).await.remove(0);
    assert_eq!(
        (l1.id().get(), l1.attempts, l1.max_attempts),
        (id, 1, NewItem::DEFAULT_MAX_ATTEMPTS)
    );
    assert_eq!(l1.expires_at, now.saturating_add(TTL));
    assert!(
        f.claim(1).await.is_empty(),
        "a live lease is never claimed again"
    );
    f.backend
        .release(&l1.key, Duration::ZERO)
        .await
        .expect("release");
    let l2 = f.claim(1).await.remove(0);
    assert_eq!(l2.attempts, 2);
    assert_ne!(l1.token(), l2.token());
    f.assert_consistent().await;
}

#[tokio::test]
async fn ack_removes_and_a_second_ack_is_lost() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    f.backend.ack(&l.key).await.expect("ack");
    assert!(f
        .backend
        .ack(&l.key)
        .await
        .expect_err("second ack")
        .is_lease_lost());
    assert!(f.backend.item(&f.queue, l.id()).await.is_err());
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").total(), 0);
    assert!(f.claim(5).await.is_empty());
}

#[tokio::test]
async fn wrong_token_wrong_queue_and_unknown_id_are_lost_and_change_nothing() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    let forged = LeaseKey {
        token: LeaseToken::random(),
        ..l.key.clone()
    };
    let elsewhere = LeaseKey {
        queue: leaseq_core::QueueName::new("x").expect("name"),
        ..l.key.clone()
    };
    let unknown = LeaseKey {
        id: ItemId::new(4242),
        ..l.key.clone()
    };
    for key in [&forged, &elsewhere, &unknown] {
        assert!(f.backend.ack(key).await.expect_err("ack").is_lease_lost());
        assert!(f
            .backend
            .extend(key, ttl(TTL))
            .await
            .expect_err("extend")
            .is_lease_lost());
        assert!(f
            .backend
            .release(key, Duration::ZERO)
            .await
            .expect_err("release")
            .is_lease_lost());
        assert!(f
            .backend
            .fail(key, "x")
            .await
            .expect_err("fail")
            .is_lease_lost());
    }
    let info = f.backend.item(&f.queue, l.id()).await.expect("item");
    assert_eq!(
        (info.state, info.due_at),
        (ItemState::Leased, Some(l.expires_at))
    );
    f.backend
        .ack(&l.key)
        .await
        .expect("the real token still works");
}

#[tokio::test]
async fn stale_token_after_reap_is_lost_and_changes_nothing() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    f.clock.advance(TTL);
    let report = f.backend.reap(&f.queue).await.expect("reap");
    assert_eq!((report.requeued, report.dead), (1, 0));
    assert!(f
        .backend
        .ack(&l.key)
        .await
        .expect_err("ack")
        .is_lease_lost());
    assert!(f
        .backend
        .extend(&l.key, ttl(TTL))
        .await
        .expect_err("extend")
        .is_lease_lost());
    assert!(f
        .backend
        .release(&l.key, Duration::ZERO)
        .await
        .expect_err("release")
        .is_lease_lost());
    assert!(f
        .backend
        .fail(&l.key, "late")
        .await
        .expect_err("fail")
        .is_lease_lost());
    let info = f.backend.item(&f.queue, l.id()).await.expect("item");
    assert_eq!(
        (info.state, info.attempts, info.last_error),
        (ItemState::Ready, 1, None)
    );
    f.assert_consistent().await;
}

#[tokio::test]
async fn stale_token_after_reclaim_cannot_touch_the_new_lease() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let old = f.claim(1).await.remove(0);
    f.clock.advance(TTL + Duration::from_secs(1));
    f.backend.reap(&f.queue).await.expect("reap");
    let new = f.claim(1).await.remove(0);
    assert_eq!((new.id(), new.attempts), (old.id(), 2));
    assert!(f
        .backend
        .ack(&old.key)
        .await
        .expect_err("ack")
        .is_lease_lost());
    assert!(f
        .backend
        .fail(&old.key, "x")
        .await
        .expect_err("fail")
        .is_lease_lost());
    assert!(f
        .backend
        .release(&old.key, Duration::ZERO)
        .await
        .expect_err("release")
        .is_lease_lost());
    assert!(f
        .backend
        .extend(&old.key, ttl(TTL))
        .await
        .expect_err("extend")
        .is_lease_lost());
    let info = f.backend.item(&f.queue, new.id()).await.expect("item");
    assert_eq!(
        (info.state, info.due_at),
        (ItemState::Leased, Some(new.expires_at))
    );
    f.backend.ack(&new.key).await.expect("new holder acks");
}

#[tokio::test]
async fn an_expired_lease_not_yet_reaped_still_acks() {
    let f = fixture();
    f.push(items(&["a", "b", "c"])).await;
    let ls = f.claim(3).await;
    f.clock.advance(TTL * 2);
    f.backend.ack(&ls[0].key).await.expect("ack after expiry");
    f.backend
        .extend(&ls[1].key, ttl(TTL))
        .await
        .expect("extend after expiry");
    f.backend
        .fail(&ls[2].key, "gave up")
        .await
        .expect("fail after expiry");
    assert_eq!(f.backend.reap(&f.queue).await.expect("reap").recovered(), 0);
    f.assert_consistent().await;
}

#[tokio::test]
async fn extend_moves_the_expiry_that_reap_honours() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    f.clock.advance(Duration::from_secs(20));
    let until = f
        .backend
        .extend(&l.key, ttl(Duration::from_secs(60)))
        .await
        .expect("extend")
        .expires_at;
    assert_eq!(
        until,
        f.backend
            .now()
            .await
            .expect("now")
            .saturating_add(Duration::from_secs(60))
    );
    f.clock.advance(Duration::from_secs(30));
    assert_eq!(f.backend.reap(&f.queue).await.expect("reap").recovered(), 0);
    assert_eq!(
        f.backend.item(&f.queue, l.id()).await.expect("item").due_at,
        Some(until)
    );
    f.clock.advance(Duration::from_secs(30));
    assert_eq!(f.backend.reap(&f.queue).await.expect("reap").requeued, 1);
}

#[tokio::test]
async fn release_goes_ready_or_scheduled_or_dead_when_exhausted() {
    let f = fixture();
    f.push(vec![NewItem::new("a").max_attempts(2)]).await;
    let l = f.claim(1).await.remove(0);
    assert_eq!(
        f.backend
            .release(&l.key, Duration::from_secs(5))
            .await
            .expect("release"),
        Released::Scheduled
    );
    assert!(f.claim(1).await.is_empty());
    f.clock.advance(Duration::from_secs(5));
    let l = f.claim(1).await.remove(0);
    assert_eq!(l.attempts, 2);
    assert!(l.is_last_attempt());
    assert_eq!(
        f.backend
            .release(&l.key, Duration::ZERO)
            .await
            .expect("release"),
        Released::Dead
    );
    let info = f.backend.item(&f.queue, l.id()).await.expect("item");
    assert_eq!(
        (info.state, info.last_error.as_deref()),
        (ItemState::Dead, Some("attempts exhausted"))
    );
    assert!(f.claim(1).await.is_empty());

    f.push(items(&["b"])).await;
    let l = f.claim(1).await.remove(0);
    assert_eq!(
        f.backend
            .release(&l.key, Duration::ZERO)
            .await
            .expect("release"),
        Released::Ready
    );
    assert_eq!(f.claim(1).await[0].id(), l.id());
    f.assert_consistent().await;
}

#[tokio::test]
async fn release_rejects_a_delay_over_the_limit_and_keeps_the_lease() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    let too_long = leaseq_core::limits::MAX_DELAY + Duration::from_secs(1);
    let err = f
        .backend
        .release(&l.key, too_long)
        .await
        .expect_err("too long");
    assert!(matches!(err, Error::InvalidInput { .. }));
    f.backend.ack(&l.key).await.expect("lease untouched");
}

#[tokio::test]
async fn fail_sends_dead_with_a_clamped_reason() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    let reason = "x".repeat(leaseq_core::limits::MAX_REASON_LEN * 2);
    f.backend.fail(&l.key, &reason).await.expect("fail");
    let info = f.backend.item(&f.queue, l.id()).await.expect("item");
    assert_eq!(info.state, ItemState::Dead);
    assert_eq!(
        info.last_error.map(|e| e.len()),
        Some(leaseq_core::limits::MAX_REASON_LEN)
    );
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").dead, 1);
}

#[tokio::test]
async fn reap_sends_exhausted_leases_dead_and_recovers_only_expired_ones() {
    let f = fixture();
    f.push(vec![
        NewItem::new("last").max_attempts(1),
        NewItem::new("more"),
    ])
    .await;
    let expiring = f.claim(2).await;
    f.clock.advance(Duration::from_secs(10));
    f.push(items(&["live1", "live2", "live3"])).await;
    let live = f.claim(3).await;
    f.clock.advance(TTL - Duration::from_secs(10));
    let report = f.backend.reap(&f.queue).await.expect("reap");
    assert_eq!((report.requeued, report.dead), (1, 1));
    let dead = f
        .backend
        .item(&f.queue, expiring[0].id())
        .await
        .expect("item");
    assert_eq!(dead.state, ItemState::Dead);
    assert_eq!(
        dead.last_error.as_deref(),
        Some("lease expired on final attempt")
    );
    for l in &live {
        assert_eq!(
            f.backend.item(&f.queue, l.id()).await.expect("item").state,
            ItemState::Leased
        );
    }
    assert_eq!(
        f.backend
            .reap(&f.queue)
            .await
            .expect("reap again")
            .recovered(),
        0
    );
    f.assert_consistent().await;
}

#[tokio::test]
async fn reap_recovers_many_leases_across_batches() {
    let f = fixture();
    let n = 3_000;
    for _ in 0..3 {
        f.push((0..1_000).map(|i| NewItem::new(format!("{i}"))).collect())
            .await;
    }
    let mut leased = 0;
    while leased < n {
        leased += f.claim(1_000).await.len();
    }
    f.clock.advance(TTL);
    assert_eq!(
        f.backend.reap(&f.queue).await.expect("reap").requeued,
        n as u64
    );
    assert_eq!(
        f.backend.stats(&f.queue).await.expect("stats").ready,
        n as u64
    );
    f.assert_consistent().await;
}

#[tokio::test]
async fn redrive_moves_oldest_dead_first_with_attempts_reset() {
    let f = fixture();
    let ids = f.push(items(&["a", "b", "c"])).await;
    let ls = f.claim(3).await;
    for i in [2, 0, 1] {
        f.backend.fail(&ls[i].key, "no").await.expect("fail");
    }
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .redrive(&f.queue, 2)
            .await
            .expect("redrive"),
        2
    );
    let ready = f
        .backend
        .peek(&f.queue, ItemState::Ready, 10)
        .await
        .expect("peek");
    let got: Vec<_> = ready.iter().map(|i| (i.id.get(), i.attempts)).collect();
    assert_eq!(got, [(ids[0], 0), (ids[2], 0)]);
    let again = f.claim(5).await;
    assert!(again.iter().all(|l| l.attempts == 1));
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .redrive(&f.queue, 10)
            .await
            .expect("redrive"),
        1
    );
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .redrive(&f.queue, 10)
            .await
            .expect("redrive"),
        0
    );
    f.assert_consistent().await;
}

#[tokio::test]
async fn purge_deletes_every_state_and_loses_leases() {
    let f = fixture();
    f.push(vec![
        NewItem::new("r"),
        NewItem::new("s").delay(Duration::from_secs(9)),
        NewItem::new("l").priority(3),
        NewItem::new("d").priority(2).dedup_key("k"),
    ])
    .await;
    let ls = f.claim(2).await;
    f.backend.fail(&ls[1].key, "x").await.expect("fail");
    assert_eq!(
        f.backend
            .admin()
            .expect("admin")
            .purge(&f.queue)
            .await
            .expect("purge"),
        4
    );
    assert!(f
        .backend
        .ack(&ls[0].key)
        .await
        .expect_err("gone")
        .is_lease_lost());
    assert_eq!(f.backend.stats(&f.queue).await.expect("stats").total(), 0);
    let again = f
        .backend
        .enqueue(&f.queue, vec![NewItem::new("d").dedup_key("k")])
        .await
        .expect("enqueue");
    assert!(!again[0].deduplicated, "purge frees dedup keys");
    f.assert_consistent().await;
}
