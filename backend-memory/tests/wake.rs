//! `wait_for_work`: woken by new work, capped by the timeout and by the
//! earliest due time. Time is tokio's paused clock, so nothing here sleeps.

mod common;

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::Duration;

use common::{fixture, items};
use leaseq_core::{Backend, NewItem};
use tokio::time::Instant;

const LONG: Duration = Duration::from_secs(3600);

#[tokio::test(start_paused = true)]
async fn returns_at_the_timeout_when_nothing_arrives() {
    let f = fixture();
    let start = Instant::now();
    f.backend
        .wait_for_work(&f.queue, Duration::from_secs(7))
        .await;
    assert_eq!(start.elapsed(), Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn returns_at_once_when_work_is_ready() {
    let f = fixture();
    f.push(items(&["a"])).await;
    let start = Instant::now();
    f.backend.wait_for_work(&f.queue, LONG).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
}

async fn woken_by<F, Fut>(f: Arc<common::Fixture>, act: F)
where
    F: FnOnce(Arc<common::Fixture>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let waiter = {
        let f = Arc::clone(&f);
        tokio::spawn(async move {
            let start = Instant::now();
            f.backend.wait_for_work(&f.queue, LONG).await;
            start.elapsed()
        })
    };
    // Let the waiter register; paused time advances only when all is idle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    act(f).await;
    let waited = waiter.await.expect("waiter");
    assert!(waited < LONG, "woken after {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn woken_by_enqueue() {
    let f = Arc::new(fixture());
    woken_by(f, |f| async move {
        f.push(items(&["a"])).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn woken_by_release() {
    let f = Arc::new(fixture());
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    woken_by(f, |f| async move {
        f.backend
            .release(&l.key, Duration::ZERO)
            .await
            .expect("release");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn woken_by_reap_and_redrive() {
    let f = Arc::new(fixture());
    f.push(vec![NewItem::new("a"), NewItem::new("b")]).await;
    let ls = f.claim(2).await;
    f.backend.fail(&ls[1].key, "x").await.expect("fail");
    woken_by(Arc::clone(&f), |f| async move {
        f.clock.advance(common::TTL);
        assert_eq!(f.backend.reap(&f.queue).await.expect("reap").requeued, 1);
    })
    .await;
    f.claim(1).await;
    woken_by(f, |f| async move {
        assert_eq!(
            f.backend
                .admin()
                .expect("admin")
                .redrive(&f.queue, 1)
                .await
                .expect("redrive"),
            1
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn woken_by_redrive_item() {
    let f = Arc::new(fixture());
    f.push(items(&["a"])).await;
    let l = f.claim(1).await.remove(0);
    f.backend.fail(&l.key, "x").await.expect("fail");
    woken_by(f, |f| async move {
        let moved = f
            .backend
            .admin()
            .expect("admin")
            .redrive_item(&f.queue, l.id())
            .await;
        assert!(moved.expect("redrive_item"), "the Dead item did not move");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn wakes_by_the_earliest_due_time() {
    let f = fixture();
    f.push(vec![
        NewItem::new("late").delay(Duration::from_secs(50)),
        NewItem::new("soon").delay(Duration::from_secs(20)),
    ])
    .await;
    let start = Instant::now();
    f.backend.wait_for_work(&f.queue, LONG).await;
    assert_eq!(start.elapsed(), Duration::from_secs(20));
    let start = Instant::now();
    f.backend
        .wait_for_work(&f.queue, Duration::from_secs(5))
        .await;
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(5),
        "the timeout caps the wait"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_wait_leaves_nothing_behind() {
    let f = fixture();
    let wait = f.backend.wait_for_work(&f.queue, LONG);
    let _ = tokio::time::timeout(Duration::from_secs(1), wait).await;
    f.push(items(&["a"])).await;
    let start = Instant::now();
    f.backend.wait_for_work(&f.queue, LONG).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn woken_by_a_reap_that_promotes_a_due_item() {
    let f = Arc::new(fixture());
    // Due after the wait's timeout: only the reap's wake-up ends it sooner.
    let delay = 2 * LONG;
    f.push(vec![NewItem::new("a").delay(delay)]).await;
    woken_by(f, |f| async move {
        f.clock.advance(delay);
        f.backend.reap(&f.queue).await.expect("reap");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn returns_at_once_when_a_scheduled_item_is_overdue() {
    let f = fixture();
    f.push(vec![NewItem::new("a").delay(Duration::from_secs(5))])
        .await;
    f.clock.advance(Duration::from_secs(6));
    let start = Instant::now();
    f.backend.wait_for_work(&f.queue, LONG).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
}
