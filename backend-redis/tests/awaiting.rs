//! Awaiting a result on Redis across handles: a producer's handle (its own
//! client and connections, as another process's) hears an ending recorded
//! through another handle on its finished signal, and `wait_finished`
//! answers the result another handle completed, on one server and on a
//! cluster.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Which;
use leaseq_core::{Backend, BackendExt, Bytes, Keep, QueueName, Retention};
use leaseq_redis::RedisOptions;

const TTL: Duration = Duration::from_secs(30);

/// How long a test waits for what it expects before it calls it lost: a
/// bound for a loaded machine, not a figure under test.
const WAIT: Duration = Duration::from_secs(20);

/// `producer` enqueues and waits; `worker` completes the job with a
/// result. The producer's finished signal fires for the worker's ending,
/// and its wait answers the worker's result.
async fn hears_the_result(producer: Arc<dyn Backend>, worker: Arc<dyn Backend>) {
    let q = QueueName::new("q").expect("name");
    producer
        .history()
        .expect("history")
        .set_retention(&q, Retention::default().completed(Keep::FOREVER))
        .await
        .expect("retention");

    // The signal alone: it must cross handles, or waiters fall back to
    // their poll.
    let mut signal = producer
        .history()
        .expect("history")
        .finished_signal(&q)
        .await
        .expect("signal");
    producer.push(&q, "first").await.expect("enqueue");
    let lease = worker
        .claim_one(&q, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    worker.ack(&lease.key).await.expect("ack");
    tokio::time::timeout(WAIT, signal.changed())
        .await
        .expect("the producer's finished signal fired for the worker's ack");

    // A producer awaiting its job's result.
    let id = producer.push(&q, "second").await.expect("enqueue");
    let waiting = {
        let (producer, q) = (producer.clone(), q.clone());
        tokio::spawn(async move { producer.wait_finished(&q, id, WAIT).await })
    };
    let lease = worker
        .claim_one(&q, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    assert_eq!(lease.id(), id);
    worker
        .history()
        .expect("history")
        .complete(&lease.key, Bytes::from_static(b"42"))
        .await
        .expect("complete");
    let done = waiting
        .await
        .expect("join")
        .expect("wait_finished")
        .finished()
        .expect("finished within the wait");
    assert_eq!(
        (done.id, done.result),
        (id, Some(Bytes::from_static(b"42")))
    );
}

async fn a_result_reaches_another_handle(which: Which) {
    let Some((producer, cleanup)) = common::backend(which, "await-cross").await else {
        return;
    };
    let config = RedisOptions::new(&cleanup.url).prefix(&cleanup.prefix);
    let worker = common::connect(which.other(), config)
        .await
        .expect("a second handle");
    hears_the_result(producer, worker).await;
}

async fn a_result_reaches_another_handle_on_a_cluster(which: Which) {
    let cluster = match common::cluster::shared() {
        Ok(c) => c,
        Err(e) => return common::unavailable("a local Redis Cluster", e),
    };
    let prefix = common::fresh_prefix(&format!("await-cluster-{}", which.name()));
    let connect = |w: Which| common::connect(w, cluster.config(&prefix));
    let (producer, worker) = (connect(which).await, connect(which.other()).await);
    hears_the_result(
        producer.expect("a cluster handle"),
        worker.expect("a second cluster handle"),
    )
    .await;
    cluster.delete_prefix(&prefix);
}

for_each_client!(
    a_result_reaches_another_handle,
    a_result_reaches_another_handle_on_a_cluster
);
