//! What the History group keeps on PostgreSQL beyond the shared checks:
//! every statement that ends a cancel-requested lease (release, snooze,
//! give_back, fail, the reap) records it Cancelled in that statement; an
//! ending kept by one handle fires the finished signal of another handle
//! on the database (the `done <queue>` notification) and an ending not
//! kept sends none; a count bound lets `collect` remove what lies past
//! it, oldest first.

mod common;

use std::time::Duration;

use leaseq_core::{
    Backend, BackendExt, Bytes, Ending, Error, History, ItemId, Keep, LeaseKey, QueueName,
    Retention,
};
use leaseq_postgres::PgBackend;

const TTL: Duration = Duration::from_secs(30);

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

fn history(b: &PgBackend) -> &dyn History {
    b.history().expect("history")
}

/// Enqueues one item, claims it for `ttl` and asks for its cancel.
async fn cancelled_lease(b: &PgBackend, queue: &QueueName, ttl: Duration) -> LeaseKey {
    b.push(queue, "x").await.expect("push");
    let lease = b
        .claim_one(queue, ttl)
        .await
        .expect("claim")
        .expect("a lease");
    b.control()
        .expect("control")
        .cancel(queue, lease.id())
        .await
        .expect("cancel");
    lease.key
}

async fn ending_of(b: &PgBackend, queue: &QueueName, id: ItemId) -> Option<Ending> {
    match history(b).finished_item(queue, id).await {
        Ok(f) => Some(f.ending),
        Err(Error::NotFound { .. }) => None,
        Err(e) => panic!("finished_item: {e}"),
    }
}

#[tokio::test]
async fn every_ending_of_a_cancelled_lease_is_recorded_cancelled() {
    let Some(db) = common::TestDb::new("histend").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("ends");
    let keep_all = Retention::default()
        .completed(Keep::FOREVER)
        .cancelled(Keep::FOREVER);
    history(b)
        .set_retention(&queue, keep_all)
        .await
        .expect("set_retention");

    let released = cancelled_lease(b, &queue, TTL).await;
    b.release(&released, Duration::ZERO).await.expect("release");
    let snoozed = cancelled_lease(b, &queue, TTL).await;
    b.control()
        .expect("control")
        .snooze(&snoozed, Duration::from_secs(60))
        .await
        .expect("snooze");
    let given = cancelled_lease(b, &queue, TTL).await;
    b.give_back(&given).await.expect("give_back");
    let failed = cancelled_lease(b, &queue, TTL).await;
    b.fail(&failed, "boom").await.expect("fail");
    let reaped = cancelled_lease(b, &queue, Duration::from_millis(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = b.reap(&queue).await.expect("reap");
    assert_eq!(report.cancelled, 1, "the reap ends the cancelled lease");

    for key in [&released, &snoozed, &given, &failed, &reaped] {
        assert_eq!(
            ending_of(b, &queue, key.id).await,
            Some(Ending::Cancelled),
            "item {} is recorded Cancelled",
            key.id
        );
    }
    let stats = b.stats(&queue).await.expect("stats");
    assert_eq!(
        stats.ready + stats.scheduled + stats.leased + stats.dead,
        0,
        "no cancelled item stays in the queue: {stats:?}"
    );

    // An ack_many of a cancel-requested lease and of a plain one.
    let cancelled = cancelled_lease(b, &queue, TTL).await;
    b.push(&queue, "y").await.expect("push");
    let plain = b
        .claim_one(&queue, TTL)
        .await
        .expect("claim")
        .expect("a lease")
        .key;
    let acked = b
        .ack_many(&[cancelled.clone(), plain.clone()])
        .await
        .expect("ack_many");
    assert!(acked.iter().all(Result::is_ok), "{acked:?}");
    assert_eq!(
        ending_of(b, &queue, cancelled.id).await,
        Some(Ending::Cancelled)
    );
    assert_eq!(
        ending_of(b, &queue, plain.id).await,
        Some(Ending::Completed)
    );
}

#[tokio::test]
async fn a_kept_ending_fires_the_signal_of_another_handle() {
    let Some(db) = common::TestDb::new("histsig").await else {
        return;
    };
    let writer = &db.backend;
    let reader = PgBackend::connect(&common::url(), common::options(&db.schema))
        .await
        .expect("second handle");
    let queue = q("signalled");
    let mut signal = history(&reader)
        .finished_signal(&queue)
        .await
        .expect("finished_signal");
    // The listener fires everyone once it has connected: wait that out.
    tokio::time::timeout(Duration::from_secs(10), signal.changed())
        .await
        .expect("the listener connects");

    // Nothing kept: no notification.
    writer.push(&queue, "a").await.expect("push");
    let lease = writer
        .claim_one(&queue, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    writer.ack(&lease.key).await.expect("ack");
    let quiet = tokio::time::timeout(Duration::from_millis(500), signal.changed()).await;
    assert!(
        quiet.is_err(),
        "an ending not kept fired the finished signal"
    );

    history(writer)
        .set_retention(&queue, Retention::default().completed(Keep::count(5)))
        .await
        .expect("set_retention");
    writer.push(&queue, "b").await.expect("push");
    let lease = writer
        .claim_one(&queue, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    history(writer)
        .complete(&lease.key, Bytes::from_static(b"done"))
        .await
        .expect("complete");
    tokio::time::timeout(Duration::from_secs(10), signal.changed())
        .await
        .expect("a kept ending in another handle fires the finished signal");
    let got = history(&reader)
        .finished_item(&queue, lease.id())
        .await
        .expect("kept");
    assert_eq!(got.result.as_deref(), Some(b"done".as_slice()));
}

#[tokio::test]
async fn collect_removes_what_lies_past_the_count_oldest_first() {
    let Some(db) = common::TestDb::new("histcount").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("counted");
    history(b)
        .set_retention(&queue, Retention::default().completed(Keep::count(3)))
        .await
        .expect("set_retention");
    let mut done = Vec::new();
    for _ in 0..7 {
        b.push(&queue, "x").await.expect("push");
        let lease = b
            .claim_one(&queue, TTL)
            .await
            .expect("claim")
            .expect("a lease");
        b.ack(&lease.key).await.expect("ack");
        done.push(lease.id());
    }
    // Past the bound until the collect: not listed, still stored.
    let listed: Vec<ItemId> = history(b)
        .finished(&queue, None, 100)
        .await
        .expect("finished")
        .iter()
        .map(|f| f.id)
        .collect();
    assert_eq!(listed, vec![done[6], done[5], done[4]]);
    assert_eq!(history(b).collect(&queue).await.expect("collect"), 4);
    assert_eq!(history(b).collect(&queue).await.expect("collect"), 0);
    for (i, id) in done.iter().enumerate() {
        let kept = ending_of(b, &queue, *id).await.is_some();
        assert_eq!(kept, i >= 4, "item {id} (ending {i}) kept: {kept}");
    }
}

/// Kept completions of `queue`: `n` items enqueued, claimed and acked in
/// batches of 1,000.
async fn keep_completions(b: &PgBackend, queue: &QueueName, n: usize) {
    let mut left = n;
    while left > 0 {
        let batch = left.min(1_000);
        let items = (0..batch).map(|_| leaseq_core::NewItem::new("k")).collect();
        b.enqueue(queue, items).await.expect("enqueue");
        let leases = b
            .claim_up_to(queue, u32::try_from(batch).expect("small"), TTL)
            .await
            .expect("claim")
            .leases;
        let keys: Vec<LeaseKey> = leases.into_iter().map(|l| l.key).collect();
        b.ack_many(&keys).await.expect("ack_many");
        left -= batch;
    }
}

/// The sum of `queue`'s kept counts of `ending` (migration 0020).
async fn kept_count(b: &PgBackend, schema: &str, queue: &str, ending: &str) -> i64 {
    sqlx::query_scalar::<_, Option<i64>>(&format!(
        "SELECT sum(n)::bigint FROM \"{schema}\".leaseq_kept_counts WHERE queue = $1 AND ending = $2"
    ))
    .bind(queue)
    .bind(ending)
    .fetch_one(b.pool())
    .await
    .expect("kept count")
    .unwrap_or(0)
}

/// Shared buffers a run of `sql` (the backend's prepared statement) reads,
/// under `EXPLAIN (ANALYZE, BUFFERS)`.
async fn buffers(b: &PgBackend, sql: &str, types: &str, args: &str) -> u64 {
    let mut c = b.pool().acquire().await.expect("connection");
    sqlx::raw_sql(&format!("PREPARE counted({types}) AS {sql}"))
        .execute(&mut *c)
        .await
        .expect("prepare");
    let lines: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN (ANALYZE, BUFFERS) EXECUTE counted({args})"
    ))
    .fetch_all(&mut *c)
    .await
    .expect("explain");
    sqlx::raw_sql("DEALLOCATE counted")
        .execute(&mut *c)
        .await
        .expect("deallocate");
    // The first `Buffers:` line is the root node's, which counts its
    // children's and its subplans'.
    let line = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Buffers: shared"))
        .unwrap_or_else(|| panic!("no buffers in the plan: {lines:#?}"));
    ["hit=", "read="]
        .iter()
        .filter_map(|key| {
            let at = line.find(key)? + key.len();
            let digits: String = line[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().ok()
        })
        .sum()
}

/// A count bound is collected from the kept counts: every kept ending
/// adds to them and every removal takes away, so `collect` finds how many
/// lie past the bound without walking the ones it keeps. With 20,000 kept
/// under a bound of a million, the count statement reads a few buffers
/// (a walk of the bound's newest entries read every leaf page of the
/// 20,000); past the bound it removes the oldest, and the counts follow.
#[tokio::test]
async fn a_count_bound_is_collected_from_the_kept_counts() {
    let Some(one) = common::plans::OneConnection::new("kept_counts").await else {
        return;
    };
    let (b, schema) = (&one.backend, one.schema.as_str());
    let queue = q("counted");
    let keep = |n| Retention::default().completed(Keep::count(n));
    history(b)
        .set_retention(&queue, keep(1_000_000))
        .await
        .expect("retention");
    keep_completions(b, &queue, 20_000).await;
    assert_eq!(kept_count(b, schema, "counted", "completed").await, 20_000);
    assert_eq!(history(b).collect(&queue).await.expect("collect"), 0);

    let sql = common::plans::prepared(b, "excess AS MATERIALIZED").await;
    sqlx::query(&format!("VACUUM ANALYZE \"{schema}\".leaseq_finished"))
        .execute(b.pool())
        .await
        .expect("analyze");
    let read = buffers(b, &sql, "text, text, int8", "'counted', 'completed', 1000").await;
    eprintln!("the count collect read {read} buffers");
    assert!(
        read < 20,
        "the count collect read {read} buffers with nothing past the bound"
    );

    // A lower bound: the oldest go, the counts follow.
    history(b)
        .set_retention(&queue, keep(15_000))
        .await
        .expect("retention");
    assert_eq!(kept_count(b, schema, "counted", "completed").await, 15_000);
    let listed = history(b)
        .finished(&queue, Some(Ending::Completed), 1)
        .await
        .expect("finished");
    let newest = listed[0].id;
    keep_completions(b, &queue, 10).await;
    assert_eq!(history(b).collect(&queue).await.expect("collect"), 10);
    assert_eq!(kept_count(b, schema, "counted", "completed").await, 15_000);
    assert!(
        history(b).finished_item(&queue, newest).await.is_ok(),
        "the newest kept before stays"
    );
    // A purge takes the counts with the items.
    b.admin()
        .expect("admin")
        .purge(&queue)
        .await
        .expect("purge");
    assert_eq!(kept_count(b, schema, "counted", "completed").await, 0);
}
