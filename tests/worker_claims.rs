//! How large the worker's claims are: it claims ahead while handlers are
//! short (its concurrency's worth, and up to its prefetch while handlers
//! get through more than that in about a millisecond), only for free slots
//! while they run long, and a job claimed ahead that never started is
//! given back at shutdown without spending an attempt.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq::{
    async_trait, handler_fn, Backend, BackendExt, CancellationToken, ClaimSpec, Claimed, ItemState,
    Job, JobContext, JobOutcome, LayeredBackend, QueueName, Result, Worker,
};
use support::{events, queue, tokio_backend};

/// Records how many items each claim asked for.
#[derive(Debug)]
struct ClaimSizes {
    inner: Arc<dyn Backend>,
    asked: Mutex<Vec<u32>>,
}

impl ClaimSizes {
    fn new() -> Arc<Self> {
        Arc::new(ClaimSizes {
            inner: tokio_backend(),
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<u32> {
        self.asked.lock().expect("lock").clone()
    }
}

#[async_trait]
impl LayeredBackend for ClaimSizes {
    type Inner = Arc<dyn Backend>;
    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }
    async fn claim(&self, q: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        self.asked.lock().expect("lock").push(spec.max());
        self.inner.claim(q, spec).await
    }
}

async fn push_many(backend: &Arc<dyn Backend>, q: &QueueName, n: usize) {
    for i in 0..n {
        backend.push(q, format!("{i}")).await.expect("enqueue");
    }
}

#[tokio::test(start_paused = true)]
async fn short_handlers_are_claimed_ahead_long_ones_only_for_free_slots() {
    // (handler time, the largest claim allowed, the largest claim needed)
    let prefetch = leaseq::WorkerBuilder::DEFAULT_PREFETCH;
    for (handler_ms, most, least) in [(0u64, prefetch, 9u32), (2, 8, 5), (50, 4, 1)] {
        let recorder = ClaimSizes::new();
        let backend: Arc<dyn Backend> = recorder.clone();
        let q = queue("sizes");
        push_many(&backend, &q, 200).await;
        let (on_event, mut events) = events();
        let worker = Worker::builder(backend.clone(), "sizes")
            .concurrency(4)
            .reap_interval(None)
            .on_event(on_event)
            .build(handler_fn(move |_job: Job, _ctx: JobContext| async move {
                tokio::time::sleep(Duration::from_millis(handler_ms)).await;
                Ok::<_, std::io::Error>(())
            }))
            .expect("worker");
        let stop = CancellationToken::new();
        let run = tokio::spawn(worker.run(stop.clone()));
        for _ in 0..200 {
            assert_eq!(events.next().await.outcome, JobOutcome::Acked);
        }
        stop.cancel();
        run.await.expect("join").expect("run");

        let asked = recorder.asked();
        let largest = asked.iter().copied().max().unwrap_or(0);
        assert!(largest <= most, "{handler_ms} ms handlers: {asked:?}");
        assert!(
            largest >= least,
            "{handler_ms} ms handlers never claimed {least}: {asked:?}"
        );
        assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_claimed_ahead_is_given_back_at_shutdown_without_running() {
    let backend = tokio_backend();
    let q = queue("ahead");
    // Sixteen instant jobs open the claim-ahead buffer; the slow ones after
    // them fill the one slot, and the rest of a claim waits behind it.
    push_many(&backend, &q, 16).await;
    let (on_event, mut events) = events();
    let gate = Arc::new(tokio::sync::Notify::new());
    let release = gate.clone();
    let worker = Worker::builder(backend.clone(), "ahead")
        .concurrency(1)
        .reap_interval(None)
        .shutdown_deadline(Duration::from_secs(60))
        .on_event(on_event)
        .build(handler_fn(move |job: Job, _ctx: JobContext| {
            let gate = gate.clone();
            async move {
                if job.payload.starts_with(b"slow") {
                    gate.notified().await;
                }
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..16 {
        assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    }
    backend.push(&q, "slow-1").await.expect("enqueue");
    backend.push(&q, "slow-2").await.expect("enqueue");
    // Let the worker claim both: one runs, one waits for the slot.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s = backend.stats(&q).await.expect("stats");
    assert_eq!(s.leased, 2, "both slow jobs claimed at once: {s:?}");

    stop.cancel();
    let waiting = events.next().await;
    assert_eq!(waiting.outcome, JobOutcome::Released, "{waiting:?}");
    release.notify_one();
    let running = events.next().await;
    assert_eq!(running.outcome, JobOutcome::Acked);
    run.await.expect("join").expect("run");

    // The waiting job is Ready again with no attempt spent.
    let back = backend.item(&q, waiting.id).await.expect("item");
    assert_eq!((back.state, back.attempts), (ItemState::Ready, 0));
}

/// Jobs whose handlers finish at their first poll start in the claim loop
/// itself (no task each); a handler that computes for long before its first
/// `.await` must not hold the claim's other jobs up behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handlers_that_block_before_their_first_await_still_run_side_by_side() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let backend = tokio_backend();
    let q = queue("blocking");
    push_many(&backend, &q, 24).await;
    let (on_event, mut events) = events();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (now, peak) = (running.clone(), most.clone());
    let worker = Worker::builder(backend.clone(), "blocking")
        .concurrency(4)
        .reap_interval(None)
        .on_event(on_event)
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let (now, peak) = (now.clone(), peak.clone());
            async move {
                let at = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(at, Ordering::SeqCst);
                // Work that holds the thread, as a CPU-bound handler does.
                std::thread::sleep(Duration::from_millis(5));
                now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..24 {
        assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    }
    stop.cancel();
    run.await.expect("join").expect("run");
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "24 blocking handlers with 4 slots never ran two at once: the claim loop ran them in turn"
    );
}
