//! The worker under an operator's control, on the memory backend with time
//! under control: a cancel stops a running handler at once through the
//! backend's cancel signal (and at the next heartbeat without one),
//! a snooze spends no attempt, progress shows while the job runs, a paused
//! queue holds the worker without polling, and each worker is listed with
//! its running jobs while it lives.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, BackendExt, CancellationToken, Cancelled, Job, JobContext, JobOutcome, Snooze,
    Worker,
};
use support::{events, queue, tokio_backend, CountingBackend};

const HEARTBEAT: Duration = Duration::from_millis(100);

#[tokio::test(start_paused = true)]
async fn a_cancel_stops_the_running_handler_at_its_next_heartbeat() {
    let backend = tokio_backend();
    let q = queue("cancel-running");
    let id = backend.push(&q, "long job").await.expect("enqueue");
    let (on_event, mut events) = events();
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .lease_ttl(Duration::from_secs(1))
        .heartbeat_interval(HEARTBEAT)
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let started = started_tx.clone();
            async move {
                let _ = started.send(());
                // Runs for an hour unless stopped.
                tokio::select! {
                    _ = ctx.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
                }
                assert!(ctx.cancel_requested(), "stopped for another reason");
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    started.recv().await.expect("the handler started");
    let asked = tokio::time::Instant::now();
    let answer = backend.control().expect("control").cancel(&q, id).await;
    assert_eq!(answer.expect("cancel"), Cancelled::Requested);
    let ev = events.next().await;
    assert_eq!(ev.outcome, JobOutcome::Cancelled);
    assert!(
        asked.elapsed() <= HEARTBEAT * 2,
        "the handler learned of the cancel {:?} after it (heartbeat {HEARTBEAT:?})",
        asked.elapsed()
    );
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(metrics.snapshot().cancelled, 1);
    assert!(
        backend.item(&q, id).await.is_err(),
        "the cancelled item is still there"
    );
}

/// With the cancel signal the handler stops long before the next beat:
/// the heartbeat here is an hour away, in paused time, so only the signal
/// can have brought the cancel.
#[tokio::test(start_paused = true)]
async fn a_cancel_reaches_the_handler_before_the_next_heartbeat() {
    const SLOW_BEAT: Duration = Duration::from_secs(3600);
    let backend = tokio_backend();
    let q = queue("cancel-signal");
    let id = backend.push(&q, "long job").await.expect("enqueue");
    let (on_event, mut events) = events();
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .lease_ttl(SLOW_BEAT * 3)
        .heartbeat_interval(SLOW_BEAT)
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let started = started_tx.clone();
            async move {
                let _ = started.send(());
                tokio::select! {
                    _ = ctx.cancelled() => {}
                    _ = tokio::time::sleep(SLOW_BEAT * 10) => {}
                }
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    started.recv().await.expect("the handler started");
    let asked = tokio::time::Instant::now();
    let answer = backend.control().expect("control").cancel(&q, id).await;
    assert_eq!(answer.expect("cancel"), Cancelled::Requested);
    let ev = events.next().await;
    assert_eq!(ev.outcome, JobOutcome::Cancelled);
    assert!(
        asked.elapsed() < SLOW_BEAT,
        "the cancel reached the handler only after {:?}, at a heartbeat: the cancel signal did not",
        asked.elapsed()
    );
    stop.cancel();
    run.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn a_snoozed_job_runs_again_without_spending_its_attempt() {
    let backend = tokio_backend();
    let q = queue("snooze");
    let id = backend
        .enqueue_one(&q, leaseq::NewItem::new("later").max_attempts(1))
        .await
        .expect("enqueue");
    let (on_event, mut events) = events();
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .on_event(on_event)
        .build(handler_fn(move |job: Job, _ctx: JobContext| {
            let r = r.clone();
            async move {
                // Attempts stay at 1: the snooze gave the first one back.
                assert_eq!(job.attempts, 1);
                if r.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(Snooze::boxed(Duration::from_secs(30)));
                }
                Ok(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    let first = events.next().await;
    assert_eq!(
        first.outcome,
        JobOutcome::Snoozed {
            delay: Duration::from_secs(30)
        }
    );
    let info = backend.item(&q, id).await.expect("item");
    assert_eq!(
        (info.state, info.attempts),
        (leaseq::ItemState::Scheduled, 0)
    );
    let second = events.next().await;
    assert_eq!(second.outcome, JobOutcome::Acked);
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn progress_shows_while_the_job_runs() {
    let backend = tokio_backend();
    let q = queue("progress");
    let id = backend.push(&q, "steps").await.expect("enqueue");
    let (go_tx, go) = tokio::sync::watch::channel(false);
    let (wrote_tx, mut wrote) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let (mut go, wrote) = (go.clone(), wrote_tx.clone());
            async move {
                ctx.progress("step 2 of 3").await?;
                let _ = wrote.send(());
                go.wait_for(|go| *go).await.map_err(std::io::Error::other)?;
                Ok::<_, leaseq::BoxError>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    wrote.recv().await.expect("progress written");
    let info = backend.item(&q, id).await.expect("item");
    assert_eq!(info.progress.as_deref(), Some(&b"step 2 of 3"[..]));
    go_tx.send(true).expect("go");
    stop.cancel();
    run.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn a_paused_queue_holds_the_worker_without_polling_until_the_resume() {
    let memory = tokio_backend();
    let counting = Arc::new(CountingBackend::new(memory.clone()));
    let backend: Arc<dyn leaseq::Backend> = counting.clone();
    let q = queue("paused");
    let control = memory.control().expect("control");
    control.pause(&q).await.expect("pause");
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .idle_wait(Duration::from_secs(5))
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    // A steady stream of enqueues into the paused queue for ten seconds.
    for _ in 0..100 {
        backend.push(&q, "waits").await.expect("enqueue");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = backend.stats(&q).await.expect("stats");
    assert_eq!(
        (s.ready, s.paused),
        (100, true),
        "the worker took items of a paused queue"
    );
    // At most one claim per spacing interval (250 ms), not one per enqueue.
    let claims = counting.claims();
    assert!(claims <= 41, "{claims} claims in 10 s on a paused queue");
    let resumed = tokio::time::Instant::now();
    control.resume(&q).await.expect("resume");
    events.next().await;
    assert!(
        resumed.elapsed() < Duration::from_secs(5),
        "the worker waited out its idle wait instead of waking on the resume"
    );
    stop.cancel();
    run.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn a_running_worker_is_listed_with_its_jobs_until_it_stops() {
    let backend = tokio_backend();
    let q = queue("listed");
    let id = backend.push(&q, "long").await.expect("enqueue");
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .concurrency(3)
        .heartbeat_interval(HEARTBEAT)
        .shutdown_deadline(Duration::from_millis(10))
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let started = started_tx.clone();
            async move {
                let _ = started.send(());
                ctx.cancelled().await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    started.recv().await.expect("the handler started");
    tokio::time::sleep(HEARTBEAT * 3).await;
    let registry = backend.registry().expect("registry");
    let listed = registry.workers().await.expect("workers");
    let mine: Vec<_> = listed.iter().filter(|w| w.queue == q.as_str()).collect();
    assert_eq!(mine.len(), 1, "workers listed: {listed:?}");
    assert_eq!(mine[0].concurrency, 3);
    assert_eq!(
        mine[0].jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![id]
    );
    stop.cancel();
    run.await.expect("join").expect("run");
    let listed = registry.workers().await.expect("workers");
    assert!(
        listed.iter().all(|w| w.queue != q.as_str()),
        "a stopped worker is still listed: {listed:?}"
    );
}
