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
