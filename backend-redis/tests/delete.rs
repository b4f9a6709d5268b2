//! What a queue leaves behind on Redis, on both clients: no dedup entry of
//! a finished item; after `delete_queue`, nothing but a generation
//! tombstone that expires; and ids that
//! never come back, also for a handle that has seen none of them (another
//! process), which only the server's id floor can protect.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Which;
use leaseq_core::{Backend, BackendExt, ItemId, ItemState, NewItem, QueueLimits, QueueName};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);

async fn fresh_handle(which: Which, url: &str, prefix: &str) -> Arc<dyn Backend> {
    let config = RedisOptions::new(url).prefix(prefix);
    common::connect(which, config).await.expect("connect")
}

async fn enqueue(b: &dyn Backend, q: &QueueName, n: usize) -> Vec<ItemId> {
    let items = (0..n).map(|i| NewItem::new(format!("i{i}")).dedup_key(format!("k{i}")));
    let out = b.enqueue(q, items.collect()).await.expect("enqueue");
    out.into_iter().map(|e| e.id).collect()
}

/// A queue used every way (items in each state, dedup keys, a key held
/// after its ack, limits, the listing) leaves no key of its own after
/// `delete_queue` but the prune generation and its last id, which expire.
async fn delete_leaves_only_an_expiring_tombstone(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "delkeys").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    b.enqueue(
        &q,
        vec![NewItem::new("held").dedup_key("h").unique_for(TTL)],
    )
    .await
    .expect("enqueue");
    let held = b.claim_up_to(&q, 1, TTL).await.expect("claim").leases;
    b.ack(&held[0].key).await.expect("ack");
    enqueue(b.as_ref(), &q, 6).await;
    let leases = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    b.fail(&leases[0].key, "dead").await.expect("fail");
    b.enqueue(&q, vec![NewItem::new("later").delay(TTL)])
        .await
        .expect("enqueue");
    b.throttles()
        .expect("throttles")
        .set_queue_limits(&q, QueueLimits::NONE.concurrency(5))
        .await
        .expect("limits");
    assert!(b.queues().await.expect("queues").contains(&q));

    let deleted = b
        .admin()
        .expect("admin")
        .delete_queue(&q)
        .await
        .expect("delete_queue");
    assert_eq!(
        deleted, 7,
        "6 keyed items (one dead, one leased) and one scheduled"
    );

    let mut raw = common::raw(&cleanup.url).await;
    let pattern = format!("{}*", keys.tag().replace('{', "\\{").replace('}', "\\}"));
    let mut left: Vec<String> = raw.keys(&pattern).await.expect("keys");
    left.sort();
    let mut want = vec![keys.listing_generation(), keys.deleted_up_to()];
    want.sort();
    assert_eq!(left, want, "keys left of a deleted queue");
    let ttl: i64 = raw.pttl(keys.listing_generation()).await.expect("pttl");
    assert!(
        ttl > 0 && ttl <= 120_000,
        "the generation tombstone must expire within 2 minutes, its PTTL is {ttl}"
    );
    let memory = i64::try_from(leaseq_core::limits::REQUEST_MEMORY.as_millis()).unwrap_or(i64::MAX);
    let ttl: i64 = raw.pttl(keys.deleted_up_to()).await.expect("pttl");
    assert!(
        ttl > 0 && ttl <= memory,
        "the deleted queue's last id must expire with its enqueue_once records, its PTTL is {ttl}"
    );
    let last: u64 = raw.get(keys.deleted_up_to()).await.expect("get");
    assert!(
        last >= 8,
        "the last id of a queue that handed out 8 ids is {last}"
    );
    assert!(!b.queues().await.expect("queues").contains(&q));
}

/// Ids after a delete are above every id the queue had, for the handle that
/// deleted it and for a fresh one that has seen no id (which the client's
/// own floor cannot protect); deleting again and again keeps them rising.
async fn ids_stay_new_for_a_handle_that_saw_none(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "delids").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let mut top = 0;
    for round in 0..3 {
        let old = enqueue(b.as_ref(), &q, 5).await;
        top = top.max(old.iter().map(|i| i.get()).max().unwrap_or(0));
        b.admin()
            .expect("admin")
            .delete_queue(&q)
            .await
            .expect("delete_queue");
        let other = fresh_handle(which, &cleanup.url, &cleanup.prefix).await;
        let got = enqueue(other.as_ref(), &q, 5).await;
        for id in &got {
            assert!(
                id.get() > top,
                "round {round}: a fresh handle got id {id} after the delete, though the queue had handed out ids up to {top}"
            );
        }
        top = top.max(got.iter().map(|i| i.get()).max().unwrap_or(0));
        let claimed = other.claim_up_to(&q, 10, TTL).await.expect("claim").leases;
        assert_eq!(claimed.len(), 5, "round {round}: the new items, whole");
        for l in claimed {
            other.ack(&l.key).await.expect("ack");
        }
    }
}

/// Every way an item with a dedup key leaves the queue (ack, ack_many,
/// `remove_item` while Leased or Ready, dead-lettered then purged) takes its
/// entry out of the dedup hash: an entry left behind answers no enqueue
/// wrongly (the holder is checked), but the hash would grow with every key
/// ever used.
async fn finished_items_leave_no_dedup_entry(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "deddone").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let mut raw = common::raw(&cleanup.url).await;
    let ids = enqueue(b.as_ref(), &q, 6).await;
    let leases = b.claim_up_to(&q, 5, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), 5);
    b.ack(&leases[0].key).await.expect("ack");
    let batch = [leases[1].key.clone(), leases[2].key.clone()];
    let acked = b.ack_many(&batch).await.expect("ack_many");
    assert!(acked.iter().all(|r| r.is_ok()), "ack_many: {acked:?}");
    let removed = b
        .admin()
        .expect("admin")
        .remove_item(&q, leases[3].id())
        .await
        .expect("remove");
    assert_eq!(removed, ItemState::Leased);
    let removed = b
        .admin()
        .expect("admin")
        .remove_item(&q, ids[5])
        .await
        .expect("remove");
    assert_eq!(removed, ItemState::Ready);
    let held: Vec<String> = raw.hkeys(keys.dedup()).await.expect("hkeys");
    assert_eq!(
        held,
        vec!["k4".to_owned()],
        "dedup entries once three of six items were acked and two removed"
    );
    b.fail(&leases[4].key, "dead").await.expect("fail");
    b.admin().expect("admin").purge(&q).await.expect("purge");
    let left: i64 = raw.exists(keys.dedup()).await.expect("exists");
    assert_eq!(left, 0, "the dedup hash outlived a purge of the last item");
}

/// Two first enqueues at once each write a token into the registry of
/// queues; the loser's stays in the registry though `listed` holds the
/// winner's. `delete_queue` drops the field all the same (it raised the
/// generation, as a listing's prune does), so the registry keeps nothing
/// of a deleted queue.
async fn delete_drops_the_field_a_lost_registration_race_left(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "delrace").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    enqueue(b.as_ref(), &q, 2).await;
    let registry = format!("{{{}:_}}:queues", cleanup.prefix);
    let mut raw = common::raw(&cleanup.url).await;
    let winner: Option<String> = raw.hget(&registry, "q").await.expect("hget");
    assert!(
        winner.is_some(),
        "the enqueue registered the queue in {registry}"
    );
    let () = raw
        .hset(&registry, "q", "the-losers-token")
        .await
        .expect("hset");

    b.admin()
        .expect("admin")
        .delete_queue(&q)
        .await
        .expect("delete_queue");
    let left: bool = raw.hexists(&registry, "q").await.expect("hexists");
    assert!(!left, "the registry kept the deleted queue's field");
    enqueue(b.as_ref(), &q, 1).await;
    assert!(
        b.queues().await.expect("queues").contains(&q),
        "an enqueue after the delete registers the queue again"
    );
}

for_each_client!(
    delete_drops_the_field_a_lost_registration_race_left,
    finished_items_leave_no_dedup_entry,
    delete_leaves_only_an_expiring_tombstone,
    ids_stay_new_for_a_handle_that_saw_none,
);
