//! The demo's moving parts: producers, workers that sometimes crash (and
//! whose stale leases wake up later, like a paused process), and reapers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaseq::{
    handler_fn, Backend, CancellationToken, Job, JobContext, JobOutcome, LeaseKey, NewItem,
    QueueName, RetryPolicy, Worker, WorkerMetrics,
};

use super::tally::Tally;
use super::DemoArgs;

/// What every task of the demo shares.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) queue: QueueName,
    pub(crate) tally: Arc<Tally>,
    pub(crate) metrics: WorkerMetrics,
    pub(crate) stop: CancellationToken,
    pub(crate) ttl: Duration,
}

/// Enqueues items `range` in batches of `batch`.
pub(crate) async fn produce(
    ctx: Ctx,
    range: std::ops::Range<u64>,
    batch: u64,
) -> leaseq::Result<()> {
    let mut next = range.start;
    while next < range.end && !ctx.stop.is_cancelled() {
        let end = (next + batch).min(range.end);
        let items = (next..end)
            .map(|i| NewItem::new(i.to_be_bytes().to_vec()).max_attempts(25))
            .collect();
        let at = Instant::now();
        let out = ctx.backend.enqueue(&ctx.queue, items).await?;
        ctx.tally.enqueued(out.into_iter().map(|e| e.id), at);
        next = end;
    }
    Ok(())
}

/// Reaps the queue every `every` until stopped.
pub(crate) async fn reap(ctx: Ctx, every: Duration) {
    let tally = &ctx.tally;
    loop {
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Ok(report) = ctx.backend.reap(&ctx.queue).await {
            tally
                .reaped
                .fetch_add(report.recovered(), std::sync::atomic::Ordering::Relaxed);
            tally.repaired.fetch_add(
                report.repairs.len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }
}

/// One worker process: runs a [`Worker`]; when a delivery draws a crash,
/// the whole worker is killed on the spot (its leases dropped without ack or
/// release) and a fresh one starts, as a supervisor would restart it.
pub(crate) async fn worker_slot(ctx: Ctx, args: Arc<DemoArgs>) -> leaseq::Result<()> {
    loop {
        let crash = CancellationToken::new();
        let held: Arc<Mutex<HashMap<u64, LeaseKey>>> = Arc::default();
        let worker = build_worker(&ctx, &args, crash.clone(), held.clone())?;
        let mut run = tokio::spawn(worker.run(ctx.stop.clone()));
        tokio::select! {
            res = &mut run => {
                return res.unwrap_or(Ok(()));
            }
            _ = crash.cancelled() => {
                run.abort();
                let _ = run.await;
                let dropped: Vec<LeaseKey> = lock(&held).drain().map(|(_, k)| k).collect();
                let t = &ctx.tally;
                t.crashes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                t.dropped_leases.fetch_add(dropped.len() as u64, std::sync::atomic::Ordering::Relaxed);
                tokio::spawn(wake_up_late(ctx.clone(), dropped));
            }
        }
    }
}

fn build_worker(
    ctx: &Ctx,
    args: &DemoArgs,
    crash: CancellationToken,
    held: Arc<Mutex<HashMap<u64, LeaseKey>>>,
) -> leaseq::Result<Worker> {
    let tally = ctx.tally.clone();
    let handled_by = ctx.tally.clone();
    let crash_rate = args.crash_rate;
    Worker::builder(ctx.backend.clone(), ctx.queue.as_str())
        .concurrency(args.concurrency)
        .prefetch(args.prefetch)
        .lease_ttl(ctx.ttl)
        .retry(RetryPolicy::exponential(Duration::from_millis(20)))
        .reap_interval(Some(ctx.ttl / 4))
        .shutdown_deadline(Duration::from_secs(5))
        .idle_wait(Duration::from_millis(200))
        .metrics(ctx.metrics.clone())
        .on_event(move |ev| {
            if ev.outcome == JobOutcome::Acked {
                tally.acked(ev.id);
            }
        })
        .build(handler_fn(move |job: Job, jctx: JobContext| {
            let (crash, held, tally) = (crash.clone(), held.clone(), handled_by.clone());
            async move {
                let id = job.id.get();
                lock(&held).insert(id, jctx.lease().clone());
                if fastrand::f64() < crash_rate {
                    crash.cancel();
                    std::future::pending::<()>().await;
                }
                // Some work: up to 2 ms.
                tokio::time::sleep(Duration::from_micros(fastrand::u64(0..2_000))).await;
                lock(&held).remove(&id);
                tally.handled(job.id);
                Ok::<_, std::convert::Infallible>(())
            }
        }))
}

/// A crashed worker's leases, used long after: each ack either lands (the
/// lease had not been recovered yet, so it was still the holder's) or is
/// refused as stale. Never both for one item.
async fn wake_up_late(ctx: Ctx, leases: Vec<LeaseKey>) {
    let pause = ctx.ttl.mul_f64(0.5 + 1.5 * fastrand::f64());
    tokio::select! {
        _ = ctx.stop.cancelled() => return,
        _ = tokio::time::sleep(pause) => {}
    }
    for key in leases {
        match ctx.backend.ack(&key).await {
            Ok(()) => {
                ctx.tally.acked(key.id);
                ctx.tally
                    .late_accepted
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) if e.is_lease_lost() => {
                ctx.tally
                    .late_rejected
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            // The reply was lost: the ack may have landed, and the item
            // may be gone with no ack counted and no handler finished.
            Err(e) if e.may_have_applied() => {
                ctx.tally.late_ack_unanswered(key.id);
                tracing::warn!(error = %e, "late ack unanswered");
            }
            Err(e) => tracing::warn!(error = %e, "late ack failed"),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(all(test, feature = "memory"))]
mod tests {
    use std::collections::HashSet;

    use leaseq::layer::fault::{Fault, Faults, Op};
    use leaseq::{ClaimSpec, MemoryBackend};

    use super::*;

    /// A crashed worker's late ack that lands but whose reply is lost (a
    /// server restarted or a connection cut under it) leaves the item gone
    /// with no ack counted and no handler finished: the verdict counts it
    /// unconfirmed, not lost.
    #[tokio::test]
    async fn a_late_ack_whose_reply_is_lost_is_unconfirmed_not_lost() {
        let memory: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let faults = Arc::new(Faults::new(memory.clone()));
        faults.inject(Op::Ack, Fault::LoseReply, 1);
        let queue = QueueName::new("late-acks").expect("queue name");
        let ctx = Ctx {
            backend: faults.clone(),
            queue: queue.clone(),
            tally: Arc::default(),
            metrics: WorkerMetrics::default(),
            stop: CancellationToken::new(),
            ttl: Duration::from_millis(10),
        };
        let enqueued = memory
            .enqueue(&queue, vec![NewItem::new("x")])
            .await
            .expect("enqueue");
        ctx.tally
            .enqueued(enqueued.iter().map(|e| e.id), Instant::now());
        let spec = ClaimSpec::new(1, Duration::from_secs(60)).expect("claim spec");
        let claimed = memory.claim(&queue, spec).await.expect("claim");
        let keys = claimed.leases.iter().map(|l| l.key.clone()).collect();

        wake_up_late(ctx.clone(), keys).await;

        assert_eq!(faults.fired(), 1, "the late ack's reply was lost");
        let stats = memory.stats(&queue).await.expect("stats");
        assert_eq!(stats.total(), 0, "the late ack landed");
        let none = HashSet::new();
        let verdict = ctx.tally.verdict(&none, &none, stats);
        assert_eq!(
            (verdict.lost, verdict.unconfirmed, verdict.acked),
            (0, 1, 1)
        );
        assert!(verdict.passed(1));
    }
}
