//! Many producers, consumers and reapers at once on a multi-threaded runtime:
//! every item is acked exactly once, no live lease is handed out twice.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq_core::{Backend, BackendExt, ClaimSpec, ManualClock, NewItem, QueueName};
use leaseq_memory::MemoryBackend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_consumers_and_reapers_lose_and_duplicate_nothing() {
    let clock = ManualClock::new();
    let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
    let queue = QueueName::new("storm").expect("name");
    let (producers, per_producer) = (4u64, 2_000u64);
    let total = producers * per_producer;
    let acked = Arc::new(Mutex::new(HashSet::new()));

    let mut tasks = Vec::new();
    for p in 0..producers {
        let (b, q) = (backend.clone(), queue.clone());
        tasks.push(tokio::spawn(async move {
            for chunk in 0..per_producer / 100 {
                let batch = (0..100)
                    .map(|i| NewItem::new(format!("{p}-{chunk}-{i}")))
                    .collect();
                b.enqueue(&q, batch).await.expect("enqueue");
                tokio::task::yield_now().await;
            }
        }));
    }
    for worker in 0..4u32 {
        let (b, q, acked, clock) = (
            backend.clone(),
            queue.clone(),
            Arc::clone(&acked),
            clock.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                if acked.lock().expect("set").len() as u64 == total {
                    return;
                }
                // One spec per claim: a spec names its claim's tokens.
                let spec = ClaimSpec::new(50, Duration::from_secs(5)).expect("spec");
                let claimed = b.claim(&q, spec).await.expect("claim");
                for (n, lease) in claimed.leases.iter().enumerate() {
                    // Worker 0 "crashes" on some items: never acks, lets time pass.
                    if worker == 0 && n % 7 == 3 {
                        clock.advance(Duration::from_secs(6));
                        continue;
                    }
                    match b.ack(&lease.key).await {
                        Ok(()) => assert!(
                            acked.lock().expect("set").insert(lease.payload.clone()),
                            "acked twice"
                        ),
                        Err(e) => assert!(e.is_lease_lost(), "{e}"),
                    }
                }
                b.reap(&q).await.expect("reap");
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(acked.lock().expect("set").len() as u64, total);
    assert_eq!(backend.stats(&queue).await.expect("stats").total(), 0);
    assert!(backend
        .claim_one(&queue, Duration::from_secs(1))
        .await
        .expect("claim")
        .is_none());
}
