//! A typed job: values in, values out, JSON on the wire. A payload that
//! does not decode goes Dead with the decode error instead of looping.
//!
//! `cargo run -p leaseq --example typed_job`

use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, Backend, BackendExt, CancellationToken, ItemState, Job, JobContext, MemoryBackend,
    Permanent, TypedQueue, Worker,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Resize {
    image: String,
    width: u32,
}

#[tokio::main]
async fn main() -> leaseq::Result<()> {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let jobs = TypedQueue::<Resize>::new(backend.clone(), "resize")?;
    jobs.enqueue(&Resize {
        image: "cat.png".into(),
        width: 640,
    })
    .await?;
    jobs.enqueue_with(
        &Resize {
            image: "huge.png".into(),
            width: 0,
        },
        |item| item.max_attempts(3),
    )
    .await?;
    backend.push(jobs.name(), "this is not JSON").await?; // goes Dead, once

    let shutdown = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), "resize").build_typed(handler_fn(
        |job: Job<Resize>, _ctx: JobContext| async move {
            if job.payload.width == 0 {
                // No retry can fix this one.
                return Err(Permanent::boxed("width must be positive"));
            }
            println!("resizing {} to {} px", job.payload.image, job.payload.width);
            Ok(())
        },
    ))?;
    let running = tokio::spawn(worker.run(shutdown.clone()));

    let queue = jobs.name().clone();
    while backend.stats(&queue).await?.dead < 2 || backend.stats(&queue).await?.ready > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    running
        .await
        .map_err(|e| leaseq::Error::outcome_unknown("worker task", e))??;
    for dead in backend.peek(&queue, ItemState::Dead, 10).await? {
        println!("dead #{}: {}", dead.id, dead.last_error.unwrap_or_default());
    }
    Ok(())
}
