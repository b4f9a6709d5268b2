//! A cancel reaches a running handler on each server backend: a worker
//! (short lease, fast heartbeat) runs a handler that waits on its
//! cancellation; the item is cancelled while it runs, the handler sees
//! `cancel_requested`, and the item ends Cancelled and is gone. A missing
//! server is a loud skip, or a failure with `CI=true`.
#![cfg(any(feature = "redis", feature = "fred", feature = "postgres"))]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leaseq::{
    handler_fn, Backend, BackendExt as _, CancellationToken, Cancelled, Job, JobContext,
    JobOutcome, QueueName, Worker,
};
use tokio::sync::mpsc;

/// How long a step may take before the test fails (generous: shared box).
const LIMIT: Duration = Duration::from_secs(30);

/// The next message on `rx`, or a failure naming `what` after [`LIMIT`].
async fn next<T>(url: &str, what: &str, rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    match tokio::time::timeout(LIMIT, rx.recv()).await {
        Ok(Some(v)) => v,
        Ok(None) => panic!("{url}: {what}: the channel closed"),
        Err(_) => panic!("{url}: {what}: not within {LIMIT:?}"),
    }
}

async fn cancel_reaches_the_handler(url: &str) {
    let backend: Arc<dyn Backend> = match leaseq::connect(url).await {
        Ok(b) => b,
        Err(e) => return leaseq_testkit::env::skip(&format!("no server at {url}"), e),
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let q = QueueName::new(format!("cancel-running-{}-{nanos}", std::process::id()))
        .expect("queue name");
    let id = backend
        .push(&q, "waits for its cancel")
        .await
        .expect("enqueue");
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let (event_tx, mut events) = mpsc::unbounded_channel();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .lease_ttl(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(200))
        .on_event(move |e| {
            let _ = event_tx.send(e.outcome.clone());
        })
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let (started, seen) = (started_tx.clone(), seen_tx.clone());
            async move {
                let _ = started.send(());
                ctx.cancelled().await;
                let _ = seen.send(ctx.cancel_requested());
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    next(url, "the handler started", &mut started).await;
    let answer = backend.control().expect("control").cancel(&q, id).await;
    assert_eq!(answer.expect("cancel"), Cancelled::Requested, "{url}");
    let requested = next(url, "the handler saw its cancellation", &mut seen).await;
    assert!(requested, "{url}: stopped for another reason");
    let outcome = next(url, "the job ended", &mut events).await;
    assert_eq!(outcome, JobOutcome::Cancelled, "{url}");
    stop.cancel();
    run.await.expect("join").expect("run");
    assert!(
        backend.item(&q, id).await.is_err(),
        "{url}: the cancelled item is still there"
    );
    let _ = backend.admin().expect("admin").delete_queue(&q).await;
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_running_handler_on_redis() {
    cancel_reaches_the_handler(&leaseq_testkit::env::redis_url()).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_running_handler_on_postgres() {
    cancel_reaches_the_handler(&leaseq_testkit::env::database_url()).await;
}
