//! A unique-for hold key (`{p:q}:held`, a sorted set, or `{p:q}:heldid`,
//! a hash) of the wrong type: an ack is refused with `Corrupt` before any
//! write, so the lease stays whole, and once the key is repaired the
//! expired lease is reaped and the item claimed again (nothing stranded in
//! Leased).
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::time::Duration;

use common::Which;
use leaseq_core::{Backend, BackendExt, Error, NewItem, QueueName};
use leaseq_redis::keys::KeyLayout;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_millis(300);

async fn run(which: Which, suffix: &str, many: bool) {
    let Some((b, cleanup)) = common::backend(which, &format!("held{suffix}{many}")).await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("valid");
    let mut raw = common::raw(&cleanup.url).await;
    b.enqueue(
        &q,
        vec![NewItem::new("u")
            .dedup_key("k1")
            .unique_for(Duration::from_secs(60))],
    )
    .await
    .expect("enqueue");
    let c = b.claim_up_to(&q, 1, TTL).await.expect("claim");
    assert_eq!(c.leases.len(), 1);
    let lease = c.leases[0].key.clone();
    // Plant a value of the wrong type under the hold key.
    let held = format!("{}{suffix}", keys.key_prefix());
    let _: () = raw.set(&held, "garbage").await.expect("plant");
    let err = if many {
        b.ack_many(std::slice::from_ref(&lease)).await.err()
    } else {
        b.ack(&lease).await.err()
    };
    eprintln!(
        "ack with wrong-typed {held}: {err:?} (may_have_applied: {:?})",
        err.as_ref().map(Error::may_have_applied)
    );
    let st = b.stats(&q).await.expect("stats");
    eprintln!("stats after refused ack: {st:?}");
    // Repair the planted key (what an operator does), then let the lease
    // expire and reap: the item must come back (or the ack must have
    // landed), never stay Leased forever.
    let _: i64 = raw.del(&held).await.expect("del");
    tokio::time::sleep(TTL * 3).await;
    let r = b.reap(&q).await.expect("reap");
    let st2 = b.stats(&q).await.expect("stats");
    let leased = b
        .peek(&q, leaseq_core::ItemState::Leased, 10)
        .await
        .expect("peek");
    let now = b.now().await.expect("now");
    eprintln!("server now {now:?}; leased items: {leased:?}");
    let again = b.claim_up_to(&q, 1, TTL).await.expect("claim");
    eprintln!(
        "reap: {r:?}; stats after reap: {st2:?}; reclaimed {}",
        again.leases.len()
    );
    // The worker that saw the refused ack gives up (the runtime reports
    // "the lease will expire and a reaper will recover the item").
    // Expected: the expired lease is reaped and the item claimed again.
    let ok =
        matches!(err, Some(Error::Corrupt { .. })) && r.requeued == 1 && again.leases.len() == 1;
    // The original lease was reaped: its token is fenced off.
    let late = b.ack(&lease).await;
    assert!(
        matches!(late, Err(Error::LeaseLost { .. })),
        "late ack: {late:?}"
    );
    assert!(
        ok,
        "ack with a wrong-typed hold key: err {err:?}; after ttl*3 + reap {r:?} stats {st2:?}, reclaimed {} (expected requeued 1, reclaimed 1)",
        again.leases.len()
    );
}

async fn held_ack(which: Which) {
    run(which, "held", false).await
}
async fn heldid_ack(which: Which) {
    run(which, "heldid", false).await
}
async fn held_ack_many(which: Which) {
    run(which, "held", true).await
}

for_each_client!(held_ack, heldid_ack, held_ack_many);
