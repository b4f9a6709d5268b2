//! One program, any backend: the backend is picked by the features compiled
//! in (or by `LEASEQ_BACKEND`), and the code never names it.
//!
//! ```text
//! cargo run -p leaseq --example any_backend                       # memory://
//! cargo run -p leaseq --example any_backend --features redis      # redis://127.0.0.1:6379
//! cargo run -p leaseq --example any_backend --features postgres   # postgres://postgres@127.0.0.1:5432/test
//! cargo run -p leaseq --example any_backend --features sqlite     # sqlite://$TMPDIR/leaseq-any-backend.db
//! ```

use std::time::Duration;

use leaseq::{handler_fn, BackendExt, CancellationToken, Job, JobContext, QueueName, Worker};

fn backend_url() -> String {
    if let Ok(url) = std::env::var("LEASEQ_BACKEND") {
        return url;
    }
    if cfg!(feature = "postgres") {
        "postgres://postgres@127.0.0.1:5432/test".into()
    } else if cfg!(any(feature = "redis", feature = "fred")) {
        "redis://127.0.0.1:6379".into()
    } else if cfg!(feature = "sqlite") {
        let file = std::env::temp_dir().join("leaseq-any-backend.db");
        format!("sqlite://{}", file.display())
    } else {
        "memory://".into()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = backend_url();
    let backend = leaseq::connect(&url).await?;
    let queue = QueueName::new(format!("example-{}", std::process::id()))?;
    for n in 1..=5 {
        backend.push(&queue, format!("job {n}")).await?;
    }

    let shutdown = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), queue.as_str()).build(handler_fn(
        |job: Job, _ctx: JobContext| async move {
            println!("{}", String::from_utf8_lossy(&job.payload));
            Ok::<_, std::io::Error>(())
        },
    ))?;
    let running = tokio::spawn(worker.run(shutdown.clone()));
    while backend.stats(&queue).await?.total() > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    running.await??;
    backend.admin()?.purge(&queue).await?;
    println!("all 5 jobs done on {url}");
    Ok(())
}
