//! Paging, finding an item and the charts' history in a real browser
//! (headless Chromium over WebDriver), on the memory backend and a Redis
//! server: a queue of 250 items shows in pages of 100 with Next and
//! Previous; the header's form opens an item by id, whose page shows its
//! times, and says so when the queue holds no such item; while a worker
//! drains the queue the overview's charts fill from the server's history,
//! and a reload shows the same history, on a labelled time axis.
//! Screenshots of the overview and of an item's page go to
//! `docs/screenshots/`.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use leaseq::{
    handler_fn, Backend, CancellationToken, ClaimSpec, ItemId, Job, JobContext, MemoryBackend,
    NewItem, QueueName, Worker,
};
use leaseq_testkit::env;
use support::page::{browser, click, redis, serve, wait_contains, wait_for, wait_text};

const ITEMS: usize = 250;
/// Items the worker leaves, so the queue stays on the overview.
const LEFT: u64 = 60;

/// The first row's item id on the queue's page.
async fn first_row(c: &Client) -> String {
    c.find(Locator::Css("#items tbody tr"))
        .await
        .expect("a row")
        .attr("data-id")
        .await
        .expect("attr")
        .unwrap_or_default()
}

/// Waits until the page shows `range` and its first row is `id`.
async fn wait_page(c: &Client, range: &str, id: ItemId) {
    wait_text(c, "#page-range", range).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while first_row(c).await != id.to_string() {
        assert!(Instant::now() < deadline, "{range}: first row is not {id}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An attribute of the element `css`, once the page shows it.
async fn attr(c: &Client, css: &str, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            if let Ok(Some(v)) = e.attr(name).await {
                return v;
            }
        }
        assert!(Instant::now() < deadline, "{css} has no {name}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The samples the depth chart drew.
async fn drawn(c: &Client) -> usize {
    attr(c, "#chart-depth", "data-samples")
        .await
        .parse()
        .expect("a count")
}

async fn walk(backend: Arc<dyn Backend>, label: &str) {
    let Some(browser) = browser().await else {
        return;
    };
    let c = &browser.client;
    let tag = env::tag();
    let queue = QueueName::new(format!("emails-{tag}")).expect("queue");
    let reports = QueueName::new(format!("reports-{tag}")).expect("queue");
    let items = (0..ITEMS)
        .map(|i| NewItem::new(format!("{{\"to\":\"user{i}@example.com\"}}")))
        .collect();
    let ids: Vec<ItemId> = backend
        .enqueue(&queue, items)
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    // Other states, so the charts and the item's page have more to show.
    let later = (0..30)
        .map(|i| NewItem::new(format!("report {i}")).delay(Duration::from_secs(3600)))
        .collect();
    let scheduled = backend.enqueue(&reports, later).await.expect("enqueue")[0].id;
    let failing = (0..12)
        .map(|i| NewItem::new(format!("broken report {i}")).max_attempts(1))
        .collect();
    backend.enqueue(&reports, failing).await.expect("enqueue");
    let spec = ClaimSpec::new(12, Duration::from_secs(60)).expect("spec");
    for lease in backend.claim(&reports, spec).await.expect("claim").leases {
        backend
            .fail(&lease.key, "template not found")
            .await
            .expect("fail");
    }
    let stop = CancellationToken::new();
    let base = serve(backend.clone(), &stop).await;

    // Pages of 100: Next twice, then Previous.
    c.goto(&format!("{base}/#/queue/{queue}/ready"))
        .await
        .expect("goto");
    wait_page(c, "Items 1–100 of 250", ids[0]).await;
    attr(c, "#page-prev", "disabled").await; // present: the first page
    click(c, "#page-next").await;
    wait_page(c, "Items 101–200 of 250", ids[100]).await;
    click(c, "#page-next").await;
    wait_page(c, "Items 201–250 of 250", ids[200]).await;
    attr(c, "#page-next", "disabled").await; // present: the last page
    let rows = c
        .find_all(Locator::Css("#items tbody tr"))
        .await
        .expect("rows");
    assert_eq!(rows.len(), 50);
    click(c, "#page-prev").await;
    wait_page(c, "Items 101–200 of 250", ids[100]).await;

    // Find an item by id from the header: the queue is filled in.
    let wanted = ids[180];
    let field = c.find(Locator::Css("#find-id")).await.expect("find-id");
    field.send_keys(&wanted.to_string()).await.expect("type");
    click(c, "#find button").await;
    wait_text(c, r#"dd[data-field="id"]"#, &wanted.to_string()).await;
    wait_contains(c, r#"dd[data-field="enqueued"] time"#, "ago").await;
    let enqueued: u64 = attr(c, r#"dd[data-field="enqueued"] time"#, "data-ms")
        .await
        .parse()
        .expect("ms");
    let item = backend.item(&queue, wanted).await.expect("item");
    assert_eq!(enqueued, item.enqueued_at.as_millis());
    // An id the queue does not hold says so.
    let field = c.find(Locator::Css("#find-id")).await.expect("find-id");
    field.clear().await.expect("clear");
    field.send_keys("999999999").await.expect("type");
    click(c, "#find button").await;
    wait_contains(c, "#not-found", "holds no item 999999999").await;

    // A Scheduled item's page shows when it was enqueued and when it is due.
    c.goto(&format!("{base}/#/queue/{reports}/item/{scheduled}"))
        .await
        .expect("goto");
    wait_for(
        c,
        r#"dd[data-field="due"] time"#,
        "due in about an hour",
        |t| t.starts_with("in 59 min") || t == "in 1 h",
    )
    .await;
    wait_contains(c, r#"dd[data-field="enqueued"] time"#, "ago").await;
    browser.screenshot(&format!("item-{label}")).await;

    // A worker drains most of the queue while the overview is open.
    c.goto(&format!("{base}/#/")).await.expect("goto");
    let worker_stop = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .concurrency(1)
        .build(handler_fn(|_job: Job, _cx: JobContext| async move {
            tokio::time::sleep(Duration::from_millis(25)).await;
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let running = tokio::spawn(worker.run(worker_stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(120);
    while backend.stats(&queue).await.expect("stats").total() > LEFT {
        assert!(
            Instant::now() < deadline,
            "the worker never drained the queue"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker_stop.cancel();
    running.await.expect("join").expect("worker");
    // A few flat samples after the fall.
    let flat_from = drawn(c).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while drawn(c).await < flat_from + 5 {
        assert!(Instant::now() < deadline, "the chart stopped growing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A reload draws the same history: the server kept it.
    let before = drawn(c).await;
    let first = attr(c, "#chart-depth", "data-first-ms").await;
    c.refresh().await.expect("reload");
    wait_contains(c, "#chart-caption", "samples so far").await;
    let after = drawn(c).await;
    assert!(
        after >= before,
        "a reload lost history: {before} samples drawn before, {after} after"
    );
    assert_eq!(
        attr(c, "#chart-depth", "data-first-ms").await,
        first,
        "the history starts where it did"
    );
    let ticks = attr(c, "#chart-depth", "data-ticks").await;
    let labels: Vec<&str> = ticks.split(',').filter(|t| !t.is_empty()).collect();
    assert!(!labels.is_empty(), "no time labels");
    for l in &labels {
        let ok = l.len() >= 5 && l.chars().all(|ch| ch.is_ascii_digit() || ch == ':');
        assert!(ok, "{l:?} is not a time of day (labels: {labels:?})");
    }
    wait_text(
        c,
        &format!(r#"tr[data-queue="{reports}"] td[data-state="dead"]"#),
        "12",
    )
    .await;
    browser.screenshot(&format!("overview-{label}")).await;

    stop.cancel();
    let _ = browser.client.clone().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_finding_and_history_in_a_browser_on_memory() {
    walk(Arc::new(MemoryBackend::new()), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_finding_and_history_in_a_browser_on_redis() {
    let Some((backend, _guard)) = redis("dash-history").await else {
        return;
    };
    walk(backend, "redis").await;
}
