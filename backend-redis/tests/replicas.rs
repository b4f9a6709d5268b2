//! Replica waits and vanished leases on one server, on both clients:
//! - with `wait_for_replicas`, writes are `Ok` while the replica is in
//!   sync and maybe-applied (`Error::OutcomeUnknown`) once it is gone, reads go
//!   on, and `durable` is reported only when the wait covers the replicas;
//! - a lease whose item was taken away before it expired, by no call of
//!   its own, is settled as `LeaseVanished`; one a reaper and another
//!   worker took stays `LeaseLost`.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use leaseq_core::BackendExt as _;
use std::time::{Duration, Instant};

use common::server::PrivateServer;
use common::Which;
use leaseq_core::settle::{Held, Settle};
use leaseq_core::{Backend, ClaimSpec, Error, Lease, NewItem, QueueName};
use leaseq_redis::RedisOptions;

fn text(v: redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => format!("{other:?}"),
    }
}

/// Polls `f` for up to 15 s.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(Instant::now() < end, "{what}: not within 15 s");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn held(l: &Lease) -> Held {
    Held {
        key: l.key.clone(),
        until: l.expires_at,
    }
}

/// Writes wait for the replica: `Ok` while it is in sync, maybe applied
/// once it is gone (and applied on the master all the same); reads never
/// wait. `durable` needs the wait to cover the replica.
async fn writes_wait_for_the_replica(which: Which) {
    let (master, replica) = match (PrivateServer::start(), PrivateServer::start_volatile()) {
        (Ok(m), Ok(r)) => (m, r),
        (Err(e), _) | (_, Err(e)) => return common::unavailable("a private redis-server", e),
    };
    master
        .command(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
        .expect("config");
    let port = master.port().to_string();
    replica
        .command(&["REPLICAOF", "127.0.0.1", &port])
        .expect("replicaof");
    // In sync once a write on one connection is acknowledged by `WAIT`.
    wait_for("the replica acknowledges writes", || {
        redis::Client::open(master.url())
            .and_then(|c| c.get_connection())
            .and_then(|mut c| {
                redis::pipe()
                    .cmd("SET")
                    .arg("probe")
                    .arg(1)
                    .cmd("WAIT")
                    .arg(1)
                    .arg(100)
                    .query::<(String, i64)>(&mut c)
            })
            .is_ok_and(|(_, acked)| acked == 1)
    });

    let config = RedisOptions::new(master.url()).prefix(common::fresh_prefix("wait"));
    let plain = common::connect(which, config.clone())
        .await
        .expect("connect");
    assert!(
        !plain.capabilities().durable,
        "a replica that writes do not wait for can lose them"
    );
    let waiting = config.wait_for_replicas(1, Duration::from_secs(2));
    let b = common::connect(which, waiting).await.expect("connect");
    assert!(
        b.capabilities().durable,
        "appendfsync always, and the wait covers the replica"
    );

    let q = QueueName::new("w").expect("name");
    b.enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue with a replica in sync");
    let spec = ClaimSpec::new(1, Duration::from_secs(60)).expect("spec");
    let lease = b.claim(&q, spec).await.expect("claim").leases.remove(0);
    b.ack(&lease.key).await.expect("ack with a replica in sync");

    replica
        .command(&["REPLICAOF", "NO", "ONE"])
        .expect("detach");
    wait_for("the master sees no replica", || {
        master
            .command(&["INFO", "replication"])
            .is_ok_and(|v| text(v).contains("connected_slaves:0"))
    });
    let e = b
        .enqueue(&q, vec![NewItem::new("c")])
        .await
        .expect_err("no replica acknowledges");
    assert!(
        matches!(e, Error::OutcomeUnknown { .. }) && e.may_have_applied(),
        "{e:?}"
    );
    let stats = b.stats(&q).await.expect("reads do not wait");
    assert_eq!(
        stats.ready, 2,
        "the write was applied on the master: {stats:?}"
    );
}

/// A lease whose item was purged while it ran is settled as vanished (the
/// backend itself answers `LeaseLost`); one that expired, was reaped and
/// was claimed by another worker stays `LeaseLost`.
async fn a_lease_the_store_lost_is_vanished(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "vanished").await else {
        return;
    };
    let settle = Settle::new();
    let q = QueueName::new("v").expect("name");
    b.enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue");
    let spec = ClaimSpec::new(2, Duration::from_secs(60)).expect("spec");
    let leases = b.claim(&q, spec).await.expect("claim").leases;
    assert_eq!(b.admin().expect("admin").purge(&q).await.expect("purge"), 2);
    let raw = b.ack(&leases[0].key).await.expect_err("gone");
    assert!(matches!(raw, Error::LeaseLost { .. }), "{raw:?}");
    let e = settle
        .ack(b.as_ref(), &held(&leases[0]))
        .await
        .expect_err("gone");
    assert!(
        matches!(e, Error::LeaseVanished { .. }) && e.is_lease_lost(),
        "{e:?}"
    );
    let many = settle
        .ack_many(b.as_ref(), &[held(&leases[1])])
        .await
        .expect("ack_many");
    assert!(
        matches!(many[0], Err(Error::LeaseVanished { .. })),
        "{many:?}"
    );

    b.enqueue(&q, vec![NewItem::new("c")])
        .await
        .expect("enqueue");
    let short = ClaimSpec::new(1, Duration::from_millis(50)).expect("spec");
    let old = b.claim(&q, short).await.expect("claim").leases.remove(0);
    while b.now().await.expect("now") <= old.expires_at {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.reap(&q).await.expect("reap").requeued, 1);
    let spec = ClaimSpec::new(1, Duration::from_secs(60)).expect("spec");
    let taker = b.claim(&q, spec).await.expect("claim").leases.remove(0);
    let e = settle
        .ack(b.as_ref(), &held(&old))
        .await
        .expect_err("taken");
    assert!(matches!(e, Error::LeaseLost { .. }), "{e:?}");
    b.ack(&taker.key).await.expect("the taker acks");
}

for_each_client!(
    writes_wait_for_the_replica,
    a_lease_the_store_lost_is_vanished
);
