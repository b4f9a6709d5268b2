//! Cancel-to-handler latency: a [`Worker`] at its defaults (lease ttl,
//! heartbeat a third of it) runs handlers that wait on
//! [`JobContext::cancelled`]; for each sample one item is enqueued, and once
//! its handler has started it is cancelled with [`Control::cancel`](leaseq_core::Control::cancel).
//! The sample is the time from the cancel call's
//! start to the handler seeing its context cancelled with
//! [`JobContext::cancel_requested`] set.
//!
//! The worker learns of a cancel at the lease's next heartbeat, which runs
//! one interval after the handler started: a cancel sent right after the
//! start waits most of an interval, the worst case for this path. With
//! `spread`, each cancel is sent instead at a point spread evenly over one
//! interval after the start (the fractional parts of multiples of the
//! golden ratio), as operators' cancels arrive at any time.
//!
//! Samples run in `lanes` independent sequences at once (each its own
//! item, one at a time), so 200 samples of a ~10 s interval take minutes
//! rather than half an hour; each lease has its own heartbeat schedule,
//! so lanes do not change what one sample measures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaseq_core::{
    handler_fn, Backend, BackendExt as _, CancellationToken, Cancelled, Error, Job, JobContext,
    JobOutcome, NewItem, QueueName, Result, Worker, WorkerBuilder,
};
use serde::Serialize;
use tokio::sync::oneshot;

use crate::load::Latency;

/// What to run.
#[derive(Debug, Clone)]
pub struct CancelConfig {
    /// Samples in all.
    pub cancels: u32,
    /// Sequences run at once (at most the worker's concurrency, 8).
    pub lanes: usize,
    /// The worker's lease ttl; its heartbeat is the default, a third of it.
    pub lease: Duration,
    /// Cancel at points spread over one heartbeat interval after the
    /// handler started, not right after it.
    pub spread: bool,
}

impl Default for CancelConfig {
    fn default() -> Self {
        CancelConfig {
            cancels: 200,
            lanes: 1,
            lease: Duration::from_secs(30),
            spread: false,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct CancelReport {
    /// The backend's name.
    pub backend: String,
    /// Samples taken.
    pub cancels: u32,
    /// Sequences run at once.
    pub lanes: usize,
    /// The worker's lease ttl, in milliseconds.
    pub lease_ttl_ms: u64,
    /// The worker's heartbeat interval (a third of the ttl), in
    /// milliseconds.
    pub heartbeat_ms: u64,
    /// Whether cancels were spread over an interval after the start.
    pub spread: bool,
    /// Cancel call start to the handler seeing its cancellation.
    pub latency: Latency,
    /// The cancel call alone (its reply), median.
    pub cancel_call_p50_us: u64,
    /// Samples whose latency was within one heartbeat interval.
    pub within_heartbeat: u32,
    /// How far the slowest sample went past one heartbeat interval (0 if
    /// none did): the heartbeat's own extend call, and timer lag.
    pub max_over_heartbeat_us: u64,
    /// Items the worker ended with the `Cancelled` outcome.
    pub ended_cancelled: u64,
    /// Seconds the run took.
    pub seconds: f64,
}

/// Spreads the cancels' points over an interval.
const GOLDEN: f64 = 0.618_033_988_749_895;

/// The two moments of one sample, told by its handler.
struct Probe {
    started: oneshot::Sender<()>,
    observed: oneshot::Sender<bool>,
}

type Probes = Arc<Mutex<HashMap<String, Probe>>>;

fn probe(probes: &Probes, key: &str) -> Option<Probe> {
    probes.lock().unwrap_or_else(|p| p.into_inner()).remove(key)
}

/// Runs `config` against `backend` in `queue` (purged before and after).
pub async fn run(
    name: &str,
    backend: Arc<dyn Backend>,
    queue: &QueueName,
    config: &CancelConfig,
) -> Result<CancelReport> {
    let lanes = config.lanes.clamp(1, WorkerBuilder::DEFAULT_CONCURRENCY);
    backend.control()?;
    backend.admin()?.purge(queue).await?;
    let probes: Probes = Arc::default();
    let ended = Arc::new(AtomicU64::new(0));
    let (handler_probes, events) = (probes.clone(), ended.clone());
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .lease_ttl(config.lease)
        .on_event(move |e| {
            if matches!(e.outcome, JobOutcome::Cancelled) {
                events.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build(handler_fn(move |job: Job, ctx: JobContext| {
            let key = String::from_utf8_lossy(&job.payload).into_owned();
            let probe = probe(&handler_probes, &key);
            async move {
                if let Some(p) = probe {
                    let _ = p.started.send(());
                    ctx.cancelled().await;
                    let _ = p.observed.send(ctx.cancel_requested());
                }
                Ok::<(), Error>(())
            }
        }))?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    let start = Instant::now();
    let per_lane = config.cancels.div_ceil(lanes as u32);
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let n = per_lane.min(config.cancels.saturating_sub(per_lane * lane as u32));
        let (b, q, p) = (backend.clone(), queue.clone(), probes.clone());
        let limit = config.lease * 2;
        let heartbeat = config.spread.then_some(config.lease / 3);
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            for k in 0..n {
                let key = format!("cancel-{lane}-{k}");
                let wait = heartbeat.map_or(Duration::ZERO, |h| {
                    h.mul_f64((f64::from(k * lanes as u32 + lane as u32) * GOLDEN).fract())
                });
                samples.push(sample(b.as_ref(), &q, &p, key, wait, limit).await?);
            }
            Ok::<_, Error>(samples)
        }));
    }
    let mut samples = Vec::new();
    let mut failed = None;
    for t in tasks {
        match t.await {
            Ok(Ok(s)) => samples.extend(s),
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(e) => failed = failed.or(Some(Error::outcome_unknown("a lane", e))),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // The last items end Cancelled as their handlers return.
    let settle = Instant::now();
    while ended.load(Ordering::Relaxed) < samples.len() as u64
        && settle.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    let _ = running.await;
    backend.admin()?.purge(queue).await?;
    if let Some(e) = failed {
        return Err(e);
    }
    report(
        name,
        config,
        lanes,
        &samples,
        ended.load(Ordering::Relaxed),
        seconds,
    )
}

/// One sample: (cancel call start to the handler seeing it, the cancel
/// call alone).
async fn sample(
    b: &dyn Backend,
    q: &QueueName,
    probes: &Probes,
    key: String,
    wait: Duration,
    limit: Duration,
) -> Result<(Duration, Duration)> {
    let (started_tx, started) = oneshot::channel();
    let (observed_tx, observed) = oneshot::channel();
    let probe = Probe {
        started: started_tx,
        observed: observed_tx,
    };
    probes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.clone(), probe);
    let id = b.enqueue_one(q, NewItem::new(key.clone())).await?;
    let waited = |what: &str| Error::outcome_unknown(format!("{key} (item {id})"), what.to_owned());
    tokio::time::timeout(limit, started)
        .await
        .map_err(|_| waited("its handler never started"))?
        .map_err(|_| waited("its handler ended before it started"))?;
    tokio::time::sleep(wait).await;
    let t0 = Instant::now();
    let answer = b.control()?.cancel(q, id).await?;
    let call = t0.elapsed();
    if answer != Cancelled::Requested {
        return Err(waited(&format!(
            "cancel of a running handler answered {answer:?}"
        )));
    }
    let requested = tokio::time::timeout(limit, observed)
        .await
        .map_err(|_| waited("its handler never saw the cancel"))?
        .map_err(|_| waited("its handler ended without seeing the cancel"))?;
    let seen = t0.elapsed();
    if !requested {
        return Err(waited("its context was cancelled without a cancel request"));
    }
    Ok((seen, call))
}

fn report(
    name: &str,
    config: &CancelConfig,
    lanes: usize,
    samples: &[(Duration, Duration)],
    ended: u64,
    seconds: f64,
) -> Result<CancelReport> {
    let seen = Latency::of(&samples.iter().map(|s| s.0).collect::<Vec<_>>())?;
    let calls = Latency::of(&samples.iter().map(|s| s.1).collect::<Vec<_>>())?;
    let heartbeat = config.lease / 3;
    Ok(CancelReport {
        backend: name.to_owned(),
        cancels: samples.len() as u32,
        lanes,
        lease_ttl_ms: config.lease.as_millis() as u64,
        heartbeat_ms: heartbeat.as_millis() as u64,
        spread: config.spread,
        latency: seen,
        cancel_call_p50_us: calls.p50_us,
        within_heartbeat: samples.iter().filter(|s| s.0 <= heartbeat).count() as u32,
        max_over_heartbeat_us: Duration::from_micros(seen.max_us)
            .saturating_sub(heartbeat)
            .as_micros() as u64,
        ended_cancelled: ended,
        seconds,
    })
}
