//! leaseq: through the `Backend` API (claim 10 + `ack_many` loops) and
//! through the `Worker` runtime with its default settings, on Redis (both
//! clients) and PostgreSQL.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use leaseq_core::{
    handler_fn, Backend, BackendExt as _, CancellationToken, ClaimSpec, Job, JobContext, JobOutcome, LeaseKey,
    NewItem, QueueName, Worker,
};
use leaseq_postgres::{PgBackend, PgOptions};
use leaseq_redis::{FredBackend, RedisOptions, RedisRsBackend};

use crate::common::{
    enqueue_batches, finish_drain, payload, DrainClock, ProbeReport, Rates, Settings, Tally,
};
use crate::raw::{pg_pool, vacuum_schemas};

/// Key prefix (Redis) and schema (PostgreSQL).
const NAMESPACE: &str = "leaseq_peers";
/// Items per claim in the API loops (what `leaseq-load --runtime api` uses).
const CLAIM: u32 = 10;
/// Lease length in the drain: nothing expires.
const TTL: Duration = Duration::from_secs(30);

/// Which server and client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Redis on the `redis` crate.
    RedisRs,
    /// Redis on the `fred` crate.
    Fred,
    /// PostgreSQL (sqlx).
    Postgres,
}

/// How consumers take jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `claim(10)` + `ack_many` loops.
    Api,
    /// `Worker`s with default settings and a no-op handler.
    Worker,
}

async fn connect(store: Store, s: &Settings) -> Result<Arc<dyn Backend>> {
    Ok(match store {
        Store::RedisRs => Arc::new(
            RedisRsBackend::connect(RedisOptions::new(s.redis_url.as_str()).prefix(NAMESPACE))
                .await?,
        ),
        Store::Fred => Arc::new(
            FredBackend::connect(RedisOptions::new(s.redis_url.as_str()).prefix(NAMESPACE)).await?,
        ),
        Store::Postgres => Arc::new(
            PgBackend::connect(
                &s.pg_url,
                PgOptions::new()
                    .schema(NAMESPACE)
                    .max_connections(s.consumers.max(1) as u32),
            )
            .await?,
        ),
    })
}

/// Empties the queue; on PostgreSQL also vacuums the backend's tables.
async fn reset(
    store: Store,
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    s: &Settings,
) -> Result<()> {
    backend.admin()?.purge(queue).await?;
    if store == Store::Postgres {
        let pool = pg_pool(&s.pg_url, 1).await?;
        vacuum_schemas(s, &pool, &[NAMESPACE]).await?;
        pool.close().await;
    }
    Ok(())
}

async fn enqueue(
    backend: &Arc<dyn Backend>,
    queue: &QueueName,
    jobs: u64,
    s: &Settings,
) -> Result<f64> {
    let (backend, queue) = (backend.clone(), queue.clone());
    enqueue_batches(jobs, s.batch, s.producers, move |ids| {
        let (backend, queue) = (backend.clone(), queue.clone());
        async move {
            let items = ids
                .into_iter()
                .map(|id| NewItem::new(Bytes::copy_from_slice(&payload(id))))
                .collect();
            backend.enqueue(&queue, items).await?;
            Ok(())
        }
    })
    .await
}

/// Acks `keys`; every slot must succeed.
async fn ack_all(backend: &dyn Backend, keys: &[LeaseKey]) -> Result<()> {
    for (key, result) in keys.iter().zip(backend.ack_many(keys).await?) {
        result.with_context(|| format!("ack of item {:?}", key.id))?;
    }
    Ok(())
}

/// The drain workload.
pub async fn drain(store: Store, runtime: Runtime, s: &Settings) -> Result<Rates> {
    let backend = connect(store, s).await?;
    let queue = QueueName::new("peers")?;
    reset(store, &backend, &queue, s).await?;
    let enqueue_secs = enqueue(&backend, &queue, s.jobs, s).await?;
    let clock = DrainClock::start(s.jobs);
    let mut tasks = tokio::task::JoinSet::new();
    let done = CancellationToken::new();
    match runtime {
        Runtime::Api => {
            for _ in 0..s.consumers {
                let (b, q, clock) = (backend.clone(), queue.clone(), clock.clone());
                tasks.spawn(async move {
                    while !clock.done() {
                        let claimed = b.claim(&q, ClaimSpec::new(CLAIM, TTL)?).await?;
                        if claimed.leases.is_empty() {
                            b.wait_for_work(&q, Duration::from_millis(5)).await;
                            continue;
                        }
                        let keys: Vec<LeaseKey> =
                            claimed.leases.into_iter().map(|l| l.key).collect();
                        ack_all(b.as_ref(), &keys).await?;
                        clock.add(keys.len() as u64);
                    }
                    Ok(())
                });
            }
        }
        Runtime::Worker => {
            for _ in 0..s.consumers {
                let (counted, done_at) = (clock.clone(), done.clone());
                let worker = Worker::builder(backend.clone(), queue.as_str())
                    .on_event(move |event| {
                        if event.outcome == JobOutcome::Acked {
                            counted.add(1);
                            if counted.done() {
                                done_at.cancel();
                            }
                        }
                    })
                    .build(handler_fn(|_job: Job, _ctx: JobContext| async {
                        Ok::<_, Infallible>(())
                    }))?;
                let done = done.clone();
                tasks.spawn(async move {
                    worker.run(done).await?;
                    Ok(())
                });
            }
        }
    }
    let drain = finish_drain(&clock, tasks, s.timeout).await;
    done.cancel();
    let drain = drain?;
    let left = backend.stats(&queue).await?.total();
    backend.admin()?.purge(&queue).await?;
    if left != 0 {
        bail!("{left} items left in the queue after the drain");
    }
    Ok(Rates {
        enqueue: s.jobs as f64 / enqueue_secs,
        drain,
    })
}

/// The duplicate-requeue probe: consumers claim with a short lease and
/// crash (drop their leases), the lease runs out, several `reap` calls run
/// at once, then a drain counts deliveries per job.
pub async fn probe(store: Store, s: &Settings) -> Result<ProbeReport> {
    let ttl = Duration::from_millis(500);
    let backend = connect(store, s).await?;
    let queue = QueueName::new("peers-probe")?;
    reset(store, &backend, &queue, s).await?;
    enqueue(&backend, &queue, s.probe_jobs, s).await?;

    // Crash: each consumer claims a share and drops the leases.
    let share = (s.probe_jobs * 4 / 5 / s.probe_crashers.max(1) as u64).max(1) as u32;
    let mut crashers = tokio::task::JoinSet::new();
    for _ in 0..s.probe_crashers {
        let (b, q) = (backend.clone(), queue.clone());
        crashers.spawn(async move {
            let claimed = b.claim(&q, ClaimSpec::new(share, ttl)?).await?;
            let n = claimed.leases.len() as u64;
            drop(claimed);
            Ok::<_, anyhow::Error>(n)
        });
    }
    let mut crashed = 0;
    while let Some(n) = crashers.join_next().await {
        crashed += n.context("crasher task")??;
    }
    tokio::time::sleep(ttl + Duration::from_millis(300)).await;

    // Several recoveries at once, each reaping until it finds nothing.
    let mut reapers = tokio::task::JoinSet::new();
    for _ in 0..s.probe_recoveries {
        let (b, q) = (backend.clone(), queue.clone());
        reapers.spawn(async move {
            let mut requeued = 0;
            loop {
                let report = b.reap(&q).await?;
                requeued += report.requeued;
                if report.requeued == 0 {
                    return Ok::<_, anyhow::Error>(requeued);
                }
            }
        });
    }
    let mut requeued = 0;
    while let Some(n) = reapers.join_next().await {
        requeued += n.context("reaper task")??;
    }

    // Drain and count.
    let tally = Tally::new(s.probe_jobs);
    let mut drainers = tokio::task::JoinSet::new();
    for _ in 0..s.consumers {
        let (b, q, tally) = (backend.clone(), queue.clone(), tally.clone());
        drainers.spawn(async move {
            let mut idle = 0;
            while idle < 5 {
                let claimed = b.claim(&q, ClaimSpec::new(CLAIM, TTL)?).await?;
                if claimed.leases.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                idle = 0;
                for l in &claimed.leases {
                    tally.record(&l.payload);
                }
                let keys: Vec<LeaseKey> = claimed.leases.into_iter().map(|l| l.key).collect();
                ack_all(b.as_ref(), &keys).await?;
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(r) = drainers.join_next().await {
        r.context("drainer task")??;
    }
    backend.admin()?.purge(&queue).await?;
    Ok(tally.verdict(crashed, Some(requeued)))
}
