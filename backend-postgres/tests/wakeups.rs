//! `LISTEN/NOTIFY` wake-ups: an idle waiter wakes when another process
//! enqueues, long before its poll interval, also after its listener
//! connection was killed; and when it resumes the queue or runs a waiting
//! item now.

mod common;

use std::time::Duration;

use std::future::Future;

use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
use leaseq_postgres::PgBackend;
use sqlx::{Connection, PgConnection};

/// Far longer than the test may take: a wake-up can only come from a
/// notification.
const POLL: Duration = Duration::from_secs(300);

/// Waits on `waiter` while `producer` pushes every 100 ms (the waiter may
/// not be listening yet when the first push goes out); true when the wait
/// ended before the deadline.
async fn woken(waiter: &PgBackend, producer: &PgBackend, queue: &QueueName) -> bool {
    woken_by(waiter, queue, || async {
        producer.push(queue, "wake").await.expect("push");
    })
    .await
}

/// Waits on `waiter` while `poke` runs every 100 ms; true when the wait
/// ended before the deadline.
async fn woken_by<F, Fut>(waiter: &PgBackend, queue: &QueueName, mut poke: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let w = waiter.clone();
    let q = queue.clone();
    let mut wait = tokio::spawn(async move { w.wait_for_work(&q, POLL).await });
    for _ in 0..100 {
        poke().await;
        if tokio::time::timeout(Duration::from_millis(100), &mut wait)
            .await
            .is_ok()
        {
            return true;
        }
    }
    wait.abort();
    false
}

#[tokio::test]
async fn waiters_wake_on_notify_and_after_the_listener_is_killed() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("wake");
    let app = format!("leaseq-wake-{schema}");
    let waiter = PgBackend::connect(
        &common::url(),
        common::options(&schema)
            .poll_interval(POLL)
            .application_name(&app),
    )
    .await
    .expect("waiter");
    let producer = PgBackend::connect(&common::url(), common::options(&schema))
        .await
        .expect("producer");
    let queue = QueueName::new("wake").expect("name");
    let other = QueueName::new("other").expect("name");

    assert!(
        woken(&waiter, &producer, &queue).await,
        "no wake-up from NOTIFY"
    );

    let mut c = PgConnection::connect(&common::url()).await.expect("killer");
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1 AND query ILIKE 'LISTEN%'",
    )
    .bind(&app)
    .fetch_one(&mut c)
    .await
    .expect("terminate");
    assert_eq!(killed, 1, "exactly one listener connection per backend");
    let _ = c.close().await;

    assert!(
        woken(&waiter, &producer, &queue).await,
        "no wake-up after the listener was killed"
    );
    // Wait until the listener is back, then prove NOTIFY reaches it again.
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("observer");
    let mut back = false;
    for _ in 0..300 {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'",
        )
        .bind(&app)
        .fetch_one(&mut c)
        .await
        .expect("observe");
        if n == 1 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = c.close().await;
    assert!(back, "the listener did not reconnect");
    assert!(
        woken(&waiter, &producer, &queue).await,
        "no wake-up after the listener reconnected"
    );
    // Notifications are per queue: the other queue's waiter keeps sleeping
    // while this queue gets work.
    let w = waiter.clone();
    let o = other.clone();
    let other_wait = tokio::spawn(async move { w.wait_for_work(&o, POLL).await });
    assert!(woken(&waiter, &producer, &queue).await);
    assert!(!other_wait.is_finished(), "a waiter on another queue woke");
    other_wait.abort();

    drop((waiter, producer));
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn resume_and_run_now_wake_waiters() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("wakectl");
    let waiter = PgBackend::connect(&common::url(), common::options(&schema).poll_interval(POLL))
        .await
        .expect("waiter");
    let operator = PgBackend::connect(&common::url(), common::options(&schema))
        .await
        .expect("operator");
    let control = operator.control().expect("control");
    let queue = QueueName::new("wake").expect("name");
    assert!(
        woken_by(&waiter, &queue, || async {
            control.pause(&queue).await.expect("pause");
            control.resume(&queue).await.expect("resume");
        })
        .await,
        "no wake-up from resume"
    );
    assert!(
        woken_by(&waiter, &queue, || async {
            let id = operator
                .enqueue_one(&queue, NewItem::new("later").delay(POLL))
                .await
                .expect("push");
            assert!(control.run_now(&queue, id).await.expect("run_now"));
        })
        .await,
        "no wake-up from run_now"
    );
    assert!(
        woken_by(&waiter, &queue, || async {
            operator
                .enqueue_one(&queue, NewItem::new("later").delay(POLL))
                .await
                .expect("push");
            assert_eq!(
                control.run_all_now(&queue, 10).await.expect("run_all_now"),
                1
            );
        })
        .await,
        "no wake-up from run_all_now"
    );
    drop((waiter, operator));
    common::drop_schema(&schema).await;
}
