//! Job results and retention in a real browser (headless Chromium over
//! WebDriver), on the memory backend and a Redis server (skipped there
//! while its backend does not offer the History group): the Completed tab
//! says the queue keeps nothing and shows the command that turns
//! retention on; the retention form sets the policy (checked through the
//! backend); a job's page, opened while the item waits, follows it live
//! and shows the result its handler set once a worker ran it; the
//! Completed tab lists it with the result; and with retention off again,
//! an item finishing under a watching page shows "finished (not kept)".
//! Screenshots of the finished job's page and of the Completed tab go to
//! `docs/screenshots/`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use fantoccini::Locator;
use leaseq::{
    handler_fn, Backend, BackendExt as _, CancellationToken, Job, JobContext, Keep, MemoryBackend,
    NewItem, QueueName, Retention, Worker,
};
use leaseq_testkit::env;
use support::http::claim_one;
use support::page::{browser, click, redis, serve, wait_contains, wait_text};

async fn type_into(c: &fantoccini::Client, css: &str, text: &str) {
    let field = c.find(Locator::Css(css)).await.expect(css);
    field.clear().await.expect("clear");
    field.send_keys(text).await.expect("type");
}

async fn walk(backend: Arc<dyn Backend>, label: &str) {
    let Ok(history) = backend.history() else {
        // Not a failure: this backend does not keep finished items yet.
        eprintln!("skipped: job results in a browser on {label}: no History group");
        return;
    };
    let Some(browser) = browser().await else {
        return;
    };
    let c = &browser.client;
    let queue = QueueName::new(format!("thumbs-{}", env::tag())).expect("queue");
    let id = backend
        .enqueue_one(&queue, NewItem::new("cat.png"))
        .await
        .expect("enqueue");
    let stop = CancellationToken::new();
    let base = serve(backend.clone(), &stop).await;

    // Retention is off: the Completed tab says so, with the command.
    c.goto(&format!("{base}/#/queue/{queue}/completed"))
        .await
        .expect("goto");
    wait_contains(
        c,
        "#retention-off pre",
        &format!("leaseq retention {queue} "),
    )
    .await;
    wait_text(c, r#"#retention span[data-ending="completed"]"#, "not kept").await;

    // The form turns it on.
    click(c, "#edit-retention").await;
    click(c, "#keep-completed").await;
    type_into(c, "#completed-secs", "3600").await;
    type_into(c, "#completed-count", "100").await;
    click(c, "#save-retention").await;
    wait_contains(c, "#notice", "saved").await;
    let want =
        Retention::default().completed(Keep::for_age(Duration::from_secs(3600)).at_most(100));
    assert_eq!(history.retention(&queue).await.expect("retention"), want);
    wait_text(
        c,
        r#"#retention span[data-ending="completed"]"#,
        "kept for 1 h, the newest 100 at most",
    )
    .await;

    // The job's page, open while the item waits, follows it.
    c.goto(&format!("{base}/#/queue/{queue}/item/{id}"))
        .await
        .expect("goto");
    wait_contains(c, "#outcome", "in the queue: ready").await;
    let worker_stop = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .concurrency(1)
        .build(handler_fn(|job: Job, cx: JobContext| async move {
            let name = String::from_utf8_lossy(&job.payload).into_owned();
            cx.set_result(format!("thumbnail of {name}: 64x64"))?;
            Ok::<_, leaseq::Error>(())
        }))
        .expect("worker");
    let running = tokio::spawn(worker.run(worker_stop.clone()));
    wait_text(c, "#outcome", "finished: completed").await;
    wait_text(c, "#result pre", "thumbnail of cat.png: 64x64").await;
    wait_text(c, r#"dd[data-field="attempts"]"#, "1").await;
    browser.screenshot(&format!("job-result-{label}")).await;
    worker_stop.cancel();
    running.await.expect("join").expect("worker");

    // The Completed tab lists it with its result.
    c.goto(&format!("{base}/#/queue/{queue}/completed"))
        .await
        .expect("goto");
    let row = format!(r#"#finished tr[data-id="{id}"]"#);
    wait_contains(
        c,
        &format!(r#"{row} td[data-field="result"]"#),
        "thumbnail of cat.png",
    )
    .await;
    wait_text(c, &format!(r#"{row} td[data-field="ending"]"#), "completed").await;
    browser.screenshot(&format!("completed-{label}")).await;

    // Retention off again (asked first); an item finishing while its page
    // watches is "finished (not kept)".
    click(c, "#edit-retention").await;
    click(c, "#retention-nothing").await;
    click(c, "#modal-confirm").await;
    wait_contains(c, "#notice", "saved").await;
    assert_eq!(
        history.retention(&queue).await.expect("retention"),
        Retention::default()
    );
    let next = backend
        .enqueue_one(&queue, NewItem::new("dog.png"))
        .await
        .expect("enqueue");
    c.goto(&format!("{base}/#/queue/{queue}/item/{next}"))
        .await
        .expect("goto");
    wait_contains(c, "#outcome", "in the queue: ready").await;
    let lease = claim_one(backend.as_ref(), &queue).await;
    backend.ack(&lease.key).await.expect("ack");
    wait_text(c, "#outcome", "finished (not kept)").await;

    stop.cancel();
    let _ = browser.client.clone().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_appears_on_the_job_page_on_memory() {
    walk(Arc::new(MemoryBackend::new()), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_appears_on_the_job_page_on_redis() {
    let Some((backend, _guard)) = redis("dash-results").await else {
        return;
    };
    walk(backend, "redis").await;
}
