//! A producer and a worker in a few lines, on the in-process backend.
//!
//! `cargo run -p leaseq --example producer_worker`

use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, Backend, CancellationToken, Job, JobContext, MemoryBackend, NewItem, Worker,
};

#[tokio::main]
async fn main() -> leaseq::Result<()> {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let queue = leaseq::QueueName::new("greetings")?;

    // Producer: one batch, one round trip.
    let items = ["ada", "grace", "linus"].map(|name| NewItem::new(format!("hello, {name}")));
    backend.enqueue(&queue, items.to_vec()).await?;

    // Worker: Ok acks, Err retries with backoff. One handler at a time, so
    // the jobs run in the order they were enqueued; with more (say
    // `.concurrency(4)`) they run at once and print in any order.
    let shutdown = CancellationToken::new();
    let done = shutdown.clone();
    let worker = Worker::builder(backend.clone(), "greetings")
        .concurrency(1)
        .lease_ttl(Duration::from_secs(30))
        .build(handler_fn(|job: Job, _ctx: JobContext| async move {
            println!(
                "#{} (attempt {}): {}",
                job.id,
                job.attempts,
                String::from_utf8_lossy(&job.payload)
            );
            Ok::<_, std::io::Error>(())
        }))?;
    let metrics = worker.metrics();
    let running = tokio::spawn(worker.run(shutdown));

    // Stop once everything is acked (a real service stops on Ctrl-C).
    while backend.stats(&queue).await?.total() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done.cancel();
    running
        .await
        .map_err(|e| leaseq::Error::outcome_unknown("worker task", e))??;
    println!("acked {}", metrics.snapshot().acked);
    Ok(())
}
