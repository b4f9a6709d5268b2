//! The dashboard in a real browser (headless Chromium over WebDriver),
//! against the memory backend and a Redis server: it sees enqueued items,
//! watches a worker drain them, shows hostile payloads as text, redrives a
//! dead item with its button, removes one and purges the queue behind a
//! confirmation, and shows a backend error on the page. A screenshot of
//! the dead letters goes to `docs/screenshots/` (the overview's comes from
//! `browser_history.rs`, whose charts have a history).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use leaseq::layer::fault::{Fault, Faults, Op};
use leaseq::{
    handler_fn, Backend, CancellationToken, ClaimSpec, ItemId, ItemState, Job, JobContext,
    MemoryBackend, NewItem, QueueName, Worker,
};
use leaseq_testkit::env;
use support::page::{browser, click, redis, serve, wait_contains, wait_text};

const XSS: &str = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">";
const NOT_UTF8: &[u8] = &[0xff, 0xfe, b'<'];
const JOBS: usize = 20;

/// Enqueues the hostile, the binary and the huge payload, and a plain one,
/// each allowed one attempt, and kills them all. Returns their ids.
async fn dead_letters(backend: &dyn Backend, queue: &QueueName) -> Vec<ItemId> {
    let payloads: Vec<Vec<u8>> = vec![
        XSS.as_bytes().to_vec(),
        NOT_UTF8.to_vec(),
        vec![b'x'; 100 * 1024],
        b"plain".to_vec(),
    ];
    let items = payloads
        .into_iter()
        .map(|p| NewItem::new(p).max_attempts(1))
        .collect();
    let ids: Vec<ItemId> = backend
        .enqueue(queue, items)
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    let spec = ClaimSpec::new(4, Duration::from_secs(60)).expect("spec");
    let claimed = backend.claim(queue, spec).await.expect("claim");
    assert_eq!(claimed.leases.len(), 4);
    for lease in &claimed.leases {
        backend
            .fail(&lease.key, "the handler said <b>no</b>")
            .await
            .expect("fail");
    }
    assert_eq!(backend.stats(queue).await.expect("stats").dead, 4);
    ids
}

/// The whole walk through the page, on one backend.
async fn walk(backend: Arc<dyn Backend>, label: &str) {
    let Some(browser) = browser().await else {
        return;
    };
    let c = &browser.client;
    let tag = env::tag();
    let work = QueueName::new(format!("emails-{tag}")).expect("queue");
    let dead = QueueName::new(format!("reports-{tag}")).expect("queue");
    let jobs = (0..JOBS)
        .map(|i| NewItem::new(format!("job {i}")))
        .collect();
    backend.enqueue(&work, jobs).await.expect("enqueue");
    let ids = dead_letters(backend.as_ref(), &dead).await;
    let stop = CancellationToken::new();
    let base = serve(backend.clone(), &stop).await;

    // The overview sees the enqueued items.
    c.goto(&format!("{base}/#/")).await.expect("goto");
    let ready = format!(r#"tr[data-queue="{work}"] td[data-state="ready"]"#);
    wait_text(c, &ready, &JOBS.to_string()).await;
    wait_text(
        c,
        &format!(r#"tr[data-queue="{dead}"] td[data-state="dead"]"#),
        "4",
    )
    .await;

    // A worker drains the queue; the page's count falls as it runs.
    let worker_stop = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), work.as_str())
        .concurrency(1)
        .build(handler_fn(|_job: Job, _cx: JobContext| async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let running = tokio::spawn(worker.run(worker_stop.clone()));
    let total = format!(r#"tr[data-queue="{work}"] td[data-state="total"]"#);
    let mut seen: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Once empty the queue leaves the listing, so its row goes too.
    while Instant::now() < deadline {
        match c.find(Locator::Css(&total)).await {
            Ok(cell) => {
                // A row being redrawn reads empty for a moment.
                let t = cell.text().await.unwrap_or_default();
                if !t.is_empty() && seen.last() != Some(&t) {
                    seen.push(t);
                }
            }
            Err(_) if !seen.is_empty() => break,
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("{label}: the page showed the total go {seen:?}");
    assert_eq!(seen.first().map(String::as_str), Some("20"), "{seen:?}");
    assert!(
        seen.len() >= 3,
        "the page should show counts between 20 and the end: {seen:?}"
    );
    assert_eq!(backend.stats(&work).await.expect("stats").total(), 0);
    worker_stop.cancel();
    running.await.expect("join").expect("worker");

    // Dead letters: every payload shows as text.
    c.goto(&format!("{base}/#/queue/{dead}/dead"))
        .await
        .expect("goto");
    let xss_row = format!(r#"tr[data-id="{}"] pre.payload"#, ids[0]);
    wait_text(c, &xss_row, XSS).await;
    wait_text(
        c,
        &format!(r#"tr[data-id="{}"] pre.payload"#, ids[1]),
        "ff fe 3c",
    )
    .await;
    wait_contains(
        c,
        &format!(r#"tr[data-id="{}"] small.payload-meta"#, ids[2]),
        "102400 bytes, cut",
    )
    .await;
    wait_contains(
        c,
        &format!(r#"tr[data-id="{}"]"#, ids[3]),
        "the handler said <b>no</b>",
    )
    .await;
    browser.screenshot(&format!("dead-letters-{label}")).await;

    // Open the hostile item and redrive it with the button.
    click(c, &format!(r#"tr[data-id="{}"] a"#, ids[0])).await;
    wait_text(c, r#"dd[data-field="state"]"#, "dead").await;
    click(c, "#redrive-item").await;
    wait_contains(c, "#notice", "Ready again").await;
    let item = backend.item(&dead, ids[0]).await.expect("item");
    assert_eq!((item.state, item.attempts), (ItemState::Ready, 0));
    wait_text(c, r#"dd[data-field="state"]"#, "ready").await;

    // Remove the plain one from its page: it asks first, then it is gone.
    c.goto(&format!("{base}/#/queue/{dead}/item/{}", ids[3]))
        .await
        .expect("goto");
    wait_text(c, r#"dd[data-field="state"]"#, "dead").await;
    click(c, "#remove-item").await;
    click(c, "#modal-cancel").await;
    assert_eq!(backend.stats(&dead).await.expect("stats").total(), 4);
    click(c, "#remove-item").await;
    click(c, "#modal-confirm").await;
    wait_contains(c, "#notice", "removed (it was dead)").await;
    let err = backend.item(&dead, ids[3]).await.expect_err("removed");
    assert!(matches!(err, leaseq::Error::NotFound { .. }), "{err}");
    assert_eq!(backend.stats(&dead).await.expect("stats").dead, 2);

    // Nothing in a payload ran.
    let pwned = c
        .execute("return typeof window.__pwned;", vec![])
        .await
        .expect("execute");
    assert_eq!(
        pwned,
        serde_json::json!("undefined"),
        "a payload ran as script"
    );
    assert!(c.get_alert_text().await.is_err(), "an alert opened");

    // Purge asks first: Cancel keeps everything, typing the name purges.
    c.goto(&format!("{base}/#/queue/{dead}/dead"))
        .await
        .expect("goto");
    click(c, "#purge").await;
    click(c, "#modal-cancel").await;
    assert_eq!(backend.stats(&dead).await.expect("stats").total(), 3);
    click(c, "#purge").await;
    c.find(Locator::Css("#modal-input"))
        .await
        .expect("input")
        .send_keys(dead.as_str())
        .await
        .expect("type");
    click(c, "#modal-confirm").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend.stats(&dead).await.expect("stats").total() > 0 {
        assert!(Instant::now() < deadline, "the purge never happened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_contains(c, "#notice", "3 items deleted").await;

    stop.cancel();
    let _ = browser.client.clone().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_in_a_browser_on_memory() {
    walk(Arc::new(MemoryBackend::new()), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_in_a_browser_on_redis() {
    let Some((backend, _guard)) = redis("dash").await else {
        return;
    };
    walk(backend, "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_error_shows_as_a_message_on_the_page() {
    let Some(browser) = browser().await else {
        return;
    };
    let c = &browser.client;
    let faults = Arc::new(Faults::new(
        Arc::new(MemoryBackend::new()) as Arc<dyn Backend>
    ));
    let queue = QueueName::new("jobs").expect("queue");
    faults
        .enqueue(&queue, vec![NewItem::new("x")])
        .await
        .expect("enqueue");
    faults.inject(Op::Stats, Fault::Refuse, u32::MAX);
    let stop = CancellationToken::new();
    let base = serve(faults.clone(), &stop).await;
    c.goto(&format!("{base}/#/")).await.expect("goto");
    let message = wait_contains(c, "#error", "unavailable").await;
    eprintln!("the page said: {message}");
    // The rest of the page is still there, not blank.
    wait_text(c, "header .brand", "leaseq").await;
    stop.cancel();
    let _ = browser.client.clone().close().await;
}
