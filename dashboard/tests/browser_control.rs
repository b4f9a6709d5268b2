//! Control of running work through the dashboard in a real browser
//! (headless Chromium over WebDriver), on the memory backend and a Redis
//! server: pausing a queue asks first, and then a running worker claims
//! nothing from it while the overview shows it paused; cancelling asks
//! first, and ends a waiting item at once, from its row or its own page;
//! resuming lets the worker claim again; the Workers page lists the job it
//! runs; and cancelling that leased job stops its handler, after which the
//! item is gone. Each step is checked through the backend, not only on the
//! page. A screenshot of the Workers page goes to `docs/screenshots/`.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq::{
    handler_fn, Backend, BackendExt as _, CancellationToken, Error, ItemId, Job, JobContext,
    MemoryBackend, NewItem, QueueName, Worker,
};
use leaseq_testkit::env;
use support::page::{browser, click, redis, serve, wait_contains, wait_text};

/// Waits until `done` holds, checking every 50 ms for 30 s.
async fn eventually<F, Fut>(what: &str, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn gone(backend: &dyn Backend, queue: &QueueName, id: ItemId) -> bool {
    matches!(backend.item(queue, id).await, Err(Error::NotFound { .. }))
}

/// The walk through pause, cancel and resume, on one backend.
async fn walk(backend: Arc<dyn Backend>, label: &str) {
    let Some(browser) = browser().await else {
        return;
    };
    let c = &browser.client;
    let queue = QueueName::new(format!("uploads-{}", env::tag())).expect("queue");
    let later = NewItem::new("later").delay(Duration::from_secs(3600));
    let ids: Vec<ItemId> = backend
        .enqueue(
            &queue,
            vec![NewItem::new("first"), NewItem::new("second"), later],
        )
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    let (first, second, scheduled) = (ids[0], ids[1], ids[2]);
    let control = backend.control().expect("the Control group");
    let stop = CancellationToken::new();
    let base = serve(backend.clone(), &stop).await;

    // Pause from the queue's page: it asks first, and "Cancel" keeps it running.
    c.goto(&format!("{base}/#/queue/{queue}/ready"))
        .await
        .expect("goto");
    wait_text(
        c,
        &format!(r#"tr[data-id="{first}"] a"#),
        &first.to_string(),
    )
    .await;
    click(c, "button.pause").await;
    click(c, "#modal-cancel").await;
    assert!(!control.is_paused(&queue).await.expect("is_paused"));
    click(c, "button.pause").await;
    click(c, "#modal-confirm").await;
    wait_contains(c, "#notice", "paused").await;
    assert!(control.is_paused(&queue).await.expect("is_paused"));
    wait_text(c, "h1 .badge", "paused").await;

    // A worker starts on the paused queue and leases nothing. Its handler
    // runs until the job is cancelled.
    let worker_stop = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .concurrency(1)
        .lease_ttl(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(200))
        .shutdown_deadline(Duration::from_millis(500))
        .build(handler_fn(|_job: Job, cx: JobContext| async move {
            cx.cancelled().await;
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let running = tokio::spawn(worker.run(worker_stop.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(backend.stats(&queue).await.expect("stats").leased, 0);

    // Cancel a Ready item from its row: asked first, then gone at once.
    click(c, &format!(r#"tr[data-id="{second}"] .cancel-one"#)).await;
    click(c, "#modal-cancel").await;
    assert!(!gone(backend.as_ref(), &queue, second).await);
    click(c, &format!(r#"tr[data-id="{second}"] .cancel-one"#)).await;
    click(c, "#modal-confirm").await;
    wait_contains(c, "#notice", "cancelled (it was ready)").await;
    assert!(gone(backend.as_ref(), &queue, second).await);

    // Cancel the Scheduled one from its own page.
    c.goto(&format!("{base}/#/queue/{queue}/item/{scheduled}"))
        .await
        .expect("goto");
    wait_text(c, r#"dd[data-field="state"]"#, "scheduled").await;
    click(c, "#cancel-item").await;
    click(c, "#modal-confirm").await;
    wait_contains(c, "#notice", "cancelled (it was scheduled)").await;
    assert!(gone(backend.as_ref(), &queue, scheduled).await);

    // The overview shows the pause; Resume there lets the worker claim.
    c.goto(&format!("{base}/#/")).await.expect("goto");
    let row = format!(r#"tr[data-queue="{queue}"]"#);
    wait_text(c, &format!("{row} .badge"), "paused").await;
    assert_eq!(backend.stats(&queue).await.expect("stats").leased, 0);
    click(c, &format!("{row} button.resume")).await;
    wait_contains(c, "#notice", "resumed").await;
    assert!(!control.is_paused(&queue).await.expect("is_paused"));
    eventually(
        "the worker claims the first item after the resume",
        || async { backend.stats(&queue).await.expect("stats").leased == 1 },
    )
    .await;
    wait_text(c, &format!("{row} button.pause"), "Pause…").await;

    // The Workers page lists the worker with the job it runs.
    click(c, "#nav-workers").await;
    let job = format!(r#"tr[data-worker] li[data-id="{first}"]"#);
    wait_contains(c, &job, &format!("item {first} (attempt 1")).await;
    wait_contains(c, r#"tr[data-worker] td[data-field="running"]"#, "1 of 1").await;
    browser.screenshot(&format!("workers-{label}")).await;

    // Cancel the running job from the Leased view: its handler is stopped
    // at the next heartbeat and the item ends, cancelled.
    c.goto(&format!("{base}/#/queue/{queue}/leased"))
        .await
        .expect("goto");
    click(c, &format!(r#"tr[data-id="{first}"] .cancel-one"#)).await;
    click(c, "#modal-confirm").await;
    wait_contains(c, "#notice", "Cancel requested").await;
    eventually("the cancelled job's item is gone", || async {
        gone(backend.as_ref(), &queue, first).await
    })
    .await;
    assert_eq!(backend.stats(&queue).await.expect("stats").total(), 0);

    worker_stop.cancel();
    running.await.expect("join").expect("worker");
    stop.cancel();
    let _ = browser.client.clone().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_cancel_work_in_a_browser_on_memory() {
    walk(Arc::new(MemoryBackend::new()), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_cancel_work_in_a_browser_on_redis() {
    let Some((backend, _guard)) = redis("dash-control").await else {
        return;
    };
    walk(backend, "redis").await;
}
