//! The worker runtime's outcome handling on the memory backend, with time
//! under control: heartbeats, lost leases (a removed job among them),
//! retries, panics, decode failures.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq::{
    handler_fn, BackendExt, CancellationToken, ItemState, Job, JobContext, JobOutcome, ManualClock,
    MemoryBackend, NewItem, RetryPolicy, TypedQueue, Worker,
};
use support::{events, queue, tokio_backend};
use tokio::sync::mpsc;

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_a_slow_jobs_lease_alive() {
    let backend = tokio_backend();
    let q = queue("slow");
    backend.push(&q, "slow job").await.expect("enqueue");
    let runs = Arc::new(AtomicU32::new(0));
    let (on_event, mut events) = events();
    let r = runs.clone();
    let worker = Worker::builder(backend.clone(), "slow")
        .concurrency(2)
        .lease_ttl(Duration::from_millis(300))
        .reap_interval(Some(Duration::from_millis(50)))
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                // Ten lease lengths on the backend's clock.
                tokio::time::sleep(Duration::from_secs(3)).await;
                assert!(!ctx.is_cancelled());
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));

    let ev = events.next().await;
    assert_eq!((ev.attempts, ev.outcome), (1, JobOutcome::Acked));
    stop.cancel();
    run.await.expect("join").expect("run");
    let m = metrics.snapshot();
    assert_eq!((m.claimed, m.acked, m.lease_lost, m.reaped), (1, 1, 0, 0));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

/// Counts the extends each lease gets.
#[derive(Debug)]
struct Extends {
    inner: Arc<dyn leaseq::Backend>,
    by_item: Mutex<std::collections::BTreeMap<leaseq::ItemId, u32>>,
}

#[leaseq::async_trait]
impl leaseq::LayeredBackend for Extends {
    type Inner = Arc<dyn leaseq::Backend>;
    fn inner(&self) -> &Arc<dyn leaseq::Backend> {
        &self.inner
    }
    async fn extend(
        &self,
        lease: &leaseq::LeaseKey,
        ttl: leaseq::LeaseTtl,
    ) -> leaseq::Result<leaseq::Extended> {
        *self
            .by_item
            .lock()
            .expect("lock")
            .entry(lease.id)
            .or_default() += 1;
        self.inner.extend(lease, ttl).await
    }
}

impl Extends {
    fn counts(&self) -> Vec<u32> {
        self.by_item
            .lock()
            .expect("lock")
            .values()
            .copied()
            .collect()
    }
}

#[tokio::test(start_paused = true)]
async fn the_scheduler_extends_each_running_lease_once_a_beat_and_stops_at_its_end() {
    let extends = Arc::new(Extends {
        inner: tokio_backend(),
        by_item: Mutex::default(),
    });
    let backend: Arc<dyn leaseq::Backend> = extends.clone();
    let q = queue("beats");
    for i in 0..10 {
        backend.push(&q, format!("{i}")).await.expect("enqueue");
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (on_event, mut events) = events();
    let open = gate.clone();
    let worker = Worker::builder(backend.clone(), "beats")
        .concurrency(10)
        .lease_ttl(Duration::from_secs(3))
        .reap_interval(None)
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let (gate, started) = (gate.clone(), started_tx.clone());
            async move {
                let _ = started.send(());
                let _pass = gate.acquire().await.expect("gate");
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..10 {
        started.recv().await.expect("a job started");
    }
    // Heartbeats every ttl/3 = 1 s: three each in 3.5 s.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(extends.counts(), vec![3; 10]);
    open.add_permits(10);
    for _ in 0..10 {
        assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(extends.counts(), vec![3; 10], "no beat after a job's end");
    stop.cancel();
    run.await.expect("join").expect("run");
}

/// A worker (one slot, 30 s leases) whose handler, on a job's first
/// attempt, sends the job's id, waits to be told to stop and records
/// whether the lease was lost; later attempts succeed at once.
struct Waiting {
    worker: Worker,
    started: mpsc::UnboundedReceiver<leaseq::ItemId>,
    saw_lost: Arc<AtomicBool>,
    events: support::Events,
}

fn waiting_worker(backend: Arc<dyn leaseq::Backend>, queue: &str) -> Waiting {
    let (started_tx, started) = mpsc::unbounded_channel();
    let saw_lost = Arc::new(AtomicBool::new(false));
    let (on_event, events) = events();
    let seen = saw_lost.clone();
    let worker = Worker::builder(backend, queue)
        .concurrency(1)
        .lease_ttl(Duration::from_secs(30))
        .reap_interval(None)
        .on_event(on_event)
        .build(handler_fn(move |job: Job, ctx: JobContext| {
            let (tx, seen) = (started_tx.clone(), seen.clone());
            async move {
                if job.attempts == 1 {
                    let _ = tx.send(job.id);
                    ctx.cancelled().await;
                    seen.store(ctx.lease_lost(), Ordering::SeqCst);
                }
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    Waiting {
        worker,
        started,
        saw_lost,
        events,
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_cancels_the_handler_and_its_result_is_not_acked() {
    let clock = ManualClock::new();
    let backend: Arc<dyn leaseq::Backend> =
        Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
    let q = queue("lost");
    backend.push(&q, "x").await.expect("enqueue");
    let mut w = waiting_worker(backend.clone(), "lost");
    let metrics = w.worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(w.worker.run(stop.clone()));

    w.started.recv().await.expect("handler started");
    clock.advance(Duration::from_secs(31));
    assert_eq!(backend.reap(&q).await.expect("reap").requeued, 1);

    let first = w.events.next().await;
    assert_eq!((first.attempts, first.outcome), (1, JobOutcome::LeaseLost));
    assert!(
        w.saw_lost.load(Ordering::SeqCst),
        "handler saw the lost lease"
    );
    let second = w.events.next().await;
    assert_eq!((second.attempts, second.outcome), (2, JobOutcome::Acked));
    stop.cancel();
    run.await.expect("join").expect("run");
    let m = metrics.snapshot();
    // One lost lease, found by the heartbeat; no ack was tried with it.
    assert_eq!((m.lease_lost, m.acked, m.claimed), (1, 1, 2));
}

#[tokio::test(start_paused = true)]
async fn removing_a_running_job_stops_its_handler_at_the_next_heartbeat() {
    let backend = tokio_backend();
    let q = queue("cancel");
    backend.push(&q, "long job").await.expect("enqueue");
    let mut w = waiting_worker(backend.clone(), "cancel");
    let metrics = w.worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(w.worker.run(stop.clone()));

    let id = w.started.recv().await.expect("handler started");
    let was = backend
        .admin()
        .expect("admin")
        .remove_item(&q, id)
        .await
        .expect("remove");
    assert_eq!(was, ItemState::Leased);

    // The next heartbeat finds the lease gone and tells the handler; its
    // result is dropped, and nothing comes back to the queue.
    let end = w.events.next().await;
    assert_eq!((end.id, end.outcome), (id, JobOutcome::LeaseLost));
    assert!(
        w.saw_lost.load(Ordering::SeqCst),
        "handler saw the lost lease"
    );
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
    stop.cancel();
    run.await.expect("join").expect("run");
    // No reaper took the unexpired lease, and the store keeps no record of
    // the removal: the worker counts it as vanished, as after a purge.
    let m = metrics.snapshot();
    assert_eq!((m.claimed, m.lease_vanished, m.acked), (1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn failures_retry_with_backoff_then_go_dead_with_the_error_text() {
    let backend = tokio_backend();
    let q = queue("flaky");
    let item = NewItem::new("x").max_attempts(3);
    backend.enqueue_one(&q, item).await.expect("enqueue");
    let times = Arc::new(Mutex::new(Vec::new()));
    let (on_event, mut events) = events();
    let t = times.clone();
    let worker = Worker::builder(backend.clone(), "flaky")
        .retry(RetryPolicy::exponential(Duration::from_secs(1)).jitter(0.0))
        .idle_wait(Duration::from_secs(60))
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            t.lock().expect("lock").push(tokio::time::Instant::now());
            async { Err::<(), _>("boom: mail server said no") }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));

    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(events.next().await.outcome);
    }
    stop.cancel();
    run.await.expect("join").expect("run");

    let error = "boom: mail server said no".to_string();
    assert_eq!(
        outcomes,
        vec![
            JobOutcome::Retried {
                delay: Duration::from_secs(1),
                error: error.clone()
            },
            JobOutcome::Retried {
                delay: Duration::from_secs(2),
                error: error.clone()
            },
            JobOutcome::Dead {
                reason: error.clone()
            },
        ]
    );
    let times = times.lock().expect("lock").clone();
    assert_eq!(times.len(), 3);
    assert!(times[1] - times[0] >= Duration::from_secs(1));
    assert!(times[2] - times[1] >= Duration::from_secs(2));
    let dead = backend.peek(&q, ItemState::Dead, 10).await.expect("peek");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some(error.as_str()));
    let m = metrics.snapshot();
    assert_eq!((m.retried, m.dead, m.acked), (2, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_counts_as_a_failure_and_the_worker_goes_on() {
    let backend = tokio_backend();
    let q = queue("panics");
    backend.push(&q, "first").await.expect("enqueue");
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), "panics")
        .retry(RetryPolicy::immediate())
        .on_event(on_event)
        .build(handler_fn(|job: Job, _ctx: JobContext| async move {
            if job.attempts == 1 {
                panic!("handler bug on {}", job.id);
            }
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));

    let ev = events.next().await;
    match ev.outcome {
        JobOutcome::Retried { error, .. } => {
            assert!(
                error.contains("handler panicked: handler bug on"),
                "{error}"
            )
        }
        other => panic!("expected a retry, got {other:?}"),
    }
    assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    backend.push(&q, "second").await.expect("enqueue");
    let ev = events.next().await;
    assert_eq!(
        ev.outcome,
        JobOutcome::Retried {
            delay: Duration::ZERO,
            error: ev_error(&ev)
        }
    );
    assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    stop.cancel();
    run.await.expect("join").expect("run");
    let m = metrics.snapshot();
    assert_eq!((m.panicked, m.retried, m.acked), (2, 2, 2));
}

fn ev_error(ev: &leaseq::JobEvent) -> String {
    match &ev.outcome {
        JobOutcome::Retried { error, .. } => error.clone(),
        other => panic!("expected a retry, got {other:?}"),
    }
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Order {
    id: u32,
    sku: String,
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_does_not_decode_goes_dead_at_once() {
    let backend = tokio_backend();
    let q = queue("orders");
    let bad = backend.push(&q, "not json").await.expect("enqueue");
    let orders = TypedQueue::<Order>::new(backend.clone(), "orders").expect("queue");
    let good = orders
        .enqueue(&Order {
            id: 7,
            sku: "A-1".into(),
        })
        .await
        .expect("enqueue");
    let got = Arc::new(Mutex::new(Vec::new()));
    let (on_event, mut events) = events();
    let g = got.clone();
    let worker = Worker::builder(backend.clone(), "orders")
        .concurrency(1)
        .on_event(on_event)
        .build_typed(handler_fn(move |job: Job<Order>, _ctx: JobContext| {
            g.lock().expect("lock").push(job.payload);
            async { Ok::<_, std::io::Error>(()) }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));

    let first = events.next().await;
    assert_eq!(first.id, bad);
    match &first.outcome {
        JobOutcome::Dead { reason } => assert!(reason.contains("does not decode"), "{reason}"),
        other => panic!("expected Dead, got {other:?}"),
    }
    let second = events.next().await;
    assert_eq!((second.id, second.outcome), (good, JobOutcome::Acked));
    stop.cancel();
    run.await.expect("join").expect("run");

    assert_eq!(
        *got.lock().expect("lock"),
        vec![Order {
            id: 7,
            sku: "A-1".into()
        }]
    );
    let dead = backend.item(&q, bad).await.expect("item");
    assert_eq!((dead.state, dead.attempts), (ItemState::Dead, 1));
}

#[tokio::test(start_paused = true)]
async fn a_job_abandoned_at_shutdown_after_losing_its_lease_still_reports_its_end() {
    let clock = ManualClock::new();
    let backend: Arc<dyn leaseq::Backend> =
        Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
    let q = queue("lost-then-abandoned");
    backend.push(&q, "x").await.expect("enqueue");
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (on_event, mut events) = events();
    let worker = Worker::builder(backend.clone(), "lost-then-abandoned")
        .concurrency(1)
        .lease_ttl(Duration::from_secs(30))
        .reap_interval(None)
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

    started.recv().await.expect("handler started");
    clock.advance(Duration::from_secs(31));
    assert_eq!(backend.reap(&q).await.expect("reap").requeued, 1);
    while metrics.snapshot().lease_lost == 0 {
        tokio::time::sleep(Duration::from_secs(1)).await; // the next heartbeat finds out
    }
    stop.cancel();
    run.await.expect("join").expect("run");

    let end = events.next().await;
    assert_eq!((end.attempts, end.outcome), (1, JobOutcome::LeaseLost));
    // Nothing was released with the stale lease: the item waits, Ready.
    let stats = backend.stats(&q).await.expect("stats");
    assert_eq!((stats.ready, stats.leased), (1, 0));
    assert_eq!(metrics.snapshot().released, 0);
}
