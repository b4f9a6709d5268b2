//! The Control group's Redis-specific parts: where the pause, the cancel
//! requests and the progress live, and that none of them outlives what it
//! belongs to (the contract's checks are the conformance suite's).
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Which;
use leaseq_core::{
    Backend, BackendExt, Cancelled, Error, ItemState, NewItem, QueueLimits, QueueName, Released,
};
use leaseq_redis::keys::KeyLayout;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(30);

/// A backend of `which` under a fresh prefix, its queue `q`, that queue's
/// keys and a raw connection.
struct Setup {
    b: Arc<dyn Backend>,
    q: QueueName,
    keys: KeyLayout,
    raw: redis::aio::MultiplexedConnection,
    _cleanup: common::Cleanup,
}

async fn setup(which: Which, tag: &str) -> Option<Setup> {
    let (b, cleanup) = common::backend(which, tag).await?;
    let q = QueueName::new("q").expect("valid");
    Some(Setup {
        keys: KeyLayout::new(&cleanup.prefix, &q).expect("valid"),
        raw: common::raw(&cleanup.url).await,
        b,
        q,
        _cleanup: cleanup,
    })
}

/// The pause is a field of the limits hash: a queue with neither has no
/// key (so a claim reads nothing more); clearing the limits keeps it,
/// purge keeps it, delete forgets it, and a paused queue with no item is
/// not listed.
async fn the_pause_lives_in_the_limits_hash(which: Which) {
    let Some(Setup {
        b,
        q,
        keys,
        mut raw,
        ..
    }) = setup(which, "ctl-pause").await
    else {
        return;
    };
    let limits = keys.limits();
    let control = b.control().expect("control");
    let throttles = b.throttles().expect("throttles");
    control.pause(&q).await.expect("pause");
    assert!(
        b.queues().await.expect("queues").is_empty(),
        "a pause alone is no queue"
    );
    throttles
        .set_queue_limits(&q, QueueLimits::NONE.concurrency(3))
        .await
        .expect("limits");
    throttles
        .set_queue_limits(&q, QueueLimits::NONE)
        .await
        .expect("no limits");
    assert!(
        control.is_paused(&q).await.expect("is_paused"),
        "limits cleared, pause kept"
    );
    b.enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue");
    let c = b.claim_up_to(&q, 5, TTL).await.expect("claim");
    assert!(c.paused && c.leases.is_empty(), "{c:?}");
    b.admin().expect("admin").purge(&q).await.expect("purge");
    assert!(
        b.stats(&q).await.expect("stats").paused,
        "purge keeps the pause"
    );
    control.resume(&q).await.expect("resume");
    let exists: bool = raw.exists(&limits).await.expect("exists");
    assert!(
        !exists,
        "neither limited nor paused: no key for the claim to read"
    );
    control.pause(&q).await.expect("pause");
    b.admin()
        .expect("admin")
        .delete_queue(&q)
        .await
        .expect("delete");
    assert!(
        !control.is_paused(&q).await.expect("is_paused"),
        "delete forgets the pause"
    );
}

/// Cancel requests and progress go with the lease that holds them: once
/// every lease ended, neither hash is left, and a new lease starts with no
/// progress.
async fn cancel_requests_and_progress_leave_no_key(which: Which) {
    let Some(Setup {
        b,
        q,
        keys,
        mut raw,
        ..
    }) = setup(which, "ctl-keys").await
    else {
        return;
    };
    let control = b.control().expect("control");
    let items = (0..6).map(|i| {
        NewItem::new(format!("i{i}"))
            .dedup_key(format!("k{i}"))
            .unique_for(Duration::from_secs(60))
    });
    b.enqueue(&q, items.collect()).await.expect("enqueue");
    let c = b.claim_up_to(&q, 6, TTL).await.expect("claim");
    let l: Vec<_> = c.leases.iter().map(|l| l.key.clone()).collect();
    assert_eq!(l.len(), 6);
    for lease in &l {
        control
            .progress(lease, "50%".into())
            .await
            .expect("progress");
        assert_eq!(
            control.cancel(&q, lease.id).await.expect("cancel"),
            Cancelled::Requested
        );
    }
    let info = b.item(&q, l[0].id).await.expect("item");
    assert_eq!(
        (info.progress.as_deref(), info.cancel_requested),
        (Some(&b"50%"[..]), true)
    );
    assert!(
        b.extend(&l[0], leaseq_core::LeaseTtl::new(TTL).expect("ttl"))
            .await
            .expect("extend")
            .cancel_requested
    );
    b.ack(&l[0]).await.expect("ack");
    assert_eq!(
        b.release(&l[1], Duration::ZERO).await.expect("release"),
        Released::Cancelled
    );
    b.give_back(&l[2]).await.expect("give back");
    b.fail(&l[3], "boom").await.expect("fail");
    assert_eq!(
        control
            .snooze(&l[4], Duration::from_secs(5))
            .await
            .expect("snooze"),
        Released::Cancelled
    );
    b.test_hooks()
        .expect("hooks")
        .expire_leases(&q)
        .await
        .expect("expire");
    let r = b.reap(&q).await.expect("reap");
    assert_eq!((r.cancelled, r.requeued, r.dead), (1, 0, 0), "{r:?}");
    let st = b.stats(&q).await.expect("stats");
    assert_eq!(st.total(), 0, "every cancelled item ended: {st:?}");
    for key in [keys.cancel_requests(), keys.progress()] {
        let exists: bool = raw.exists(&key).await.expect("exists");
        assert!(!exists, "{key} outlived its leases");
    }
    // No unique-for hold after a cancelled ack: the dedup key is free.
    let again = b
        .enqueue(&q, vec![NewItem::new("x").dedup_key("k0")])
        .await
        .expect("enqueue");
    assert!(!again[0].deduplicated);

    // A new lease starts with no progress and no cancel request.
    let lease = b.claim_one(&q, TTL).await.expect("claim").expect("an item");
    control
        .progress(&lease.key, "1".into())
        .await
        .expect("progress");
    b.release(&lease.key, Duration::ZERO)
        .await
        .expect("release");
    let lease = b.claim_one(&q, TTL).await.expect("claim").expect("an item");
    let info = b.item(&q, lease.id()).await.expect("item");
    assert_eq!(
        (info.state, info.progress, info.cancel_requested),
        (ItemState::Leased, None, false)
    );
    b.ack(&lease.key).await.expect("ack");
}

/// A cancel-request or progress key of the wrong type is refused as
/// corrupt before any write: the lease stays whole.
async fn wrong_typed_control_keys_are_refused(which: Which) {
    let Some(Setup {
        b,
        q,
        keys,
        mut raw,
        ..
    }) = setup(which, "ctl-corrupt").await
    else {
        return;
    };
    b.enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue");
    let c = b.claim_up_to(&q, 2, TTL).await.expect("claim");
    for key in [keys.cancel_requests(), keys.progress(), keys.limits()] {
        let _: () = raw.set(&key, "garbage").await.expect("plant");
        let acked = b.ack(&c.leases[0].key).await;
        let stats = b.stats(&q).await;
        let _: i64 = raw.del(&key).await.expect("repair");
        if key == keys.limits() {
            assert!(matches!(stats, Err(Error::Corrupt { .. })), "{stats:?}");
            acked.expect("the ack reads no limits");
        } else {
            assert!(
                matches!(acked, Err(Error::Corrupt { .. })),
                "{key}: {acked:?}"
            );
            assert_eq!(stats.expect("stats").leased, 2, "{key}: nothing written");
        }
    }
    b.ack(&c.leases[1].key).await.expect("ack");
}

for_each_client!(
    the_pause_lives_in_the_limits_hash,
    cancel_requests_and_progress_leave_no_key,
    wrong_typed_control_keys_are_refused
);
