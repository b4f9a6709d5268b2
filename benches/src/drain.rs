//! The drain workload: enqueue N jobs in batches, then drain them with C
//! consumers, through the `Backend` API or through the `Worker` runtime, and
//! report both rates. This is the shape the peer comparison uses; running it
//! with `--runtime api` and `--runtime worker` side by side shows what the
//! runtime costs on top of the backend.

use leaseq_core::BackendExt as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{
    handler_fn, Backend, CancellationToken, ClaimSpec, Error, Job, JobContext, JobOutcome, NewItem,
    QueueName, Result, Worker, WorkerBuilder,
};
use serde::Serialize;

use crate::{ack_all, payload};

/// How consumers take jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// Each consumer is a loop of `claim(prefetch)` and `ack_many`.
    Api,
    /// Each consumer is a [`Worker`] with a no-op handler.
    Worker,
}

/// What to drain.
#[derive(Debug, Clone)]
pub struct DrainConfig {
    /// Jobs to enqueue, then drain.
    pub jobs: u64,
    /// Items per enqueue call.
    pub batch: usize,
    /// Producer tasks for the enqueue phase.
    pub producers: usize,
    /// Consumer tasks (API loops) or workers.
    pub consumers: usize,
    /// Items per claim (API) or the workers' prefetch; `None` keeps the
    /// worker's default.
    pub prefetch: Option<u32>,
    /// Handler slots per worker; `None` keeps the worker's default.
    pub concurrency: Option<usize>,
    /// API loops or workers.
    pub runtime: Runtime,
    /// Lease length.
    pub lease: Duration,
}

/// What a drain measured.
#[derive(Debug, Clone, Serialize)]
pub struct DrainReport {
    /// The backend's name.
    pub backend: String,
    /// API loops or workers.
    pub runtime: Runtime,
    /// Jobs enqueued and drained.
    pub jobs: u64,
    /// Consumers (API loops or workers).
    pub consumers: usize,
    /// Enqueued jobs per second in the enqueue phase.
    pub enqueue_per_sec: f64,
    /// Acked jobs per second in the drain phase.
    pub drain_per_sec: f64,
    /// Seconds the drain took.
    pub drain_seconds: f64,
}

/// Enqueues `config.jobs` into `queue` (purged first), drains them, and
/// checks that every job was acked once and the queue is empty after.
pub async fn run(
    name: &str,
    backend: Arc<dyn Backend>,
    queue: &QueueName,
    config: &DrainConfig,
) -> Result<DrainReport> {
    if config.producers == 0 || config.consumers == 0 || config.batch == 0 {
        return Err(Error::invalid(
            "need at least one producer, one consumer and a batch of one",
        ));
    }
    backend.admin()?.purge(queue).await?;
    let enqueue_seconds = enqueue(&backend, queue, config).await?;
    let acked = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    match config.runtime {
        Runtime::Api => drain_api(&backend, queue, config, &acked).await?,
        Runtime::Worker => drain_worker(&backend, queue, config, &acked).await?,
    }
    let drain_seconds = started.elapsed().as_secs_f64();
    let left = backend.stats(queue).await?.total();
    backend.admin()?.purge(queue).await?;
    let acked = acked.load(Ordering::Relaxed);
    if acked != config.jobs || left != 0 {
        return Err(Error::Corrupt {
            what: format!(
                "drained {acked} acks of {} jobs, {left} left in the queue",
                config.jobs
            ),
        });
    }
    Ok(DrainReport {
        backend: name.to_owned(),
        runtime: config.runtime,
        jobs: config.jobs,
        consumers: config.consumers,
        enqueue_per_sec: config.jobs as f64 / enqueue_seconds,
        drain_per_sec: config.jobs as f64 / drain_seconds,
        drain_seconds,
    })
}

/// The enqueue phase; returns its seconds.
async fn enqueue(
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    config: &DrainConfig,
) -> Result<f64> {
    let batches = config.jobs.div_ceil(config.batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut producers = Vec::new();
    for _ in 0..config.producers {
        let (b, q, next, cfg) = (backend.clone(), queue.clone(), next.clone(), config.clone());
        producers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= batches {
                    return Ok::<_, Error>(());
                }
                let n = (cfg.jobs - i * cfg.batch as u64).min(cfg.batch as u64);
                let items = (0..n).map(|_| NewItem::new(payload())).collect();
                b.enqueue(&q, items).await?;
            }
        }));
    }
    for p in producers {
        p.await
            .map_err(|e| Error::outcome_unknown("producer task", e))??;
    }
    Ok(started.elapsed().as_secs_f64())
}

async fn drain_api(
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    config: &DrainConfig,
    acked: &Arc<AtomicU64>,
) -> Result<()> {
    let prefetch = config.prefetch.unwrap_or(10);
    let mut consumers = Vec::new();
    for _ in 0..config.consumers {
        let (b, q, acked, jobs, lease) = (
            backend.clone(),
            queue.clone(),
            acked.clone(),
            config.jobs,
            config.lease,
        );
        consumers.push(tokio::spawn(async move {
            while acked.load(Ordering::Relaxed) < jobs {
                let claimed = b.claim(&q, ClaimSpec::new(prefetch, lease)?).await?;
                if claimed.leases.is_empty() {
                    b.wait_for_work(&q, Duration::from_millis(5)).await;
                    continue;
                }
                ack_all(b.as_ref(), &claimed.leases).await?;
                acked.fetch_add(claimed.leases.len() as u64, Ordering::Relaxed);
            }
            Ok::<_, Error>(())
        }));
    }
    for c in consumers {
        c.await
            .map_err(|e| Error::outcome_unknown("consumer task", e))??;
    }
    Ok(())
}

async fn drain_worker(
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    config: &DrainConfig,
    acked: &Arc<AtomicU64>,
) -> Result<()> {
    let done = CancellationToken::new();
    let mut workers = Vec::new();
    for _ in 0..config.consumers {
        let builder = worker_builder(
            backend,
            queue,
            config.lease,
            config.prefetch,
            config.concurrency,
        );
        let (counted, all, done_at) = (acked.clone(), config.jobs, done.clone());
        let worker = builder
            .on_event(move |event| {
                if event.outcome == JobOutcome::Acked
                    && counted.fetch_add(1, Ordering::Relaxed) + 1 >= all
                {
                    done_at.cancel();
                }
            })
            .build(handler_fn(|_job: Job, _ctx: JobContext| async {
                Ok::<_, std::convert::Infallible>(())
            }))?;
        workers.push(tokio::spawn(worker.run(done.clone())));
    }
    for w in workers {
        w.await
            .map_err(|e| Error::outcome_unknown("worker task", e))??;
    }
    Ok(())
}

/// A worker on `queue` with the given lease, and the prefetch and
/// concurrency only where given (the worker's defaults otherwise).
pub(crate) fn worker_builder(
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    lease: Duration,
    prefetch: Option<u32>,
    concurrency: Option<usize>,
) -> WorkerBuilder {
    let mut builder = Worker::builder(backend.clone(), queue.as_str()).lease_ttl(lease);
    if let Some(k) = prefetch {
        builder = builder.prefetch(k);
    }
    if let Some(n) = concurrency {
        builder = builder.concurrency(n);
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn drain_memory(runtime: Runtime) -> DrainReport {
        let backend: Arc<dyn Backend> = Arc::new(leaseq_memory::MemoryBackend::new());
        let queue = QueueName::new("drain-test").expect("name");
        let config = DrainConfig {
            jobs: 1_003,
            batch: 100,
            producers: 2,
            consumers: 3,
            prefetch: None,
            concurrency: None,
            runtime,
            lease: Duration::from_secs(30),
        };
        run("memory", backend, &queue, &config)
            .await
            .expect("drain")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_runtimes_drain_every_job_once() {
        for runtime in [Runtime::Api, Runtime::Worker] {
            let report = drain_memory(runtime).await;
            assert_eq!(report.jobs, 1_003);
            assert!(report.drain_per_sec > 0.0, "{report:?}");
        }
    }
}
