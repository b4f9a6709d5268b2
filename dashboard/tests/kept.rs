//! Kept finished items and retention over plain HTTP, on the memory
//! backend: the policy is set through the CSRF guard (refused, and
//! nothing changed, without the page's token), the kept items page newest
//! first with their results, an item out of the queue answers its kept
//! record, and the collector charts completions from each queue's
//! completion counter, kept or not. A backend without
//! the History group says so and answers `unsupported` to a write.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq::{
    Backend, BackendExt as _, ClaimSpec, ItemId, Keep, MemoryBackend, NewItem, QueueName, Retention,
};
use leaseq_dashboard::Dashboard;
use serde_json::Value;
use support::http::{claim_one, send, serve, with_items, writer, AdminOnly};

/// Claims every Ready item of `q` and completes each, in id order, with
/// its result (`None`: a plain ack).
async fn complete_all(
    backend: &dyn Backend,
    q: &QueueName,
    results: &[Option<&[u8]>],
) -> Vec<ItemId> {
    let spec = ClaimSpec::new(
        u32::try_from(results.len()).expect("few"),
        Duration::from_secs(60),
    )
    .expect("spec");
    let mut leases = backend.claim(q, spec).await.expect("claim").leases;
    leases.sort_by_key(|l| l.id());
    assert_eq!(leases.len(), results.len());
    let history = backend.history().expect("history");
    for (lease, result) in leases.iter().zip(results) {
        match result {
            Some(r) => history
                .complete(&lease.key, r.to_vec().into())
                .await
                .expect("complete"),
            None => backend.ack(&lease.key).await.expect("ack"),
        }
    }
    leases.iter().map(|l| l.id()).collect()
}

fn ids(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_owned())
        .collect()
}

async fn get(addr: std::net::SocketAddr, path: &str) -> Value {
    let r = send(addr, "GET", path, &[], "").await;
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.json()
}

#[tokio::test]
async fn retention_is_set_through_the_guard_and_kept_items_page_newest_first() {
    let (backend, q) = with_items(3).await;
    let (w, _stop) = writer(backend.clone()).await;
    let history = backend.history().expect("history");

    let off = get(w.addr, "/api/queues/jobs/finished").await;
    assert_eq!(
        (
            off["history"].clone(),
            off["retention"]["keeps_any"].clone()
        ),
        (true.into(), false.into())
    );
    assert_eq!(off["items"], serde_json::json!([]));

    let body = r#"{"completed":{"max_age_secs":3600,"max_count":10}}"#;
    let refused = w
        .post_without_csrf("/api/queues/jobs/retention", body)
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(
        history.retention(&q).await.expect("retention"),
        Retention::default()
    );
    let too_long = r#"{"cancelled":{"max_age_secs":999999999999,"max_count":null}}"#;
    let bad = w.post("/api/queues/jobs/retention", too_long).await;
    assert_eq!(
        (bad.status, bad.json()["kind"].as_str()),
        (400, Some("invalid_input")),
        "{}",
        bad.body
    );

    let set = w.post("/api/queues/jobs/retention", body).await;
    assert_eq!(set.status, 200, "{}", set.body);
    assert_eq!(set.json()["retention"]["completed"]["max_age_secs"], 3600);
    let stored = history.retention(&q).await.expect("retention");
    let want = Retention::default().completed(Keep::for_age(Duration::from_secs(3600)).at_most(10));
    assert_eq!(stored, want);
    let listed = get(w.addr, "/api/queues/jobs/items?state=ready").await;
    assert_eq!(listed["retention"]["completed"]["max_count"], 10);
    assert_eq!(listed["retention"]["cancelled"]["keeps"], false);

    let done = complete_all(
        backend.as_ref(),
        &q,
        &[Some(b"result one"), Some(&[0xff, 0xfe]), None],
    )
    .await;
    let first = get(w.addr, "/api/queues/jobs/finished?limit=2").await;
    assert_eq!(
        ids(&first),
        [done[2].to_string(), done[1].to_string()],
        "newest first: {first}"
    );
    assert_eq!(first["more"], true);
    assert_eq!(first["queue"]["total"], 0);
    let newest = &first["items"][0];
    assert_eq!(
        (newest["ending"].as_str(), newest["attempts"].as_u64()),
        (Some("completed"), Some(1))
    );
    assert!(
        newest["result"].is_null(),
        "acked without a result: {newest}"
    );
    let hex = &first["items"][1]["result"];
    assert_eq!(
        (hex["encoding"].as_str(), hex["text"].as_str()),
        (Some("hex"), Some("ff fe"))
    );
    let second = get(w.addr, "/api/queues/jobs/finished?offset=2&limit=2").await;
    assert_eq!(ids(&second), [done[0].to_string()]);
    assert_eq!(second["more"], false);
    assert_eq!(second["items"][0]["result"]["text"], "result one");
    assert_eq!(second["items"][0]["payload"]["text"], "item 0");

    // Out of the queue, an item answers its kept record.
    let item = get(w.addr, &format!("/api/queues/jobs/items/{}", done[0])).await;
    assert!(item["item"].is_null(), "{item}");
    assert_eq!(item["finished"]["ending"], "completed");
    assert_eq!(item["finished"]["result"]["text"], "result one");
    assert!(
        item["finished"]["finished_at_ms"].as_u64() >= item["finished"]["enqueued_at_ms"].as_u64()
    );
    let never = send(w.addr, "GET", "/api/queues/jobs/items/999999", &[], "").await;
    assert_eq!(
        (never.status, never.json()["kind"].as_str()),
        (404, Some("not_found"))
    );

    let cancelled = get(w.addr, "/api/queues/jobs/finished?ending=cancelled").await;
    assert_eq!(cancelled["items"], serde_json::json!([]));
    let unknown = send(
        w.addr,
        "GET",
        "/api/queues/jobs/finished?ending=done",
        &[],
        "",
    )
    .await;
    assert_eq!(unknown.status, 400, "{}", unknown.body);

    // Keeping nothing again: `null` endings.
    let off = w
        .post(
            "/api/queues/jobs/retention",
            r#"{"completed":null,"cancelled":null}"#,
        )
        .await;
    assert_eq!(off.json()["retention"]["keeps_any"], false, "{}", off.body);
    assert_eq!(
        history.retention(&q).await.expect("retention"),
        Retention::default()
    );
}

#[tokio::test]
async fn without_history_the_page_is_told_and_a_write_is_unsupported() {
    let backend: Arc<dyn Backend> = Arc::new(AdminOnly(MemoryBackend::new()));
    let q = QueueName::new("jobs").expect("queue");
    backend
        .enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue");
    let (w, _stop) = writer(backend.clone()).await;
    let list = get(w.addr, "/api/queues/jobs/finished").await;
    assert_eq!(
        (list["history"].clone(), list["retention"].clone()),
        (false.into(), Value::Null)
    );
    assert_eq!(list["items"], serde_json::json!([]));
    assert_eq!(
        get(w.addr, "/api/queues/jobs/retention").await["history"],
        false
    );
    assert!(get(w.addr, "/api/queues/jobs/items").await["retention"].is_null());
    let r = w
        .post(
            "/api/queues/jobs/retention",
            r#"{"completed":{"max_age_secs":60,"max_count":null}}"#,
        )
        .await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (501, Some("unsupported")),
        "{}",
        r.body
    );
    // An acked item is simply gone.
    let lease = claim_one(backend.as_ref(), &q).await;
    backend.ack(&lease.key).await.expect("ack");
    let gone = send(
        w.addr,
        "GET",
        &format!("/api/queues/jobs/items/{}", lease.id()),
        &[],
        "",
    )
    .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
}

/// The completions the samples of `query` count, summed; `None` when no
/// sample has a counter.
fn counted(history: &Value) -> Option<u64> {
    let samples = history["samples"].as_array().expect("samples");
    samples
        .iter()
        .filter_map(|s| s["completed"].as_u64())
        .reduce(|a, b| a + b)
}

#[tokio::test]
async fn the_collector_counts_completions_kept_or_not() {
    let (backend, q) = with_items(3).await;
    let plain = QueueName::new("plain").expect("queue");
    backend
        .enqueue(&plain, vec![NewItem::new("p0"), NewItem::new("p1")])
        .await
        .expect("enqueue");
    let keep = Retention::default().completed(Keep::count(100));
    backend
        .history()
        .expect("history")
        .set_retention(&q, keep)
        .await
        .expect("retention");
    let dashboard = Dashboard::new(backend.clone())
        .sample_every(Duration::from_millis(100))
        .history_len(1_000);
    let (addr, _stop) = serve(dashboard).await;

    // The queue is sampled with its counter (at 0) before anything ends.
    let deadline = Instant::now() + Duration::from_secs(30);
    while counted(&get(addr, "/api/history?queue=jobs").await).is_none() {
        assert!(Instant::now() < deadline, "the queue never got a counter");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    complete_all(backend.as_ref(), &q, &[Some(b"a"), None, Some(b"c")]).await;
    let spec = ClaimSpec::new(2, Duration::from_secs(60)).expect("spec");
    for lease in backend.claim(&plain, spec).await.expect("claim").leases {
        backend.ack(&lease.key).await.expect("ack");
    }

    // Every completion is counted once, though the emptied queues are no
    // longer listed, and also where nothing is kept.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = get(addr, "/api/history?queue=jobs").await;
        let plain = get(addr, "/api/history?queue=plain").await;
        let all = get(addr, "/api/history").await;
        if counted(&jobs) == Some(3) && counted(&plain) == Some(2) && counted(&all) == Some(5) {
            break;
        }
        assert!(counted(&jobs) <= Some(3), "counted twice: {jobs}");
        assert!(counted(&plain) <= Some(2), "counted twice: {plain}");
        assert!(
            Instant::now() < deadline,
            "never counted 3 and 2: {jobs} {plain} {all}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Later samples add nothing more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        counted(&get(addr, "/api/history?queue=jobs").await),
        Some(3)
    );
}
