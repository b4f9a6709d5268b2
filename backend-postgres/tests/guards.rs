//! Guards, without timing assertions, for three fixes:
//!
//! - Poison is quarantined, never contagious: a row whose attempt counter
//!   cannot be incremented (or whose item is missing) is moved aside by the
//!   claim that meets it, takes no slot, and never stalls the queue; release,
//!   reap and give_back of such a row never overflow. The schema's checks
//!   hold the core's limits.
//! - `stats` counts through the state indexes, and `purge` and
//!   `delete_queue` find the queue's rows through them: their plans read no
//!   table scan of `leaseq_items`, on a table big enough for the planner to
//!   prefer one if it could.
//! - reap (and promotion and redrive) walk their index once per call: each
//!   batch starts after the key where the last one stopped (the plan's index
//!   condition says so), and a call of many batches, with ties in the
//!   ordering key across a batch boundary, handles every row once.

mod common;

use std::time::Duration;

use common::plans::{
    by_primary_key, no_table_scan, nodes, plan, prepared, uses, walks_once_from, OneConnection,
    STATE_INDEXES,
};
use leaseq_core::layer::shard::Sharded;
use leaseq_core::limits::{MAX_DEDUP_KEY_LEN, MAX_REASON_LEN};
use leaseq_core::testing::Poison;
use leaseq_core::{
    Backend, BackendExt, ClaimSpec, Error, ItemId, ItemState, NewItem, QueueName, Released,
};
use leaseq_postgres::PgBackend;
use sqlx::{Connection, PgConnection, Row};

const LONG: Duration = Duration::from_secs(60);

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

fn table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_items")
}

async fn push(b: &PgBackend, queue: &QueueName, items: Vec<NewItem>) -> Vec<ItemId> {
    b.enqueue(queue, items)
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect()
}

async fn plant(b: &PgBackend, queue: &QueueName, id: ItemId, poison: Poison) {
    let hooks = b.test_hooks().expect("hooks");
    assert!(
        hooks.plant_poison(queue, id, poison).await.expect("plant"),
        "{poison:?} is a kind the schema holds"
    );
}

#[tokio::test]
async fn poison_at_the_head_is_quarantined_and_never_stalls_a_claim() {
    let Some(db) = common::TestDb::new("gpoison").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("poison");
    let victim = push(b, &queue, vec![NewItem::new("victim").priority(9)]).await[0];
    let healthy = push(
        b,
        &queue,
        (0..3).map(|i| NewItem::new(format!("h{i}"))).collect(),
    )
    .await;
    plant(b, &queue, victim, Poison::AttemptsAtLimit).await;

    // The store holds the value, and adding one to it is what used to fail
    // every claim while the row sat at the head.
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    let overflow = sqlx::query(&format!(
        "SELECT attempts + 1 FROM {} WHERE id = $1",
        table(&db.schema)
    ))
    .bind(i64::try_from(victim.get()).expect("id"))
    .fetch_one(&mut c)
    .await
    .expect_err("attempts + 1 overflows");
    assert_eq!(
        overflow
            .as_database_error()
            .and_then(|e| e.code())
            .as_deref(),
        Some("22003"),
        "{overflow}"
    );

    // The claim of 2 returns two healthy items (first attempt, first
    // tokens), and reports the poison it moved aside.
    let spec = ClaimSpec::new(2, LONG).expect("spec");
    let claimed = b
        .claim(&queue, spec.duplicate())
        .await
        .expect("a claim over poison");
    let got: Vec<_> = claimed.leases.iter().map(|l| (l.id(), l.token())).collect();
    assert_eq!(
        got,
        vec![(healthy[0], spec.token(0)), (healthy[1], spec.token(1))]
    );
    assert!(claimed.leases.iter().all(|l| l.attempts == 1));
    assert_eq!(claimed.repairs.len(), 1, "{:?}", claimed.repairs);
    assert_eq!(claimed.repairs[0].id, victim);
    assert_eq!(claimed.repairs[0].index, ItemState::Ready);
    assert!(claimed.repairs[0].problem.contains("quarantined"));
    let info = b.item(&queue, victim).await.expect("the victim is kept");
    assert_eq!(info.state, ItemState::Dead);
    assert_eq!(
        info.last_error.as_deref(),
        Some("quarantined: attempt counter at its limit")
    );
    assert_eq!(info.attempts, i32::MAX.unsigned_abs());
    let s = b.stats(&queue).await.expect("stats");
    assert_eq!((s.ready, s.scheduled, s.leased, s.dead), (1, 0, 2, 1));

    // A missing item at the head is left out of stats, then deleted by the
    // claim, which still returns the healthy item behind it.
    let ghost = push(b, &queue, vec![NewItem::new("ghost").priority(9)]).await[0];
    plant(b, &queue, ghost, Poison::MissingPayload).await;
    assert_eq!(b.stats(&queue).await.expect("stats").ready, 1);
    let c1 = b
        .claim(&queue, ClaimSpec::new(1, LONG).expect("spec"))
        .await
        .expect("claim");
    assert_eq!(c1.leases.len(), 1);
    assert_eq!(c1.leases[0].id(), healthy[2]);
    assert_eq!(c1.repairs.len(), 1, "{:?}", c1.repairs);
    assert_eq!(c1.repairs[0].id, ghost);
    assert!(matches!(
        b.item(&queue, ghost).await,
        Err(Error::NotFound { .. })
    ));

    // More poison than the claim asks for, all ahead of one healthy item:
    // a claim of 1 still gets the item and moves every poisoned row aside.
    let many = push(
        b,
        &queue,
        (0..5)
            .map(|i| NewItem::new(format!("p{i}")).priority(5))
            .collect(),
    )
    .await;
    for id in &many {
        plant(b, &queue, *id, Poison::AttemptsAtLimit).await;
    }
    let last = push(b, &queue, vec![NewItem::new("last")]).await[0];
    let c2 = b
        .claim(&queue, ClaimSpec::new(1, LONG).expect("spec"))
        .await
        .expect("claim");
    assert_eq!(
        c2.leases.iter().map(|l| l.id()).collect::<Vec<_>>(),
        vec![last]
    );
    let mut moved: Vec<ItemId> = c2.repairs.iter().map(|r| r.id).collect();
    moved.sort_unstable();
    assert_eq!(moved, many);

    // Poison among due Scheduled items: the same, reported from Scheduled.
    let later = push(b, &queue, vec![NewItem::new("later").delay(LONG)]).await[0];
    let hooks = b.test_hooks().expect("hooks");
    assert_eq!(hooks.make_due(&queue).await.expect("make_due"), 1);
    plant(b, &queue, later, Poison::AttemptsAtLimit).await;
    let c3 = b
        .claim(&queue, ClaimSpec::new(3, LONG).expect("spec"))
        .await
        .expect("claim");
    assert!(c3.leases.is_empty(), "{:?}", c3.leases);
    assert_eq!(c3.repairs.len(), 1, "{:?}", c3.repairs);
    assert_eq!(
        (c3.repairs[0].id, c3.repairs[0].index),
        (later, ItemState::Scheduled)
    );
    let snap = hooks.snapshot(&queue).await.expect("snapshot");
    assert!(snap.violations().is_empty(), "{:?}", snap.violations());
    let _ = c.close().await;
}

#[tokio::test]
async fn poison_is_quarantined_behind_a_sharded_queue() {
    let Some(db) = common::TestDb::new("gshard").await else {
        return;
    };
    let b = Sharded::new(db.backend.clone(), 4).expect("sharded");
    let queue = q("sharded");
    let victim = b
        .enqueue(&queue, vec![NewItem::new("victim")])
        .await
        .expect("enqueue")[0]
        .id;
    let mut healthy: Vec<ItemId> = b
        .enqueue(
            &queue,
            (0..3).map(|i| NewItem::new(format!("h{i}"))).collect(),
        )
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    let hooks = b.test_hooks().expect("hooks");
    assert!(hooks
        .plant_poison(&queue, victim, Poison::AttemptsAtLimit)
        .await
        .expect("plant"));
    // Claims visit the shards in turn: claim until the poison was met and
    // every healthy item came back.
    let (mut got, mut met) = (Vec::new(), false);
    for _ in 0..16 {
        let c = b
            .claim(&queue, ClaimSpec::new(3, LONG).expect("spec"))
            .await
            .expect("a claim over poison");
        met |= c.repairs.iter().any(|r| r.id == victim);
        got.extend(c.leases.iter().map(|l| l.id()));
        if met && got.len() >= healthy.len() {
            break;
        }
    }
    got.sort_unstable();
    healthy.sort_unstable();
    assert!(met, "no claim reported the poison");
    assert_eq!(got, healthy);
    assert_eq!(
        b.item(&queue, victim).await.expect("item").state,
        ItemState::Dead
    );
}

#[tokio::test]
async fn poisoned_leases_release_reap_and_give_back_without_overflow() {
    let Some(db) = common::TestDb::new("gplease").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("leases");
    push(
        b,
        &queue,
        (0..3).map(|i| NewItem::new(format!("l{i}"))).collect(),
    )
    .await;
    let ls = b
        .claim(&queue, ClaimSpec::new(3, LONG).expect("spec"))
        .await
        .expect("claim")
        .leases;
    assert_eq!(ls.len(), 3);
    for l in &ls {
        plant(b, &queue, l.id(), Poison::AttemptsAtLimit).await;
    }
    // Release: the attempts are spent (max_attempts is at most i32::MAX).
    assert_eq!(
        b.release(&ls[0].key, Duration::ZERO)
            .await
            .expect("release"),
        Released::Dead
    );
    // give_back takes one attempt back, which leaves the item Ready with
    // its attempts far past its maximum: the next claim sends it to Dead
    // instead of leasing it again.
    b.give_back(&ls[1].key).await.expect("give_back");
    let back = b
        .claim(&queue, ClaimSpec::new(1, LONG).expect("spec"))
        .await
        .expect("claim after give_back");
    assert!(back.leases.is_empty(), "{:?}", back.leases);
    assert_eq!(back.repairs.len(), 1, "{:?}", back.repairs);
    assert_eq!(back.repairs[0].id, ls[1].id());
    let info = b.item(&queue, ls[1].id()).await.expect("item");
    assert_eq!(info.state, ItemState::Dead);
    assert_eq!(info.attempts, i32::MAX.unsigned_abs() - 1);
    // Reap: an expired lease at the limit goes Dead.
    let hooks = b.test_hooks().expect("hooks");
    assert_eq!(hooks.expire_leases(&queue).await.expect("expire"), 1);
    let r = b.reap(&queue).await.expect("reap");
    assert_eq!((r.requeued, r.dead), (0, 1));
    let s = b.stats(&queue).await.expect("stats");
    assert_eq!((s.ready, s.leased, s.dead), (0, 0, 3));
}

#[tokio::test]
async fn schema_checks_hold_the_core_limits() {
    let Some(db) = common::TestDb::new("gcheck").await else {
        return;
    };
    let t = table(&db.schema);
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    let insert = format!(
        "INSERT INTO {t} (queue, state, payload, max_attempts, attempts, dedup_key, last_error) \
         VALUES ($1, 'ready', 'x', $2, $3, $4, $5)"
    );
    let code = |e: sqlx::Error| {
        e.as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.into_owned())
    };
    /// One row to insert, and whether the schema takes it.
    struct Case {
        what: &'static str,
        queue: String,
        max_attempts: i32,
        attempts: i32,
        key: Option<String>,
        reason: Option<String>,
        ok: bool,
    }
    let base = |what: &'static str, ok: bool| Case {
        what,
        queue: "q".into(),
        max_attempts: 3,
        attempts: 0,
        key: None,
        reason: None,
        ok,
    };
    let long_key = "k".repeat(MAX_DEDUP_KEY_LEN);
    let cases = vec![
        Case {
            key: Some(long_key.clone()),
            reason: Some("e".repeat(MAX_REASON_LEN)),
            ..base("at every limit", true)
        },
        Case {
            key: Some(format!("{long_key}k")),
            ..base("a dedup key over the limit", false)
        },
        Case {
            key: Some(String::new()),
            ..base("an empty dedup key", false)
        },
        Case {
            reason: Some("e".repeat(MAX_REASON_LEN + 1)),
            ..base("a reason over the limit", false)
        },
        Case {
            queue: "q".repeat(QueueName::MAX_LEN + 1),
            ..base("a queue name over the limit", false)
        },
        Case {
            max_attempts: 0,
            ..base("no attempts allowed", false)
        },
        Case {
            attempts: -1,
            ..base("negative attempts", false)
        },
        Case {
            max_attempts: i32::MAX,
            attempts: i32::MAX,
            ..base("counters at i32::MAX", true)
        },
    ];
    for case in cases {
        let done = sqlx::query(&insert)
            .bind(&case.queue)
            .bind(case.max_attempts)
            .bind(case.attempts)
            .bind(case.key.as_deref())
            .bind(case.reason.as_deref())
            .execute(&mut c)
            .await;
        let what = case.what;
        match done {
            Ok(_) => assert!(case.ok, "{what}: the schema took it"),
            Err(e) => {
                assert!(!case.ok, "{what}: {e}");
                assert_eq!(code(e).as_deref(), Some("23514"), "{what}");
            }
        }
    }
    // What the backend writes stays inside: a reason over the limit is cut
    // (after a NUL became U+FFFD, three bytes) and stored.
    let b = &db.backend;
    let queue = q("checks");
    push(b, &queue, vec![NewItem::new("x")]).await;
    let l = b
        .claim_one(&queue, LONG)
        .await
        .expect("claim")
        .expect("one");
    b.fail(&l.key, &"\0é".repeat(MAX_REASON_LEN))
        .await
        .expect("fail with a long reason");
    let _ = c.close().await;
}

#[tokio::test]
async fn reap_promote_and_redrive_walk_many_batches_once() {
    let Some(db) = common::TestDb::new("gwalk").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("walk");
    // 1,234 leases, 1,000 of them from one claim statement, so they share
    // one expiry: batches of 500 cut through the tie.
    let n = 1_234usize;
    for chunk in [1_000, 234] {
        push(
            b,
            &queue,
            (0..chunk)
                .map(|i| NewItem::new(format!("i{i}")).max_attempts(1))
                .collect(),
        )
        .await;
    }
    let ttl = Duration::from_millis(1);
    let mut leased = 0;
    for _ in 0..3 {
        leased += b
            .claim(&queue, ClaimSpec::new(1_000, ttl).expect("spec"))
            .await
            .expect("claim")
            .leases
            .len();
    }
    assert_eq!(leased, n);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let r = b.reap(&queue).await.expect("reap");
    assert_eq!((r.requeued, r.dead), (0, n as u64), "{r:?}");
    assert_eq!(b.reap(&queue).await.expect("reap again").recovered(), 0);
    // Redrive: a limit inside the second batch, then the rest.
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&queue, 700)
            .await
            .expect("redrive"),
        700
    );
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&queue, 10_000)
            .await
            .expect("redrive"),
        (n - 700) as u64
    );
    let s = b.stats(&queue).await.expect("stats");
    assert_eq!((s.ready, s.dead), (n as u64, 0));
    b.admin()
        .expect("admin")
        .purge(&queue)
        .await
        .expect("purge");
    // Promotion: 1,100 items due at once (one enqueue statement's now()).
    for chunk in [1_000, 100] {
        push(
            b,
            &queue,
            (0..chunk)
                .map(|i| NewItem::new(format!("d{i}")).delay(Duration::from_millis(1)))
                .collect(),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    b.reap(&queue).await.expect("reap promotes");
    let snap = b
        .test_hooks()
        .expect("hooks")
        .snapshot(&queue)
        .await
        .expect("snapshot");
    assert_eq!(
        snap.indexes.get(&ItemState::Ready).map(Vec::len),
        Some(1_100)
    );
    assert!(!snap.indexes.contains_key(&ItemState::Scheduled));

    // Expired `enqueue_once` records: 1,200 sharing one expiry (batches of
    // 500 cut through the tie) and 300 of their own, all forgotten by one
    // reap; a live record stays.
    let requests = format!("\"{}\".leaseq_requests", db.schema);
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    sqlx::query(&format!(
        "INSERT INTO {requests} (queue, request, ids, deduplicated, expires_at) \
         SELECT 'walk', gen_random_uuid(), ARRAY[n]::bigint[], ARRAY[false], \
                CASE WHEN n < 1200 THEN now() - interval '1 hour' \
                     WHEN n < 1500 THEN now() - n * interval '1 second' \
                     ELSE now() + interval '1 hour' END \
         FROM generate_series(0, 1500) n"
    ))
    .execute(&mut c)
    .await
    .expect("fill requests");
    b.reap(&queue).await.expect("reap forgets records");
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {requests} WHERE queue = 'walk'"
    ))
    .fetch_one(&mut c)
    .await
    .expect("count");
    assert_eq!(left, 1, "only the live record is left");
    let _ = c.close().await;
}

#[tokio::test]
async fn stats_reap_and_claim_plans_use_the_state_indexes() {
    let Some(db) = OneConnection::new("gplan").await else {
        return;
    };
    let b = &db.backend;
    let t = table(&db.schema);
    // 20,000 rows over 500 queues, a quarter in each state; one queue of
    // 20,000 expired leases; one of 20,000 Dead items; one of 200,000 in
    // every state whose Scheduled items are all in the future (no Scheduled
    // item is due while the due time of most rows has passed: a planner
    // that takes the columns as independent expects due ones); and one of
    // 200,000 Ready items (a planner that cannot count poison guesses a
    // third of them): a table where a scan of everything is what the
    // planner takes when no index serves the statement.
    let fill = format!(
        "INSERT INTO {t} (queue, state, payload, attempts, max_attempts, token, \
           lease_expires_at, available_at, dead_at) \
         SELECT q, st, 'x', 1, 3, \
                CASE WHEN st = 'leased' THEN gen_random_uuid() END, \
                CASE WHEN st = 'leased' THEN now() - interval '1 hour' END, \
                CASE WHEN st = 'scheduled' THEN now() + interval '1 hour' ELSE now() END, \
                CASE WHEN st = 'dead' THEN now() END \
         FROM (SELECT 'q' || (n % 500) AS q, \
                      (ARRAY['ready','scheduled','leased','dead'])[1 + (n / 500) % 4] AS st \
               FROM generate_series(0, 19999) n \
               UNION ALL \
               SELECT 'big', 'leased' FROM generate_series(1, 20000) \
               UNION ALL \
               SELECT 'bigdead', 'dead' FROM generate_series(1, 20000) \
               UNION ALL \
               SELECT 'bigmix', (ARRAY['ready','scheduled','leased','dead'])[1 + n % 4] \
               FROM generate_series(1, 200000) n \
               UNION ALL \
               SELECT 'bigready', 'ready' FROM generate_series(1, 200000)) g"
    );
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    sqlx::query(&fill).execute(&mut c).await.expect("fill");
    // 20,000 expired `enqueue_once` records over the same queues.
    let requests = format!("\"{}\".leaseq_requests", db.schema);
    sqlx::query(&format!(
        "INSERT INTO {requests} (queue, request, ids, deduplicated, expires_at) \
         SELECT 'q' || (n % 500), gen_random_uuid(), ARRAY[n]::bigint[], ARRAY[false], \
                now() - interval '1 hour' \
         FROM generate_series(0, 19999) n"
    ))
    .execute(&mut c)
    .await
    .expect("fill requests");

    // Run each statement once (on queues with nothing to do) so the
    // backend's exact text can be read back.
    let none = q("none");
    b.stats(&q("q42")).await.expect("stats");
    b.reap(&none).await.expect("reap");
    let nothing = b
        .claim(&none, ClaimSpec::new(10, LONG).expect("spec"))
        .await
        .expect("claim");
    assert!(nothing.leases.is_empty());
    let stranger = leaseq_core::LeaseKey {
        queue: q("q42"),
        id: ItemId::new(1),
        token: leaseq_core::LeaseToken::random(),
    };
    assert!(b.ack(&stranger).await.is_err_and(|e| e.is_lease_lost()));
    assert!(b.ack_many(&[stranger]).await.expect("ack_many")[0].is_err());
    assert!(b
        .admin()
        .expect("admin")
        .redrive_item(&q("q42"), ItemId::new(1))
        .await
        .is_err_and(|e| matches!(e, Error::NotFound { .. })));
    assert!(b
        .admin()
        .expect("admin")
        .remove_item(&q("q42"), ItemId::new(1))
        .await
        .is_err_and(|e| matches!(e, Error::NotFound { .. })));
    let admin = b.admin().expect("admin");
    assert_eq!(admin.purge(&none).await.expect("purge"), 0);
    assert_eq!(admin.delete_queue(&none).await.expect("delete_queue"), 0);
    let stats = prepared(b, "pg_relation_size").await;
    let purge = prepared(b, "leaseq_held_keys WHERE queue = $1) DELETE").await;
    let delete_queue = prepared(b, "q AS (DELETE FROM").await;
    let remove_item = prepared(b, "payload IS NOT NULL RETURNING CASE").await;
    let redrive_item = prepared(b, "AS was").await;
    let ack = prepared(b, "leaseq_items WHERE id = $1").await;
    let ack_many = prepared(b, "unnest($1::bigint[]").await;
    let reap = prepared(b, "lease_expires_at AS at").await;
    let claim = prepared(b, "bad_ready AS").await;
    let reap_requests = prepared(b, "request, expires_at AS at").await;

    // Before any ANALYZE (autovacuum off, or not yet come round) the
    // planner guesses; after it, it knows. Both, in custom and generic plans.
    for phase in ["never analyzed", "analyzed"] {
        if phase == "analyzed" {
            sqlx::query(&format!("VACUUM ANALYZE {t}"))
                .execute(&mut c)
                .await
                .expect("analyze");
        }
        for mode in ["force_custom_plan", "force_generic_plan"] {
            for (what, sql, types, args) in [
                ("stats", &stats, "text, int8", "'q42', 10001"),
                (
                    "stats of a big queue",
                    &stats,
                    "text, int8",
                    "'bigmix', 10001",
                ),
                ("purge", &purge, "text", "'q42'"),
                ("delete_queue", &delete_queue, "text", "'q42'"),
            ] {
                let what = format!("{what}, {phase} ({mode})");
                let found = plan(&mut c, sql, types, args, mode).await;
                no_table_scan(&found, &what);
                for index in STATE_INDEXES {
                    uses(&found, index, &what);
                }
            }

            for queue in ["q42", "big"] {
                let what = format!("reap of {queue}, {phase} ({mode})");
                let args = format!("'{queue}', 500, 'ch', '-infinity', 0");
                let found = plan(&mut c, &reap, "text, int8, text, text, int8", &args, mode).await;
                no_table_scan(&found, &what);
                // The UPDATE finds its rows by id.
                uses(&found, "leaseq_items_pkey", &what);
                // The only walk of the leased index is the batch's, and it
                // starts after the last batch's key.
                walks_once_from(
                    &found,
                    "leaseq_items_leased",
                    "ROW(lease_expires_at, id) >",
                    &what,
                );
            }

            // Expired `enqueue_once` records: one walk of the expiry index,
            // in its order (no sort of every expired record), from the
            // last batch's expiry on.
            let what = format!("reap of requests, {phase} ({mode})");
            let found = plan(
                &mut c,
                &reap_requests,
                "text, int8, text",
                "'q42', 500, '-infinity'",
                mode,
            )
            .await;
            no_table_scan(&found, &what);
            walks_once_from(&found, "leaseq_requests_expiry", "expires_at >=", &what);
            assert!(
                !found.iter().any(|n| n.kind == "Sort"),
                "{what}: the expired records are sorted instead of read in index order: {found:#?}"
            );

            // A fenced call finds its row by the primary key, never by
            // walking the queue's leases.
            let zero = "'00000000-0000-0000-0000-000000000000'::uuid";
            for (what, sql, types, args) in [
                (
                    "ack",
                    &ack,
                    "int8, text, uuid, text",
                    format!("1, 'big', {zero}, 'ch'"),
                ),
                (
                    "ack_many",
                    &ack_many,
                    "int8[], text[], uuid[], text",
                    format!("ARRAY[1]::int8[], ARRAY['big'], ARRAY[{zero}], 'ch'"),
                ),
            ] {
                let what = format!("{what}, {phase} ({mode})");
                let found = plan(&mut c, sql, types, &args, mode).await;
                by_primary_key(&found, &["leaseq_items_leased"], &what);
            }

            // redrive_item finds its row by the primary key, never by
            // walking the queue's dead items.
            let what = format!("redrive_item, {phase} ({mode})");
            let found = plan(
                &mut c,
                &redrive_item,
                "text, int8, text",
                "'bigdead', 1, 'ch'",
                mode,
            )
            .await;
            by_primary_key(&found, &["leaseq_items_dead"], &what);

            // remove_item too, whatever the queue holds: no state index.
            for queue in ["big", "bigdead"] {
                let what = format!("remove_item of {queue}, {phase} ({mode})");
                let args = format!("'{queue}', 1");
                let found = plan(&mut c, &remove_item, "text, int8", &args, mode).await;
                by_primary_key(&found, &STATE_INDEXES, &what);
            }

            // On a big queue too: its poison probe once scanned the table,
            // the planner taking a third of the Ready rows for poison.
            for queue in ["q42", "bigmix", "bigready"] {
                let what = format!("claim of {queue}, {phase} ({mode})");
                let args = format!("'{queue}', 10, 60000, ARRAY[]::uuid[], false, 'ch'");
                let found = plan(
                    &mut c,
                    &claim,
                    "text, int8, int8, uuid[], bool, text",
                    &args,
                    mode,
                )
                .await;
                no_table_scan(&found, &what);
                for index in [
                    "leaseq_items_ready",
                    "leaseq_items_scheduled",
                    "leaseq_items_poison",
                ] {
                    uses(&found, index, &what);
                }
            }
        }
    }
    let _ = c.close().await;
}

/// The listing walks each state's partial index one queue at a time (a
/// seek past the last queue found): it never reads the table, nor every
/// entry of an index, whatever the planner knows of the table.
#[tokio::test]
async fn the_queue_listing_seeks_each_state_index_queue_by_queue() {
    let Some(db) = OneConnection::new("lplan").await else {
        return;
    };
    let b = &db.backend;
    let t = table(&db.schema);
    // 500 queues, a quarter of each one's rows in each state, and one
    // queue of 20,000 leases: reading rows instead of seeking past queues
    // would show in the plan.
    let fill = format!(
        "INSERT INTO {t} (queue, state, payload, attempts, max_attempts, token, \
           lease_expires_at, available_at, dead_at) \
         SELECT q, st, 'x', 1, 3, \
                CASE WHEN st = 'leased' THEN gen_random_uuid() END, \
                CASE WHEN st = 'leased' THEN now() + interval '1 hour' END, \
                CASE WHEN st = 'scheduled' THEN now() + interval '1 hour' ELSE now() END, \
                CASE WHEN st = 'dead' THEN now() END \
         FROM (SELECT 'q' || (n % 500) AS q, \
                      (ARRAY['ready','scheduled','leased','dead'])[1 + (n / 500) % 4] AS st \
               FROM generate_series(0, 19999) n \
               UNION ALL \
               SELECT 'big', 'leased' FROM generate_series(1, 20000)) g"
    );
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    sqlx::query(&fill).execute(&mut c).await.expect("fill");
    // A row whose item is missing is no item (stats leave it out too).
    sqlx::query(&format!(
        "INSERT INTO {t} (queue, state, payload, max_attempts) VALUES ('ghost', 'ready', NULL, 1)"
    ))
    .execute(&mut c)
    .await
    .expect("plant a missing payload");

    let mut want: Vec<QueueName> = (0..500).map(|n| q(&format!("q{n}"))).collect();
    want.push(q("big"));
    want.sort();
    assert_eq!(b.queues().await.expect("queues"), want);

    let sql = prepared(b, "WITH RECURSIVE r(queue)").await;
    for phase in ["never analyzed", "analyzed"] {
        if phase == "analyzed" {
            sqlx::query(&format!("VACUUM ANALYZE {t}"))
                .execute(&mut c)
                .await
                .expect("analyze");
        }
        let row = sqlx::raw_sql(&format!("EXPLAIN (FORMAT JSON) {sql}"))
            .fetch_one(&mut c)
            .await
            .expect("explain");
        let json: String = row.try_get_unchecked(0).expect("plan text");
        let found = nodes(&json);
        let what = format!("queues, {phase}");
        no_table_scan(&found, &what);
        for index in STATE_INDEXES {
            assert!(
                found.iter().any(|n| n.index.as_deref() == Some(index)
                    && n.cond.as_deref().is_some_and(|c| c.contains("queue >"))),
                "{what}: no seek past the last queue in {index}: {found:#?}"
            );
        }
    }
    let _ = c.close().await;
}
