//! A job's result, end to end on the memory backend: the handler sets it,
//! the worker completes the item with it, and a producer waiting on the
//! item gets it (or learns that the job died); a queue that keeps nothing
//! drops it, and a result over the bound is refused where the handler
//! sets it.

mod support;

use std::time::Duration;

use leaseq::finished::MAX_RESULT_LEN;
use leaseq::{
    handler_fn, Awaited, BackendExt, CancellationToken, Ending, Error, Job, JobContext, JobOutcome,
    Keep, Permanent, Retention, Worker,
};
use support::{events, queue, tokio_backend};

fn doubling_worker(
    backend: std::sync::Arc<dyn leaseq::Backend>,
    q: &leaseq::QueueName,
    on_event: impl Fn(&leaseq::JobEvent) + Send + Sync + 'static,
) -> Worker {
    Worker::builder(backend, q.as_str())
        .on_event(on_event)
        .build(handler_fn(|job: Job, ctx: JobContext| async move {
            let n: u64 = String::from_utf8_lossy(&job.payload).parse().unwrap_or(0);
            ctx.set_result((n * 2).to_string())?;
            Ok::<_, Error>(())
        }))
        .expect("worker")
}

#[tokio::test(start_paused = true)]
async fn a_producer_gets_the_result_its_job_returned() {
    let backend = tokio_backend();
    let q = queue("results");
    let history = backend.history().expect("history");
    history
        .set_retention(&q, Retention::default().completed(Keep::count(100)))
        .await
        .expect("retention");
    let id = backend.push(&q, "21").await.expect("enqueue");
    let (on_event, mut events) = events();
    let stop = CancellationToken::new();
    let worker = doubling_worker(backend.clone(), &q, on_event);
    let metrics = worker.metrics();
    let run = tokio::spawn(worker.run(stop.clone()));
    let done = backend
        .wait_finished(&q, id, Duration::from_secs(60))
        .await
        .expect("wait")
        .finished()
        .expect("finished before the timeout");
    assert_eq!(done.ending, Ending::Completed);
    assert_eq!(done.result.as_deref(), Some(b"42".as_slice()));
    assert_eq!(done.attempts, 1);
    assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    stop.cancel();
    run.await.expect("join").expect("run");
    // Completed with a result is acked, in the metrics as in the event.
    assert_eq!(metrics.snapshot().acked, 1);
}

/// A job that gives up stays in the queue as a dead letter: its producer
/// is told so (with the reason) instead of waiting out its timeout.
#[tokio::test(start_paused = true)]
async fn a_producer_is_told_its_job_died() {
    let backend = tokio_backend();
    let q = queue("dies");
    let history = backend.history().expect("history");
    history
        .set_retention(&q, Retention::default().completed(Keep::count(100)))
        .await
        .expect("retention");
    let id = backend.push(&q, "cat.png").await.expect("enqueue");
    let (on_event, mut events) = events();
    let stop = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async move {
            Err::<(), _>(Permanent::boxed("no such image"))
        }))
        .expect("worker");
    let run = tokio::spawn(worker.run(stop.clone()));
    let waited = backend
        .wait_finished(&q, id, Duration::from_secs(3600))
        .await
        .expect("wait");
    let Awaited::Dead(letter) = waited else {
        panic!("a job that died was answered {waited:?}");
    };
    assert_eq!(letter.id, id);
    assert!(
        letter
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("no such image")),
        "{letter:?}"
    );
    assert!(matches!(
        events.next().await.outcome,
        JobOutcome::Dead { .. }
    ));
    stop.cancel();
    run.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn a_queue_that_keeps_nothing_drops_the_result() {
    let backend = tokio_backend();
    let q = queue("no-results");
    let id = backend.push(&q, "1").await.expect("enqueue");
    let (on_event, mut events) = events();
    let stop = CancellationToken::new();
    let run = tokio::spawn(doubling_worker(backend.clone(), &q, on_event).run(stop.clone()));
    assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    let waited = backend.wait_finished(&q, id, Duration::from_secs(1)).await;
    assert!(matches!(waited, Err(Error::NotFound { .. })), "{waited:?}");
    stop.cancel();
    run.await.expect("join").expect("run");
}

#[test]
fn a_result_over_the_bound_is_refused_where_it_is_set() {
    let q = queue("big");
    let key = leaseq::LeaseKey {
        queue: q,
        id: leaseq::ItemId::new(1),
        token: leaseq::LeaseToken::random(),
    };
    let ctx = JobContext::new(key);
    let big = vec![0u8; MAX_RESULT_LEN + 1];
    assert!(matches!(
        ctx.set_result(big),
        Err(Error::InvalidInput { .. })
    ));
    assert!(ctx.set_result(vec![0u8; MAX_RESULT_LEN]).is_ok());
}
