//! The job timeout: a handler past its time is cancelled, the job retried
//! per the retry policy and sent Dead when its attempts run out.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, CancellationToken, ItemState, Job, JobContext, JobOutcome, NewItem, RetryPolicy,
    Worker,
};
use support::{events, queue, tokio_backend};

#[tokio::test(start_paused = true)]
async fn a_handler_past_its_timeout_is_retried_then_dead() {
    let backend = tokio_backend();
    let q = queue("timeouts");
    let id = backend
        .enqueue(&q, vec![NewItem::new("slow").max_attempts(2)])
        .await
        .expect("enqueue")[0]
        .id;
    let runs = Arc::new(AtomicU32::new(0));
    let (on_event, mut events) = events();
    let r = runs.clone();
    let worker = Worker::builder(backend.clone(), "timeouts")
        .concurrency(1)
        .lease_ttl(Duration::from_secs(30))
        .job_timeout(Duration::from_secs(2))
        .retry(RetryPolicy::immediate())
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                // Far past the timeout: only the timeout ends it.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));

    let first = events.next().await;
    assert!(
        matches!(&first.outcome, JobOutcome::Retried { error, .. } if error.contains("timed out")),
        "{first:?}"
    );
    let second = events.next().await;
    assert!(
        matches!(&second.outcome, JobOutcome::Dead { reason } if reason.contains("timed out")),
        "{second:?}"
    );
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let info = backend.item(&q, id).await.expect("item");
    assert_eq!(info.state, ItemState::Dead);
}

#[test]
fn a_zero_timeout_is_refused() {
    let backend = tokio_backend();
    let built = Worker::builder(backend, "q")
        .job_timeout(Duration::ZERO)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }));
    assert!(matches!(built, Err(leaseq::Error::InvalidInput { .. })));
}
