//! Items through one queue, or one queue sharded K ways, on a Redis Cluster:
//! producers enqueue batches while consumers claim batches and ack each
//! item, for a fixed time; prints items acked per second.
//!
//! ```text
//! cargo run --release -p leaseq-redis --example cluster_throughput -- \
//!     redis+cluster://127.0.0.1:7000,127.0.0.1:7001 <shards> <seconds> [fred]
//! ```

use leaseq_core::BackendExt as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, ClaimSpec, NewItem, QueueName};
use leaseq_redis::RedisOptions;

async fn backend(url: &str, shards: u16, fred: bool) -> leaseq_core::Result<Arc<dyn Backend>> {
    let prefix = format!("tp-{}", std::process::id());
    let config = RedisOptions::new(url).prefix(prefix);
    #[cfg(feature = "fred")]
    if fred {
        let b = leaseq_redis::FredBackend::connect(config).await?;
        return Ok(if shards > 1 {
            Arc::new(leaseq_redis::ShardedBackend::new(b, shards)?)
        } else {
            Arc::new(b)
        });
    }
    #[cfg(feature = "redis-rs")]
    {
        let _ = fred;
        let b = leaseq_redis::RedisRsBackend::connect(config).await?;
        Ok(if shards > 1 {
            Arc::new(leaseq_redis::ShardedBackend::new(b, shards)?)
        } else {
            Arc::new(b)
        })
    }
    #[cfg(not(feature = "redis-rs"))]
    Err(leaseq_core::Error::invalid("build with a client feature"))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> leaseq_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .cloned()
        .unwrap_or("redis://127.0.0.1:6379".into());
    let shards: u16 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let secs: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let fred = args.get(4).is_some_and(|s| s == "fred");
    let b = backend(&url, shards, fred).await?;
    let q = QueueName::new("tp")?;
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (b, q, stop) = (b.clone(), q.clone(), stop.clone());
        tasks.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let backlog = b.stats(&q).await.map(|s| s.ready).unwrap_or(0);
                if backlog > 20_000 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let items = (0..50).map(|i| NewItem::new(format!("item {i}"))).collect();
                let _ = b.enqueue(&q, items).await;
            }
        });
    }
    for _ in 0..16 {
        let (b, q, stop, acked) = (b.clone(), q.clone(), stop.clone(), acked.clone());
        tasks.spawn(async move {
            let new_spec = || ClaimSpec::new(10, Duration::from_secs(30)).expect("spec");
            let mut spec = new_spec();
            while !stop.load(Ordering::Relaxed) {
                // A failed claim is sent again as the same claim (its
                // tokens); after a reply the next claim gets a new spec.
                let Ok(c) = b.claim(&q, spec.duplicate()).await else {
                    continue;
                };
                spec = new_spec();
                if c.leases.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                for l in c.leases {
                    if b.ack(&l.key).await.is_ok() {
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    // Warm up one second, then measure.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start_count = acked.load(Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let n = acked.load(Ordering::Relaxed) - start_count;
    let rate = n as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}
    let purged = b.admin()?.purge(&q).await?;
    println!(
        "client {} shards {shards}: {n} items acked in {secs} s = {rate:.0} items/s (purged {purged})",
        if fred { "fred" } else { "redis-rs" }
    );
    Ok(())
}
