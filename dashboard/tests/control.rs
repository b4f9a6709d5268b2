//! The control routes over plain HTTP, on the memory backend: pause and
//! resume, cancel, run now and the live workers. Each write passes the
//! CSRF guard as redrive and purge do (refused, and nothing changed,
//! without the page's token), and answers what the backend did. A backend
//! without the groups tells the page so (it shows no control buttons) and
//! answers `unsupported`.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq::CancellationToken;
use leaseq::{
    handler_fn, Backend, BackendExt as _, ClaimSpec, ItemId, Job, JobContext, LeaseTtl,
    MemoryBackend, NewItem, QueueName, Worker,
};
use support::http::{claim_one, send, writer, AdminOnly};

/// A queue `jobs` with two Ready items and two Scheduled an hour out.
async fn setup() -> (Arc<dyn Backend>, QueueName, Vec<ItemId>) {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let q = QueueName::new("jobs").expect("queue");
    let later = |p: &str| NewItem::new(p.to_owned()).delay(Duration::from_secs(3600));
    let items = vec![NewItem::new("a"), NewItem::new("b"), later("c"), later("d")];
    let ids = backend
        .enqueue(&q, items)
        .await
        .expect("enqueue")
        .into_iter()
        .map(|e| e.id)
        .collect();
    (backend, q, ids)
}

#[tokio::test]
async fn control_writes_without_the_page_csrf_token_are_refused_and_change_nothing() {
    let (backend, q, ids) = setup().await;
    let (w, _stop) = writer(backend.clone()).await;
    let writes = [
        ("/api/queues/jobs/pause".to_owned(), "{}"),
        ("/api/queues/jobs/resume".to_owned(), "{}"),
        (format!("/api/queues/jobs/items/{}/cancel", ids[0]), "{}"),
        ("/api/queues/jobs/run-now".to_owned(), r#"{"all":true}"#),
    ];
    for (path, body) in &writes {
        let r = w.post_without_csrf(path, body).await;
        assert_eq!(
            (r.status, r.json()["kind"].as_str()),
            (403, Some("forbidden")),
            "{path}"
        );
        // Nor as a GET: writes are POSTs only.
        let r = send(w.addr, "GET", path, &[], "").await;
        assert_eq!(r.status, 405, "GET {path}: {}", r.body);
    }
    let control = backend.control().expect("control");
    assert!(!control.is_paused(&q).await.expect("is_paused"));
    let stats = backend.stats(&q).await.expect("stats");
    assert_eq!((stats.ready, stats.scheduled), (2, 2));

    for (path, body) in &writes {
        let r = w.post(path, body).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
}

#[tokio::test]
async fn pause_and_resume_show_on_the_listings_and_gate_claims() {
    let (backend, q, _) = setup().await;
    let (w, _stop) = writer(backend.clone()).await;
    let spec = || ClaimSpec::new(1, Duration::from_secs(60)).expect("spec");

    let overview = send(w.addr, "GET", "/api/overview", &[], "").await.json();
    assert_eq!(overview["control"], true);
    let r = w.post("/api/queues/jobs/pause", "{}").await;
    assert_eq!((r.status, r.json()["paused"].as_bool()), (200, Some(true)));
    let claimed = backend.claim(&q, spec()).await.expect("claim");
    assert!(claimed.paused && claimed.leases.is_empty(), "{claimed:?}");
    let overview = send(w.addr, "GET", "/api/overview", &[], "").await.json();
    assert_eq!(overview["queues"][0]["paused"], true);
    let list = send(w.addr, "GET", "/api/queues/jobs/items", &[], "")
        .await
        .json();
    assert_eq!(list["queue"]["paused"], true);

    let r = w.post("/api/queues/jobs/resume", "{}").await;
    assert_eq!((r.status, r.json()["paused"].as_bool()), (200, Some(false)));
    assert_eq!(
        backend.claim(&q, spec()).await.expect("claim").leases.len(),
        1
    );
    let overview = send(w.addr, "GET", "/api/overview", &[], "").await.json();
    assert_eq!(overview["queues"][0]["paused"], false);

    let r = w.post("/api/queues/no%20such%00/pause", "{}").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("invalid_input"))
    );
}

#[tokio::test]
async fn cancel_ends_a_waiting_item_now_and_asks_a_leased_one_to_stop() {
    let (backend, q, ids) = setup().await;
    let (w, _stop) = writer(backend.clone()).await;
    let cancel = |id: ItemId| format!("/api/queues/jobs/items/{id}/cancel");
    let item = |id: ItemId| format!("/api/queues/jobs/items/{id}");

    // Scheduled, not yet due: it ends at once.
    let r = w.post(&cancel(ids[2]), "{}").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"cancelled": "now", "was": "scheduled"})
    );
    assert_eq!(
        send(w.addr, "GET", &item(ids[2]), &[], "").await.status,
        404
    );

    // Leased: the item page shows its progress, then the cancel request.
    let lease = claim_one(backend.as_ref(), &q).await;
    let control = backend.control().expect("control");
    control
        .progress(&lease.key, "half way".into())
        .await
        .expect("progress");
    let page = send(w.addr, "GET", &item(lease.id()), &[], "").await.json();
    assert_eq!(page["item"]["progress"]["text"], "half way");
    assert_eq!(page["item"]["cancel_requested"], false);
    let r = w.post(&cancel(lease.id()), "{}").await;
    assert_eq!(r.json(), serde_json::json!({"cancelled": "requested"}));
    let page = send(w.addr, "GET", &item(lease.id()), &[], "").await.json();
    assert_eq!(page["item"]["cancel_requested"], true);
    let list = send(
        w.addr,
        "GET",
        "/api/queues/jobs/items?state=leased",
        &[],
        "",
    )
    .await
    .json();
    assert_eq!(list["items"][0]["cancel_requested"], true);
    assert!(
        backend
            .extend(
                &lease.key,
                LeaseTtl::new(Duration::from_secs(60)).expect("ttl")
            )
            .await
            .expect("extend")
            .cancel_requested
    );

    let r = w.post(&cancel(ItemId::new(999_999)), "{}").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (404, Some("not_found"))
    );
    let r = w.post("/api/queues/jobs/items/abc/cancel", "{}").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("invalid_input"))
    );
}

#[tokio::test]
async fn run_now_moves_one_scheduled_item_or_all_of_them() {
    let (backend, q, ids) = setup().await;
    let (w, _stop) = writer(backend.clone()).await;
    let path = "/api/queues/jobs/run-now";

    let r = w.post(path, &format!(r#"{{"id":"{}"}}"#, ids[2])).await;
    assert_eq!((r.status, r.json()["moved"].as_u64()), (200, Some(1)));
    // Ready now: not Scheduled any more, so nothing moves.
    let r = w.post(path, &format!(r#"{{"id":"{}"}}"#, ids[2])).await;
    assert_eq!(r.json()["moved"], 0);
    let r = w.post(path, r#"{"all":true}"#).await;
    assert_eq!(r.json()["moved"], 1);
    let stats = backend.stats(&q).await.expect("stats");
    assert_eq!((stats.ready, stats.scheduled), (4, 0));

    for body in ["{}", r#"{"id":"1","all":true}"#] {
        let r = w.post(path, body).await;
        assert_eq!(
            (r.status, r.json()["kind"].as_str()),
            (400, Some("invalid_input")),
            "{body}"
        );
    }
    let r = w.post(path, r#"{"id":"999999"}"#).await;
    assert_eq!(r.status, 404, "{}", r.body);
}

#[tokio::test]
async fn workers_lists_a_running_worker_with_its_job() {
    let (backend, q, ids) = setup().await;
    let (w, _stop) = writer(backend.clone()).await;
    let stop = CancellationToken::new();
    // The job runs until the test lets it finish.
    let finish = CancellationToken::new();
    let until = finish.clone();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .concurrency(1)
        .lease_ttl(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(100))
        .build(handler_fn(move |_job: Job, _cx: JobContext| {
            let until = until.clone();
            async move {
                until.cancelled().await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let running = tokio::spawn(worker.run(stop.clone()));

    let deadline = Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let r = send(w.addr, "GET", "/api/workers", &[], "").await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        if v["workers"][0]["jobs"][0]["id"].is_string() {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never listed its job: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let entry = &listed["workers"][0];
    assert_eq!(entry["queue"], "jobs");
    assert_eq!(entry["concurrency"], 1);
    assert_eq!(entry["pid"], std::process::id());
    assert_eq!(entry["jobs"][0]["id"], ids[0].to_string());
    assert!(entry["expires_at_ms"].as_u64() > listed["now_ms"].as_u64());

    finish.cancel();
    stop.cancel();
    running.await.expect("join").expect("worker");
    let after = send(w.addr, "GET", "/api/workers", &[], "").await.json();
    assert_eq!(after["workers"], serde_json::json!([]));
}

#[tokio::test]
async fn without_the_groups_the_page_is_told_and_the_routes_are_unsupported() {
    let backend: Arc<dyn Backend> = Arc::new(AdminOnly(MemoryBackend::new()));
    let q = QueueName::new("jobs").expect("queue");
    let id = backend
        .enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue")[0]
        .id;
    let (w, _stop) = writer(backend.clone()).await;
    for path in [
        "/api/overview".to_owned(),
        "/api/queues/jobs/items".to_owned(),
        format!("/api/queues/jobs/items/{id}"),
    ] {
        let r = send(w.addr, "GET", &path, &[], "").await;
        assert_eq!(r.json()["control"], false, "{path}");
    }
    for path in [
        "/api/queues/jobs/pause".to_owned(),
        format!("/api/queues/jobs/items/{id}/cancel"),
    ] {
        let r = w.post(&path, "{}").await;
        assert_eq!(
            (r.status, r.json()["kind"].as_str()),
            (501, Some("unsupported")),
            "{path}"
        );
    }
    let r = send(w.addr, "GET", "/api/workers", &[], "").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (501, Some("unsupported"))
    );
    assert_eq!(backend.stats(&q).await.expect("stats").ready, 1);
}
