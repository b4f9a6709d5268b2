//! Item ids stay unique when the id counter is lost, reset or taken back,
//! on both clients: an enqueue finds out before it writes anything, and
//! either writes its whole batch under fresh ids or writes nothing and
//! fails with a typed error.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{Backend, BackendExt, Error, ItemId, NewItem, QueueName};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);

fn items(tag: &str, n: usize) -> Vec<NewItem> {
    (0..n).map(|i| NewItem::new(format!("{tag}{i}"))).collect()
}

async fn enqueue(b: &dyn Backend, q: &QueueName, tag: &str, n: usize) -> Vec<ItemId> {
    let out = b.enqueue(q, items(tag, n)).await.expect("enqueue");
    out.into_iter().map(|e| e.id).collect()
}

/// A new handle on the same prefix: it has seen no id, so only what the
/// server holds can protect it.
async fn fresh_handle(which: Which, url: &str, prefix: &str) -> Arc<dyn Backend> {
    let config = RedisOptions::new(url).prefix(prefix).test_hooks(true);
    common::connect(which, config).await.expect("connect")
}

/// Claims and acks everything; how often each payload was handed out.
async fn drain(b: &dyn Backend, q: &QueueName) -> BTreeMap<String, u32> {
    let mut seen = BTreeMap::new();
    loop {
        let claimed = b.claim_up_to(q, 50, TTL).await.expect("claim");
        if claimed.leases.is_empty() {
            return seen;
        }
        for l in claimed.leases {
            *seen
                .entry(String::from_utf8_lossy(&l.payload).into_owned())
                .or_insert(0u32) += 1;
            b.ack(&l.key).await.expect("ack");
        }
    }
}

fn all_new(got: &[ItemId], old: &[ItemId], above: u64) {
    let unique: BTreeSet<_> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "ids repeat: {got:?}");
    for id in got {
        assert!(!old.contains(id), "id {id} handed out again: {got:?}");
        assert!(id.get() > above, "id {id} is not past {above}: {got:?}");
    }
}

/// The id counter and its copy deleted while items wait: a new handle's
/// enqueue of 5 re-seeds past the highest id in the indexes, writes all 5,
/// and every item is then delivered once.
async fn lost_counter_is_reseeded_before_writing(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "idlost").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let old = enqueue(b.as_ref(), &q, "old", 30).await;
    // Some acked, one dead, one leased, the rest ready: every index used.
    let leases = b.claim_up_to(&q, 5, TTL).await.expect("claim").leases;
    for l in &leases[..3] {
        b.ack(&l.key).await.expect("ack");
    }
    b.fail(&leases[3].key, "x").await.expect("fail");
    let mut raw = common::raw(&cleanup.url).await;
    let _: i64 = raw.del(&[keys.seq(), keys.id_mark()]).await.expect("del");

    let other = fresh_handle(which, &cleanup.url, &cleanup.prefix).await;
    let got = enqueue(other.as_ref(), &q, "new", 5).await;
    all_new(&got, &old, 30);
    let seq: Option<u64> = raw.get(keys.seq()).await.expect("get");
    let mark: Option<u64> = raw.get(keys.id_mark()).await.expect("get");
    let top = got.iter().map(|i| i.get()).max();
    assert_eq!((seq, mark), (top, top));
    let s = b.stats(&q).await.expect("stats");
    assert_eq!(s.total(), 27 + 5, "{s:?}");

    b.ack(&leases[4].key).await.expect("ack the leased one");
    let seen = drain(b.as_ref(), &q).await;
    assert_eq!(seen.len(), 25 + 5, "{seen:?}");
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
}

/// Only the counter deleted (its copy survives): nothing to walk, the next
/// ids follow the copy.
async fn counter_alone_deleted_follows_its_copy(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "idcopy").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let old = enqueue(b.as_ref(), &q, "old", 10).await;
    // Ack them all: nothing in the queue shows which ids were used.
    for l in b.claim_up_to(&q, 10, TTL).await.expect("claim").leases {
        b.ack(&l.key).await.expect("ack");
    }
    let mut raw = common::raw(&cleanup.url).await;
    let _: i64 = raw.del(keys.seq()).await.expect("del");
    let other = fresh_handle(which, &cleanup.url, &cleanup.prefix).await;
    let got = enqueue(other.as_ref(), &q, "new", 5).await;
    all_new(&got, &old, 10);
}

/// The counter (and its copy) set back to a lower value while items
/// exist: the collision is found before writing and the counter re-seeded
/// past the highest id in the indexes.
async fn counter_set_back_is_reseeded(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "idback").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let old = enqueue(b.as_ref(), &q, "old", 10).await;
    let mut raw = common::raw(&cleanup.url).await;
    for (seq, mark) in [(2, 10), (2, 2), (0, 0)] {
        let _: () = raw.set(keys.seq(), seq).await.expect("set");
        let _: () = raw.set(keys.id_mark(), mark).await.expect("set");
        let other = fresh_handle(which, &cleanup.url, &cleanup.prefix).await;
        let before = other.stats(&q).await.expect("stats").total();
        let got = enqueue(other.as_ref(), &q, &format!("s{seq}m{mark}-"), 3).await;
        all_new(&got, &old, 10);
        assert_eq!(other.stats(&q).await.expect("stats").total(), before + 3);
    }
    // The same handle never goes below the ids it has seen either.
    let _: () = raw.set(keys.seq(), 1).await.expect("set");
    let _: () = raw.set(keys.id_mark(), 1).await.expect("set");
    let mine = enqueue(b.as_ref(), &q, "mine", 2).await;
    all_new(&mine, &old, 10);
    let seen = drain(b.as_ref(), &q).await;
    assert_eq!(seen.len(), 10 + 9 + 2);
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
}

/// When no free ids can be found within the probe budget (item keys in no
/// index fill the whole range after the counter), the enqueue fails with
/// `Corrupt` and writes nothing: not the counter, not one item, no index
/// entry. Once the stray keys are gone the same enqueue works.
async fn no_free_ids_writes_nothing(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "idfull").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let mut raw = common::raw(&cleanup.url).await;
    let strays: Vec<String> = (1..=10_010u64).map(|i| keys.item(ItemId::new(i))).collect();
    let mut pipe = redis::pipe();
    for k in &strays {
        pipe.hset(k, "p", "stray").ignore();
    }
    let _: () = pipe.query_async(&mut raw).await.expect("plant");
    let err = b
        .enqueue(&q, items("x", 5))
        .await
        .expect_err("no free id in reach");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(!err.may_have_applied());
    let seq: Option<String> = raw.get(keys.seq()).await.expect("get");
    let mark: Option<String> = raw.get(keys.id_mark()).await.expect("get");
    assert_eq!((seq, mark), (None, None), "the counter was not written");
    let n: i64 = raw
        .exists(keys.item(ItemId::new(10_011)))
        .await
        .expect("exists");
    assert_eq!(n, 0, "no item was written");
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
    for chunk in strays.chunks(1000) {
        let _: i64 = raw.del(chunk).await.expect("del");
    }
    let got = enqueue(b.as_ref(), &q, "x", 5).await;
    assert_eq!(got.len(), 5);
    assert_eq!(drain(b.as_ref(), &q).await.len(), 5);
}

/// A server restarted from an older snapshot takes its id counter back
/// with everything else. A handle that saw the later ids re-seeds past
/// them, so it never gets an id it already saw for another item.
async fn restart_from_an_older_snapshot(which: Which) {
    let mut server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let config = RedisOptions::new(server.url())
        .prefix("snap")
        .response_timeout(Duration::from_secs(2));
    let b = common::connect(which, config).await.expect("connect");
    let q = QueueName::new("q").expect("valid");
    let before = enqueue(b.as_ref(), &q, "kept", 3).await;
    server.command(&["SAVE"]).expect("save");
    let after = enqueue(b.as_ref(), &q, "lost", 4).await;
    for l in b.claim_up_to(&q, 2, TTL).await.expect("claim").leases {
        b.ack(&l.key).await.expect("ack");
    }
    // Back to the snapshot: ids 1 to 3 and a counter at 3.
    server.restart().expect("restart from the snapshot");
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.stats(&q).await.is_err() {
        assert!(Instant::now() < deadline, "never reconnected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.stats(&q).await.expect("stats").total(), 3);
    let seen: Vec<ItemId> = before.iter().chain(&after).copied().collect();
    let got = enqueue(b.as_ref(), &q, "new", 2).await;
    all_new(&got, &seen, 7);
}

for_each_client!(
    lost_counter_is_reseeded_before_writing,
    counter_alone_deleted_follows_its_copy,
    counter_set_back_is_reseeded,
    no_free_ids_writes_nothing,
    restart_from_an_older_snapshot,
);
