//! The load generator: producers and consumers against one backend for a
//! fixed time, reporting throughput, enqueue-to-ack latency (and with
//! workers enqueue-to-start latency) and peak memory.

use leaseq_core::BackendExt as _;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use leaseq_core::{
    handler_fn, Backend, CancellationToken, ClaimSpec, Error, ItemId, Job, JobContext, JobOutcome,
    NewItem, QueueName, Result,
};
use serde::Serialize;

use crate::ack_all;
use crate::drain::Runtime;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Producer tasks, each enqueueing batches as fast as the backlog allows.
    pub producers: usize,
    /// Consumer tasks, each claiming, then acking what it claimed.
    pub consumers: usize,
    /// How long to run.
    pub duration: Duration,
    /// Items per enqueue call.
    pub batch: usize,
    /// Items per claim (the API loops; 100 if `None`), or the workers'
    /// prefetch (the worker's default if `None`).
    pub prefetch: Option<u32>,
    /// API loops or workers.
    pub runtime: Runtime,
    /// Handler slots per worker; `None` keeps the worker's default.
    pub concurrency: Option<usize>,
    /// Jobs per second over all producers; `None` enqueues as fast as the
    /// backlog allows. A light steady rate is how latency is measured.
    pub rate: Option<f64>,
    /// Producers pause while this many items are enqueued but not acked, so
    /// latency measures the queue, not an ever-growing backlog.
    pub max_backlog: u64,
    /// Payload size in bytes (at least 8: the enqueue time rides in it).
    pub payload_bytes: usize,
    /// Lease length for claims.
    pub lease: Duration,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            producers: 2,
            consumers: 4,
            duration: Duration::from_secs(10),
            batch: 100,
            prefetch: None,
            runtime: Runtime::Api,
            concurrency: None,
            rate: None,
            max_backlog: 2_000,
            payload_bytes: 16,
            lease: Duration::from_secs(30),
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest seen.
    pub max_us: u64,
}

impl Latency {
    /// The percentiles of `samples`.
    pub fn of(samples: &[Duration]) -> leaseq_core::Result<Latency> {
        let broken = |e| leaseq_core::Error::outcome_unknown("histogram", e);
        let mut h = hdrhistogram::Histogram::<u64>::new(3).map_err(broken)?;
        for v in samples {
            h.record(v.as_micros().try_into().unwrap_or(u64::MAX))
                .map_err(|e| leaseq_core::Error::outcome_unknown("histogram", e))?;
        }
        Ok(Latency::from_histogram(&h))
    }

    /// The percentiles recorded in `h` (in microseconds).
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        Latency {
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// The backend's name.
    pub backend: String,
    /// Producer tasks.
    pub producers: usize,
    /// Consumer tasks.
    pub consumers: usize,
    /// Items per enqueue call.
    pub batch: usize,
    /// Items per claim (`None`: the worker's default).
    pub prefetch: Option<u32>,
    /// API loops or workers.
    pub runtime: Runtime,
    /// Seconds measured.
    pub seconds: f64,
    /// Items enqueued in that time.
    pub enqueued: u64,
    /// Items acked in that time.
    pub acked: u64,
    /// Acked items per second: the throughput.
    pub jobs_per_sec: f64,
    /// Enqueue (call start) to ack (call end), per item.
    pub latency: Latency,
    /// Workers only: enqueue (call start) to the handler's start, per item.
    pub start_latency: Option<Latency>,
    /// Peak resident memory of this process, in bytes.
    pub peak_rss_bytes: Option<u64>,
}

/// Runs `config` against `backend` in `queue` (purged before and after).
pub async fn run(
    name: &str,
    backend: Arc<dyn Backend>,
    queue: &QueueName,
    config: &LoadConfig,
) -> Result<LoadReport> {
    if config.producers == 0 || config.consumers == 0 {
        return Err(Error::invalid(
            "need at least one producer and one consumer",
        ));
    }
    if config.payload_bytes < 8 {
        return Err(Error::invalid(
            "payloads carry an 8-byte timestamp: --payload-bytes must be at least 8",
        ));
    }
    let max = config.prefetch.unwrap_or(100);
    // Checked once here; each claim makes its own spec.
    ClaimSpec::new(max, config.lease)?;
    backend.admin()?.purge(queue).await?;
    let origin = Instant::now();
    let end = origin + config.duration;
    let counters = Arc::new(Counters::default());

    let mut producers = Vec::new();
    for _ in 0..config.producers {
        let (b, q, c, cfg) = (
            backend.clone(),
            queue.clone(),
            counters.clone(),
            config.clone(),
        );
        producers.push(tokio::spawn(async move {
            produce(b.as_ref(), &q, &c, &cfg, origin, end).await
        }));
    }
    let (hist, starts) = match config.runtime {
        Runtime::Api => {
            let mut consumers = Vec::new();
            for _ in 0..config.consumers {
                let (b, q, c) = (backend.clone(), queue.clone(), counters.clone());
                let lease = config.lease;
                consumers.push(tokio::spawn(async move {
                    consume(b.as_ref(), &q, &c, (max, lease), origin, end).await
                }));
            }
            let mut hist = new_histogram()?;
            for c in consumers {
                let h = c
                    .await
                    .map_err(|e| Error::outcome_unknown("consumer task", e))??;
                hist.add(&h)
                    .map_err(|e| Error::outcome_unknown("merging histograms", e))?;
            }
            (hist, None)
        }
        Runtime::Worker => {
            let (hist, starts) =
                run_workers(&backend, queue, config, &counters, origin, end).await?;
            (hist, Some(starts))
        }
    };
    for p in producers {
        p.await
            .map_err(|e| Error::outcome_unknown("producer task", e))??;
    }
    let seconds = config.duration.as_secs_f64();
    backend.admin()?.purge(queue).await?;
    let acked = counters.acked.load(Ordering::Relaxed);
    Ok(LoadReport {
        backend: name.to_owned(),
        producers: config.producers,
        consumers: config.consumers,
        batch: config.batch,
        prefetch: config.prefetch,
        runtime: config.runtime,
        seconds,
        enqueued: counters.enqueued.load(Ordering::Relaxed),
        acked,
        jobs_per_sec: acked as f64 / seconds,
        latency: Latency::from_histogram(&hist),
        start_latency: starts.as_ref().map(Latency::from_histogram),
        peak_rss_bytes: crate::rss::peak_rss_bytes(),
    })
}

/// Workers with a no-op handler until `end`. Latency runs from the
/// enqueue call to the ack's result reaching the worker (its `Acked` event);
/// the second histogram from the enqueue call to the handler's start.
///
/// Each worker records into a tally of its own, touched only by its own
/// tasks, and adds to the shared ack count every [`ACKS_PER_FLUSH`] acks:
/// a tally shared by all workers made every job take contended locks the
/// API loops never take, which measured the harness, not the Worker.
async fn run_workers(
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    config: &LoadConfig,
    counters: &Arc<Counters>,
    origin: Instant,
    end: Instant,
) -> Result<(Histogram<u64>, Histogram<u64>)> {
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    let mut tallies = Vec::new();
    for _ in 0..config.consumers {
        let builder = crate::drain::worker_builder(
            backend,
            queue,
            config.lease,
            config.prefetch,
            config.concurrency,
        );
        let tally = Arc::new(Mutex::new(Tally::new()?));
        tallies.push(tally.clone());
        let (acks, c) = (tally.clone(), counters.clone());
        let worker = builder
            .on_event(move |event| {
                if event.outcome != JobOutcome::Acked {
                    return;
                }
                let mut t = lock(&acks);
                let Some(at) = t.stamps.remove(&event.id) else {
                    return;
                };
                if Instant::now() <= end {
                    let now_us = origin.elapsed().as_micros() as u64;
                    let _ = t.acks.record(now_us.saturating_sub(at));
                    t.unflushed += 1;
                    if t.unflushed >= ACKS_PER_FLUSH {
                        c.acked.fetch_add(t.unflushed, Ordering::Relaxed);
                        t.unflushed = 0;
                    }
                }
            })
            .build(handler_fn(move |job: Job, _ctx: JobContext| {
                if let Some(at) = stamped_at(&job.payload) {
                    let now_us = origin.elapsed().as_micros() as u64;
                    let mut t = lock(&tally);
                    if Instant::now() <= end {
                        let _ = t.starts.record(now_us.saturating_sub(at));
                    }
                    t.stamps.insert(job.id, at);
                }
                async { Ok::<_, std::convert::Infallible>(()) }
            }))?;
        workers.push(tokio::spawn(worker.run(stop.clone())));
    }
    tokio::time::sleep_until(end.into()).await;
    stop.cancel();
    for w in workers {
        w.await
            .map_err(|e| Error::outcome_unknown("worker task", e))??;
    }
    let (mut hist, mut starts) = (new_histogram()?, new_histogram()?);
    for tally in tallies {
        let t = lock(&tally);
        counters.acked.fetch_add(t.unflushed, Ordering::Relaxed);
        hist.add(&t.acks)
            .map_err(|e| Error::outcome_unknown("merging histograms", e))?;
        starts
            .add(&t.starts)
            .map_err(|e| Error::outcome_unknown("merging histograms", e))?;
    }
    Ok((hist, starts))
}

/// Acks a worker counts before it adds them to the count the producers
/// read (their backlog bound is 2,000 by default, far above it).
const ACKS_PER_FLUSH: u64 = 32;

/// One worker's records.
struct Tally {
    /// Enqueue stamps of the jobs started and not yet acked.
    stamps: HashMap<ItemId, u64>,
    acks: Histogram<u64>,
    starts: Histogram<u64>,
    /// Acks not yet added to [`Counters::acked`].
    unflushed: u64,
}

impl Tally {
    fn new() -> Result<Self> {
        Ok(Tally {
            stamps: HashMap::new(),
            acks: new_histogram()?,
            starts: new_histogram()?,
            unflushed: 0,
        })
    }
}

/// A poisoned lock only means another recorder panicked; the data is fine.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug, Default)]
struct Counters {
    enqueued: AtomicU64,
    acked: AtomicU64,
}

fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new(3).map_err(|e| Error::outcome_unknown("histogram", e))
}

fn stamp(origin: Instant, size: usize) -> Bytes {
    let us = origin.elapsed().as_micros() as u64;
    let mut v = vec![0u8; size];
    v[..8].copy_from_slice(&us.to_le_bytes());
    Bytes::from(v)
}

fn stamped_at(payload: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(payload.get(..8)?.try_into().ok()?))
}

async fn produce(
    b: &dyn Backend,
    q: &QueueName,
    c: &Counters,
    cfg: &LoadConfig,
    origin: Instant,
    end: Instant,
) -> Result<()> {
    while Instant::now() < end {
        let backlog = c
            .enqueued
            .load(Ordering::Relaxed)
            .saturating_sub(c.acked.load(Ordering::Relaxed));
        if backlog >= cfg.max_backlog {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        if let Some(rate) = cfg.rate {
            // Each producer's share of the rate, one batch at a time.
            let per_producer = rate / cfg.producers as f64;
            let sent = c.enqueued.load(Ordering::Relaxed) as f64 / cfg.producers as f64;
            let due = origin + Duration::from_secs_f64(sent / per_producer);
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
        }
        let payload = stamp(origin, cfg.payload_bytes);
        let items = (0..cfg.batch)
            .map(|_| NewItem::new(payload.clone()))
            .collect();
        b.enqueue(q, items).await?;
        c.enqueued.fetch_add(cfg.batch as u64, Ordering::Relaxed);
    }
    Ok(())
}

async fn consume(
    b: &dyn Backend,
    q: &QueueName,
    c: &Counters,
    (max, lease): (u32, Duration),
    origin: Instant,
    end: Instant,
) -> Result<Histogram<u64>> {
    let mut hist = new_histogram()?;
    while Instant::now() < end {
        // One spec per claim: a spec names its claim's tokens.
        let spec = ClaimSpec::new(max, lease)?;
        let claimed = b.claim(q, spec).await?;
        if claimed.leases.is_empty() {
            b.wait_for_work(
                q,
                end.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(5)),
            )
            .await;
            continue;
        }
        ack_all(b, &claimed.leases).await?;
        let now_us = origin.elapsed().as_micros() as u64;
        if Instant::now() <= end {
            c.acked
                .fetch_add(claimed.leases.len() as u64, Ordering::Relaxed);
            for l in &claimed.leases {
                if let Some(at) = stamped_at(&l.payload) {
                    hist.record(now_us.saturating_sub(at))
                        .map_err(|e| Error::outcome_unknown("histogram", e))?;
                }
            }
        }
    }
    Ok(hist)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_round_trips() {
        let origin = Instant::now();
        let p = stamp(origin, 16);
        assert_eq!(p.len(), 16);
        assert!(stamped_at(&p).is_some());
        assert_eq!(stamped_at(b"short"), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_run_on_memory_acks_jobs() {
        for runtime in [Runtime::Api, Runtime::Worker] {
            let backend: Arc<dyn Backend> = Arc::new(leaseq_memory::MemoryBackend::new());
            let queue = QueueName::new("load-test").expect("name");
            let config = LoadConfig {
                duration: Duration::from_millis(200),
                producers: 1,
                consumers: 2,
                runtime,
                ..LoadConfig::default()
            };
            let report = run("memory", backend.clone(), &queue, &config)
                .await
                .expect("run");
            assert!(report.acked > 0, "{runtime:?}: {report:?}");
            assert!(report.acked <= report.enqueued);
            assert!(report.latency.p50_us <= report.latency.max_us);
            match (runtime, report.start_latency) {
                (Runtime::Api, None) => {}
                (Runtime::Worker, Some(start)) => {
                    assert!(start.p50_us <= start.p90_us && start.p90_us <= start.p99_us);
                    // A job starts before its ack returns.
                    assert!(start.p50_us <= report.latency.p50_us, "{report:?}");
                }
                (_, other) => panic!("{runtime:?} reported start latency {other:?}"),
            }
            assert_eq!(backend.stats(&queue).await.expect("stats").total(), 0);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rate_holds_the_producers_back() {
        let backend: Arc<dyn Backend> = Arc::new(leaseq_memory::MemoryBackend::new());
        let queue = QueueName::new("load-rate").expect("name");
        let config = LoadConfig {
            duration: Duration::from_millis(300),
            producers: 1,
            consumers: 1,
            batch: 1,
            rate: Some(100.0),
            ..LoadConfig::default()
        };
        let report = run("memory", backend, &queue, &config).await.expect("run");
        // 100 jobs/s for 0.3 s is about 30; unthrottled it would be many thousands.
        assert!(report.enqueued <= 40, "{report:?}");
        assert!(report.enqueued >= 1, "{report:?}");
    }
}
