//! Figures for the History group, printed, never asserted (ignored: run
//! them by hand with `--ignored --nocapture`):
//! - `ack_path_figure`: the median single ack on a queue with the default
//!   retention (what keeping nothing costs on the hot path), and on one
//!   that keeps its completed items;
//! - `collect_figure`: the median `collect` with 10 and with 100,000 kept
//!   items that have not expired (its cost follows what it removes).

mod common;

use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt, Keep, NewItem, QueueName, Retention};

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
    let keeping = q("keeping");
    let history = b.history().expect("history");
    history
        .set_retention(&keeping, Retention::default().completed(Keep::FOREVER))
        .await
        .expect("set_retention");
    acks(b, &keeping, 500).await;
    let median_kept = acks(b, &keeping, n).await;
    println!("ack, completed items kept: median {median_kept:?} over {n} acks");
}

/// Writes `n` kept Completed items of `queue`, finished now, by SQL.
async fn plant_kept(db: &common::TestDb, queue: &str, n: i64) {
    sqlx::query(&format!(
        "INSERT INTO \"{}\".leaseq_finished \
           (queue, id, ending, finished_at, enqueued_at, attempts, payload) \
         SELECT $1, g, 'completed', now(), now(), 1, '\\x00'::bytea \
         FROM generate_series(1, $2) g",
        db.schema
    ))
    .bind(queue)
    .bind(n)
    .execute(db.backend.pool())
    .await
    .expect("plant kept items");
    sqlx::query(&format!("ANALYZE \"{}\".leaseq_finished", db.schema))
        .execute(db.backend.pool())
        .await
        .expect("analyze");
}

#[tokio::test]
#[ignore = "a figure: run by hand"]
async fn collect_figure() {
    let Some(db) = common::TestDb::new("collectfig").await else {
        return;
    };
    let history = db.backend.history().expect("history");
    let day = Retention::default().completed(Keep::for_age(Duration::from_secs(86_400)));
    for n in [10, 100_000] {
        let queue = format!("kept{n}");
        history
            .set_retention(&q(&queue), day)
            .await
            .expect("set_retention");
        plant_kept(&db, &queue, n).await;
        let mut took = Vec::new();
        for _ in 0..200 {
            let at = Instant::now();
            let gone = history.collect(&q(&queue)).await.expect("collect");
            took.push(at.elapsed());
            assert_eq!(gone, 0, "nothing has expired");
        }
        let kept = history
            .finished(&q(&queue), None, 1)
            .await
            .expect("finished");
        assert_eq!(kept.len(), 1, "the kept items are still there");
        println!(
            "collect with {n} kept unexpired items: median {:?} over 200",
            median(took)
        );
    }
}
