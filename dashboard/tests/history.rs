//! The collector's history over the JSON API: samples taken at the
//! interval set, kept server-side (so a page that opens later still gets
//! them), bounded in count, per queue and for all queues together.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq::{Backend, BackendExt as _, CancellationToken};
use leaseq_dashboard::Dashboard;
use serde_json::Value;
use support::http::{send, serve, with_items};

const KEEP: usize = 5;

/// A dashboard over `backend` sampling every 100 ms, keeping `KEEP`.
async fn sampled(backend: Arc<dyn Backend>) -> (std::net::SocketAddr, CancellationToken) {
    let dashboard = Dashboard::new(backend)
        .sample_every(Duration::from_millis(100))
        .history_len(KEEP);
    serve(dashboard).await
}

async fn history(addr: std::net::SocketAddr, query: &str) -> Value {
    let r = send(addr, "GET", &format!("/api/history{query}"), &[], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn samples(v: &Value) -> &Vec<Value> {
    v["samples"].as_array().expect("samples")
}

/// Polls until the history holds `n` samples; bounded, so a collector that
/// never samples fails the test.
async fn until_full(addr: std::net::SocketAddr, query: &str, n: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = history(addr, query).await;
        if samples(&v).len() >= n {
            return v;
        }
        assert!(Instant::now() < deadline, "never {n} samples: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_collector_keeps_a_sliding_window_of_samples_per_queue_and_in_all() {
    let (backend, _) = with_items(3).await;
    let (addr, _stop) = sampled(backend.clone()).await;

    let full = until_full(addr, "", KEEP).await;
    assert_eq!(full["every_ms"], 100);
    assert_eq!(full["capacity"], KEEP);
    let first = samples(&full)[0]["t_ms"].as_u64().expect("t");
    // The window slides: newer samples push the oldest out, and it never
    // holds more than KEEP.
    let deadline = Instant::now() + Duration::from_secs(30);
    let all = loop {
        let v = history(addr, "").await;
        assert_eq!(samples(&v).len(), KEEP, "kept at most {KEEP}: {v}");
        if samples(&v)[0]["t_ms"].as_u64() > Some(first) {
            break v;
        }
        assert!(Instant::now() < deadline, "the window never slid: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let taken = samples(&all);
    let times: Vec<u64> = taken
        .iter()
        .map(|s| s["t_ms"].as_u64().expect("t"))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {times:?}"
    );
    assert!(taken.iter().all(|s| s["ready"] == 3), "{all}");

    // Only the newer ones after a time.
    let after = history(addr, &format!("?after_ms={}", times[2])).await;
    let newer: Vec<u64> = samples(&after)
        .iter()
        .map(|s| s["t_ms"].as_u64().expect("t"))
        .collect();
    assert!(
        !newer.is_empty() && newer.iter().all(|t| *t > times[2]),
        "{newer:?}"
    );

    // One queue's own history, and none for a queue never seen.
    let jobs = until_full(addr, "?queue=jobs", KEEP).await;
    assert_eq!(jobs["tracked"], true);
    let other = history(addr, "?queue=other").await;
    assert_eq!(other["tracked"], false);
    assert!(samples(&other).is_empty());
    let bad = send(addr, "GET", "/api/history?queue=a%7Bb%7D", &[], "").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[tokio::test]
async fn a_queue_emptied_drops_to_zero_in_its_history() {
    let (backend, q) = with_items(1).await;
    let (addr, _stop) = sampled(backend.clone()).await;
    until_full(addr, "?queue=jobs", 1).await;
    backend
        .admin()
        .expect("admin")
        .purge(&q)
        .await
        .expect("purge");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = history(addr, "").await;
        let last = samples(&v).last().cloned().unwrap_or_default();
        if last["ready"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the total never fell: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
