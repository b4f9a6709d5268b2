//! The worker runtime's lifecycle on the memory backend: graceful shutdown,
//! crash recovery, the concurrency bound, idle waiting without polling.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, Backend, BackendExt, CancellationToken, Job, JobContext, JobOutcome, Worker,
};
use support::{events, noop_handler, queue, tokio_backend, CountingBackend};
use tokio::sync::{mpsc, Notify};

#[tokio::test(start_paused = true)]
async fn shutdown_releases_unfinished_leases_at_the_deadline() {
    let backend = tokio_backend();
    let q = queue("stuck");
    // Both on their last attempt: a shutdown must not dead-letter them.
    for p in ["a", "b"] {
        backend
            .enqueue_one(&q, leaseq::NewItem::new(p).max_attempts(1))
            .await
            .expect("enqueue");
    }
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), "stuck")
        .concurrency(2)
        .lease_ttl(Duration::from_secs(60))
        .shutdown_deadline(Duration::from_secs(5))
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let tx = started_tx.clone();
            async move {
                let _ = tx.send(());
                std::future::pending::<()>().await; // ignores every signal
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    started.recv().await.expect("first started");
    started.recv().await.expect("second started");
    assert_eq!(backend.stats(&q).await.expect("stats").leased, 2);

    let t0 = tokio::time::Instant::now();
    stop.cancel();
    run.await.expect("join").expect("run");
    assert!(
        t0.elapsed() >= Duration::from_secs(5),
        "waited for the deadline"
    );
    // Released at once, long before the 60 s leases would expire.
    // Given back without spending the attempt: Ready, attempts 0, not Dead.
    let stats = backend.stats(&q).await.expect("stats");
    assert_eq!((stats.ready, stats.leased, stats.dead), (2, 0, 0));
    for item in backend
        .peek(&q, leaseq::ItemState::Ready, 10)
        .await
        .expect("peek")
    {
        assert_eq!(item.attempts, 0, "{item:?}");
    }
    assert_eq!(metrics.snapshot().released, 2);
    assert_eq!(events.next().await.outcome, JobOutcome::Released);
    assert_eq!(events.next().await.outcome, JobOutcome::Released);
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_claiming_and_lets_running_handlers_finish() {
    let backend = tokio_backend();
    let q = queue("graceful");
    for p in ["a", "b"] {
        backend.push(&q, p).await.expect("enqueue");
    }
    let go = Arc::new(Notify::new());
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let g = go.clone();
    let worker = Worker::builder(backend.clone(), "graceful")
        .concurrency(1)
        .shutdown_deadline(Duration::from_secs(30))
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let (tx, g) = (started_tx.clone(), g.clone());
            async move {
                let _ = tx.send(());
                g.notified().await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    started.recv().await.expect("started");
    stop.cancel();
    go.notify_one();
    run.await.expect("join").expect("run");

    let m = metrics.snapshot();
    assert_eq!((m.claimed, m.acked, m.released), (1, 1, 0));
    let stats = backend.stats(&q).await.expect("stats");
    assert_eq!(
        (stats.ready, stats.leased),
        (1, 0),
        "the second item was never claimed"
    );
}

/// A worker on `name` that leases its one item (lease 1 s) and is stopped
/// hard while its handler runs: no release, no ack.
async fn crash_holding_the_item(backend: &Arc<dyn Backend>, name: &str) {
    let q = queue(name);
    backend.push(&q, "x").await.expect("enqueue");
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let crashing = Worker::builder(backend.clone(), name)
        .lease_ttl(Duration::from_secs(1))
        .reap_interval(None)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let tx = started_tx.clone();
            async move {
                let _ = tx.send(());
                std::future::pending::<()>().await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let crashed = tokio::spawn(crashing.run(CancellationToken::new()));
    started.recv().await.expect("started");
    crashed.abort(); // a hard stop: no release, no ack
    let _ = crashed.await;
    assert_eq!(backend.stats(&q).await.expect("stats").leased, 1);
}

#[tokio::test(start_paused = true)]
async fn a_crashed_workers_items_are_recovered_by_another_workers_reaper() {
    let backend = tokio_backend();
    let q = queue("crash");
    crash_holding_the_item(&backend, "crash").await;

    let (on_event, mut events) = events();
    let rescuer = Worker::builder(backend.clone(), "crash")
        .lease_ttl(Duration::from_secs(1))
        .reap_interval(Some(Duration::from_millis(100)))
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = rescuer.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(rescuer.run(stop.clone()));
    let ev = events.next().await;
    assert_eq!((ev.attempts, ev.outcome), (2, JobOutcome::Acked));
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(metrics.snapshot().reaped, 1);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

/// A worker's reaper runs its first round as the worker starts: a
/// restarted worker recovers the lease its crashed predecessor left as
/// soon as it has expired, not one reap interval later.
#[tokio::test(start_paused = true)]
async fn a_restarted_worker_reaps_as_it_starts() {
    let backend = tokio_backend();
    let q = queue("restart");
    crash_holding_the_item(&backend, "restart").await;
    tokio::time::sleep(Duration::from_secs(2)).await; // the lease expires
    let every = Duration::from_secs(3600);
    let (on_event, mut events) = events();
    let restarted = Worker::builder(backend.clone(), "restart")
        .reap_interval(Some(every))
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let started = tokio::time::Instant::now();
    let stop = CancellationToken::new();
    let run = tokio::spawn(restarted.run(stop.clone()));
    let ev = events.next().await;
    assert_eq!((ev.attempts, ev.outcome), (2, JobOutcome::Acked));
    let waited = started.elapsed();
    assert!(
        waited < every / 2,
        "the expired lease was recovered {waited:?} after the start, as if by the second reap"
    );
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test(start_paused = true)]
async fn never_more_handlers_than_the_concurrency_and_every_item_acked() {
    let backend = tokio_backend();
    let q = queue("many");
    for i in 0..50 {
        backend.push(&q, format!("{i}")).await.expect("enqueue");
    }
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, p) = (running.clone(), peak.clone());
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), "many")
        .concurrency(4)
        .prefetch(3)
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let (r, p) = (r.clone(), p.clone());
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..50 {
        assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    }
    stop.cancel();
    run.await.expect("join").expect("run");
    assert!(peak.load(Ordering::SeqCst) <= 4);
    assert_eq!(peak.load(Ordering::SeqCst), 4, "the slots were used");
    let m = metrics.snapshot();
    assert_eq!((m.claimed, m.acked), (50, 50));
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_waits_for_work_instead_of_polling() {
    let counting = Arc::new(CountingBackend::new(tokio_backend()));
    let backend: Arc<dyn Backend> = counting.clone();
    let q = queue("idle");
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), "idle")
        .idle_wait(Duration::from_secs(3600))
        .reap_interval(None)
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(
        counting.claims() <= 2,
        "{} claims while idle",
        counting.claims()
    );

    let id = backend.push(&q, "wake up").await.expect("enqueue");
    let t0 = tokio::time::Instant::now();
    let ev = events.next().await;
    assert_eq!((ev.id, ev.outcome), (id, JobOutcome::Acked));
    assert!(
        t0.elapsed() < Duration::from_secs(3600),
        "woken, not polled"
    );
    stop.cancel();
    run.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn backend_failures_are_retried_not_fatal() {
    let counting = Arc::new(CountingBackend::new(tokio_backend()));
    counting.fail_claims.store(3, Ordering::SeqCst);
    counting.fail_acks.store(2, Ordering::SeqCst);
    let backend: Arc<dyn Backend> = counting.clone();
    let q = queue("flaky-server");
    let id = backend.push(&q, "x").await.expect("enqueue");
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), "flaky-server")
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    let ev = events.next().await;
    assert_eq!((ev.id, ev.attempts, ev.outcome), (id, 1, JobOutcome::Acked));
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(metrics.snapshot().backend_errors, 5);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[test]
fn a_concurrency_or_prefetch_out_of_range_is_refused_not_a_panic() {
    let builder = || Worker::builder(tokio_backend(), "sizes");
    for bad in [0, leaseq::WorkerBuilder::MAX_CONCURRENCY + 1, usize::MAX] {
        let err = builder()
            .concurrency(bad)
            .build(noop_handler())
            .expect_err("refused");
        assert!(
            matches!(err, leaseq::Error::InvalidInput { .. }),
            "concurrency {bad}: {err}"
        );
    }
    let err = builder()
        .prefetch(0)
        .build(noop_handler())
        .expect_err("refused");
    assert!(matches!(err, leaseq::Error::InvalidInput { .. }), "{err}");
    let worker = builder()
        .concurrency(leaseq::WorkerBuilder::MAX_CONCURRENCY)
        .build(noop_handler())
        .expect("the largest concurrency is accepted");
    drop(worker);
}
