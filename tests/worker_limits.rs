//! The worker runtime under a queue's global limits: it runs no more than
//! the limits allow, and when a claim is cut short it waits the
//! `retry_after` the backend gave instead of claiming again at once.

mod support;

use leaseq::BackendExt as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq::{
    async_trait, handler_fn, Backend, CancellationToken, Job, JobContext, JobOutcome,
    LayeredBackend, NewItem, QueueLimits, QueueName, Rate, Worker,
};
use support::{events, queue, tokio_backend, CountingBackend};

/// A backend whose wake-up fires almost at once (as one would while items
/// sit Ready): a worker that ignored `retry_after` and waited for work
/// would claim again every millisecond.
#[derive(Debug)]
struct EagerWake(Arc<dyn Backend>);

#[async_trait]
impl LayeredBackend for EagerWake {
    type Inner = Arc<dyn Backend>;
    fn inner(&self) -> &Arc<dyn Backend> {
        &self.0
    }
    async fn wait_for_work(&self, _: &QueueName, _: Duration) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_worker_waits_for_the_window_instead_of_polling() {
    let memory = tokio_backend();
    let q = queue("rate-limited");
    let items: Vec<NewItem> = (0..10).map(|i| NewItem::new(format!("j{i}"))).collect();
    memory.enqueue(&q, items).await.expect("enqueue");
    let rate = Rate::new(2, Duration::from_secs(1)).expect("rate");
    memory
        .throttles()
        .expect("throttles")
        .set_queue_limits(&q, QueueLimits::NONE.rate(rate))
        .await
        .expect("limits");
    let counting = Arc::new(CountingBackend::new(memory.clone()));
    let backend: Arc<dyn Backend> = Arc::new(EagerWake(counting.clone()));
    let started: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (on_event, mut events) = events();
    let worker = {
        let (started, clock) = (started.clone(), memory.clone());
        Worker::builder(backend, "rate-limited")
            .concurrency(4)
            .on_event(on_event)
            .build(handler_fn(move |_job: Job, _ctx: JobContext| {
                let (started, clock) = (started.clone(), clock.clone());
                async move {
                    let now = clock.now().await.expect("now").as_millis();
                    started.lock().expect("lock").push(now);
                    Ok::<_, std::io::Error>(())
                }
            }))
            .expect("worker")
    };
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..10 {
        assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    }
    stop.cancel();
    run.await.expect("join").expect("run");

    let mut per_window = std::collections::BTreeMap::<u64, u32>::new();
    for t in started.lock().expect("lock").iter() {
        *per_window.entry(t / 1_000).or_default() += 1;
    }
    assert!(
        per_window.values().all(|&n| n <= 2),
        "at most 2 jobs per second: {per_window:?}"
    );
    assert!(
        per_window.len() >= 5,
        "10 jobs at 2 a second: {per_window:?}"
    );
    // About one or two claims per window; a worker that claimed again on
    // every wake-up would have made thousands over these five seconds.
    let claims = counting.claims();
    assert!(
        claims <= 4 * per_window.len() as u64,
        "{claims} claims over {} windows",
        per_window.len()
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_at_the_concurrency_limit_waits_between_claims() {
    let memory = tokio_backend();
    let q = queue("one-at-a-time");
    let items: Vec<NewItem> = (0..3).map(|i| NewItem::new(format!("j{i}"))).collect();
    memory.enqueue(&q, items).await.expect("enqueue");
    memory
        .throttles()
        .expect("throttles")
        .set_queue_limits(&q, QueueLimits::NONE.concurrency(1))
        .await
        .expect("limits");
    let counting = Arc::new(CountingBackend::new(memory.clone()));
    let backend: Arc<dyn Backend> = Arc::new(EagerWake(counting.clone()));
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (on_event, mut events) = events();
    let worker = {
        let (running, most) = (running.clone(), most.clone());
        Worker::builder(backend, "one-at-a-time")
            .concurrency(4)
            .on_event(on_event)
            .build(handler_fn(move |_job: Job, _ctx: JobContext| {
                let (running, most) = (running.clone(), most.clone());
                async move {
                    use std::sync::atomic::Ordering::SeqCst;
                    let now = running.fetch_add(1, SeqCst) + 1;
                    most.fetch_max(now, SeqCst);
                    // Each job holds its slot for two seconds.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    running.fetch_sub(1, SeqCst);
                    Ok::<_, std::io::Error>(())
                }
            }))
            .expect("worker")
    };
    let stop = CancellationToken::new();
    let t0 = tokio::time::Instant::now();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..3 {
        assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    }
    let spent = t0.elapsed();
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Claims while a job holds the one slot come every `retry_after`
    // (100 ms), not every wake-up (1 ms): about ten per second held.
    let claims = counting.claims();
    let bound = 2 * (spent.as_millis() as u64 / 100) + 10;
    assert!(
        claims <= bound,
        "{claims} claims over {spent:?} (bound {bound})"
    );
}
