//! Global limits over the core's `Sharded` layer: the limit is split into
//! one share per shard, so the sum holds over the logical queue; a limit
//! below the shard count is refused. (The suite's limit checks skip a
//! split backend: they use a limit of 3, below its 4 shards.)

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::layer::shard::Sharded;
use leaseq_core::{
    Backend, ClaimSpec, Error, LimitScope, ManualClock, NewItem, QueueLimits, QueueName, Rate,
};
use leaseq_memory::MemoryBackend;

fn sharded() -> (Arc<dyn Backend>, ManualClock) {
    let clock = ManualClock::new();
    let inner = MemoryBackend::with_clock(Arc::new(clock.clone()));
    let b = Sharded::new(inner, 4).expect("4 shards");
    (Arc::new(b), clock)
}

async fn fill(b: &Arc<dyn Backend>, q: &QueueName, n: usize) {
    let items = (0..n).map(|i| NewItem::new(format!("i{i}"))).collect();
    b.enqueue(q, items).await.expect("enqueue");
}

/// Sixteen claimers race, each until its claims come back empty.
async fn race(b: &Arc<dyn Backend>, q: &QueueName) -> (usize, bool) {
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (b, q) = (b.clone(), q.clone());
            tokio::spawn(async move {
                let mut got = 0;
                loop {
                    let spec = ClaimSpec::new(3, Duration::from_secs(600)).expect("spec");
                    let c = b.claim(&q, spec).await.expect("claim");
                    if c.leases.is_empty() {
                        return (got, c.retry_after.is_some());
                    }
                    got += c.leases.len();
                }
            })
        })
        .collect();
    let mut total = 0;
    let mut all_told = true;
    for t in tasks {
        let (got, told) = t.await.expect("task");
        total += got;
        all_told &= told;
    }
    (total, all_told)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_concurrency_limit_is_split_over_the_shards_and_holds_in_sum() {
    let (b, _clock) = sharded();
    assert_eq!(
        b.throttles().expect("throttles").scope(),
        LimitScope::Split { shards: 4 }
    );
    let q = QueueName::new("split-conc").expect("name");
    fill(&b, &q, 200).await;
    let limits = QueueLimits::NONE.concurrency(10);
    b.throttles()
        .expect("throttles")
        .set_queue_limits(&q, limits)
        .await
        .expect("set");
    assert_eq!(
        b.throttles()
            .expect("throttles")
            .queue_limits(&q)
            .await
            .expect("read"),
        limits
    );
    let (claimed, told) = race(&b, &q).await;
    assert_eq!(claimed, 10, "every share filled, none exceeded");
    assert!(told, "a claim cut by the limit says when to come back");
    assert_eq!(b.stats(&q).await.expect("stats").leased, 10);
    // Below the shard count: refused, nothing changed.
    let below = b
        .throttles()
        .expect("throttles")
        .set_queue_limits(&q, QueueLimits::NONE.concurrency(3))
        .await;
    assert!(
        matches!(below, Err(Error::InvalidInput { .. })),
        "{below:?}"
    );
    assert_eq!(
        b.throttles()
            .expect("throttles")
            .queue_limits(&q)
            .await
            .expect("read"),
        limits
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_is_split_over_the_shards_and_holds_in_sum_per_window() {
    let (b, clock) = sharded();
    let q = QueueName::new("split-rate").expect("name");
    fill(&b, &q, 200).await;
    let rate = Rate::new(9, Duration::from_secs(1)).expect("rate");
    b.throttles()
        .expect("throttles")
        .set_queue_limits(&q, QueueLimits::NONE.rate(rate))
        .await
        .expect("set");
    let now = b.now().await.expect("now").as_millis();
    clock.advance(Duration::from_millis(1_000 - now % 1_000));
    for window in 0..3 {
        let (claimed, told) = race(&b, &q).await;
        assert_eq!(claimed, 9, "window {window}");
        assert!(told, "window {window}");
        clock.advance(Duration::from_secs(1));
    }
    b.throttles()
        .expect("throttles")
        .set_queue_limits(&q, QueueLimits::NONE)
        .await
        .expect("clear");
    assert_eq!(
        b.throttles()
            .expect("throttles")
            .queue_limits(&q)
            .await
            .expect("read"),
        QueueLimits::NONE
    );
}
