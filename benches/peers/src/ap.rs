//! apalis 0.7: apalis-redis and the PostgreSQL storage of apalis-sql (the
//! crate later published as apalis-postgres).
//!
//! Neither storage has a batch push: a "batch" is 100 `push` calls in
//! flight at once. Workers poll every `--apalis-poll-ms` for up to
//! `--apalis-buffer` jobs (apalis's defaults, 100 ms and 10, cap a worker at
//! 100 jobs/s). apalis acks in the background (the worker's heartbeat
//! loop), so the drain clock stops when the server shows every job done,
//! not when the last handler returns.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use apalis::prelude::{Data, Storage, WorkerBuilder, WorkerFactoryFn};
use apalis_redis::{ConnectionManager, RedisStorage};
use apalis_sql::postgres::PostgresStorage;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::common::{
    enqueue_batches, payload_string, DrainClock, ProbeReport, Rates, Settings, Tally,
};
use crate::raw::{pg_pool, redis_connect, vacuum_schemas};

/// The job: its 16-byte payload (which carries its id).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerJob {
    payload: String,
}

/// What the handlers share.
#[derive(Debug, Default)]
struct Shared {
    handled: AtomicU64,
    /// Probe: handlers hang (the worker is about to crash).
    hang: AtomicBool,
    tally: Option<Arc<Tally>>,
}

async fn handle(job: PeerJob, shared: Data<Arc<Shared>>) {
    if let Some(t) = &shared.tally {
        t.record(job.payload.as_bytes());
    }
    shared.handled.fetch_add(1, Ordering::AcqRel);
    if shared.hang.load(Ordering::Acquire) {
        std::future::pending::<()>().await;
    }
}

/// Which store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// apalis-redis.
    Redis,
    /// apalis-sql's PostgreSQL storage.
    Postgres,
}

/// A connected store under one namespace.
#[derive(Clone)]
enum Conn {
    Redis {
        conn: ConnectionManager,
        config: apalis_redis::Config,
    },
    Postgres {
        pool: PgPool,
        config: apalis_sql::Config,
    },
}

impl Conn {
    async fn open(store: Store, namespace: &str, s: &Settings) -> Result<Self> {
        match store {
            Store::Redis => {
                // redis 0.32 with its `tcp_nodelay` feature on.
                let conn = apalis_redis::connect(s.redis_url.as_str()).await?;
                let config = apalis_redis::Config::default()
                    .set_namespace(namespace)
                    .set_poll_interval(s.apalis_poll)
                    .set_buffer_size(s.apalis_buffer);
                // Clear the namespace's keys.
                let mut raw = redis_connect(&s.redis_url, true).await?;
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{namespace}:*"))
                    .query_async(&mut raw)
                    .await?;
                if !keys.is_empty() {
                    let _: () = redis::cmd("DEL").arg(keys).query_async(&mut raw).await?;
                }
                Ok(Conn::Redis { conn, config })
            }
            Store::Postgres => {
                let pool = pg_pool(&s.pg_url, s.consumers.max(1) as u32).await?;
                PostgresStorage::setup(&pool).await?;
                sqlx::query("DELETE FROM apalis.jobs WHERE job_type = $1")
                    .bind(namespace)
                    .execute(&pool)
                    .await?;
                sqlx::query("DELETE FROM apalis.workers WHERE worker_type = $1")
                    .bind(namespace)
                    .execute(&pool)
                    .await?;
                vacuum_schemas(s, &pool, &["apalis"]).await?;
                let config = apalis_sql::Config::new(namespace)
                    .set_poll_interval(s.apalis_poll)
                    .set_buffer_size(s.apalis_buffer);
                Ok(Conn::Postgres { pool, config })
            }
        }
    }

    async fn push(&self, job: PeerJob) -> Result<()> {
        match self {
            Conn::Redis { conn, config } => {
                let mut st = RedisStorage::<PeerJob>::new_with_config(conn.clone(), config.clone());
                st.push(job).await?;
            }
            Conn::Postgres { pool, config } => {
                let mut st =
                    PostgresStorage::<PeerJob>::new_with_config(pool.clone(), config.clone());
                st.push(job).await?;
            }
        }
        Ok(())
    }

    async fn enqueue(&self, jobs: u64, s: &Settings) -> Result<f64> {
        let this = self.clone();
        enqueue_batches(jobs, s.batch, s.producers, move |ids| {
            let this = this.clone();
            async move {
                let pushes = ids.into_iter().map(|id| {
                    this.push(PeerJob {
                        payload: payload_string(id),
                    })
                });
                for r in join_all(pushes).await {
                    r?;
                }
                Ok(())
            }
        })
        .await
    }

    /// Starts `n` workers, each on a storage of its own; returns their tasks.
    fn start_workers(
        &self,
        n: usize,
        tag: &str,
        shared: &Arc<Shared>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|i| {
                let name = format!("peers-{tag}-{i}");
                match self {
                    Conn::Redis { conn, config } => {
                        let st =
                            RedisStorage::<PeerJob>::new_with_config(conn.clone(), config.clone());
                        let worker = WorkerBuilder::new(name)
                            .data(shared.clone())
                            .backend(st)
                            .build_fn(handle);
                        tokio::spawn(worker.run())
                    }
                    Conn::Postgres { pool, config } => {
                        let st = PostgresStorage::<PeerJob>::new_with_config(
                            pool.clone(),
                            config.clone(),
                        );
                        let worker = WorkerBuilder::new(name)
                            .data(shared.clone())
                            .backend(st)
                            .build_fn(handle);
                        tokio::spawn(worker.run())
                    }
                }
            })
            .collect()
    }

    /// Jobs marked done on the server.
    async fn done(&self) -> Result<u64> {
        match self {
            Conn::Redis { conn, config } => {
                let n: u64 = redis032::cmd("ZCARD")
                    .arg(config.done_jobs_set())
                    .query_async(&mut conn.clone())
                    .await?;
                Ok(n)
            }
            Conn::Postgres { pool, config } => {
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 AND status = 'Done'",
                )
                .bind(config.namespace())
                .fetch_one(pool)
                .await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }
        }
    }

    /// Jobs held by workers (in flight / running).
    async fn held(&self) -> Result<u64> {
        match self {
            Conn::Redis { conn, config } => {
                let mut conn = conn.clone();
                let sets: Vec<String> = redis032::cmd("KEYS")
                    .arg(format!("{}:*", config.inflight_jobs_set()))
                    .query_async(&mut conn)
                    .await?;
                let mut n = 0u64;
                for set in sets {
                    let c: u64 = redis032::cmd("SCARD")
                        .arg(set)
                        .query_async(&mut conn)
                        .await?;
                    n += c;
                }
                Ok(n)
            }
            Conn::Postgres { pool, config } => {
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 AND status = 'Running'",
                )
                .bind(config.namespace())
                .fetch_one(pool)
                .await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }
        }
    }

    /// One recovery: apalis's own `reenqueue_orphaned`, with every worker
    /// last seen before `dead_since` counted as dead.
    async fn reenqueue_orphaned(
        &self,
        dead_since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<u64>> {
        match self {
            Conn::Redis { conn, config } => {
                let mut st = RedisStorage::<PeerJob>::new_with_config(conn.clone(), config.clone());
                let n = st.reenqueue_orphaned(1_000, dead_since).await?;
                Ok(Some(n as u64))
            }
            Conn::Postgres { pool, config } => {
                let mut st =
                    PostgresStorage::<PeerJob>::new_with_config(pool.clone(), config.clone());
                st.reenqueue_orphaned(1_000, dead_since).await?;
                Ok(None)
            }
        }
    }
}

fn namespace(what: &str) -> String {
    format!("peers_apalis_{what}")
}

/// The drain workload.
pub async fn drain(store: Store, s: &Settings) -> Result<Rates> {
    let conn = Conn::open(store, &namespace("drain"), s).await?;
    let enqueue_secs = conn.enqueue(s.jobs, s).await?;
    let shared = Arc::new(Shared::default());
    let clock = DrainClock::start(s.jobs);
    let workers = conn.start_workers(s.consumers, "drain", &shared);
    let result = async {
        let deadline = Instant::now() + s.timeout;
        // Handlers first (cheap to watch), then the server's done count.
        while shared.handled.load(Ordering::Acquire) < s.jobs {
            if Instant::now() > deadline {
                bail!(
                    "drain did not finish within {:?}: {} of {} handled",
                    s.timeout,
                    shared.handled.load(Ordering::Acquire),
                    s.jobs
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        loop {
            let done = conn.done().await?;
            if done >= s.jobs {
                clock.stop();
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "acks did not land within {:?}: {done} of {} done",
                    s.timeout,
                    s.jobs
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        clock.wait(Duration::from_secs(1)).await
    }
    .await;
    for w in &workers {
        w.abort();
    }
    let drain = result?;
    Ok(Rates {
        enqueue: s.jobs as f64 / enqueue_secs,
        drain,
    })
}

/// The duplicate-requeue probe: workers fetch jobs and hang in the handler,
/// then their tasks are aborted (the crash); several
/// `reenqueue_orphaned` calls run at once (every worker counted dead); a
/// drain counts deliveries per job.
pub async fn probe(store: Store, s: &Settings) -> Result<ProbeReport> {
    let conn = Conn::open(store, &namespace("probe"), s).await?;
    conn.enqueue(s.probe_jobs, s).await?;

    let hanging = Arc::new(Shared {
        hang: AtomicBool::new(true),
        ..Shared::default()
    });
    let crashers = conn.start_workers(s.probe_crashers, "crash", &hanging);
    // Let them fetch until they hold most jobs or stop taking more.
    let started = Instant::now();
    let mut last = 0;
    let mut still = 0;
    while started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let held = conn.held().await?;
        if held >= s.probe_jobs * 4 / 5 {
            break;
        }
        if held == last {
            still += 1;
            if still >= 10 && held > 0 {
                break;
            }
        } else {
            still = 0;
        }
        last = held;
    }
    for w in &crashers {
        w.abort();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let crashed = conn.held().await?;
    if crashed == 0 {
        bail!("the crashing workers fetched nothing");
    }

    let dead_since = chrono::Utc::now() + chrono::Duration::seconds(2);
    let recoveries = (0..s.probe_recoveries).map(|_| {
        let conn = conn.clone();
        async move {
            let mut total = None;
            for _ in 0..3 {
                if let Some(n) = conn.reenqueue_orphaned(dead_since).await? {
                    total = Some(total.unwrap_or(0) + n);
                }
            }
            Ok::<_, anyhow::Error>(total)
        }
    });
    let mut requeued = None;
    for r in join_all(recoveries).await {
        if let Some(n) = r.context("recovery")? {
            requeued = Some(requeued.unwrap_or(0) + n);
        }
    }

    let tally = Tally::new(s.probe_jobs);
    let draining = Arc::new(Shared {
        tally: Some(tally.clone()),
        ..Shared::default()
    });
    let drainers = conn.start_workers(s.consumers, "probe-drain", &draining);
    tally
        .settle(
            s.probe_jobs,
            Duration::from_secs(2),
            Duration::from_secs(30),
        )
        .await;
    for w in &drainers {
        w.abort();
    }
    Ok(tally.verdict(crashed, requeued))
}
