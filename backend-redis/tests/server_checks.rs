//! The checks made at connect, on both clients: an evicting
//! `maxmemory-policy` is refused unless allowed, durability comes from the
//! server's persistence settings (on every master of a cluster), and a
//! server whose `CONFIG` is denied is accepted with a warning.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::time::Duration;

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{Backend, BackendExt, Error, NewItem, QueueName};
use leaseq_redis::RedisOptions;

async fn round_trip(b: &dyn Backend) {
    let q = QueueName::new("chk").expect("valid");
    b.enqueue(&q, vec![NewItem::new("x")])
        .await
        .expect("enqueue");
    let l = b
        .claim_one(&q, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("a lease");
    b.ack(&l.key).await.expect("ack");
}

/// `allkeys-lru` (any policy but `noeviction`) is refused with a clear
/// `InvalidInput`; `allow_eviction(true)` connects anyway.
async fn evicting_policy_is_refused(which: Which) {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    server
        .command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .expect("config set");
    let err = common::connect(which, RedisOptions::new(server.url()))
        .await
        .expect_err("an evicting server is refused");
    let Error::InvalidInput { what } = &err else {
        panic!("{err:?}");
    };
    for words in [
        "maxmemory-policy",
        "allkeys-lru",
        "noeviction",
        "allow_eviction",
    ] {
        assert!(what.contains(words), "{what}");
    }
    let b = common::connect(which, RedisOptions::new(server.url()).allow_eviction(true))
        .await
        .expect("allowed");
    round_trip(b.as_ref()).await;
    server
        .command(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"])
        .expect("config set");
    let err = common::connect(which, RedisOptions::new(server.url()))
        .await
        .expect_err("volatile policies evict request keys");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

/// Durable only with `appendonly yes` and `appendfsync always`, as the
/// server says; `durable(false)` turns it off, `durable(true)` cannot turn
/// it on.
async fn durability_comes_from_the_server(which: Which) {
    let durable = match PrivateServer::start() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let caps = |b: &dyn Backend| b.capabilities().durable;
    let b = common::connect(which, RedisOptions::new(durable.url()))
        .await
        .expect("connect");
    assert!(caps(b.as_ref()), "appendonly yes + appendfsync always");
    let b = common::connect(which, RedisOptions::new(durable.url()).durable(false))
        .await
        .expect("connect");
    assert!(!caps(b.as_ref()), "overridden off");
    durable
        .command(&["CONFIG", "SET", "appendfsync", "everysec"])
        .expect("config set");
    let b = common::connect(which, RedisOptions::new(durable.url()).durable(true))
        .await
        .expect("connect");
    assert!(!caps(b.as_ref()), "everysec loses up to a second of writes");

    let volatile = PrivateServer::start_volatile().expect("a second server");
    let b = common::connect(which, RedisOptions::new(volatile.url()).durable(true))
        .await
        .expect("connect");
    assert!(!caps(b.as_ref()), "no persistence");
    round_trip(b.as_ref()).await;
}

/// An ACL user that may not run `CONFIG` (nor `INFO`): the settings cannot
/// be read, so the backend connects with a warning, works, and reports
/// itself not durable even on a durable server.
async fn denied_config_is_tolerated(which: Which) {
    let server = match PrivateServer::start() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    server
        .command(&[
            "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-config", "-info",
        ])
        .expect("acl setuser");
    let url = format!("redis://app:pw@127.0.0.1:{}", server.port());
    let b = common::connect(which, RedisOptions::new(url))
        .await
        .expect("connects without CONFIG");
    assert!(!b.capabilities().durable, "unverified: not durable");
    round_trip(b.as_ref()).await;
}

/// On a cluster every master is read: one master with an evicting policy
/// refuses the connect, and durability needs every master durable.
async fn every_master_is_checked(which: Which) {
    let cluster = match common::cluster::LocalCluster::start() {
        Ok(c) => c,
        Err(e) => return common::unavailable("a local Redis Cluster", e),
    };
    let node = |port: u16, args: &[&str]| {
        leaseq_testkit::redis_server::command(
            &format!("redis://127.0.0.1:{port}"),
            args,
            Duration::from_secs(2),
        )
        .expect("node command")
    };
    let config = || cluster.config("chk");
    let b = common::connect(which, config()).await.expect("connect");
    assert!(!b.capabilities().durable, "the nodes run without an AOF");
    round_trip(b.as_ref()).await;

    let last = cluster.ports[2];
    node(
        last,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
    );
    let err = common::connect(which, config())
        .await
        .expect_err("one evicting master");
    let Error::InvalidInput { what } = &err else {
        panic!("{err:?}");
    };
    assert!(what.contains(&last.to_string()), "names the node: {what}");
    common::connect(which, config().allow_eviction(true))
        .await
        .expect("allowed");
    node(last, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);

    for (i, &p) in cluster.ports.iter().enumerate() {
        node(p, &["CONFIG", "SET", "appendfsync", "always"]);
        node(p, &["CONFIG", "SET", "appendonly", "yes"]);
        let b = common::connect(which, config()).await.expect("connect");
        let all = i + 1 == cluster.ports.len();
        assert_eq!(
            b.capabilities().durable,
            all,
            "{} of 3 masters durable",
            i + 1
        );
    }
}

for_each_client!(
    evicting_policy_is_refused,
    durability_comes_from_the_server,
    denied_config_is_tolerated,
    every_master_is_checked,
);
