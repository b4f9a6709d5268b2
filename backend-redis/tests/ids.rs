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
/// enqueue of 5 re-seeds past the highest id of any record, writes all 5,
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
/// past the highest id of any record.
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

/// The records of the queue, as stored, without the items hash's
/// sentinel field.
async fn records(
    raw: &mut redis::aio::MultiplexedConnection,
    keys: &KeyLayout,
) -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> = raw.hgetall(keys.items()).await.expect("hgetall");
    all.remove("~");
    all
}

/// Records in no index (10,010 of them, more than the old probe budget)
/// fill the ids after the counter: the enqueue finds the next id taken
/// before it writes, walks the records for the highest id and re-seeds
/// past it. No stray record is overwritten, the batch gets fresh ids above
/// every record, and the real items are each delivered once.
async fn stray_records_after_the_counter_are_stepped_over(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "idstray").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let mut raw = common::raw(&cleanup.url).await;
    let old = enqueue(b.as_ref(), &q, "old", 3).await;
    assert_eq!(old.last().map(|i| i.get()), Some(3));
    let strays: Vec<(String, String)> = (4..=10_013u64)
        .map(|i| (i.to_string(), format!("0,1,0,stray{i}")))
        .collect();
    for chunk in strays.chunks(1000) {
        let _: () = raw.hset_multiple(keys.items(), chunk).await.expect("plant");
    }
    let planted = records(&mut raw, &keys).await;
    assert_eq!(planted.len(), 3 + 10_010);

    let got = enqueue(b.as_ref(), &q, "new", 5).await;
    all_new(&got, &old, 10_013);
    assert_eq!(
        got,
        (10_014..=10_018).map(ItemId::new).collect::<Vec<_>>(),
        "re-seeded right past the highest record"
    );
    let seq: Option<u64> = raw.get(keys.seq()).await.expect("get");
    let mark: Option<u64> = raw.get(keys.id_mark()).await.expect("get");
    assert_eq!((seq, mark), (Some(10_018), Some(10_018)));
    let now = records(&mut raw, &keys).await;
    for (id, rec) in &strays {
        assert_eq!(now.get(id), Some(rec), "stray record {id} was overwritten");
    }
    assert_eq!(now.len(), planted.len() + 5);

    let fields: Vec<&String> = strays.iter().map(|(id, _)| id).collect();
    for chunk in fields.chunks(1000) {
        let _: i64 = raw.hdel(keys.items(), chunk).await.expect("hdel");
    }
    let seen = drain(b.as_ref(), &q).await;
    assert_eq!(seen.len(), 3 + 5, "{seen:?}");
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    assert!(!seen.keys().any(|p| p.starts_with("stray")), "{seen:?}");
}

/// When no free ids are left (a stray record right after the counter makes
/// the enqueue re-seed past the highest record, which holds the last id a
/// script can write, 2^53 - 1), the enqueue fails with `Corrupt` and writes
/// nothing: not the counter, not one record, no index entry. Once the
/// stray records are gone the same enqueue works, under the ids after the
/// counter.
async fn no_free_ids_writes_nothing(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "idfull").await else {
        return;
    };
    let q = QueueName::new("q").expect("valid");
    let keys = KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let mut raw = common::raw(&cleanup.url).await;
    let old = enqueue(b.as_ref(), &q, "old", 3).await;
    let top = (1u64 << 53) - 1;
    let strays = [4u64.to_string(), top.to_string()];
    for id in &strays {
        let _: i64 = raw
            .hset(keys.items(), id, format!("0,1,0,stray{id}"))
            .await
            .expect("plant");
    }
    let before = records(&mut raw, &keys).await;
    let fifo: Vec<String> = raw.lrange(keys.ready_fifo(), 0, -1).await.expect("lrange");
    let err = b
        .enqueue(&q, items("x", 5))
        .await
        .expect_err("no free id in reach");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(!err.may_have_applied());
    let seq: Option<u64> = raw.get(keys.seq()).await.expect("get");
    let mark: Option<u64> = raw.get(keys.id_mark()).await.expect("get");
    assert_eq!(
        (seq, mark),
        (Some(3), Some(3)),
        "the counter was not written"
    );
    assert_eq!(
        records(&mut raw, &keys).await,
        before,
        "no record was written"
    );
    let after: Vec<String> = raw.lrange(keys.ready_fifo(), 0, -1).await.expect("lrange");
    assert_eq!(after, fifo, "no index entry was written");
    let ranked: i64 = raw.zcard(keys.ready()).await.expect("zcard");
    assert_eq!(ranked, 0, "no index entry was written");
    assert_eq!(b.stats(&q).await.expect("stats").total(), 3);

    let _: i64 = raw.hdel(keys.items(), &strays).await.expect("hdel");
    let got = enqueue(b.as_ref(), &q, "x", 5).await;
    assert_eq!(got, (4..=8).map(ItemId::new).collect::<Vec<_>>());
    let seen = drain(b.as_ref(), &q).await;
    assert_eq!(seen.len(), 3 + 5, "{seen:?}");
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    assert!(old.iter().all(|id| id.get() <= 3));
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
    stray_records_after_the_counter_are_stepped_over,
    no_free_ids_writes_nothing,
    restart_from_an_older_snapshot,
);
