//! A private server at its `maxmemory` under `noeviction`, on both
//! clients: enqueues are refused with `Error::Full` and write nothing,
//! while claim, extend, release, ack, ack_many, fail, reap, redrive,
//! inspection and the Control group keep working (their scripts carry
//! `#!lua flags=allow-oom`)
//! until the whole backlog is drained; then enqueues work again.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{
    Backend, BackendExt, Cancelled, Error, ItemState, LeaseToken, NewItem, QueueName, Released,
    WorkerEntry,
};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;

const TTL: Duration = Duration::from_secs(60);
const PAYLOAD: usize = 2048;
const BATCH: usize = 50;

fn used_memory(server: &PrivateServer) -> u64 {
    let info = match server.command(&["INFO", "memory"]).expect("info") {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO memory answered {other:?}"),
    };
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

fn batch(n: usize, from: usize) -> (Vec<String>, Vec<NewItem>) {
    let names: Vec<String> = (from..from + n).map(|i| format!("item-{i:06}")).collect();
    let items = names
        .iter()
        .map(|s| {
            let mut p = s.clone().into_bytes();
            p.resize(PAYLOAD, b'.');
            NewItem::new(p)
        })
        .collect();
    (names, items)
}

fn name_of(payload: &[u8]) -> String {
    String::from_utf8_lossy(&payload[..11.min(payload.len())]).into_owned()
}

/// Fails unless an enqueue and a new `enqueue_once` are refused with
/// `Full`, and nothing was written: same counts, same id counter.
async fn assert_full_writes_nothing(
    b: &dyn Backend,
    q: &QueueName,
    raw: &mut redis::aio::MultiplexedConnection,
    keys: &KeyLayout,
    when: &str,
) {
    let stats = b.stats(q).await.expect("stats on a full server");
    let seq: Option<u64> = redis::cmd("GET")
        .arg(keys.seq())
        .query_async(raw)
        .await
        .expect("get");
    let err = b
        .enqueue(q, batch(3, 900_000).1)
        .await
        .expect_err("enqueue on a full server");
    assert!(matches!(err, Error::Full { .. }), "{when}: {err:?}");
    assert!(err.is_retryable() && !err.may_have_applied(), "{when}");
    let err = b
        .enqueue_once(q, LeaseToken::random(), batch(2, 910_000).1)
        .await
        .expect_err("enqueue_once on a full server");
    assert!(matches!(err, Error::Full { .. }), "{when}: {err:?}");
    assert_eq!(b.stats(q).await.expect("stats"), stats, "{when}");
    let after: Option<u64> = redis::cmd("GET")
        .arg(keys.seq())
        .query_async(raw)
        .await
        .expect("get");
    assert_eq!(after, seq, "{when}: the id counter moved");
}

async fn full_server_drains(which: Which) {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let config = RedisOptions::new(server.url())
        .prefix("mem")
        .test_hooks(true);
    let b: Arc<dyn Backend> = common::connect(which, config).await.expect("connect");
    let q = QueueName::new("m").expect("valid");
    let keys = KeyLayout::new("mem", &q).expect("keys");
    let mut raw = common::raw(&server.url()).await;

    // A request written before the server fills up.
    let request = LeaseToken::random();
    let (early, early_items) = batch(2, 0);
    let first = b
        .enqueue_once(&q, request, early_items.clone())
        .await
        .expect("enqueue_once");

    let limit = used_memory(&server) + 3 * 1024 * 1024;
    server
        .command(&["CONFIG", "SET", "maxmemory", &limit.to_string()])
        .expect("config set maxmemory");
    let mut enqueued: Vec<String> = early;
    let mut next = 2;
    loop {
        let (names, items) = batch(BATCH, next);
        next += BATCH;
        match b.enqueue(&q, items).await {
            Ok(out) => {
                assert_eq!(out.len(), BATCH);
                enqueued.extend(names);
            }
            Err(Error::Full { .. }) => break,
            Err(e) => panic!("filling: {e:?}"),
        }
        assert!(next < 200_000, "the server never filled up");
    }
    let total = enqueued.len();
    assert!(total > 500, "only {total} items fit");
    // Pin the server just under what it holds: memory the server frees on
    // its own (client buffers, script scratch space) must not let a later
    // enqueue squeeze in.
    let pinned = used_memory(&server).saturating_sub(256 * 1024).max(1);
    server
        .command(&["CONFIG", "SET", "maxmemory", &pinned.to_string()])
        .expect("config set maxmemory");
    assert_full_writes_nothing(b.as_ref(), &q, &mut raw, &keys, "at the limit").await;
    // A request already written is answered from what it stored.
    let again = b
        .enqueue_once(&q, request, early_items)
        .await
        .expect("a written request answers on a full server");
    assert_eq!(again, first);

    // At the limit: claim, extend, release, fail, ack.
    let mut acked: BTreeMap<String, u32> = BTreeMap::new();
    let mut leases = b.claim_up_to(&q, 4, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), 4);
    let extended = b
        .extend(
            &leases[0].key,
            Duration::from_secs(120).try_into().expect("ttl"),
        )
        .await
        .expect("extend on a full server");
    assert!(extended.expires_at > leases[0].expires_at);
    assert_eq!(
        b.release(&leases[1].key, Duration::ZERO)
            .await
            .expect("release"),
        Released::Ready
    );
    b.fail(&leases[2].key, "to redrive").await.expect("fail");
    for l in [&leases[0], &leases[3]] {
        b.ack(&l.key).await.expect("ack on a full server");
        *acked.entry(name_of(&l.payload)).or_insert(0) += 1;
    }
    leases.clear();

    // Keep the server over its limit while acks free memory, so every
    // call below runs on a full server. A script cache flushed on the way
    // is loaded again by `EVAL` (the shebang lets it run).
    server
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .expect("config set maxmemory");
    server.command(&["SCRIPT", "FLUSH"]).expect("script flush");
    assert_full_writes_nothing(b.as_ref(), &q, &mut raw, &keys, "over the limit").await;

    // A lease that expires: reap brings it back.
    let lost = b.claim_up_to(&q, 1, TTL).await.expect("claim").leases;
    assert_eq!(lost.len(), 1);
    let hooks = b.test_hooks().expect("hooks");
    assert_eq!(hooks.expire_leases(&q).await.expect("expire"), 1);
    let report = b.reap(&q).await.expect("reap on a full server");
    assert_eq!(report.requeued, 1, "{report:?}");
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&q, 10)
            .await
            .expect("redrive on a full server"),
        1
    );
    assert_eq!(
        b.peek(&q, ItemState::Ready, 3).await.expect("peek").len(),
        3
    );

    // Control over the limit: pause and resume, progress, snooze, run now,
    // and a cancel request that the lease's ack carries out. A worker's
    // registration adds data and is refused; the listing runs.
    let control = b.control().expect("control");
    control.pause(&q).await.expect("pause on a full server");
    assert!(b.claim_up_to(&q, 1, TTL).await.expect("claim").paused);
    control.resume(&q).await.expect("resume on a full server");
    let l = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    assert_eq!(l.len(), 2);
    control
        .progress(&l[0].key, "half".into())
        .await
        .expect("progress on a full server");
    let snoozed = control
        .snooze(&l[0].key, Duration::from_secs(600))
        .await
        .expect("snooze on a full server");
    assert_eq!(snoozed, Released::Scheduled);
    assert!(control.run_now(&q, l[0].id()).await.expect("run now"));
    let asked = control.cancel(&q, l[1].id()).await.expect("cancel");
    assert_eq!(asked, Cancelled::Requested);
    b.ack(&l[1].key).await.expect("ack of a cancelled lease");
    *acked.entry(name_of(&l[1].payload)).or_insert(0) += 1;
    let registry = b.registry().expect("registry");
    let entry = WorkerEntry::new("w1", &q, 1, b.now().await.expect("now"));
    let refused = registry.register(&entry, TTL).await;
    assert!(matches!(refused, Err(Error::Full { .. })), "{refused:?}");
    assert!(registry.workers().await.expect("workers").is_empty());

    let mut rounds = 0;
    loop {
        let claimed = b.claim_up_to(&q, 100, TTL).await.expect("claim");
        if claimed.leases.is_empty() {
            break;
        }
        assert!(claimed.repairs.is_empty(), "{:?}", claimed.repairs);
        let (one, rest) = claimed.leases.split_at(1);
        b.ack(&one[0].key).await.expect("ack");
        let keys_of: Vec<_> = rest.iter().map(|l| l.key.clone()).collect();
        for r in b.ack_many(&keys_of).await.expect("ack_many") {
            r.expect("each ack");
        }
        for l in &claimed.leases {
            *acked.entry(name_of(&l.payload)).or_insert(0) += 1;
        }
        rounds += 1;
        if rounds % 4 == 0 {
            assert_full_writes_nothing(b.as_ref(), &q, &mut raw, &keys, "while draining").await;
        }
    }
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
    assert!(used_memory(&server) > 1, "still over the limit");
    let want: BTreeMap<String, u32> = enqueued.iter().map(|n| (n.clone(), 1)).collect();
    assert_eq!(acked.len(), want.len(), "every item acked");
    assert_eq!(acked, want, "each item acked exactly once");

    server
        .command(&["CONFIG", "SET", "maxmemory", "0"])
        .expect("config set maxmemory");
    let out = b
        .enqueue(&q, batch(3, 0).1)
        .await
        .expect("enqueue works again");
    assert_eq!(out.len(), 3);
    println!(
        "{}: {total} items of {PAYLOAD} bytes filled the server, drained in {rounds} rounds",
        which.name()
    );
}

#[cfg(feature = "redis-rs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_full_server_drains() {
    full_server_drains(Which::RedisRs).await;
}

#[cfg(feature = "fred")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_full_server_drains() {
    full_server_drains(Which::Fred).await;
}
