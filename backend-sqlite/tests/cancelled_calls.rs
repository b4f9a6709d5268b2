//! Calls cancelled mid-way (a worker aborted, a timeout around a call)
//! leave no transaction open on the connection they used: every later
//! write commits, and another handle on the file sees it.

mod common;

use std::time::Duration;

use leaseq_core::{Backend, LeaseToken, NewItem, QueueName};

/// Enqueues under a request (each one `BEGIN IMMEDIATE` transaction) are
/// aborted at every point of their run, a few microseconds apart. Whatever the aborts left,
/// each enqueue that answered, and the ones after, are committed: a second
/// handle on the file counts them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_call_leaves_no_transaction_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("aborts.db");
    let b = common::open(&path).await;
    let q = QueueName::new("aborts").expect("valid");
    let mut answered = 0u64;
    for round in 0..400u64 {
        let task = {
            let (b, q) = (b.clone(), q.clone());
            let request = LeaseToken::random();
            tokio::spawn(async move { b.enqueue_once(&q, request, vec![NewItem::new("x")]).await })
        };
        // From 0 to about 400 µs: early, inside and after the transaction.
        tokio::time::sleep(Duration::from_micros(round % 40 * 10)).await;
        task.abort();
        if let Ok(Ok(_)) = task.await {
            answered += 1;
        }
    }
    let after = 20;
    let items = (0..after).map(|_| NewItem::new("after")).collect();
    b.enqueue(&q, items)
        .await
        .expect("an enqueue after the aborts");
    let other = common::open(&path).await;
    let ready = other.stats(&q).await.expect("stats").ready;
    // An enqueue aborted after its commit but before its answer counts in
    // the file and not in `answered`.
    assert!(
        ready >= answered + after,
        "another handle sees {ready} items; {answered} enqueues answered before \
         the last {after}: writes were left uncommitted"
    );
    drop(other);
    drop(b);
    // Reopened, the file holds them too (nothing waited in an open
    // transaction that closing rolled back).
    let reopened = common::open(&path).await;
    let kept = reopened.stats(&q).await.expect("stats").ready;
    assert_eq!(kept, ready);
}
