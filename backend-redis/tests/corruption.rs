//! Corruption planted with raw commands: the next claims (and reaps) heal it
//! and hand out every real item exactly once, on both clients.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::Which;
use leaseq_core::{Backend, BackendExt, Error, ItemId, ItemState, NewItem, QueueName, Repair};
use leaseq_redis::keys::KeyLayout;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(30);

struct Case {
    backend: Arc<dyn Backend>,
    cleanup: common::Cleanup,
    queue: QueueName,
    keys: KeyLayout,
    raw: redis::aio::MultiplexedConnection,
}

async fn case(which: Which, tag: &str) -> Option<Case> {
    let (backend, cleanup) = common::backend(which, tag).await?;
    let queue = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &queue).expect("valid");
    let raw = common::raw(&cleanup.url).await;
    Some(Case {
        backend,
        cleanup,
        queue,
        keys,
        raw,
    })
}

impl Case {
    async fn enqueue(&self, n: usize) -> Vec<ItemId> {
        let items = (0..n).map(|i| NewItem::new(format!("p{i}"))).collect();
        let out = self
            .backend
            .enqueue(&self.queue, items)
            .await
            .expect("enqueue");
        out.into_iter().map(|e| e.id).collect()
    }

    /// Claims (two at a time) and acks until a claim finds nothing; returns
    /// how often each payload was handed out, and the repairs reported.
    async fn drain(&self) -> (BTreeMap<String, u32>, Vec<Repair>) {
        let mut seen = BTreeMap::new();
        let mut repairs = Vec::new();
        loop {
            let claimed = self
                .backend
                .claim_up_to(&self.queue, 2, TTL)
                .await
                .expect("claim");
            repairs.extend(claimed.repairs);
            if claimed.leases.is_empty() {
                return (seen, repairs);
            }
            for lease in claimed.leases {
                *seen
                    .entry(String::from_utf8_lossy(&lease.payload).into_owned())
                    .or_insert(0) += 1;
                self.backend.ack(&lease.key).await.expect("ack");
            }
        }
    }

    async fn assert_consistent_and_empty(&self) {
        let hooks = self.backend.test_hooks().expect("hooks");
        let snap = hooks.snapshot(&self.queue).await.expect("snapshot");
        assert_eq!(snap.violations(), Vec::<String>::new());
        assert_eq!(
            self.backend
                .stats(&self.queue)
                .await
                .expect("stats")
                .total(),
            0
        );
        let _ = &self.cleanup;
    }
}

fn once_each(names: &[&str]) -> BTreeMap<String, u32> {
    names.iter().map(|n| (n.to_string(), 1)).collect()
}

fn has_repair(repairs: &[Repair], id: ItemId, words: &str) -> bool {
    repairs
        .iter()
        .any(|r| r.id == id && r.problem.contains(words))
}

/// A ready id whose item hash was deleted is removed and reported.
async fn ready_id_without_hash(which: Which) {
    let Some(mut c) = case(which, "nohash").await else {
        return;
    };
    let ids = c.enqueue(5).await;
    let _: i64 = c.raw.del(c.keys.item(ids[2])).await.expect("del");
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1", "p3", "p4"]));
    assert!(has_repair(&repairs, ids[2], "missing"), "{repairs:?}");
    c.assert_consistent_and_empty().await;
}

/// A ready id that is also (live) leased is not handed out a second time;
/// the stray Ready entry is removed, and the lease still acks.
async fn ready_id_also_leased(which: Which) {
    let Some(mut c) = case(which, "dupleased").await else {
        return;
    };
    let ids = c.enqueue(3).await;
    let held = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    assert_eq!(held.id(), ids[0]);
    let _: i64 = c
        .raw
        .zadd(c.keys.ready(), KeyLayout::member(ids[0]), -1)
        .await
        .expect("zadd");
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p1", "p2"]));
    assert!(has_repair(&repairs, ids[0], "duplicate"), "{repairs:?}");
    c.backend
        .ack(&held.key)
        .await
        .expect("the real lease still acks");
    c.assert_consistent_and_empty().await;
}

/// A key of the wrong type where an item hash should be (the WRONGTYPE
/// case) is deleted with its index entries; the claim carries on.
async fn wrong_type_where_hash_should_be(which: Which) {
    let Some(mut c) = case(which, "wrongtype").await else {
        return;
    };
    let ids = c.enqueue(4).await;
    let _: i64 = c.raw.del(c.keys.item(ids[1])).await.expect("del");
    let _: i64 = c
        .raw
        .rpush(c.keys.item(ids[1]), "junk")
        .await
        .expect("rpush");
    let _: () = c.raw.set(c.keys.item(ids[3]), "junk").await.expect("set");
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p2"]));
    assert!(has_repair(&repairs, ids[1], "WRONGTYPE"), "{repairs:?}");
    assert!(has_repair(&repairs, ids[3], "WRONGTYPE"), "{repairs:?}");
    let left: i64 = c.raw.exists(c.keys.item(ids[1])).await.expect("exists");
    assert_eq!(left, 0, "the junk key is removed");
    c.assert_consistent_and_empty().await;
}

/// What a racing two-step reaper leaves behind: an expired lease pushed back
/// to Ready twice (a sorted set keeps it once) while still in Leased. The
/// claim drops the stray entry, one reap recovers the lease once, and the
/// item is then handed out once.
async fn racing_reaper_leftovers(which: Which) {
    let Some(mut c) = case(which, "racer").await else {
        return;
    };
    let ids = c.enqueue(2).await;
    let lost = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("lease");
    let hooks = c.backend.test_hooks().expect("hooks");
    assert_eq!(hooks.expire_leases(&c.queue).await.expect("expire"), 1);
    let member = KeyLayout::member(ids[0]);
    for _ in 0..2 {
        let _: i64 = c.raw.zadd(c.keys.ready(), &member, 0).await.expect("zadd");
    }
    let in_ready: i64 = c.raw.zcard(c.keys.ready()).await.expect("zcard");
    assert_eq!(in_ready, 2, "a sorted set cannot hold the id twice");

    let first = c
        .backend
        .claim_up_to(&c.queue, 5, TTL)
        .await
        .expect("claim");
    let got: Vec<ItemId> = first.leases.iter().map(|l| l.id()).collect();
    assert_eq!(
        got,
        vec![ids[1]],
        "the stray entry of a leased item is not handed out"
    );
    assert!(
        has_repair(&first.repairs, ids[0], "duplicate"),
        "{:?}",
        first.repairs
    );
    for l in &first.leases {
        c.backend.ack(&l.key).await.expect("ack");
    }
    // Two reapers: the expired lease is recovered exactly once.
    let (a, b) = tokio::join!(c.backend.reap(&c.queue), c.backend.reap(&c.queue));
    assert_eq!(a.expect("reap").requeued + b.expect("reap").requeued, 1);
    assert!(c
        .backend
        .ack(&lost.key)
        .await
        .is_err_and(|e| e.is_lease_lost()));
    let (seen, _) = c.drain().await;
    assert_eq!(seen, once_each(&["p0"]));
    c.assert_consistent_and_empty().await;
}

/// The same leftovers when the racer also rewrote the item as Ready: the
/// item is claimed once and its Leased entry goes with the claim.
async fn racing_reaper_rewrote_state(which: Which) {
    let Some(mut c) = case(which, "racer2").await else {
        return;
    };
    let ids = c.enqueue(1).await;
    let _lost = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("lease");
    let member = KeyLayout::member(ids[0]);
    let _: i64 = c.raw.zadd(c.keys.ready(), &member, 0).await.expect("zadd");
    let _: i64 = c
        .raw
        .hset(c.keys.item(ids[0]), "st", "ready")
        .await
        .expect("hset");
    let (seen, _) = c.drain().await;
    assert_eq!(seen, once_each(&["p0"]));
    let leased: i64 = c.raw.zcard(c.keys.leased()).await.expect("zcard");
    assert_eq!(leased, 0);
    let report = c.backend.reap(&c.queue).await.expect("reap");
    assert_eq!(report.recovered(), 0, "nothing left to recover");
    c.assert_consistent_and_empty().await;
}

/// Leased entries without items, and garbage members, are removed by reap.
async fn reap_heals_leased_index(which: Which) {
    let Some(mut c) = case(which, "reapheal").await else {
        return;
    };
    let ids = c.enqueue(1).await;
    let l = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("lease");
    let _: i64 = c.raw.del(c.keys.item(ids[0])).await.expect("del");
    let _: i64 = c
        .raw
        .zadd(c.keys.leased(), "not-an-id", 0)
        .await
        .expect("zadd");
    c.backend
        .test_hooks()
        .expect("hooks")
        .expire_leases(&c.queue)
        .await
        .expect("expire");
    let report = c.backend.reap(&c.queue).await.expect("reap");
    assert_eq!(report.recovered(), 0);
    assert!(
        has_repair(&report.repairs, ids[0], "missing"),
        "{:?}",
        report.repairs
    );
    assert!(
        report
            .repairs
            .iter()
            .any(|r| r.problem.contains("malformed")),
        "{:?}",
        report.repairs
    );
    assert!(c
        .backend
        .ack(&l.key)
        .await
        .is_err_and(|e| e.is_lease_lost()));
    c.assert_consistent_and_empty().await;
}

/// Ready entries that spell a real item's id almost as an index member
/// does (20 characters that a number parser reads as the id: hex, padded
/// with spaces, signed, with a fraction or an exponent) are malformed: each
/// is removed and reported, and the item is handed out once, by its own
/// entry.
async fn near_miss_spellings_of_an_id_are_malformed(which: Which) {
    let Some(mut c) = case(which, "spelling").await else {
        return;
    };
    let ids = c.enqueue(2).await;
    let id = ids[0].get();
    let spellings = [
        format!("0x{id:018x}"),
        format!("{id:>20}"),
        format!("+{id:019}"),
        format!("{id:017}.00"),
        format!("{id:016}e000"),
        "0".repeat(20),
        "9".repeat(20),
    ];
    for s in &spellings {
        assert_eq!(s.len(), 20, "{s:?}");
        let _: i64 = c.raw.zadd(c.keys.ready(), s, -1).await.expect("zadd");
    }
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1"]));
    let malformed = repairs
        .iter()
        .filter(|r| r.problem.contains("malformed"))
        .count();
    assert_eq!(malformed, spellings.len(), "{repairs:?}");
    c.assert_consistent_and_empty().await;
}

/// Thousands of dangling ids ahead of real items never make a claim return
/// empty: the client goes on past the script's repair budget.
async fn many_dangling_ids_never_stall(which: Which) {
    let Some(mut c) = case(which, "manydangling").await else {
        return;
    };
    c.enqueue(2).await;
    let mut pipe = redis::pipe();
    for id in 1_000_000..1_003_000u64 {
        pipe.zadd(c.keys.ready(), KeyLayout::member(ItemId::new(id)), -1)
            .ignore();
    }
    let _: () = pipe.query_async(&mut c.raw).await.expect("plant");
    let claimed = c
        .backend
        .claim_up_to(&c.queue, 1, TTL)
        .await
        .expect("claim");
    assert_eq!(claimed.leases.len(), 1);
    assert_eq!(claimed.repairs.len(), 3_000);
    for l in claimed.leases {
        c.backend.ack(&l.key).await.expect("ack");
    }
    let (seen, _) = c.drain().await;
    assert_eq!(seen.len(), 1);
    c.assert_consistent_and_empty().await;
}

/// An index key of the wrong type cannot be healed without losing items:
/// the call fails with `Corrupt` and writes nothing.
async fn wrong_type_index_is_a_typed_error(which: Which) {
    let Some(mut c) = case(which, "badindex").await else {
        return;
    };
    let _: i64 = c.raw.rpush(c.keys.ready(), "x").await.expect("rpush");
    let err = c
        .backend
        .enqueue(&c.queue, vec![NewItem::new("a")])
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    let err = c
        .backend
        .claim_up_to(&c.queue, 1, TTL)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    let seq: Option<String> = c.raw.get(c.keys.seq()).await.expect("get");
    assert_eq!(seq, None, "nothing was written");
    let _: i64 = c.raw.del(c.keys.ready()).await.expect("del");
    c.enqueue(1).await;
    let (seen, _) = c.drain().await;
    assert_eq!(seen, once_each(&["p0"]));
    assert!(c
        .backend
        .peek(&c.queue, ItemState::Ready, 10)
        .await
        .expect("peek")
        .is_empty());
}

/// A counter reset behind existing items: a batch gets fresh ids past the
/// taken ones (see tests/ids.rs for the other ways a counter goes back),
/// dedup within the batch still holds, and every item is handed out once.
async fn counter_reset_skips_taken_ids(which: Which) {
    let Some(mut c) = case(which, "seqreset").await else {
        return;
    };
    let old = c.enqueue(3).await;
    let _: i64 = c.raw.del(c.keys.seq()).await.expect("del");
    let items = vec![
        NewItem::new("a").dedup_key("k"),
        NewItem::new("b"),
        NewItem::new("c").dedup_key("k"),
    ];
    let got = c.backend.enqueue(&c.queue, items).await.expect("enqueue");
    assert!(!got[0].deduplicated && !got[1].deduplicated, "{got:?}");
    assert!(got[2].deduplicated && got[2].id == got[0].id, "{got:?}");
    assert_ne!(got[0].id, got[1].id);
    for e in &got {
        assert!(!old.contains(&e.id), "id {} was reused: {got:?}", e.id);
    }
    let (seen, _) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1", "p2", "a", "b"]));
    c.assert_consistent_and_empty().await;
}

/// A stray entry in an index other than the item's: transitions leave it
/// (they touch only the index the item is in), and the first script that
/// meets it removes it.
async fn stray_entry_elsewhere_is_healed(which: Which) {
    let Some(mut c) = case(which, "stray").await else {
        return;
    };
    let ids = c.enqueue(2).await;
    let member = KeyLayout::member(ids[0]);
    let _: i64 = c.raw.zadd(c.keys.dead(), &member, 1).await.expect("zadd");
    let (seen, _) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1"]));
    assert_eq!(c.backend.redrive(&c.queue, 10).await.expect("redrive"), 0);
    let dead: i64 = c.raw.zcard(c.keys.dead()).await.expect("zcard");
    assert_eq!(dead, 0, "redrive removed the entry of the acked item");
    c.assert_consistent_and_empty().await;
}

/// An item hash without `enq` (written before the field existed) is not
/// corrupt: inspection shows a Scheduled one's due time and any other the
/// time of the call; a claim gives it the claim's time and writes it, so
/// later reads and claims agree.
async fn item_without_enqueue_time_gets_the_claims(which: Which) {
    let Some(mut c) = case(which, "noenq").await else {
        return;
    };
    let now_id = c.enqueue(1).await[0];
    let later = NewItem::new("later").delay(Duration::from_secs(600));
    let later_id = c
        .backend
        .enqueue_one(&c.queue, later)
        .await
        .expect("enqueue");
    for id in [now_id, later_id] {
        let _: i64 = c.raw.hdel(c.keys.item(id), "enq").await.expect("hdel");
    }
    let scheduled = c.backend.item(&c.queue, later_id).await.expect("item");
    assert_eq!(Some(scheduled.enqueued_at), scheduled.due_at);

    let before = c.backend.now().await.expect("now");
    let shown = c.backend.item(&c.queue, now_id).await.expect("item");
    let lease = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    let after = c.backend.now().await.expect("now");
    assert_eq!(lease.id(), now_id);
    for t in [shown.enqueued_at, lease.enqueued_at] {
        assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
    }
    let stored: Option<u64> = c.raw.hget(c.keys.item(now_id), "enq").await.expect("hget");
    assert_eq!(
        stored,
        Some(lease.enqueued_at.as_millis()),
        "the claim wrote it"
    );
    let info = c.backend.item(&c.queue, now_id).await.expect("item");
    assert_eq!(info.enqueued_at, lease.enqueued_at);
    c.backend
        .release(&lease.key, Duration::ZERO)
        .await
        .expect("release");
    let again = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    assert_eq!(again.enqueued_at, lease.enqueued_at);
    c.backend.ack(&again.key).await.expect("ack");
    c.backend.purge(&c.queue).await.expect("purge");
}

for_each_client!(
    item_without_enqueue_time_gets_the_claims,
    ready_id_without_hash,
    ready_id_also_leased,
    near_miss_spellings_of_an_id_are_malformed,
    wrong_type_where_hash_should_be,
    racing_reaper_leftovers,
    racing_reaper_rewrote_state,
    reap_heals_leased_index,
    many_dangling_ids_never_stall,
    wrong_type_index_is_a_typed_error,
    counter_reset_skips_taken_ids,
    stray_entry_elsewhere_is_healed,
);
