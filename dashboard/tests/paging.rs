//! Pages of a state's items over the JSON API: offset and limit, whether a
//! next page exists, where paging stops, and every item's times.

mod support;

use std::sync::Arc;
use std::time::Duration;

use leaseq::{Backend, ItemId, MemoryBackend, NewItem, QueueName};
use support::http::{send, start, with_items};

const ITEMS: usize = 250;

/// The ids on one page of `jobs`' Ready items.
async fn page(addr: std::net::SocketAddr, query: &str) -> serde_json::Value {
    let r = send(
        addr,
        "GET",
        &format!("/api/queues/jobs/items?{query}"),
        &[],
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn ids(answer: &serde_json::Value) -> Vec<String> {
    answer["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn pages_follow_one_another_in_claim_order_until_the_last() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let q = QueueName::new("jobs").expect("queue");
    let items = (0..ITEMS)
        .map(|i| NewItem::new(format!("item {i}")))
        .collect();
    let enqueued: Vec<String> = backend
        .enqueue(&q, items)
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    let (addr, _stop) = start(backend, None).await;

    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let answer = page(addr, &format!("state=ready&offset={offset}&limit=100")).await;
        assert_eq!(answer["offset"], offset);
        assert_eq!(answer["limit"], 100);
        let got = ids(&answer);
        seen.extend(got.iter().cloned());
        let more = answer["more"].as_bool().expect("more");
        assert_eq!(more, seen.len() < ITEMS, "at offset {offset}");
        if !more {
            break;
        }
        assert_eq!(got.len(), 100);
        offset += 100;
    }
    assert_eq!(offset, 200, "three pages: 100, 100 and 50");
    assert_eq!(seen, enqueued, "every item once, in claim order");

    // A page past the end is empty, not an error.
    let past = page(addr, "state=ready&offset=400&limit=100").await;
    assert!(ids(&past).is_empty());
    assert_eq!(past["more"], false);
}

#[tokio::test]
async fn paging_stops_at_the_most_one_peek_returns() {
    let (backend, _) = with_items(1).await;
    let (addr, _stop) = start(backend, None).await;
    let max = leaseq::limits::MAX_PEEK;
    let r = send(
        addr,
        "GET",
        &format!("/api/queues/jobs/items?offset={max}"),
        &[],
        "",
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["kind"], "invalid_input");
    let last = page(addr, &format!("offset={}&limit=100", max - 1)).await;
    assert_eq!(last["max_offset"], max);
    let r = send(addr, "GET", "/api/queues/jobs/items?offset=x", &[], "").await;
    assert_eq!(r.status, 400, "a bad offset: {}", r.body);
}

#[tokio::test]
async fn every_item_carries_its_enqueue_time_and_due_or_expiry() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let q = QueueName::new("jobs").expect("queue");
    let before = backend.now().await.expect("now").as_millis();
    let enqueued = backend
        .enqueue(
            &q,
            vec![
                NewItem::new("now"),
                NewItem::new("later").delay(Duration::from_secs(600)),
            ],
        )
        .await
        .expect("enqueue");
    let (addr, _stop) = start(backend.clone(), None).await;

    let ready = page(addr, "state=ready").await;
    let now = ready["now_ms"].as_u64().expect("now");
    let item = &ready["items"][0];
    let at = item["enqueued_at_ms"].as_u64().expect("enqueued_at_ms");
    assert!((before..=now).contains(&at), "{before} <= {at} <= {now}");
    assert!(item["due_at_ms"].is_null(), "{item}");

    let scheduled = page(addr, "state=scheduled").await;
    let item = &scheduled["items"][0];
    let due = item["due_at_ms"].as_u64().expect("due_at_ms");
    assert!(due >= at + 600_000, "due {due}, enqueued {at}");

    // An item's own page carries the same times.
    let id: ItemId = enqueued[1].id;
    let r = send(
        addr,
        "GET",
        &format!("/api/queues/jobs/items/{id}"),
        &[],
        "",
    )
    .await;
    let one = &r.json()["item"];
    assert_eq!(one["due_at_ms"].as_u64(), Some(due));
    assert!(one["enqueued_at_ms"].as_u64().is_some(), "{one}");
}
