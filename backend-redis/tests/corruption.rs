//! Corruption planted with raw commands: the next claims (and reaps) heal it
//! and hand out every real item exactly once, on both clients. What cannot
//! be healed without losing items (a structural key of the wrong type, a
//! queue still in key layout 1) is refused with `Error::Corrupt` before
//! anything is written.
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

    /// A key of the queue's own (`{p:q}:<suffix>`), for the keys the
    /// layout has no accessor for.
    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.keys.key_prefix())
    }

    /// The fifo of Ready ids, as stored.
    async fn fifo(&mut self) -> Vec<String> {
        self.raw
            .lrange(self.keys.ready_fifo(), 0, -1)
            .await
            .expect("lrange")
    }

    /// Every key of the queue with its type and its whole contents (in a
    /// form that does not depend on how the server lays the value out), to
    /// prove a refused call wrote nothing.
    async fn contents(&mut self) -> BTreeMap<String, String> {
        let pattern = format!(
            "{}*",
            self.keys.tag().replace('{', "\\{").replace('}', "\\}")
        );
        let names: Vec<String> = self.raw.keys(&pattern).await.expect("keys");
        let mut out = BTreeMap::new();
        for k in names {
            let t: String = redis::cmd("TYPE")
                .arg(&k)
                .query_async(&mut self.raw)
                .await
                .expect("type");
            let shown = match t.as_str() {
                "string" => {
                    let v: Vec<u8> = self.raw.get(&k).await.expect("get");
                    format!("{v:?}")
                }
                "list" => {
                    let v: Vec<Vec<u8>> = self.raw.lrange(&k, 0, -1).await.expect("lrange");
                    format!("{v:?}")
                }
                "hash" => {
                    let v: BTreeMap<Vec<u8>, Vec<u8>> =
                        self.raw.hgetall(&k).await.expect("hgetall");
                    format!("{v:?}")
                }
                "zset" => {
                    let v: Vec<(Vec<u8>, f64)> =
                        self.raw.zrange_withscores(&k, 0, -1).await.expect("zrange");
                    format!("{v:?}")
                }
                "set" => {
                    let v: std::collections::BTreeSet<Vec<u8>> =
                        self.raw.smembers(&k).await.expect("smembers");
                    format!("{v:?}")
                }
                _ => String::new(),
            };
            out.insert(k, format!("{t}: {shown}"));
        }
        out
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

fn is_corrupt(err: &Error, words: &str) -> bool {
    matches!(err, Error::Corrupt { what } if what.contains(words))
}

/// Ready entries (one in the fifo, one in the ranked index) whose record
/// was deleted from the items hash are removed and reported; every other
/// item is handed out once.
async fn ready_id_without_record(which: Which) {
    let Some(mut c) = case(which, "norecord").await else {
        return;
    };
    let ids = c.enqueue(5).await;
    let ranked = c
        .backend
        .enqueue_one(&c.queue, NewItem::new("hi").priority(3))
        .await
        .expect("enqueue");
    for id in [ids[2], ranked] {
        let n: i64 = c
            .raw
            .hdel(c.keys.items(), id.get().to_string())
            .await
            .expect("hdel");
        assert_eq!(n, 1, "the record of {id} was there");
    }
    let in_ranked: Option<f64> = c
        .raw
        .zscore(c.keys.ready(), KeyLayout::member(ranked))
        .await
        .expect("zscore");
    assert_eq!(in_ranked, Some(-3.0), "the ranked entry is left behind");
    assert!(c.fifo().await.contains(&ids[2].get().to_string()));

    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1", "p3", "p4"]));
    assert!(
        has_repair(&repairs, ids[2], "item is missing"),
        "{repairs:?}"
    );
    assert!(
        has_repair(&repairs, ranked, "item is missing"),
        "{repairs:?}"
    );
    assert!(c.fifo().await.is_empty());
    let left: i64 = c.raw.zcard(c.keys.ready()).await.expect("zcard");
    assert_eq!(left, 0, "the dangling ranked entry is removed");
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
    assert!(
        has_repair(&repairs, ids[0], "duplicate entry: the item is leased"),
        "{repairs:?}"
    );
    c.backend
        .ack(&held.key)
        .await
        .expect("the real lease still acks");
    c.assert_consistent_and_empty().await;
}

/// Ids the Ready indexes list twice (the fifo twice over, the fifo and
/// the ranked index) within the reach of one claim: each item is leased
/// once, the repeats are reported, and every lease holds the token of its
/// slot (each acks).
async fn ready_id_listed_twice_in_one_claim(which: Which) {
    let Some(mut c) = case(which, "duptwice").await else {
        return;
    };
    let ids = c.enqueue(4).await;
    for id in &ids[..2] {
        let _: i64 = c
            .raw
            .rpush(c.keys.ready_fifo(), id.get().to_string())
            .await
            .expect("rpush");
    }
    let _: i64 = c
        .raw
        .zadd(c.keys.ready(), KeyLayout::member(ids[2]), 0)
        .await
        .expect("zadd");
    assert_eq!(c.fifo().await.len(), 6);

    let claimed = c
        .backend
        .claim_up_to(&c.queue, 10, TTL)
        .await
        .expect("claim");
    let mut got: Vec<ItemId> = claimed.leases.iter().map(|l| l.id()).collect();
    got.sort();
    assert_eq!(got, ids, "each item once");
    for id in &ids[..3] {
        assert!(
            has_repair(&claimed.repairs, *id, "duplicate entry: the item is leased"),
            "{:?}",
            claimed.repairs
        );
    }
    for lease in &claimed.leases {
        c.backend
            .ack(&lease.key)
            .await
            .expect("every lease holds its own token");
    }
    let (seen, _) = c.drain().await;
    assert!(seen.is_empty(), "nothing is left to hand out: {seen:?}");
    c.assert_consistent_and_empty().await;
}

/// Plants each structural key with the wrong type in turn: an enqueue
/// that touches the key, a claim and a reap each fail with `Corrupt`, and
/// the queue is left exactly as it was (every key, every value); then puts
/// the key back as it was.
///
/// Each case: the key, a command that plants a value of another type, and
/// the item an enqueue that touches the key sends (`None`: no enqueue
/// touches it; the claim and the reap are checked).
async fn assert_wrong_types_refused(
    c: &mut Case,
    cases: Vec<(String, redis::Cmd, Option<NewItem>)>,
) {
    for (key, plant, item) in cases {
        let saved: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(&mut c.raw)
            .await
            .expect("dump");
        let _: i64 = c.raw.del(&key).await.expect("del");
        let _: () = plant.query_async(&mut c.raw).await.expect("plant");
        let before = c.contents().await;
        assert!(before.contains_key(&key), "{key}: {before:?}");
        if let Some(item) = item {
            let err = c
                .backend
                .enqueue(&c.queue, vec![item])
                .await
                .expect_err("enqueue refused");
            assert!(matches!(err, Error::Corrupt { .. }), "{key}: {err:?}");
            assert!(!err.may_have_applied(), "{key}: {err:?}");
        }
        let err = c
            .backend
            .claim_up_to(&c.queue, 5, TTL)
            .await
            .expect_err("claim refused");
        assert!(matches!(err, Error::Corrupt { .. }), "{key}: {err:?}");
        let err = c.backend.reap(&c.queue).await.expect_err("reap refused");
        assert!(matches!(err, Error::Corrupt { .. }), "{key}: {err:?}");
        assert_eq!(c.contents().await, before, "{key}: a refused call wrote");
        let _: i64 = c.raw.del(&key).await.expect("del");
        if let Some(saved) = saved {
            let _: () = redis::cmd("RESTORE")
                .arg(&key)
                .arg(0)
                .arg(saved)
                .query_async(&mut c.raw)
                .await
                .expect("restore");
        }
    }
}

/// The items hash holding a string: claims cannot read a record, and
/// dropping the Ready entries would lose every item. The claim fails with
/// `Corrupt` and changes nothing (the fifo still holds every id); put
/// back, the hash serves all its items.
async fn wrong_type_items_is_a_typed_error(which: Which) {
    let Some(mut c) = case(which, "baditems").await else {
        return;
    };
    let ids = c.enqueue(4).await;
    let fifo: Vec<String> = ids.iter().map(|i| i.get().to_string()).collect();
    assert_eq!(c.fifo().await, fifo);
    let items = c.keys.items();
    let mut set = redis::cmd("SET");
    set.arg(&items).arg("junk");
    let mut list = redis::cmd("RPUSH");
    list.arg(&items).arg(ids[0].get());
    assert_wrong_types_refused(
        &mut c,
        vec![
            (items.clone(), set, Some(NewItem::new("x"))),
            (items, list, Some(NewItem::new("y"))),
        ],
    )
    .await;
    assert_eq!(c.fifo().await, fifo, "the fifo still holds every id");
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1", "p2", "p3"]));
    assert!(repairs.is_empty(), "{repairs:?}");
    c.assert_consistent_and_empty().await;
}

/// An index key of the wrong type cannot be healed without losing items:
/// each of the Ready fifo, the ranked Ready index, the Scheduled and Dead
/// indexes, the lease groups and the lease tokens planted with another
/// type makes the calls that touch it fail with `Corrupt`, having written
/// nothing.
async fn wrong_type_index_is_a_typed_error(which: Which) {
    let Some(mut c) = case(which, "badindex").await else {
        return;
    };
    c.enqueue(2).await;
    let hi = c
        .backend
        .enqueue_one(&c.queue, NewItem::new("hi").priority(2))
        .await
        .expect("enqueue");
    let k = &c.keys;
    let plant = |name: &str, key: &str, args: &[&str]| {
        let mut cmd = redis::cmd(name);
        cmd.arg(key).arg(args);
        cmd
    };
    let cases = vec![
        (
            k.ready_fifo(),
            plant("ZADD", &k.ready_fifo(), &["0", "x"]),
            Some(NewItem::new("plain")),
        ),
        (
            k.ready(),
            plant("RPUSH", &k.ready(), &["x"]),
            Some(NewItem::new("ranked").priority(1)),
        ),
        (
            k.scheduled(),
            plant("HSET", &k.scheduled(), &["x", "1"]),
            Some(NewItem::new("later").delay(Duration::from_secs(600))),
        ),
        (k.dead(), plant("RPUSH", &k.dead(), &["x"]), None),
        (
            k.lease_groups(),
            plant("SET", &k.lease_groups(), &["x"]),
            None,
        ),
        (
            k.lease_tokens(),
            plant("SADD", &k.lease_tokens(), &["x"]),
            None,
        ),
    ];
    assert_wrong_types_refused(&mut c, cases).await;
    let seq: Option<u64> = c.raw.get(c.keys.seq()).await.expect("get");
    assert_eq!(seq, Some(hi.get()), "no id was handed out");
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["hi", "p0", "p1"]));
    assert!(repairs.is_empty(), "{repairs:?}");
    assert!(c
        .backend
        .peek(&c.queue, ItemState::Ready, 10)
        .await
        .expect("peek")
        .is_empty());
    c.assert_consistent_and_empty().await;
}

/// A queue that still holds a key of layout 1 (`{p:q}:ready`,
/// `:scheduled`, `:leased`, `:dead`, of any type) would have its items
/// invisible to these scripts: every call is refused with `Corrupt` naming
/// layout 1, and nothing is written. Without the key the queue works.
async fn layout1_keys_are_refused(which: Which) {
    let Some(mut c) = case(which, "layout1").await else {
        return;
    };
    c.enqueue(1).await;
    let old = c.keys.layout1_indexes();
    assert!(old.iter().all(|k| k.starts_with(c.keys.tag())), "{old:?}");
    for (i, key) in old.iter().enumerate() {
        if i % 2 == 0 {
            let _: () = c.raw.set(key, "x").await.expect("set");
        } else {
            let _: i64 = c
                .raw
                .zadd(key, KeyLayout::member(ItemId::new(1)), 0)
                .await
                .expect("zadd");
        }
        let before = c.contents().await;
        assert!(
            before.contains_key(key) && before.contains_key(&c.keys.items()),
            "{key}: {before:?}"
        );
        let err = c
            .backend
            .enqueue(&c.queue, vec![NewItem::new("new")])
            .await
            .expect_err("enqueue refused");
        assert!(is_corrupt(&err, "key layout 1"), "{key}: {err:?}");
        assert!(!err.may_have_applied(), "{key}: {err:?}");
        let err = c
            .backend
            .claim_up_to(&c.queue, 5, TTL)
            .await
            .expect_err("claim refused");
        assert!(is_corrupt(&err, "key layout 1"), "{key}: {err:?}");
        let err = c.backend.reap(&c.queue).await.expect_err("reap refused");
        assert!(is_corrupt(&err, "key layout 1"), "{key}: {err:?}");
        let err = c.backend.stats(&c.queue).await.expect_err("stats refused");
        assert!(is_corrupt(&err, "key layout 1"), "{key}: {err:?}");
        assert_eq!(c.contents().await, before, "{key}: a refused call wrote");
        let _: i64 = c.raw.del(key).await.expect("del");
    }
    c.backend
        .enqueue(&c.queue, vec![NewItem::new("p1")])
        .await
        .expect("enqueue");
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p1"]));
    assert!(repairs.is_empty(), "{repairs:?}");
    c.assert_consistent_and_empty().await;
}

/// What a racing two-step reaper leaves behind: an expired lease pushed back
/// to Ready twice (a sorted set keeps it once) while still Leased (its
/// token in place). The claim drops the stray entry, one reap recovers the
/// lease once, and the item is then handed out once.
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
    let in_ranked: i64 = c.raw.zcard(c.keys.ready()).await.expect("zcard");
    assert_eq!(in_ranked, 1, "a sorted set cannot hold the id twice");

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
        has_repair(
            &first.repairs,
            ids[0],
            "duplicate entry: the item is leased"
        ),
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

/// The same leftovers when the racer also made the item Ready (took its
/// lease token) but left its lease group behind: the item is claimed once,
/// the old lease is lost, and the stale group recovers nothing when it
/// expires and leaves no trace.
async fn racing_reaper_rewrote_state(which: Which) {
    let Some(mut c) = case(which, "racer2").await else {
        return;
    };
    let ids = c.enqueue(1).await;
    let lost = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("lease");
    let member = KeyLayout::member(ids[0]);
    let _: i64 = c.raw.zadd(c.keys.ready(), &member, 0).await.expect("zadd");
    let n: i64 = c
        .raw
        .hdel(c.keys.lease_tokens(), ids[0].get().to_string())
        .await
        .expect("hdel");
    assert_eq!(n, 1, "the lease token was there");
    let groups: i64 = c.raw.zcard(c.keys.lease_groups()).await.expect("zcard");
    assert_eq!(groups, 1, "the old lease group is left behind");

    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0"]));
    assert!(repairs.is_empty(), "{repairs:?}");
    assert!(c
        .backend
        .ack(&lost.key)
        .await
        .is_err_and(|e| e.is_lease_lost()));
    let hooks = c.backend.test_hooks().expect("hooks");
    assert_eq!(
        hooks.expire_leases(&c.queue).await.expect("expire"),
        0,
        "the stale group holds no live lease"
    );
    let report = c.backend.reap(&c.queue).await.expect("reap");
    assert_eq!(report.recovered(), 0, "nothing left to recover");
    let groups: i64 = c.raw.zcard(c.keys.lease_groups()).await.expect("zcard");
    assert_eq!(groups, 0, "the reap dropped the stale group");
    for suffix in ["lease:ids", "lease:live"] {
        let n: i64 = c.raw.hlen(c.key(suffix)).await.expect("hlen");
        assert_eq!(n, 0, "{suffix} outlived the stale group");
    }
    c.assert_consistent_and_empty().await;
}

/// A reap with work to do (expired leases, one of them on its final
/// attempt; then also a due Scheduled item) meets each key it may touch
/// planted with the wrong type in turn: it fails with `Corrupt` and the
/// queue is left exactly as it was. With every key put back, the reap
/// recovers every lease.
async fn reap_with_work_refuses_wrong_types(which: Which) {
    let Some(mut c) = case(which, "reapbadtype").await else {
        return;
    };
    let items = vec![
        NewItem::new("again"),
        NewItem::new("last").max_attempts(1),
        NewItem::new("ranked").priority(3),
    ];
    c.backend.enqueue(&c.queue, items).await.expect("enqueue");
    let leases = c
        .backend
        .claim_up_to(&c.queue, 3, TTL)
        .await
        .expect("claim");
    assert_eq!(leases.leases.len(), 3);
    c.backend
        .enqueue_one(&c.queue, NewItem::new("dead").max_attempts(1))
        .await
        .expect("enqueue");
    let doomed = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("lease");
    c.backend.fail(&doomed.key, "no").await.expect("fail");
    c.backend
        .enqueue_one(
            &c.queue,
            NewItem::new("later").delay(Duration::from_secs(600)),
        )
        .await
        .expect("enqueue");
    let backend = Arc::clone(&c.backend);
    let hooks = backend.test_hooks().expect("hooks");
    assert_eq!(hooks.expire_leases(&c.queue).await.expect("expire"), 3);
    reap_refused_on_each_wrong_type(&mut c).await;
    assert_eq!(hooks.make_due(&c.queue).await.expect("due"), 1);
    reap_refused_on_each_wrong_type(&mut c).await;
    let report = c.backend.reap(&c.queue).await.expect("reap");
    assert_eq!((report.requeued, report.dead), (2, 1), "{report:?}");
    assert!(report.repairs.is_empty(), "{report:?}");
    let stats = c.backend.stats(&c.queue).await.expect("stats");
    assert_eq!(
        (stats.ready, stats.leased, stats.dead),
        (3, 0, 2),
        "{stats:?}"
    );
}

/// Plants each key a reap may touch with the wrong type in turn: the reap
/// fails with `Corrupt` having written nothing; then puts the key back.
async fn reap_refused_on_each_wrong_type(c: &mut Case) {
    let k = &c.keys;
    let counters = [k.dead_seq()];
    let structures = [
        k.ready_fifo(),
        k.ready(),
        k.scheduled(),
        k.lease_groups(),
        k.dead(),
        k.items(),
        k.lease_tokens(),
        k.attempts(),
        c.key("lease:ids"),
        c.key("lease:live"),
        c.key("lease:moved"),
        c.key("errors"),
    ];
    for key in structures.iter().chain(counters.iter()) {
        let saved: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut c.raw)
            .await
            .expect("dump");
        let _: i64 = c.raw.del(key).await.expect("del");
        if counters.contains(key) {
            let _: i64 = c.raw.rpush(key, "x").await.expect("plant");
        } else {
            let _: () = c.raw.set(key, "junk").await.expect("plant");
        }
        let before = c.contents().await;
        let err = c.backend.reap(&c.queue).await.expect_err("reap refused");
        assert!(matches!(err, Error::Corrupt { .. }), "{key}: {err:?}");
        assert_eq!(c.contents().await, before, "{key}: a refused reap wrote");
        let _: i64 = c.raw.del(key).await.expect("del");
        if let Some(saved) = saved {
            let _: () = redis::cmd("RESTORE")
                .arg(key)
                .arg(0)
                .arg(saved)
                .query_async(&mut c.raw)
                .await
                .expect("restore");
        }
    }
}

/// Lease groups that name ids without records (a real lease whose record
/// was deleted, and a planted group), and garbage in the lease indexes (a
/// group without an id list, ids that are no ids), are removed by reap:
/// the ids with a token but no record are reported missing, nothing is
/// recovered, and no lease index keeps a trace.
async fn reap_heals_lease_groups(which: Which) {
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
    let _: i64 = c
        .raw
        .hdel(c.keys.items(), ids[0].get().to_string())
        .await
        .expect("hdel");
    // A planted group, expired long ago: a leased id without a record
    // (its token in the group's family), and ids that are no ids.
    let group = "0123456789abcdef01234567";
    let ghost = ItemId::new(4242);
    let mut pipe = redis::pipe();
    pipe.zadd(c.keys.lease_groups(), group, 1)
        .ignore()
        .zadd(c.keys.lease_groups(), "not-a-group", 1)
        .ignore()
        .hset(c.key("lease:ids"), group, "4242,not-an-id,,-7,00042")
        .ignore()
        .hset(c.key("lease:live"), group, 5)
        .ignore()
        .hset(
            c.keys.lease_tokens(),
            ghost.get(),
            format!("{group}00000000"),
        )
        .ignore();
    let _: () = pipe.query_async(&mut c.raw).await.expect("plant");
    c.backend
        .test_hooks()
        .expect("hooks")
        .expire_leases(&c.queue)
        .await
        .expect("expire");
    let report = c.backend.reap(&c.queue).await.expect("reap");
    assert_eq!(report.recovered(), 0);
    for id in [ids[0], ghost] {
        assert!(
            has_repair(&report.repairs, id, "item is missing"),
            "{id}: {:?}",
            report.repairs
        );
    }
    // The garbage in the planted group's id list is reported too.
    assert!(
        has_repair(&report.repairs, ItemId::new(0), "malformed entry not-an-id"),
        "{:?}",
        report.repairs
    );
    let groups: i64 = c.raw.zcard(c.keys.lease_groups()).await.expect("zcard");
    assert_eq!(groups, 0, "every group left the index");
    for suffix in ["lease:ids", "lease:live"] {
        let n: i64 = c.raw.hlen(c.key(suffix)).await.expect("hlen");
        assert_eq!(n, 0, "{suffix} kept an entry");
    }
    for id in [ids[0], ghost] {
        let token: bool = c
            .raw
            .hexists(c.keys.lease_tokens(), id.get())
            .await
            .expect("hexists");
        assert!(!token, "the token of {id} is left");
    }
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
    // The malformed entries sort first (score -1): a claim that drops
    // them goes on to the items behind them, it never returns empty while
    // they wait.
    let first = c
        .backend
        .claim_up_to(&c.queue, 2, TTL)
        .await
        .expect("claim");
    let got: Vec<ItemId> = first.leases.iter().map(|l| l.id()).collect();
    assert_eq!(
        got, ids,
        "the claim that dropped malformed entries handed out the items behind them ({:?})",
        first.repairs
    );
    for l in &first.leases {
        c.backend.ack(&l.key).await.expect("ack");
    }
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, BTreeMap::new(), "each item was handed out once");
    let repairs: Vec<Repair> = first.repairs.into_iter().chain(repairs).collect();
    let malformed = repairs
        .iter()
        .filter(|r| r.problem.contains("malformed index entry"))
        .count();
    assert_eq!(malformed, spellings.len(), "{repairs:?}");
    let left: i64 = c.raw.zcard(c.keys.ready()).await.expect("zcard");
    assert_eq!(left, 0, "every near miss was removed");
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

/// A stray Ready entry of an item in another state (a Dead one, a
/// Scheduled one): transitions leave it (they touch only the index the
/// item is in), and the claim that meets it removes and reports it without
/// handing the item out; the item stays where it was, and comes back from
/// there once.
async fn stray_entry_elsewhere_is_healed(which: Which) {
    let Some(mut c) = case(which, "stray").await else {
        return;
    };
    let ids = c.enqueue(2).await;
    let later = c
        .backend
        .enqueue_one(
            &c.queue,
            NewItem::new("later").delay(Duration::from_secs(600)),
        )
        .await
        .expect("enqueue");
    let dead = c
        .backend
        .claim_one(&c.queue, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    assert_eq!(dead.id(), ids[0]);
    c.backend.fail(&dead.key, "boom").await.expect("fail");
    for id in [ids[0], later] {
        let _: i64 = c
            .raw
            .zadd(c.keys.ready(), KeyLayout::member(id), -1)
            .await
            .expect("zadd");
    }
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p1"]));
    assert!(
        has_repair(&repairs, ids[0], "duplicate entry: the item is dead"),
        "{repairs:?}"
    );
    assert!(
        has_repair(&repairs, later, "duplicate entry: the item is scheduled"),
        "{repairs:?}"
    );
    let left: i64 = c.raw.zcard(c.keys.ready()).await.expect("zcard");
    assert_eq!(left, 0, "the stray entries were removed");
    let info = c.backend.item(&c.queue, ids[0]).await.expect("item");
    assert_eq!(info.state, ItemState::Dead);
    let info = c.backend.item(&c.queue, later).await.expect("item");
    assert_eq!(info.state, ItemState::Scheduled);

    assert_eq!(
        c.backend
            .admin()
            .expect("admin")
            .redrive(&c.queue, 10)
            .await
            .expect("redrive"),
        1
    );
    let hooks = c.backend.test_hooks().expect("hooks");
    assert_eq!(hooks.make_due(&c.queue).await.expect("make due"), 1);
    let (seen, _) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "later"]));
    let dead: i64 = c.raw.zcard(c.keys.dead()).await.expect("zcard");
    assert_eq!(dead, 0);
    c.assert_consistent_and_empty().await;
}

/// A record whose enqueue time is not a plain decimal number (a word, a
/// float a number parser would take) is poison: the claim that meets it
/// quarantines it to Dead, reports it, and hands out the healthy items
/// around it; a redrive leaves it in Dead while the record stays unusable.
async fn record_with_bad_enqueue_time_is_quarantined(which: Which) {
    let Some(mut c) = case(which, "badenq").await else {
        return;
    };
    let ids = c.enqueue(4).await;
    let bad = [(ids[1], "soon"), (ids[2], "1.7e12")];
    for (id, enq) in bad {
        let rec: String = c
            .raw
            .hget(c.keys.items(), id.get().to_string())
            .await
            .expect("hget");
        let comma = rec.find(',').expect("a record has its commas");
        let planted = format!("{enq}{}", &rec[comma..]);
        let _: i64 = c
            .raw
            .hset(c.keys.items(), id.get().to_string(), planted)
            .await
            .expect("hset");
    }
    let (seen, repairs) = c.drain().await;
    assert_eq!(seen, once_each(&["p0", "p3"]));
    for (id, enq) in bad {
        let words = format!("quarantined: enqueue time field holds '{enq}'");
        assert!(has_repair(&repairs, id, &words), "{id}: {repairs:?}");
        let info = c.backend.item(&c.queue, id).await.expect("item");
        assert_eq!(info.state, ItemState::Dead, "{id}");
        let reason = info.last_error.unwrap_or_default();
        assert!(reason.starts_with("quarantined: "), "{id}: {reason}");
    }
    assert_eq!(
        c.backend
            .admin()
            .expect("admin")
            .redrive(&c.queue, 10)
            .await
            .expect("redrive"),
        0
    );
    let dead = c
        .backend
        .peek(&c.queue, ItemState::Dead, 10)
        .await
        .expect("peek");
    let mut dead: Vec<ItemId> = dead.iter().map(|i| i.id).collect();
    dead.sort();
    assert_eq!(dead, vec![ids[1], ids[2]]);
    c.backend
        .admin()
        .expect("admin")
        .purge(&c.queue)
        .await
        .expect("purge");
    c.assert_consistent_and_empty().await;
}

/// The takeover traces of the wrong type (`taken` a hash, `taken:floor` a
/// list) are hints, not items: claims and acks go on, `lease_fate` past an
/// expiry answers Lost (it claims nothing) instead of failing, and the next
/// reap that takes a lease replaces both keys, its trace kept; a lease
/// acked after that reap is told Finished again.
async fn wrong_type_takeover_traces_are_replaced(which: Which) {
    use leaseq_core::{ClaimSpec, LeaseFate};
    let Some(mut c) = case(which, "taken-type").await else {
        return;
    };
    let b = Arc::clone(&c.backend);
    c.enqueue(3).await;
    let () = c.raw.hset(c.keys.taken(), "x", "y").await.expect("plant");
    let () = c.raw.rpush(c.keys.taken_floor(), "x").await.expect("plant");
    let ls = b
        .claim(&c.queue, ClaimSpec::new(3, TTL).expect("spec"))
        .await
        .expect("a claim is not stopped by the traces")
        .leases;
    assert_eq!(ls.len(), 3);
    b.ack(&ls[0].key).await.expect("ack");
    let past = b.now().await.expect("now");
    assert_eq!(
        b.lease_fate(&ls[0].key, past).await.expect("fate"),
        LeaseFate::Lost,
        "traces that cannot be read tell nothing"
    );
    let hooks = b.test_hooks().expect("hooks");
    hooks.expire_leases(&c.queue).await.expect("expire");
    assert_eq!(b.reap(&c.queue).await.expect("reap").requeued, 2);
    let kind: String = redis::cmd("TYPE")
        .arg(c.keys.taken())
        .query_async(&mut c.raw)
        .await
        .expect("type");
    assert_eq!(kind, "zset");
    let taken = b.now().await.expect("now");
    assert_eq!(
        b.lease_fate(&ls[1].key, taken).await.expect("fate"),
        LeaseFate::Lost
    );
    common::assert_a_fresh_ack_is_finished(b.as_ref(), &c.queue).await;
}

for_each_client!(
    wrong_type_takeover_traces_are_replaced,
    ready_id_without_record,
    ready_id_also_leased,
    ready_id_listed_twice_in_one_claim,
    wrong_type_items_is_a_typed_error,
    wrong_type_index_is_a_typed_error,
    layout1_keys_are_refused,
    near_miss_spellings_of_an_id_are_malformed,
    racing_reaper_leftovers,
    racing_reaper_rewrote_state,
    reap_heals_lease_groups,
    reap_with_work_refuses_wrong_types,
    many_dangling_ids_never_stall,
    counter_reset_skips_taken_ids,
    stray_entry_elsewhere_is_healed,
    record_with_bad_enqueue_time_is_quarantined,
);
