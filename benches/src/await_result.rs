//! Enqueue-to-result latency: how long a producer waits for a job's
//! result with [`BackendExt::wait_finished`](leaseq_core::BackendExt::wait_finished). A [`Worker`] at its defaults
//! runs a handler that sets a small result; the queue keeps completed
//! items (so the result is recorded); producers enqueue at a steady rate
//! and each sample is the time from the enqueue call's start to
//! `wait_finished` answering the record, woken by the backend's finished
//! signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{
    handler_fn, Awaited, Backend, BackendExt as _, CancellationToken, Error, Job, JobContext, Keep,
    NewItem, QueueName, Result, Retention, Worker,
};
use serde::Serialize;

use crate::load::Latency;

/// What to run.
#[derive(Debug, Clone)]
pub struct AwaitConfig {
    /// Samples in all.
    pub jobs: u32,
    /// Jobs enqueued per second.
    pub rate: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct AwaitReport {
    /// The backend's name.
    pub backend: String,
    /// Samples taken.
    pub jobs: u32,
    /// Jobs enqueued per second.
    pub rate: f64,
    /// Enqueue call start to `wait_finished` answering the result.
    pub latency: Latency,
    /// Samples whose result was what the handler set.
    pub results_right: u32,
    /// Seconds the run took.
    pub seconds: f64,
}

/// How long one sample may take before the run fails.
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `config` against `backend` in `queue` (purged before and after;
/// its retention is set for the run and put back to the default after).
pub async fn run(
    name: &str,
    backend: Arc<dyn Backend>,
    queue: &QueueName,
    config: &AwaitConfig,
) -> Result<AwaitReport> {
    if !(config.rate.is_finite() && config.rate > 0.0) {
        return Err(Error::invalid("--rate must be a positive number"));
    }
    let history = backend.history()?;
    backend.admin()?.purge(queue).await?;
    let keep = Keep::count(u64::from(config.jobs).max(1));
    history
        .set_retention(queue, Retention::default().completed(keep))
        .await?;
    let worker = Worker::builder(backend.clone(), queue.as_str()).build(handler_fn(
        |job: Job, ctx: JobContext| async move {
            ctx.set_result(job.payload)?;
            Ok::<(), Error>(())
        },
    ))?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    let started = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / config.rate);
    let mut ticks = tokio::time::interval(gap);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut samples = Vec::with_capacity(config.jobs as usize);
    for n in 0..config.jobs {
        ticks.tick().await;
        let (b, q) = (backend.clone(), queue.clone());
        samples.push(tokio::spawn(async move { sample(b.as_ref(), &q, n).await }));
    }
    let mut took = Vec::with_capacity(samples.len());
    let mut right = 0;
    for s in samples {
        let (t, ok) = s
            .await
            .map_err(|e| Error::outcome_unknown("a sample task failed", e))??;
        took.push(t);
        right += u32::from(ok);
    }
    let seconds = started.elapsed().as_secs_f64();
    stop.cancel();
    let _ = running.await;
    history.set_retention(queue, Retention::default()).await?;
    backend.admin()?.purge(queue).await?;
    Ok(AwaitReport {
        backend: name.to_owned(),
        jobs: config.jobs,
        rate: config.rate,
        latency: Latency::of(&took)?,
        results_right: right,
        seconds,
    })
}

/// One job: enqueue, wait for its result; the time and whether the result
/// is the payload the handler echoed.
async fn sample(b: &dyn Backend, q: &QueueName, n: u32) -> Result<(Duration, bool)> {
    let payload = format!("job {n}");
    let t0 = Instant::now();
    let id = b.enqueue_one(q, NewItem::new(payload.clone())).await?;
    let done = match b.wait_finished(q, id, LIMIT).await? {
        Awaited::Finished(done) => done,
        other => {
            return Err(Error::outcome_unknown(
                format!("item {id}"),
                format!("no result within 30 s: {other:?}"),
            ))
        }
    };
    Ok((
        t0.elapsed(),
        done.result.as_deref() == Some(payload.as_bytes()),
    ))
}
