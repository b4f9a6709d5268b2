//! What is SQLite's own in the Control group (the shared checks are in the
//! conformance suite): the pause shares the limits row, a cancelled ack
//! holds no key, the traces `lease_fate` reads after a cancelled ending,
//! progress after a reap under a reused token, and migration 0015 on a
//! file that already has limits.

mod common;

use std::borrow::Cow;
use std::time::Duration;

use leaseq_core::{
    Admin, Backend, BackendExt, Bytes, Cancelled, ClaimSpec, Control, LeaseFate, NewItem,
    QueueLimits, QueueName, Rate, Throttles, Timestamp,
};
use leaseq_sqlite::sqlx;

const TTL: Duration = Duration::from_secs(60);

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

/// The rows of the limits table (the pause lives there too).
async fn limit_rows(db: &common::TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM leaseq_queue_limits")
        .fetch_one(db.backend.pool())
        .await
        .expect("count limit rows")
}

#[tokio::test]
async fn the_pause_and_the_limits_share_a_row_and_each_clears_its_half() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("shared-row");
    let limits = QueueLimits::NONE.concurrency(2);
    b.enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue");

    b.set_queue_limits(&q, limits).await.expect("limits");
    b.pause(&q).await.expect("pause");
    b.set_queue_limits(&q, QueueLimits::NONE)
        .await
        .expect("clear limits");
    assert!(
        b.is_paused(&q).await.expect("is_paused"),
        "clearing the limits lifted the pause"
    );
    assert_eq!(b.queue_limits(&q).await.expect("read"), QueueLimits::NONE);
    let claimed = b.claim_up_to(&q, 1, TTL).await.expect("claim");
    assert!(claimed.paused && claimed.leases.is_empty(), "{claimed:?}");

    b.set_queue_limits(&q, limits).await.expect("limits again");
    b.resume(&q).await.expect("resume");
    assert!(!b.is_paused(&q).await.expect("is_paused"));
    assert_eq!(
        b.queue_limits(&q).await.expect("read"),
        limits,
        "resume dropped the limits"
    );
    assert_eq!(limit_rows(&db).await, 1);

    // Neither half left: no row, so claims go back to the plain statement.
    b.set_queue_limits(&q, QueueLimits::NONE)
        .await
        .expect("clear limits");
    assert_eq!(limit_rows(&db).await, 0);
    b.pause(&q).await.expect("pause");
    b.resume(&q).await.expect("resume");
    assert_eq!(limit_rows(&db).await, 0);
    let claimed = b.claim_up_to(&q, 1, TTL).await.expect("claim");
    assert!(!claimed.paused && claimed.leases.len() == 1, "{claimed:?}");
}

#[tokio::test]
async fn purge_keeps_the_pause_and_delete_queue_forgets_it() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("paused-purge");
    b.enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue");
    b.pause(&q).await.expect("pause");
    b.purge(&q).await.expect("purge");
    assert!(
        b.is_paused(&q).await.expect("is_paused"),
        "purge lifted the pause"
    );
    assert!(b.stats(&q).await.expect("stats").paused);
    b.delete_queue(&q).await.expect("delete_queue");
    assert!(
        !b.is_paused(&q).await.expect("is_paused"),
        "delete_queue kept the pause"
    );
}

#[tokio::test]
async fn an_ack_holds_the_key_unless_a_cancel_was_requested() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("cancel-hold");
    let item = || NewItem::new("x").dedup_key("k").unique_for(TTL);
    for cancelled in [false, true] {
        let first = b.enqueue(&q, vec![item()]).await.expect("enqueue")[0];
        assert!(
            !first.deduplicated,
            "the key was still held before round {cancelled}"
        );
        let lease = b.claim_one(&q, TTL).await.expect("claim").expect("a lease");
        if cancelled {
            let got = b.cancel(&q, lease.key.id).await.expect("cancel");
            assert_eq!(got, Cancelled::Requested);
        }
        b.ack(&lease.key).await.expect("ack");
        let again = b.enqueue(&q, vec![item()]).await.expect("enqueue")[0];
        assert_eq!(
            again.deduplicated, !cancelled,
            "cancelled {cancelled}: {again:?}"
        );
        if !cancelled {
            // Free the key for the next round.
            b.purge(&q).await.expect("purge");
        }
    }
}

#[tokio::test]
async fn lease_fate_after_a_cancelled_ack_and_a_cancelled_reap() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let hooks = b.test_hooks().expect("test hooks");
    let q = queue("cancel-fate");
    b.enqueue(&q, vec![NewItem::new("acked"), NewItem::new("reaped")])
        .await
        .expect("enqueue");
    let leases = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), 2);
    for lease in &leases {
        assert_eq!(
            b.cancel(&q, lease.key.id).await.expect("cancel"),
            Cancelled::Requested
        );
    }
    b.ack(&leases[0].key).await.expect("ack");
    hooks.expire_leases(&q).await.expect("expire");
    let report = b.reap(&q).await.expect("reap");
    assert_eq!(
        (report.cancelled, report.requeued, report.dead),
        (1, 0, 0),
        "{report:?}"
    );
    // Past `held_until`, only the traces tell the two apart.
    let now = b.now().await.expect("now").as_millis();
    let held_until = Timestamp::from_millis(now.saturating_sub(1));
    let acked = b
        .lease_fate(&leases[0].key, held_until)
        .await
        .expect("fate");
    assert_eq!(acked, LeaseFate::Finished { state: None });
    let reaped = b
        .lease_fate(&leases[1].key, held_until)
        .await
        .expect("fate");
    assert_eq!(reaped, LeaseFate::Lost);
}

#[tokio::test]
async fn a_claim_sent_again_after_a_reap_starts_without_the_old_progress() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let hooks = b.test_hooks().expect("test hooks");
    let q = queue("progress-reaped");
    b.enqueue(&q, vec![NewItem::new("x")])
        .await
        .expect("enqueue");
    let spec = ClaimSpec::new(1, TTL).expect("spec");
    let first = b.claim(&q, spec.duplicate()).await.expect("claim").leases;
    let key = first.first().expect("a lease").key.clone();
    b.progress(&key, Bytes::from_static(b"50%"))
        .await
        .expect("progress");
    let shown = b.item(&q, key.id).await.expect("item").progress;
    assert_eq!(shown.as_deref(), Some(&b"50%"[..]));
    hooks.expire_leases(&q).await.expect("expire");
    assert_eq!(b.reap(&q).await.expect("reap").requeued, 1);
    // The same claim sent again (its reply lost): the same token.
    let again = b.claim(&q, spec).await.expect("claim").leases;
    assert_eq!(again.first().map(|l| &l.key), Some(&key));
    let info = b.item(&q, key.id).await.expect("item");
    assert_eq!(
        info.progress, None,
        "the new lease shows the reaped one's progress"
    );
}

#[tokio::test]
async fn migration_0015_keeps_the_limits_of_an_older_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    let url = common::url(&path);
    {
        let options: sqlx::sqlite::SqliteConnectOptions = url
            .parse::<sqlx::sqlite::SqliteConnectOptions>()
            .expect("url")
            .create_if_missing(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.expect("open");
        let mut older = sqlx::migrate::Migrator::new(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/migrations"
        )))
        .await
        .expect("read the migrations");
        let before: Vec<_> = older
            .migrations
            .iter()
            .filter(|m| m.version < 15)
            .cloned()
            .collect();
        older.migrations = Cow::Owned(before);
        older.run(&pool).await.expect("migrate to 0014");
        sqlx::query(
            "INSERT INTO leaseq_queue_limits (queue, concurrency, rate, per_ms, window_used) \
             VALUES ('old', 3, 10, 1000, 4)",
        )
        .execute(&pool)
        .await
        .expect("a limits row");
        pool.close().await;
    }
    let b = common::open(&path).await;
    let q = queue("old");
    let rate = Rate::new(10, Duration::from_secs(1)).expect("rate");
    assert_eq!(
        b.queue_limits(&q).await.expect("read"),
        QueueLimits::NONE.concurrency(3).rate(rate)
    );
    assert!(!b.is_paused(&q).await.expect("is_paused"));
    b.pause(&q).await.expect("pause");
    assert!(b.is_paused(&q).await.expect("is_paused"));
}
