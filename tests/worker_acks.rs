//! The worker's batched acks on the memory backend, with time under
//! control: batches form under load, a lone ack is not delayed, each lease
//! keeps its own outcome, failed batches are retried, shutdown sends what is
//! pending.

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq::{
    async_trait, handler_fn, Backend, BackendExt, CancellationToken, ItemId, Job, JobContext,
    JobOutcome, LayeredBackend, LeaseKey, QueueName, Result, Worker,
};
use leaseq_core::layer::fault::{Fault, Faults, Op};
use support::{events, queue, tokio_backend};
use tokio::time::Instant;

/// Wraps a backend and records the size of every `ack_many` call. Each call
/// takes `round_trip` (on tokio's clock) like a server would, and can be
/// made to misbehave: `steal` acks the batch's first lease behind the
/// worker's back. Below it, `faults` can fail a call without acking anything
/// (`Fault::Refuse`) or ack the batch but report a backend error
/// (`Fault::LoseReply`); a refused call is still recorded.
#[derive(Debug)]
struct AckRecorder {
    faults: Faults<Arc<dyn Backend>>,
    round_trip: Duration,
    sizes: Mutex<Vec<usize>>,
    steal: AtomicU64,
}

impl AckRecorder {
    fn new(round_trip: Duration) -> Arc<Self> {
        Arc::new(AckRecorder {
            faults: Faults::new(tokio_backend()),
            round_trip,
            sizes: Mutex::new(Vec::new()),
            steal: AtomicU64::new(0),
        })
    }

    fn sizes(&self) -> Vec<usize> {
        self.sizes.lock().expect("lock").clone()
    }
}

fn take(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

#[async_trait]
impl LayeredBackend for AckRecorder {
    type Inner = Faults<Arc<dyn Backend>>;
    fn inner(&self) -> &Faults<Arc<dyn Backend>> {
        &self.faults
    }
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        self.sizes.lock().expect("lock").push(leases.len());
        if !self.round_trip.is_zero() {
            tokio::time::sleep(self.round_trip).await;
        }
        if take(&self.steal) {
            Backend::ack(&self.faults, &leases[0])
                .await
                .expect("stolen ack");
        }
        Backend::ack_many(&self.faults, leases).await
    }
}

async fn push_many(backend: &Arc<dyn Backend>, q: &QueueName, n: usize) -> HashSet<ItemId> {
    let mut ids = HashSet::new();
    for i in 0..n {
        ids.insert(backend.push(q, format!("{i}")).await.expect("enqueue"));
    }
    ids
}

fn quick_worker(
    backend: Arc<dyn Backend>,
    queue: &str,
    concurrency: usize,
) -> leaseq::WorkerBuilder {
    Worker::builder(backend, queue)
        .concurrency(concurrency)
        .prefetch(concurrency as u32)
        .reap_interval(None)
}

#[tokio::test(start_paused = true)]
async fn under_load_acks_go_out_in_batches_and_each_job_is_acked_once() {
    let recorder = AckRecorder::new(Duration::from_millis(1));
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("batched");
    let ids = push_many(&backend, &q, 200).await;
    let (on_event, mut events) = events();
    let worker = quick_worker(backend.clone(), "batched", 16)
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));

    let mut acked = HashSet::new();
    for _ in 0..200 {
        let ev = events.next().await;
        assert_eq!((ev.attempts, &ev.outcome), (1, &JobOutcome::Acked));
        assert!(acked.insert(ev.id), "item {} acked twice", ev.id);
    }
    stop.cancel();
    run.await.expect("join").expect("run");

    assert_eq!(acked, ids);
    let sizes = recorder.sizes();
    assert!(
        sizes.len() < 200,
        "{} ack_many calls for 200 jobs",
        sizes.len()
    );
    assert_eq!(sizes.iter().sum::<usize>(), 200, "every lease sent once");
    // A worker holds at most 2 × 16 leases running or claimed ahead, and
    // two claims of 16 in acks (on their way and gathering): no batch is
    // larger than its room.
    assert!(sizes.iter().all(|&n| (1..=64).contains(&n)), "{sizes:?}");
    let m = metrics.snapshot();
    assert_eq!((m.claimed, m.acked, m.lease_lost), (200, 200, 0));
    assert_eq!(m.backend_errors, 0);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_lone_ack_goes_out_at_once() {
    let recorder = AckRecorder::new(Duration::ZERO);
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("lone");
    backend.push(&q, "x").await.expect("enqueue");
    let done_at = Arc::new(Mutex::new(None));
    let acked_at = Arc::new(Mutex::new(None));
    let (d, a) = (done_at.clone(), acked_at.clone());
    let (on_event, mut events) = events();
    let worker = quick_worker(backend.clone(), "lone", 4)
        .on_event(move |ev| {
            *a.lock().expect("lock") = Some(Instant::now());
            on_event(ev);
        })
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let d = d.clone();
            async move {
                *d.lock().expect("lock") = Some(Instant::now());
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    assert_eq!(events.next().await.outcome, JobOutcome::Acked);
    stop.cancel();
    run.await.expect("join").expect("run");

    assert_eq!(recorder.sizes(), vec![1]);
    let done = done_at.lock().expect("lock").expect("handler ran");
    let acked = acked_at.lock().expect("lock").expect("event seen");
    // Paused time only moves when every task waits on a timer: an ack held
    // back by one would show here.
    assert_eq!(acked - done, Duration::ZERO, "the ack waited for a timer");
}

#[tokio::test(start_paused = true)]
async fn each_lease_in_a_batch_gets_its_own_result() {
    let recorder = AckRecorder::new(Duration::from_millis(1));
    recorder.steal.store(1, Ordering::SeqCst);
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("mixed");
    push_many(&backend, &q, 20).await;
    let (on_event, mut events) = events();
    let worker = quick_worker(backend.clone(), "mixed", 4)
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    let mut outcomes = Vec::new();
    for _ in 0..20 {
        outcomes.push(events.next().await.outcome);
    }
    stop.cancel();
    run.await.expect("join").expect("run");

    let lost = outcomes
        .iter()
        .filter(|o| **o == JobOutcome::LeaseLost)
        .count();
    let acked = outcomes.iter().filter(|o| **o == JobOutcome::Acked).count();
    assert_eq!((lost, acked), (1, 19), "{outcomes:?}");
    let m = metrics.snapshot();
    // The stolen lease ended before it expired by no call of the worker's:
    // to the worker it vanished (the store lost it), counted apart.
    assert_eq!((m.acked, m.lease_lost, m.lease_vanished), (19, 0, 1));
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_batch_whose_reply_was_lost_is_settled_and_reports_the_ack() {
    let recorder = AckRecorder::new(Duration::ZERO);
    recorder.faults.inject(Op::AckMany, Fault::LoseReply, 1);
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("lost-reply");
    let id = backend.push(&q, "x").await.expect("enqueue");
    let (on_event, mut events) = events();
    let worker = quick_worker(backend.clone(), "lost-reply", 1)
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    let ev = events.next().await;
    stop.cancel();
    run.await.expect("join").expect("run");

    // The batch ran but its reply was lost: the worker asks the backend
    // what became of the lease (finished by its own ack, before expiry) and
    // reports the job acked, without sending the ack again.
    assert_eq!((ev.id, ev.outcome), (id, JobOutcome::Acked));
    assert_eq!(recorder.sizes(), vec![1]);
    let m = metrics.snapshot();
    assert_eq!((m.acked, m.lease_lost, m.backend_errors), (1, 0, 1));
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_lost_batch_is_settled_even_when_the_probe_fails_longer_than_a_write_may() {
    let recorder = AckRecorder::new(Duration::ZERO);
    recorder.faults.inject(Op::AckMany, Fault::LoseReply, 1);
    // More failed probes in a row than the worker's 4 attempts for a write:
    // the store knows the ack landed, so the worker must keep asking.
    recorder.faults.inject(Op::LeaseFate, Fault::LoseReply, 6);
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("probe-fails");
    let id = backend.push(&q, "x").await.expect("enqueue");
    let (on_event, mut events) = events();
    let worker = quick_worker(backend.clone(), "probe-fails", 1)
        .lease_ttl(Duration::from_secs(60))
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    let ev = events.next().await;
    stop.cancel();
    run.await.expect("join").expect("run");

    assert_eq!((ev.id, ev.outcome), (id, JobOutcome::Acked));
    assert_eq!(recorder.sizes(), vec![1], "the ack was not sent again");
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_batch_the_backend_keeps_failing_is_unrecorded_for_every_lease() {
    let recorder = AckRecorder::new(Duration::ZERO);
    recorder.faults.inject(Op::AckMany, Fault::Refuse, u32::MAX);
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("down");
    push_many(&backend, &q, 3).await;
    let (on_event, mut events) = events();
    let worker = quick_worker(backend.clone(), "down", 3)
        .lease_ttl(Duration::from_secs(60))
        .on_event(on_event)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            Ok::<_, std::io::Error>(())
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..3 {
        match events.next().await.outcome {
            JobOutcome::Unrecorded { error } => {
                assert!(error.contains("refused"), "{error}")
            }
            other => panic!("expected Unrecorded, got {other:?}"),
        }
    }
    stop.cancel();
    run.await.expect("join").expect("run");

    let calls = recorder.sizes();
    assert_eq!(
        calls.iter().sum::<usize>(),
        3 * 4,
        "each batch tried 4 times"
    );
    let m = metrics.snapshot();
    assert_eq!((m.acked, m.lease_lost), (0, 0));
    // Every failed call counts, as for any other settled call.
    assert_eq!(m.backend_errors, calls.len() as u64);
    // Nothing was acked: the leases are left for a reaper.
    assert_eq!(backend.stats(&q).await.expect("stats").leased, 3);
}

#[tokio::test(start_paused = true)]
async fn shutdown_sends_the_pending_acks_before_run_returns() {
    // A slow server: every ack_many takes 5 s.
    let recorder = AckRecorder::new(Duration::from_secs(5));
    let backend: Arc<dyn Backend> = recorder.clone();
    let q = queue("drain-acks");
    push_many(&backend, &q, 8).await;
    let (tx, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let worker = quick_worker(backend.clone(), "drain-acks", 8)
        .lease_ttl(Duration::from_secs(60))
        .build(handler_fn(move |_job: Job, _ctx: JobContext| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(());
                Ok::<_, std::io::Error>(())
            }
        }))
        .expect("worker");
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..8 {
        finished.recv().await.expect("a handler finished");
    }
    assert_eq!(
        metrics.snapshot().acked,
        0,
        "the acks are still on their way"
    );
    stop.cancel();
    run.await.expect("join").expect("run");

    assert_eq!(metrics.snapshot().acked, 8, "every pending ack was sent");
    assert_eq!(recorder.sizes().iter().sum::<usize>(), 8);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}
