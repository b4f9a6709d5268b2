//! What the Control group keeps on PostgreSQL beyond the shared checks:
//! the pause lives on the queue's limits row (set and cleared limits keep
//! it, a limited claim honours it), a reaped cancel-requested lease leaves
//! its takeover trace, a lease's progress goes with the lease, and the
//! new statements find their rows by the primary key (or walk their index
//! once), never through a scan of the table or a queue's state index.

mod common;

use std::time::Duration;

use common::plans::{
    by_primary_key, no_table_scan, plan, prepared, uses, walks_once_from, OneConnection,
    STATE_INDEXES,
};
use leaseq_core::{
    Backend, BackendExt, Cancelled, ClaimSpec, Error, ItemId, Lease, LeaseFate, LeaseKey,
    LeaseToken, LeaseTtl, NewItem, QueueLimits, QueueName, Released,
};
use leaseq_postgres::PgBackend;
use sqlx::{Connection, PgConnection};

const TTL: Duration = Duration::from_secs(30);

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

/// The lease of a new item with dedup key "k", held for 10 minutes after
/// an ack (`unique_for`).
async fn keyed_lease(b: &PgBackend, queue: &QueueName, ttl: Duration) -> (ItemId, Lease) {
    let id = b
        .enqueue_one(
            queue,
            NewItem::new("x")
                .dedup_key("k")
                .unique_for(Duration::from_secs(600)),
        )
        .await
        .expect("push");
    let lease = b
        .claim_one(queue, ttl)
        .await
        .expect("claim")
        .expect("a lease");
    (id, lease)
}

#[tokio::test]
async fn the_pause_shares_the_limits_row_and_survives_its_changes() {
    let Some(db) = common::TestDb::new("ctlpause").await else {
        return;
    };
    let b = &db.backend;
    let control = b.control().expect("control");
    let throttles = b.groups().throttles.expect("throttles");
    let queue = q("paused");
    b.push(&queue, "a").await.expect("push");

    control.pause(&queue).await.expect("pause");
    throttles
        .set_queue_limits(&queue, QueueLimits::NONE.concurrency(4))
        .await
        .expect("limits");
    // A limited claim (under the row's lock) sees the pause too.
    let got = b.claim_up_to(&queue, 1, TTL).await.expect("claim");
    assert!(got.paused && got.leases.is_empty(), "{got:?}");
    // Clearing the limits keeps the pause.
    throttles
        .set_queue_limits(&queue, QueueLimits::NONE)
        .await
        .expect("clear limits");
    assert!(control.is_paused(&queue).await.expect("is_paused"));
    let got = b.claim_up_to(&queue, 1, TTL).await.expect("claim");
    assert!(got.paused && got.leases.is_empty(), "{got:?}");
    assert!(b.stats(&queue).await.expect("stats").paused);

    // Resuming keeps the limits, and a claim leases again.
    throttles
        .set_queue_limits(&queue, QueueLimits::NONE.concurrency(4))
        .await
        .expect("limits");
    control.resume(&queue).await.expect("resume");
    assert_eq!(
        throttles.queue_limits(&queue).await.expect("limits"),
        QueueLimits::NONE.concurrency(4)
    );
    let got = b.claim_up_to(&queue, 1, TTL).await.expect("claim");
    assert!(!got.paused && got.leases.len() == 1, "{got:?}");

    // Neither limits nor a pause: the row goes.
    throttles
        .set_queue_limits(&queue, QueueLimits::NONE)
        .await
        .expect("clear limits");
    let rows: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM \"{}\".leaseq_queue_limits",
        db.schema
    ))
    .fetch_one(b.pool())
    .await
    .expect("count");
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn a_reaped_cancel_request_ends_cancelled_and_leaves_its_takeover_trace() {
    let Some(db) = common::TestDb::new("ctlreap").await else {
        return;
    };
    let b = &db.backend;
    let control = b.control().expect("control");
    let queue = q("reaped");
    let (id, lease) = keyed_lease(b, &queue, Duration::from_millis(200)).await;
    assert_eq!(
        control.cancel(&queue, id).await.expect("cancel"),
        Cancelled::Requested
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = b.reap(&queue).await.expect("reap");
    assert_eq!((report.cancelled, report.requeued, report.dead), (1, 0, 0));
    assert_eq!(b.stats(&queue).await.expect("stats").total(), 0);
    assert_eq!(
        b.lease_fate(&lease.key, lease.expires_at)
            .await
            .expect("fate"),
        LeaseFate::Lost
    );
    // No hold: the key is free at once.
    let again = b
        .enqueue_one(&queue, NewItem::new("y").dedup_key("k"))
        .await
        .expect("push");
    assert_ne!(again, id);
}

#[tokio::test]
async fn progress_goes_with_its_lease() {
    let Some(db) = common::TestDb::new("ctlprog").await else {
        return;
    };
    let b = &db.backend;
    let control = b.control().expect("control");
    let queue = q("progress");
    let id = b.push(&queue, "x").await.expect("push");
    let spec = ClaimSpec::new(1, TTL).expect("spec");
    let lease = b
        .claim(&queue, spec.duplicate())
        .await
        .expect("claim")
        .leases[0]
        .clone();
    control
        .progress(&lease.key, "50%".into())
        .await
        .expect("progress");
    let info = b.item(&queue, id).await.expect("item");
    assert_eq!(info.progress.as_deref(), Some(&b"50%"[..]));
    assert!(!info.cancel_requested);
    assert_eq!(
        control
            .snooze(&lease.key, Duration::ZERO)
            .await
            .expect("snooze"),
        Released::Ready
    );
    let info = b.item(&queue, id).await.expect("item");
    assert_eq!((info.progress, info.attempts), (None, 0));
    // A claim sent again reuses its tokens: the new lease starts with none.
    let again = b.claim(&queue, spec).await.expect("claim").leases[0].clone();
    assert_eq!(again.key.token, lease.key.token);
    assert_eq!(b.item(&queue, id).await.expect("item").progress, None);
    assert!(control
        .progress(&lease.key, vec![0u8; 4097].into())
        .await
        .is_err_and(|e| matches!(e, leaseq_core::Error::InvalidInput { .. })));
}

#[tokio::test]
async fn control_plans_find_their_rows_by_the_primary_key() {
    let Some(db) = OneConnection::new("ctlplan").await else {
        return;
    };
    let b = &db.backend;
    let t = format!("\"{}\".leaseq_items", db.schema);
    // A queue of 20,000 leases, one of 20,000 Scheduled items not yet due,
    // and 20,000 rows of other queues.
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    sqlx::query(&format!(
        "INSERT INTO {t} (queue, state, payload, attempts, max_attempts, token, \
           lease_expires_at, available_at) \
         SELECT q, st, 'x', 1, 3, \
                CASE WHEN st = 'leased' THEN gen_random_uuid() END, \
                CASE WHEN st = 'leased' THEN now() + interval '1 hour' END, \
                CASE WHEN st = 'scheduled' THEN now() + interval '1 hour' ELSE now() END \
         FROM (SELECT 'big' AS q, 'leased' AS st FROM generate_series(1, 20000) \
               UNION ALL SELECT 'bigsched', 'scheduled' FROM generate_series(1, 20000) \
               UNION ALL SELECT 'q' || (n % 100), 'ready' FROM generate_series(1, 20000) n) g"
    ))
    .execute(&mut c)
    .await
    .expect("fill");

    // Each statement once, so its text can be read back.
    let control = b.control().expect("control");
    let none = q("none");
    let stranger = LeaseKey {
        queue: none.clone(),
        id: ItemId::new(1),
        token: LeaseToken::random(),
    };
    let lost = |r: leaseq_core::Result<_>| matches!(r, Err(Error::LeaseLost { .. }));
    let ttl = LeaseTtl::new(TTL).expect("ttl");
    assert!(lost(b.extend(&stranger, ttl).await.map(|_| ())));
    assert!(lost(b.release(&stranger, Duration::ZERO).await.map(|_| ())));
    assert!(lost(b.give_back(&stranger).await));
    assert!(lost(b.fail(&stranger, "x").await));
    assert!(lost(
        control.snooze(&stranger, Duration::ZERO).await.map(|_| ())
    ));
    assert!(lost(control.progress(&stranger, "x".into()).await));
    let not_found = |r: leaseq_core::Result<_>| matches!(r, Err(Error::NotFound { .. }));
    assert!(not_found(
        control.cancel(&none, ItemId::new(1)).await.map(|_| ())
    ));
    assert!(not_found(
        control.run_now(&none, ItemId::new(1)).await.map(|_| ())
    ));
    assert_eq!(
        control.run_all_now(&none, 10).await.expect("run_all_now"),
        0
    );
    // (name, text, the types of the parameters after the fence's three,
    // their values)
    let fenced = [
        (
            "extend",
            prepared(b, "interval '1 millisecond' WHERE id = $1").await,
            ", int8",
            ", 60000",
        ),
        (
            "release",
            prepared(b, "ELSE i.last_error").await,
            ", int8, text",
            ", 0, 'ch'",
        ),
        (
            "give_back",
            prepared(b, "SET state = 'ready', attempts = greatest").await,
            ", text",
            ", 'ch'",
        ),
        (
            "fail",
            prepared(b, "last_error = $4").await,
            ", text, text",
            ", 'x', 'ch'",
        ),
        (
            "snooze",
            prepared(b, "ELSE 'ready' END, attempts").await,
            ", int8, text",
            ", 0, 'ch'",
        ),
        (
            "progress",
            prepared(b, "SET progress = $4").await,
            ", bytea, text",
            ", 'x'::bytea, 'ch'",
        ),
    ];
    let by_id = [
        (
            "cancel",
            prepared(b, "SET cancel_requested = (i.state").await,
            ", text",
            ", 'ch'",
        ),
        (
            "run_now",
            prepared(b, "c.waiting").await,
            ", text",
            ", 'ch'",
        ),
    ];
    let run_all = prepared(b, "available_at > now() AND (available_at, id) >").await;

    let zero = "'00000000-0000-0000-0000-000000000000'::uuid";
    for phase in ["never analyzed", "analyzed"] {
        if phase == "analyzed" {
            sqlx::query(&format!("VACUUM ANALYZE {t}"))
                .execute(&mut c)
                .await
                .expect("analyze");
        }
        for mode in ["force_custom_plan", "force_generic_plan"] {
            for (what, sql, types, rest) in &fenced {
                let what = format!("{what}, {phase} ({mode})");
                let types = format!("int8, text, uuid{types}");
                let args = format!("1, 'big', {zero}{rest}");
                let found = plan(&mut c, sql, &types, &args, mode).await;
                by_primary_key(&found, &["leaseq_items_leased"], &what);
            }
            for (what, sql, types, rest) in &by_id {
                for queue in ["big", "bigsched"] {
                    let what = format!("{what} of {queue}, {phase} ({mode})");
                    let types = format!("text, int8{types}");
                    let args = format!("'{queue}', 1{rest}");
                    let found = plan(&mut c, sql, &types, &args, mode).await;
                    by_primary_key(&found, &STATE_INDEXES, &what);
                }
            }
            let what = format!("run_all_now, {phase} ({mode})");
            let found = plan(
                &mut c,
                &run_all,
                "text, int8, text, text, int8",
                "'bigsched', 500, 'ch', '-infinity', 0",
                mode,
            )
            .await;
            no_table_scan(&found, &what);
            uses(&found, "leaseq_items_pkey", &what);
            walks_once_from(
                &found,
                "leaseq_items_scheduled",
                "ROW(available_at, id) >",
                &what,
            );
        }
    }
    let _ = c.close().await;
}

/// A cancel request that commits while an ack or a release waits for the
/// row's lock (the statement's snapshot is older than the request) is
/// seen: the ack holds no key, the release ends the item Cancelled.
#[tokio::test]
async fn endings_see_a_cancel_that_committed_while_they_waited() {
    let Some(db) = common::TestDb::new("ctlwait").await else {
        return;
    };
    let b = &db.backend;
    let t = format!("\"{}\".leaseq_items", db.schema);
    let queue = q("waited");
    for ending in ["ack", "release"] {
        let (id, lease) = keyed_lease(b, &queue, TTL).await;
        // The request, written the way `cancel` writes it, held open.
        let mut other = PgConnection::connect(&common::url())
            .await
            .expect("connect");
        sqlx::raw_sql(&format!(
            "BEGIN; UPDATE {t} SET cancel_requested = true WHERE id = {}",
            id.get()
        ))
        .execute(&mut other)
        .await
        .expect("flag");
        let (b2, key) = (b.clone(), lease.key.clone());
        let call = tokio::spawn(async move {
            match ending {
                "ack" => b2.ack(&key).await.map(|()| None),
                _ => b2.release(&key, Duration::ZERO).await.map(Some),
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!call.is_finished(), "{ending} did not wait for the row");
        sqlx::raw_sql("COMMIT")
            .execute(&mut other)
            .await
            .expect("commit");
        let got = call.await.expect("join").expect(ending);
        if ending == "release" {
            assert_eq!(got, Some(Released::Cancelled));
        }
        assert_eq!(b.stats(&queue).await.expect("stats").total(), 0);
        // No hold: the key is free at once.
        let again = b
            .enqueue_one(&queue, NewItem::new("y").dedup_key("k"))
            .await
            .expect("push");
        assert_ne!(again, id, "{ending}");
        b.admin()
            .expect("admin")
            .purge(&queue)
            .await
            .expect("purge");
        let _ = other.close().await;
    }
}
