//! Behaviour specific to the PostgreSQL backend, beyond the shared suite.

mod common;

use std::time::Duration;

use leaseq_core::{Backend, BackendExt, ClaimSpec, Error, ItemState, NewItem, QueueName, Released};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

#[tokio::test]
async fn enqueue_claim_ack_round_trip_with_fencing() {
    let Some(db) = common::TestDb::new("basic").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("jobs");
    let out = b
        .enqueue(
            &queue,
            vec![
                NewItem::new("a"),
                NewItem::new("b").priority(5),
                NewItem::new("c"),
            ],
        )
        .await
        .expect("enqueue");
    assert_eq!(out.len(), 3);
    let claimed = b
        .claim(
            &queue,
            ClaimSpec::new(10, Duration::from_secs(30)).expect("spec"),
        )
        .await
        .expect("claim");
    let payloads: Vec<_> = claimed.leases.iter().map(|l| l.payload.clone()).collect();
    assert_eq!(payloads, vec!["b", "a", "c"]);
    assert!(claimed.leases.iter().all(|l| l.attempts == 1));
    let first = &claimed.leases[0];
    let now = b.now().await.expect("now");
    assert!(first.expires_at > now);
    b.ack(&first.key).await.expect("ack");
    assert!(matches!(
        b.ack(&first.key).await,
        Err(Error::LeaseLost { .. })
    ));
    let stats = b.stats(&queue).await.expect("stats");
    assert_eq!((stats.ready, stats.leased), (0, 2));
    assert_eq!(
        b.release(&claimed.leases[1].key, Duration::ZERO)
            .await
            .expect("release"),
        Released::Ready
    );
    assert!(b
        .extend(
            &claimed.leases[1].key,
            leaseq_core::LeaseTtl::new(Duration::from_secs(1)).expect("ttl")
        )
        .await
        .is_err_and(|e| e.is_lease_lost()));
    b.fail(&claimed.leases[2].key, "boom").await.expect("fail");
    let dead = b.peek(&queue, ItemState::Dead, 10).await.expect("peek");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("boom"));
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&queue, 10)
            .await
            .expect("redrive"),
        1
    );
    assert_eq!(b.stats(&queue).await.expect("stats").ready, 2);
    assert_eq!(
        b.admin()
            .expect("admin")
            .purge(&queue)
            .await
            .expect("purge"),
        2
    );
}

#[tokio::test]
async fn dedup_reap_schedule_and_repair() {
    let Some(db) = common::TestDb::new("misc").await else {
        return;
    };
    let b = &db.backend;
    let hooks = b.test_hooks().expect("hooks");
    let queue = q("misc");
    let out = b
        .enqueue(
            &queue,
            vec![
                NewItem::new("x").dedup_key("k"),
                NewItem::new("y").dedup_key("k"),
            ],
        )
        .await
        .expect("enqueue");
    assert_eq!(out[0].id, out[1].id);
    assert!(!out[0].deduplicated && out[1].deduplicated);
    let again = b
        .enqueue_one(&queue, NewItem::new("z").dedup_key("k"))
        .await
        .expect("enqueue");
    assert_eq!(again, out[0].id);

    let lease = b
        .claim_one(&queue, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("one");
    assert_eq!(hooks.expire_leases(&queue).await.expect("expire"), 1);
    let r = b.reap(&queue).await.expect("reap");
    assert_eq!(r.requeued, 1);
    assert!(b.ack(&lease.key).await.is_err_and(|e| e.is_lease_lost()));

    b.enqueue_one(
        &queue,
        NewItem::new("later").delay(Duration::from_secs(3600)),
    )
    .await
    .expect("enqueue");
    assert_eq!(b.stats(&queue).await.expect("stats").scheduled, 1);
    assert_eq!(hooks.make_due(&queue).await.expect("due"), 1);
    hooks
        .plant_dangling_ready(&queue, leaseq_core::ItemId::new(1_000_000))
        .await
        .expect("plant");
    let snap = hooks.snapshot(&queue).await.expect("snapshot");
    assert_eq!(snap.violations().len(), 1, "{:?}", snap.violations());
    let claimed = b
        .claim(
            &queue,
            ClaimSpec::new(2, Duration::from_secs(30)).expect("spec"),
        )
        .await
        .expect("claim");
    assert_eq!(claimed.repairs.len(), 1);
    assert_eq!(claimed.leases.len(), 2);
    assert!(hooks
        .snapshot(&queue)
        .await
        .expect("snapshot")
        .violations()
        .is_empty());
    let next = b
        .enqueue_one(&queue, NewItem::new("after"))
        .await
        .expect("enqueue");
    assert!(next.get() > 1_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_dedup_batches_never_deadlock() {
    let Some(db) = common::TestDb::new("cross").await else {
        return;
    };
    let queue = q("cross");
    for round in 0..20 {
        let keys: Vec<String> = (0..20).map(|k| format!("r{round}-k{k}")).collect();
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let (b, queue) = (db.backend.clone(), queue.clone());
                let mut keys = keys.clone();
                if t % 2 == 1 {
                    keys.reverse();
                }
                tokio::spawn(async move {
                    let items = keys
                        .iter()
                        .map(|k| NewItem::new(k.clone()).dedup_key(k.clone()))
                        .collect();
                    b.enqueue(&queue, items).await
                })
            })
            .collect();
        for t in tasks {
            t.await
                .expect("join")
                .expect("no enqueue fails (no deadlock)");
        }
    }
    assert_eq!(
        db.backend.stats(&queue).await.expect("stats").ready,
        20 * 20
    );
}

#[tokio::test]
async fn concurrent_batches_without_keys_get_their_own_ids_in_batch_order() {
    let Some(db) = common::TestDb::new("plain_batches").await else {
        return;
    };
    let queue = q("plain");
    let batches = (0..4).map(|b| {
        let backend = db.backend.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            let items = (0..50).map(|i| NewItem::new(format!("{b}-{i}"))).collect();
            (b, backend.enqueue(&queue, items).await.expect("enqueue"))
        })
    });
    let mut seen = std::collections::HashSet::new();
    for task in batches.collect::<Vec<_>>() {
        let (b, out) = task.await.expect("task");
        assert_eq!(out.len(), 50);
        assert!(out.windows(2).all(|w| w[0].id < w[1].id), "batch {b}");
        for (i, e) in out.iter().enumerate() {
            assert!(!e.deduplicated);
            assert!(seen.insert(e.id));
            let info = db.backend.item(&queue, e.id).await.expect("item");
            assert_eq!(info.payload, format!("{b}-{i}"));
            assert_eq!(info.state, ItemState::Ready);
        }
    }
    // A delayed item in a batch without keys is Scheduled.
    let out = db
        .backend
        .enqueue(
            &queue,
            vec![
                NewItem::new("now"),
                NewItem::new("later").delay(Duration::from_secs(60)),
            ],
        )
        .await
        .expect("enqueue");
    let later = db.backend.item(&queue, out[1].id).await.expect("item");
    assert_eq!(later.state, ItemState::Scheduled);
}

#[tokio::test]
async fn a_refused_connection_says_so_at_once() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    let options = leaseq_postgres::PgOptions::new().acquire_timeout(Duration::from_secs(30));
    let started = std::time::Instant::now();
    let err = leaseq_postgres::PgBackend::connect(&url, options)
        .await
        .expect_err("nothing listens there");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let text = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(text.to_lowercase().contains("refused"), "{text}");
    // Not the pool's "timed out" after its 30 s acquire timeout.
    assert!(!text.contains("timed out"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A role that may read but not write gets `Error::Rejected` for a write
/// (permission denied), not a retryable error, and the read still works;
/// a schema that was never migrated is rejected the same way.
#[tokio::test]
async fn calls_the_server_denies_for_good_are_rejected() {
    use sqlx::Connection;
    let Some(db) = common::TestDb::new("reject").await else {
        return;
    };
    let queue = q("jobs");
    db.backend
        .enqueue(&queue, vec![NewItem::new("a")])
        .await
        .expect("enqueue");
    let role = format!("leaseq_reject_{}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(&common::url())
        .await
        .expect("connect");
    for sql in [
        format!("DROP ROLE IF EXISTS {role}"),
        format!("CREATE ROLE {role} LOGIN"),
        format!("GRANT USAGE ON SCHEMA \"{}\" TO {role}", db.schema),
        format!(
            "GRANT SELECT ON ALL TABLES IN SCHEMA \"{}\" TO {role}",
            db.schema
        ),
    ] {
        sqlx::query(&sql).execute(&mut admin).await.expect(&sql);
    }
    let url = common::url().replacen("postgres@", &format!("{role}@"), 1);
    let reader = leaseq_postgres::PgBackend::connect(
        &url,
        common::options(&db.schema).migrate_on_connect(false),
    )
    .await
    .expect("connect as a reader");
    assert_eq!(reader.stats(&queue).await.expect("stats").ready, 1);
    let err = reader
        .enqueue(&queue, vec![NewItem::new("b")])
        .await
        .expect_err("a reader cannot enqueue");
    assert!(matches!(err, Error::Rejected { .. }), "{err:?}");
    assert!(!err.is_retryable(), "{err:?}");

    let unmigrated = leaseq_postgres::PgBackend::connect(
        &common::url(),
        common::options(&format!("{}_none", db.schema)).migrate_on_connect(false),
    )
    .await;
    let err = match unmigrated {
        Ok(b) => b.stats(&queue).await.expect_err("no tables"),
        Err(e) => e,
    };
    assert!(matches!(err, Error::Rejected { .. }), "{err:?}");
    drop(reader);
    let _ = sqlx::query(&format!("DROP OWNED BY {role}"))
        .execute(&mut admin)
        .await;
    let _ = sqlx::query(&format!("DROP ROLE IF EXISTS {role}"))
        .execute(&mut admin)
        .await;
}

/// A claim held up on its queue's limits row stamps its leases after the
/// wait, not at a clock read before it: an item enqueued (and committed)
/// while the claim waited is leased no earlier than it was enqueued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_waits_on_the_limits_lock_stamps_its_leases_after_the_wait() {
    use sqlx::{Connection, Executor};
    let Some(db) = common::TestDb::new("clockwait").await else {
        return;
    };
    let queue = q("jobs");
    db.backend
        .throttles()
        .expect("throttles")
        .set_queue_limits(&queue, leaseq_core::QueueLimits::NONE.concurrency(5))
        .await
        .expect("limits");
    let mut holder = sqlx::PgConnection::connect(&common::url())
        .await
        .expect("connect");
    holder.execute("BEGIN").await.expect("begin");
    let lock = format!(
        "SELECT 1 FROM \"{}\".leaseq_queue_limits WHERE queue = 'jobs' FOR UPDATE",
        db.schema
    );
    holder
        .execute(lock.as_str())
        .await
        .expect("lock the limits row");
    let ttl = Duration::from_secs(30);
    let claimer = {
        let (b, queue) = (db.backend.clone(), queue.clone());
        tokio::spawn(async move { b.claim(&queue, ClaimSpec::new(1, ttl).expect("spec")).await })
    };
    // Until the claim waits on the row lock (so its step has begun). On
    // a connection of its own: a transaction sees one snapshot of the view.
    let mut watcher = sqlx::PgConnection::connect(&common::url())
        .await
        .expect("connect");
    let waiting = "SELECT count(*) FROM pg_stat_activity \
                   WHERE wait_event_type = 'Lock' AND datname = current_database()";
    let mut seen = false;
    for _ in 0..1_000 {
        let n: i64 = sqlx::query_scalar(waiting)
            .fetch_one(&mut watcher)
            .await
            .expect("pg_stat_activity");
        if n > 0 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen, "the claim never waited on the limits row");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let id = db
        .backend
        .enqueue(&queue, vec![NewItem::new("late")])
        .await
        .expect("enqueue")[0]
        .id;
    holder.execute("COMMIT").await.expect("commit");
    let claimed = claimer.await.expect("join").expect("claim");
    assert_eq!(
        claimed.leases.len(),
        1,
        "the claim sees the item: {claimed:?}"
    );
    let lease = &claimed.leases[0];
    assert_eq!(lease.id(), id);
    let stamped = lease.expires_at.as_millis() - 30_000;
    assert!(
        stamped >= lease.enqueued_at.as_millis(),
        "the lease is stamped at {stamped} ms, before its item's enqueue at {}: the claim read the clock before it waited",
        lease.enqueued_at
    );
}

#[tokio::test]
async fn unflushed_claims_lease_as_durable_ones_and_leave_the_session_durable() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("unflushed");
    // One connection: the claims and the check below share a session.
    let b = leaseq_postgres::PgBackend::connect(
        &common::url(),
        common::options(&schema)
            .max_connections(1)
            .durable_claims(false),
    )
    .await
    .expect("connect");
    let queue = q("jobs");
    b.enqueue(
        &queue,
        vec![
            NewItem::new("a"),
            NewItem::new("b").priority(5),
            NewItem::new("c"),
        ],
    )
    .await
    .expect("enqueue");
    let spec = || ClaimSpec::new(2, Duration::from_secs(30)).expect("spec");
    let first = b.claim(&queue, spec()).await.expect("claim");
    let payloads: Vec<_> = first.leases.iter().map(|l| l.payload.clone()).collect();
    assert_eq!(payloads, vec!["b", "a"]);
    // `SET LOCAL` ended with the claim's transaction.
    let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(b.pool())
        .await
        .expect("show");
    assert_eq!(setting, "on");
    for l in &first.leases {
        b.ack(&l.key).await.expect("ack");
    }
    let second = b.claim(&queue, spec()).await.expect("claim");
    assert_eq!(second.leases.len(), 1);
    assert_eq!(second.leases[0].payload, "c");
    assert_eq!(second.leases[0].attempts, 1);
    b.ack(&second.leases[0].key).await.expect("ack");
    assert!(b
        .claim(&queue, spec())
        .await
        .expect("claim")
        .leases
        .is_empty());
    assert_eq!(b.stats(&queue).await.expect("stats").total(), 0);
    drop(b);
    common::drop_schema(&schema).await;
}
