//! The steady retention run: does a queue that keeps its completed items
//! for a while hold a flat store once the first of them expire?
//!
//! The queue's policy keeps completed items for `keep_age` (and at most
//! `max_count` of them, if set). A producer enqueues at a steady `rate`; a
//! [`Worker`] at its defaults runs a handler that sets a small result
//! ([`JobContext::set_result`]), so every job is completed with it and
//! kept. Nothing else removes kept items: the worker's own reaper collects
//! them every [`WorkerBuilder::DEFAULT_REAP_INTERVAL`], as in production.
//! Every `sample_every` the run reads the store beside the backend
//! ([`crate::store_size`]): the kept items and the bytes, and through the
//! backend the items still in the queue. The verdict
//! ([`crate::flatness`]) fits a line through the samples after the first
//! retention period.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{
    handler_fn, Backend, BackendExt as _, CancellationToken, Error, Job, JobContext, JobOutcome,
    Keep, NewItem, QueueName, Result, Retention, Worker, WorkerBuilder,
};
use serde::Serialize;

use crate::flatness::{window_start, Trend};
use crate::store_size::{Size, StoreSize};

/// What to run.
#[derive(Debug, Clone)]
pub struct SteadyConfig {
    /// How long the producer runs.
    pub duration: Duration,
    /// Jobs enqueued per second.
    pub rate: f64,
    /// How long completed items are kept.
    pub keep_age: Duration,
    /// At most this many completed items kept, if set.
    pub max_count: Option<u64>,
    /// Time between two readings of the store.
    pub sample_every: Duration,
    /// Payload size in bytes.
    pub payload_bytes: usize,
}

/// The result each handler sets, in bytes.
pub const RESULT_BYTES: usize = 32;

/// How often the producer enqueues (a batch of what the rate owes).
const TICK: Duration = Duration::from_millis(20);

/// One reading.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the producer started.
    pub t_s: f64,
    /// Jobs enqueued so far.
    pub enqueued: u64,
    /// Jobs the worker completed so far.
    pub completed: u64,
    /// Items still in the queue ([`Backend::stats`]' total).
    pub in_queue: u64,
    /// The store's reading.
    #[serde(flatten)]
    pub size: Size,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct SteadyReport {
    /// The backend's name.
    pub backend: String,
    /// What the readings count.
    pub measures: String,
    /// Jobs enqueued per second (asked).
    pub rate: f64,
    /// Completed items kept this many seconds.
    pub keep_age_s: f64,
    /// And at most this many, if set.
    pub max_count: Option<u64>,
    /// The worker's reaper interval, which collects.
    pub collect_every_s: f64,
    /// Seconds the producer ran.
    pub seconds: f64,
    /// Jobs enqueued.
    pub enqueued: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Every reading, the first before any load.
    pub samples: Vec<Sample>,
    /// Where the verdict's window starts, in seconds.
    pub window_from_s: f64,
    /// How the kept count moved in the window.
    pub kept: Option<Trend>,
    /// How the bytes moved in the window.
    pub bytes: Option<Trend>,
    /// Both held flat.
    pub flat: bool,
}

/// Runs `config` against `backend` in `queue`, reading its store with
/// `store`. The queue is purged before and after, its retention set for
/// the run and put back to the default after.
pub async fn run(
    name: &str,
    backend: Arc<dyn Backend>,
    queue: &QueueName,
    store: &dyn StoreSize,
    config: &SteadyConfig,
) -> Result<SteadyReport> {
    if !(config.rate.is_finite() && config.rate > 0.0) {
        return Err(Error::invalid("--rate must be a positive number"));
    }
    if config.sample_every.is_zero() || config.keep_age.is_zero() {
        return Err(Error::invalid(
            "the sample interval and the keep age must be positive",
        ));
    }
    let history = backend.history()?;
    backend.admin()?.purge(queue).await?;
    let mut keep = Keep::for_age(config.keep_age);
    if let Some(n) = config.max_count {
        keep = keep.at_most(n);
    }
    history
        .set_retention(queue, Retention::default().completed(keep))
        .await?;
    let outcome = drive(name, &backend, queue, store, config).await;
    history.set_retention(queue, Retention::default()).await?;
    backend.admin()?.purge(queue).await?;
    outcome
}

/// The run itself, between the set-up and the clean-up.
async fn drive(
    name: &str,
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    store: &dyn StoreSize,
    config: &SteadyConfig,
) -> Result<SteadyReport> {
    let completed = Arc::new(AtomicU64::new(0));
    let enqueued = Arc::new(AtomicU64::new(0));
    let seen = completed.clone();
    let result = bytes::Bytes::from(vec![b'r'; RESULT_BYTES]);
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .on_event(move |e| {
            if matches!(e.outcome, JobOutcome::Acked) {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build(handler_fn(move |_job: Job, ctx: JobContext| {
            let result = result.clone();
            async move {
                ctx.set_result(result)?;
                Ok::<(), Error>(())
            }
        }))?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    let mut samples = vec![sample(backend.as_ref(), queue, store, 0.0, 0, 0).await?];
    let origin = Instant::now();
    let end = origin + config.duration;
    let producer = {
        let (b, q, n) = (backend.clone(), queue.clone(), enqueued.clone());
        let (rate, bytes) = (config.rate, config.payload_bytes);
        tokio::spawn(async move { produce(b.as_ref(), &q, rate, bytes, &n, end).await })
    };
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::from_std(origin + config.sample_every),
        config.sample_every,
    );
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failed = None;
    while Instant::now() < end {
        ticks.tick().await;
        let t = origin.elapsed().as_secs_f64();
        let (e, c) = (
            enqueued.load(Ordering::Relaxed),
            completed.load(Ordering::Relaxed),
        );
        match sample(backend.as_ref(), queue, store, t, e, c).await {
            Ok(s) => samples.push(s),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let produced = producer
        .await
        .map_err(|e| Error::outcome_unknown("the producer task", e));
    stop.cancel();
    let _ = running.await;
    if let Some(e) = failed {
        return Err(e);
    }
    produced??;
    let seconds = config.duration.as_secs_f64();
    let collect_every = WorkerBuilder::DEFAULT_REAP_INTERVAL.as_secs_f64();
    let from = window_start(seconds, config.keep_age.as_secs_f64(), collect_every);
    let window: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= from).collect();
    let trend = |f: fn(&Sample) -> u64| {
        Trend::of(&window.iter().map(|s| (s.t_s, f(s))).collect::<Vec<_>>())
    };
    let (kept, bytes) = (trend(|s| s.size.kept), trend(|s| s.size.bytes));
    Ok(SteadyReport {
        backend: name.to_owned(),
        measures: store.describe().to_owned(),
        rate: config.rate,
        keep_age_s: config.keep_age.as_secs_f64(),
        max_count: config.max_count,
        collect_every_s: collect_every,
        seconds,
        enqueued: enqueued.load(Ordering::Relaxed),
        completed: completed.load(Ordering::Relaxed),
        samples,
        window_from_s: from,
        flat: matches!((&kept, &bytes), (Some(k), Some(b)) if k.is_flat() && b.is_flat()),
        kept,
        bytes,
    })
}

async fn sample(
    b: &dyn Backend,
    q: &QueueName,
    store: &dyn StoreSize,
    t_s: f64,
    enqueued: u64,
    completed: u64,
) -> Result<Sample> {
    let size = store.measure().await?;
    let in_queue = b.stats(q).await?.total();
    Ok(Sample {
        t_s,
        enqueued,
        completed,
        in_queue,
        size,
    })
}

/// Enqueues at `rate` per second until `end`, every [`TICK`] the jobs the
/// rate owes by then.
async fn produce(
    b: &dyn Backend,
    q: &QueueName,
    rate: f64,
    payload_bytes: usize,
    enqueued: &AtomicU64,
    end: Instant,
) -> Result<()> {
    let start = Instant::now();
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0u64;
    while Instant::now() < end {
        ticks.tick().await;
        let owed = (start.elapsed().as_secs_f64() * rate) as u64;
        let items: Vec<NewItem> = (sent..owed)
            .map(|n| NewItem::new(payload(n, payload_bytes)))
            .collect();
        if items.is_empty() {
            continue;
        }
        let n = items.len() as u64;
        b.enqueue(q, items).await?;
        sent += n;
        enqueued.fetch_add(n, Ordering::Relaxed);
    }
    Ok(())
}

/// Job `n`'s payload: its number, padded to `len` bytes.
fn payload(n: u64, len: usize) -> Vec<u8> {
    let mut p = n.to_string().into_bytes();
    p.resize(len.max(p.len()), b'.');
    p
}
