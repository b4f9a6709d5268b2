//! The eviction policy re-read while running, on a private server and both
//! clients: once the reaper sees `CONFIG SET maxmemory-policy allkeys-lru`
//! the writes that add items are refused with `Error::Unavailable` and
//! write nothing, while leases keep working; once it sees `noeviction`
//! again they work again. With `allow_eviction(true)` nothing is refused;
//! the policy is read at most once per interval, on every master of a
//! cluster; where `CONFIG` is denied it is read from `INFO memory`, and
//! where both are denied nothing is refused.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::server::PrivateServer;
use common::Which;
use leaseq_core::schedule::{Fired, Schedule, ScheduleTick};
use leaseq_core::{Backend, BackendExt, Error, LeaseToken, NewItem, QueueName, Released};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;

const TTL: Duration = Duration::from_secs(60);

fn items(n: usize) -> Vec<NewItem> {
    (0..n).map(|i| NewItem::new(format!("item-{i}"))).collect()
}

fn set_policy(server: &PrivateServer, policy: &str) {
    server
        .command(&["CONFIG", "SET", "maxmemory-policy", policy])
        .expect("config set maxmemory-policy");
}

/// Fails unless `err` is the refusal: retryable, nothing applied, and it
/// names the policy and the way out.
fn assert_refusal(err: &Error, when: &str) {
    assert!(matches!(err, Error::Unavailable { .. }), "{when}: {err:?}");
    assert!(err.is_retryable() && !err.may_have_applied(), "{when}");
    let text = err.to_string();
    for words in ["allkeys-lru", "noeviction", "allow_eviction"] {
        assert!(text.contains(words), "{when}: {text}");
    }
}

/// A private server (tests here change its config), a backend on it that
/// reads the policy at every reap, a queue and its keys.
async fn setup(
    which: Which,
    config: impl FnOnce(RedisOptions) -> RedisOptions,
) -> Option<(PrivateServer, Arc<dyn Backend>, QueueName)> {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => {
            common::unavailable("a private redis-server", e);
            return None;
        }
    };
    let options = RedisOptions::new(server.url())
        .prefix("evict")
        .policy_check_interval(Duration::ZERO);
    let b = common::connect(which, config(options))
        .await
        .expect("connect");
    Some((server, b, QueueName::new("e").expect("valid")))
}

async fn evicting_policy_refuses_item_writes_until_noeviction(which: Which) {
    let Some((server, b, q)) = setup(which, |c| c).await else {
        return;
    };
    let keys = KeyLayout::new("evict", &q).expect("keys");
    let mut raw = common::raw(&server.url()).await;
    b.enqueue(&q, items(4)).await.expect("enqueue");
    let store = b.schedule_store().expect("schedules");
    let stored = store
        .put_schedule(
            &Schedule::every("tick", q.clone(), Duration::from_secs(1), "s").expect("schedule"),
        )
        .await
        .expect("put_schedule");
    let held = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    assert_eq!(held.len(), 2);

    set_policy(&server, "allkeys-lru");
    b.reap(&q).await.expect("reap reads the policy");

    let stats = b.stats(&q).await.expect("stats");
    let seq: Option<u64> = redis::cmd("GET")
        .arg(keys.seq())
        .query_async(&mut raw)
        .await
        .expect("get");
    let err = b.enqueue(&q, items(3)).await.expect_err("enqueue refused");
    assert_refusal(&err, "enqueue");
    let err = b
        .enqueue_once(&q, LeaseToken::random(), items(2))
        .await
        .expect_err("enqueue_once refused");
    assert_refusal(&err, "enqueue_once");
    let tick = ScheduleTick {
        name: stored.name.clone(),
        revision: stored.revision,
        at: b.now().await.expect("now"),
    };
    let err = store
        .fire_schedule(&tick, NewItem::new("s"))
        .await
        .expect_err("fire refused");
    assert_refusal(&err, "fire_schedule");
    assert_eq!(b.stats(&q).await.expect("stats"), stats, "nothing written");
    let after: Option<u64> = redis::cmd("GET")
        .arg(keys.seq())
        .query_async(&mut raw)
        .await
        .expect("get");
    assert_eq!(after, seq, "the id counter moved");

    // Leases keep working, so consumers drain the backlog.
    let ttl = Duration::from_secs(120).try_into().expect("ttl");
    b.extend(&held[0].key, ttl).await.expect("extend");
    b.ack(&held[0].key).await.expect("ack");
    assert_eq!(
        b.release(&held[1].key, Duration::ZERO)
            .await
            .expect("release"),
        Released::Ready
    );
    let more = b.claim_up_to(&q, 3, TTL).await.expect("claim").leases;
    assert_eq!(more.len(), 3);
    b.fail(&more[0].key, "drained").await.expect("fail");
    for l in &more[1..] {
        b.ack(&l.key).await.expect("ack");
    }
    b.reap(&q).await.expect("reap");
    let drained = b.stats(&q).await.expect("stats");
    assert_eq!((drained.ready, drained.leased, drained.dead), (0, 0, 1));

    set_policy(&server, "noeviction");
    b.reap(&q).await.expect("reap reads the policy");
    assert_eq!(
        b.enqueue(&q, items(3))
            .await
            .expect("enqueue works again")
            .len(),
        3
    );
    b.enqueue_once(&q, LeaseToken::random(), items(1))
        .await
        .expect("enqueue_once works again");
    let fired = store
        .fire_schedule(&tick, NewItem::new("s"))
        .await
        .expect("fire works again");
    assert!(matches!(fired, Fired::Enqueued(_)), "{fired:?}");
    assert_eq!(b.stats(&q).await.expect("stats").ready, 5);
}

async fn allowed_eviction_refuses_nothing(which: Which) {
    let Some((server, b, q)) = setup(which, |c| c.allow_eviction(true)).await else {
        return;
    };
    b.enqueue(&q, items(1)).await.expect("enqueue");
    for policy in ["allkeys-lru", "volatile-ttl"] {
        set_policy(&server, policy);
        b.reap(&q).await.expect("reap");
        b.enqueue(&q, items(2)).await.expect("enqueue");
        b.enqueue_once(&q, LeaseToken::random(), items(1))
            .await
            .expect("enqueue_once");
    }
    assert_eq!(b.stats(&q).await.expect("stats").ready, 7);
}

/// With a 2 s interval a reap right after the change does not read the
/// policy (connect just did); one after the interval does.
async fn the_policy_is_read_once_per_interval(which: Which) {
    let every = Duration::from_secs(2);
    let Some((server, b, q)) = setup(which, |c| c.policy_check_interval(every)).await else {
        return;
    };
    set_policy(&server, "allkeys-lru");
    b.reap(&q).await.expect("reap");
    b.enqueue(&q, items(1)).await.expect("not read yet");
    tokio::time::sleep(every + Duration::from_millis(100)).await;
    b.reap(&q).await.expect("reap");
    let err = b.enqueue(&q, items(1)).await.expect_err("read now");
    assert_refusal(&err, "after the interval");
    set_policy(&server, "noeviction");
    tokio::time::sleep(every + Duration::from_millis(100)).await;
    // A refused write makes the due read itself: no reap needed.
    b.enqueue(&q, items(1)).await.expect("lifted");
}

/// An ACL user that may not run `CONFIG`: the policy comes from `INFO
/// memory`. One that may run neither: nothing is refused (as at connect).
async fn denied_config_reads_info_or_refuses_nothing(which: Which) {
    let Some((server, admin, q)) = setup(which, |c| c).await else {
        return;
    };
    drop(admin);
    let user = |name: &str, denied: &[&str]| {
        let mut args = vec!["ACL", "SETUSER", name, "on", ">pw", "~*", "&*", "+@all"];
        args.extend_from_slice(denied);
        server.command(&args).expect("acl setuser");
        RedisOptions::new(format!("redis://{name}:pw@127.0.0.1:{}", server.port()))
            .prefix("evict")
            .policy_check_interval(Duration::ZERO)
    };
    let info_only = common::connect(which, user("info", &["-config"]))
        .await
        .expect("connects without CONFIG");
    let blind = common::connect(which, user("blind", &["-config", "-info"]))
        .await
        .expect("connects without CONFIG and INFO");
    set_policy(&server, "allkeys-lru");
    info_only.reap(&q).await.expect("reap");
    blind.reap(&q).await.expect("reap");
    let err = info_only
        .enqueue(&q, items(1))
        .await
        .expect_err("INFO memory shows the policy");
    assert_refusal(&err, "read from INFO");
    blind
        .enqueue(&q, items(1))
        .await
        .expect("an unreadable policy refuses nothing");
    set_policy(&server, "noeviction");
    info_only.reap(&q).await.expect("reap");
    info_only.enqueue(&q, items(1)).await.expect("lifted");
}

/// On a cluster every master is read: one that turns to an evicting
/// policy refuses the writes that add items (on every queue: the policy is
/// the operator's mistake, not a queue's), and is named.
async fn one_evicting_master_refuses_writes(which: Which) {
    let cluster = match common::cluster::LocalCluster::start() {
        Ok(c) => c,
        Err(e) => return common::unavailable("a local Redis Cluster", e),
    };
    let node = |port: u16, policy: &str| {
        leaseq_testkit::redis_server::command(
            &format!("redis://127.0.0.1:{port}"),
            &["CONFIG", "SET", "maxmemory-policy", policy],
            Duration::from_secs(2),
        )
        .expect("config set maxmemory-policy")
    };
    let config = cluster
        .config("evict")
        .policy_check_interval(Duration::ZERO);
    let b = common::connect(which, config).await.expect("connect");
    let q = QueueName::new("e").expect("valid");
    b.enqueue(&q, items(2)).await.expect("enqueue");
    let last = cluster.ports[2];
    node(last, "allkeys-random");
    b.reap(&q).await.expect("reap reads every master");
    let err = b.enqueue(&q, items(1)).await.expect_err("refused");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&last.to_string()) && text.contains("allkeys-random"),
        "names the node: {text}"
    );
    let l = b.claim_up_to(&q, 1, TTL).await.expect("claim").leases;
    b.ack(&l[0].key).await.expect("ack");
    node(last, "noeviction");
    b.reap(&q).await.expect("reap");
    b.enqueue(&q, items(1)).await.expect("lifted");
    assert_eq!(b.stats(&q).await.expect("stats").ready, 2);
}

for_each_client!(
    one_evicting_master_refuses_writes,
    evicting_policy_refuses_item_writes_until_noeviction,
    allowed_eviction_refuses_nothing,
    the_policy_is_read_once_per_interval,
    denied_config_reads_info_or_refuses_nothing,
);
