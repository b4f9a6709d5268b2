//! Large backlogs: the largest batch enqueue, claim and ack each work in one
//! call, and reap recovers thousands of expired leases in bounded batches
//! (no script ever unpacks an unbounded set).
#![cfg(any(feature = "redis-rs", feature = "fred"))]

mod common;

use std::time::Duration;

use common::Which;
use leaseq_core::limits::{MAX_ACK_BATCH, MAX_CLAIM, MAX_ENQUEUE_BATCH};
use leaseq_core::{BackendExt, LeaseKey, NewItem, QueueName};

async fn big_backlog(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "big").await else {
        return;
    };
    let q = QueueName::new("big").expect("valid");
    for round in 0..12 {
        let items = (0..MAX_ENQUEUE_BATCH)
            .map(|i| NewItem::new(format!("{round}-{i}")))
            .collect();
        let out = b.enqueue(&q, items).await.expect("enqueue");
        assert_eq!(out.len(), MAX_ENQUEUE_BATCH);
    }
    let mut held = 0;
    for _ in 0..6 {
        let claimed = b
            .claim_up_to(&q, MAX_CLAIM, Duration::from_secs(60))
            .await
            .expect("claim");
        assert_eq!(claimed.leases.len(), MAX_CLAIM as usize);
        held += claimed.leases.len() as u64;
    }
    // The largest batch ack: one call, every lease acked once.
    let claimed = b
        .claim_up_to(&q, MAX_CLAIM, Duration::from_secs(60))
        .await
        .expect("claim");
    let keys: Vec<LeaseKey> = claimed.leases.iter().map(|l| l.key.clone()).collect();
    assert_eq!(keys.len(), MAX_ACK_BATCH);
    let acked = b.ack_many(&keys).await.expect("ack_many");
    assert_eq!(acked.len(), MAX_ACK_BATCH);
    assert!(acked.iter().all(|r| r.is_ok()));
    let again = b.ack_many(&keys).await.expect("ack_many again");
    assert!(again
        .iter()
        .all(|r| r.as_ref().is_err_and(|e| e.is_lease_lost())));
    let left = 11 * MAX_ENQUEUE_BATCH as u64;
    let hooks = b.test_hooks().expect("hooks");
    assert_eq!(hooks.expire_leases(&q).await.expect("expire"), held);
    let report = b.reap(&q).await.expect("reap");
    assert_eq!(
        report.requeued, held,
        "every expired lease recovered, in batches"
    );
    let stats = b.stats(&q).await.expect("stats");
    assert_eq!((stats.ready, stats.leased), (left, 0));
    assert_eq!(
        b.admin().expect("admin").purge(&q).await.expect("purge"),
        left
    );
}

#[cfg(feature = "redis-rs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_big_backlog() {
    big_backlog(Which::RedisRs).await;
}

#[cfg(feature = "fred")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_big_backlog() {
    big_backlog(Which::Fred).await;
}
