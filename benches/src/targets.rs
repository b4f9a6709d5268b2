//! Which backends to measure, how to reach them, and their baselines.
//!
//! Each backend has a [`BackendFactory`] (the conformance suite's interface),
//! so the benches get backends the same way the suite does.

use std::sync::Arc;

use async_trait::async_trait;
use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::ManualClock;
use leaseq_memory::MemoryBackend;

use crate::baseline::{Baseline, VecDequeBaseline};

/// A server that did not answer, named by its URL with any password
/// taken out (`leaseq_core::redact_url`): the reason is printed.
pub fn no_server(what: &str, url: &str, e: impl std::fmt::Display) -> Unavailable {
    Unavailable(format!(
        "no {what} at {}: {e}",
        leaseq_core::redact_url(url)
    ))
}

/// Every backend name, in report order.
pub const ALL: [&str; 5] = ["memory", "redis-rs", "fred", "postgres", "sqlite"];

/// Key prefix (Redis) and schema (PostgreSQL) the benches use.
pub const NAMESPACE: &str = "leaseq_bench";

/// The Redis server: `LEASEQ_REDIS_URL` or the local default.
pub fn redis_url() -> String {
    std::env::var("LEASEQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The PostgreSQL server: `LEASEQ_DATABASE_URL` or the local default.
pub fn database_url() -> String {
    std::env::var("LEASEQ_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Pool size for the PostgreSQL backend and its baseline.
pub const PG_CONNECTIONS: u32 = 8;

/// True when `LEASEQ_BENCH_BACKENDS` (comma-separated names) is unset or
/// names `backend`.
pub fn wanted(backend: &str) -> bool {
    match std::env::var("LEASEQ_BENCH_BACKENDS") {
        Ok(list) if !list.trim().is_empty() => list.split(',').any(|b| b.trim() == backend),
        _ => true,
    }
}

/// One backend under measurement, with the baselines it is compared to.
#[derive(Debug)]
pub struct Target {
    /// The backend's name (one of [`ALL`]).
    pub name: &'static str,
    /// The backend and how time passes for it.
    pub backend: TestBackend,
    /// The bare-store baselines (the first is the primary one).
    pub baselines: Vec<Arc<dyn Baseline>>,
}

/// Connects every wanted backend. Each one that cannot be had is skipped
/// with a message on stderr naming the reason. `manual_clock` gives the
/// memory backend a clock the caller advances.
pub async fn connect_all(manual_clock: bool) -> Vec<Target> {
    let mut out = Vec::new();
    for name in ALL {
        if !wanted(name) {
            eprintln!("leaseq-benches: {name}: not in LEASEQ_BENCH_BACKENDS, skipped");
            continue;
        }
        match connect(name, manual_clock).await {
            Ok(t) => out.push(t),
            Err(Unavailable(why)) => eprintln!("leaseq-benches: {name}: SKIPPED: {why}"),
        }
    }
    out
}

/// Connects one backend by name, with its baselines.
pub async fn connect(name: &str, manual_clock: bool) -> Result<Target, Unavailable> {
    match name {
        "memory" => {
            let factory = if manual_clock {
                MemoryFactory::manual_clock()
            } else {
                MemoryFactory::system_clock()
            };
            Ok(Target {
                name: "memory",
                backend: factory.backend().await?,
                baselines: vec![Arc::new(VecDequeBaseline::new())],
            })
        }
        "redis-rs" => redis_rs_target().await,
        "fred" => fred_target().await,
        "postgres" => postgres_target().await,
        "sqlite" => sqlite_target().await,
        other => Err(Unavailable(format!(
            "unknown backend {other:?}; expected one of {ALL:?}"
        ))),
    }
}

/// The in-process backend.
#[derive(Debug, Clone, Copy)]
pub struct MemoryFactory {
    manual: bool,
}

impl MemoryFactory {
    /// On the system clock (what the operation benches use).
    pub fn system_clock() -> Self {
        MemoryFactory { manual: false }
    }

    /// On a [`ManualClock`] the caller advances (what the reap bench uses).
    pub fn manual_clock() -> Self {
        MemoryFactory { manual: true }
    }
}

#[async_trait]
impl BackendFactory for MemoryFactory {
    fn name(&self) -> &str {
        "memory"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        if self.manual {
            let clock = ManualClock::new();
            Ok(TestBackend::manual(
                Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks()),
                clock,
            ))
        } else {
            Ok(TestBackend::real(Arc::new(MemoryBackend::new())))
        }
    }
}

/// Whether every Redis connection of the benches (the backends' and the
/// raw baselines', so all are connected the same way) sets `TCP_NODELAY`:
/// `LEASEQ_BENCH_TCP_NODELAY` (`on` or `off`), else on, the backend's
/// default ([`leaseq_redis::RedisOptions::tcp_nodelay`]). An unknown value
/// is refused.
pub fn redis_tcp_nodelay() -> Result<bool, Unavailable> {
    switch("LEASEQ_BENCH_TCP_NODELAY", true)
}

/// Whether the PostgreSQL backends of the benches claim durably:
/// `LEASEQ_BENCH_PG_DURABLE_CLAIMS` (`on` or `off`), else on, the
/// backend's default (`leaseq_postgres::PgOptions::durable_claims`). An
/// unknown value is refused.
pub fn pg_durable_claims() -> Result<bool, Unavailable> {
    switch("LEASEQ_BENCH_PG_DURABLE_CLAIMS", true)
}

/// An `on`/`off` environment variable; `default` when unset or empty.
fn switch(name: &str, default: bool) -> Result<bool, Unavailable> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" => Ok(default),
            "on" => Ok(true),
            "off" => Ok(false),
            other => Err(Unavailable(format!("{name}={other:?}: expected on or off"))),
        },
    }
}

#[cfg(any(feature = "redis-rs", feature = "fred"))]
fn redis_config(url: &str) -> Result<leaseq_redis::RedisOptions, Unavailable> {
    Ok(leaseq_redis::RedisOptions::new(url)
        .prefix(NAMESPACE)
        .test_hooks(true)
        .tcp_nodelay(redis_tcp_nodelay()?))
}

/// The Redis backend on the `redis` crate.
#[cfg(feature = "redis-rs")]
#[derive(Debug, Clone)]
pub struct RedisRsFactory {
    /// The server URL.
    pub url: String,
}

#[cfg(feature = "redis-rs")]
#[async_trait]
impl BackendFactory for RedisRsFactory {
    fn name(&self) -> &str {
        "redis-rs"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let b = leaseq_redis::RedisRsBackend::connect(redis_config(&self.url)?)
            .await
            .map_err(|e| no_server("Redis", &self.url, e))?;
        Ok(TestBackend::real(Arc::new(b)))
    }
}

/// The Redis backend on the `fred` crate.
#[cfg(feature = "fred")]
#[derive(Debug, Clone)]
pub struct FredFactory {
    /// The server URL.
    pub url: String,
}

#[cfg(feature = "fred")]
#[async_trait]
impl BackendFactory for FredFactory {
    fn name(&self) -> &str {
        "fred"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let b = leaseq_redis::FredBackend::connect(redis_config(&self.url)?)
            .await
            .map_err(|e| no_server("Redis", &self.url, e))?;
        Ok(TestBackend::real(Arc::new(b)))
    }
}

/// The PostgreSQL backend.
#[cfg(feature = "postgres")]
#[derive(Debug, Clone)]
pub struct PgFactory {
    /// The database URL.
    pub url: String,
}

#[cfg(feature = "postgres")]
#[async_trait]
impl BackendFactory for PgFactory {
    fn name(&self) -> &str {
        "postgres"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let options = leaseq_postgres::PgOptions::new()
            .test_hooks(true)
            .schema(NAMESPACE)
            .max_connections(PG_CONNECTIONS)
            .durable_claims(pg_durable_claims()?);
        let b = leaseq_postgres::PgBackend::connect(&self.url, options)
            .await
            .map_err(|e| no_server("PostgreSQL", &self.url, e))?;
        Ok(TestBackend::real(Arc::new(b)))
    }
}

#[cfg(feature = "redis-rs")]
async fn redis_rs_target() -> Result<Target, Unavailable> {
    let url = redis_url();
    let backend = RedisRsFactory { url: url.clone() }.backend().await?;
    let raw = crate::baseline::RedisRsRaw::connect(&url, NAMESPACE, redis_tcp_nodelay()?)
        .await
        .map_err(|e| no_server("Redis", &url, e))?;
    Ok(Target {
        name: "redis-rs",
        backend,
        baselines: vec![Arc::new(raw)],
    })
}

#[cfg(not(feature = "redis-rs"))]
async fn redis_rs_target() -> Result<Target, Unavailable> {
    Err(Unavailable("built without the `redis-rs` feature".into()))
}

#[cfg(feature = "fred")]
async fn fred_target() -> Result<Target, Unavailable> {
    let url = redis_url();
    let backend = FredFactory { url: url.clone() }.backend().await?;
    let raw = crate::baseline::FredRaw::connect(&url, NAMESPACE, redis_tcp_nodelay()?)
        .await
        .map_err(|e| no_server("Redis", &url, e))?;
    Ok(Target {
        name: "fred",
        backend,
        baselines: vec![Arc::new(raw)],
    })
}

#[cfg(not(feature = "fred"))]
async fn fred_target() -> Result<Target, Unavailable> {
    Err(Unavailable("built without the `fred` feature".into()))
}

#[cfg(feature = "postgres")]
async fn postgres_target() -> Result<Target, Unavailable> {
    use crate::baseline::{AckStyle, PgRaw};
    let url = database_url();
    let backend = PgFactory { url: url.clone() }.backend().await?;
    let raw = PgRaw::connect(&url, &format!("{NAMESPACE}_raw"), PG_CONNECTIONS)
        .await
        .map_err(|e| no_server("PostgreSQL", &url, e))?;
    let batched = raw.with_ack(AckStyle::Batched);
    Ok(Target {
        name: "postgres",
        backend,
        baselines: vec![Arc::new(raw), Arc::new(batched)],
    })
}

#[cfg(not(feature = "postgres"))]
async fn postgres_target() -> Result<Target, Unavailable> {
    Err(Unavailable("built without the `postgres` feature".into()))
}

/// The SQLite durability the benches run at: `LEASEQ_BENCH_SQLITE_SYNC`
/// (`full` or `normal`), else the backend's default ([`leaseq_sqlite::Durability::Full`]).
/// An unknown value is refused.
#[cfg(feature = "sqlite")]
pub fn sqlite_durability() -> Result<leaseq_sqlite::Durability, Unavailable> {
    use leaseq_sqlite::Durability;
    match std::env::var("LEASEQ_BENCH_SQLITE_SYNC") {
        Err(_) => Ok(Durability::default()),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" => Ok(Durability::default()),
            "full" => Ok(Durability::Full),
            "normal" => Ok(Durability::Normal),
            other => Err(Unavailable(format!(
                "LEASEQ_BENCH_SQLITE_SYNC={other:?}: expected full or normal"
            ))),
        },
    }
}

/// The SQLite backend on a file.
#[cfg(feature = "sqlite")]
#[derive(Debug, Clone)]
pub struct SqliteFactory {
    /// The database URL (`sqlite://path`, or `sqlite::memory:`).
    pub url: String,
    /// What a commit guarantees on power failure.
    pub durability: leaseq_sqlite::Durability,
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl BackendFactory for SqliteFactory {
    fn name(&self) -> &str {
        "sqlite"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        // No test hooks: the handle an application gets.
        let options = leaseq_sqlite::SqliteOptions::new().durability(self.durability);
        let b = leaseq_sqlite::SqliteBackend::connect(&self.url, options)
            .await
            .map_err(|e| Unavailable(format!("cannot open {}: {e}", self.url)))?;
        Ok(TestBackend::real(Arc::new(b)))
    }
}

/// The backend and its baseline, each on its own file in one scratch
/// directory (in the system's temp dir; `TMPDIR` moves it), removed when
/// the target is dropped.
#[cfg(feature = "sqlite")]
async fn sqlite_target() -> Result<Target, Unavailable> {
    use crate::baseline::SqliteRaw;
    let durability = sqlite_durability()?;
    let dir = tempfile::Builder::new()
        .prefix("leaseq-bench-sqlite-")
        .tempdir()
        .map_err(|e| Unavailable(format!("no scratch directory for SQLite: {e}")))?;
    let url = format!("sqlite://{}", dir.path().join("leaseq.db").display());
    let backend = SqliteFactory { url, durability }.backend().await?;
    let raw = SqliteRaw::open(&dir.path().join("raw.db"), durability)
        .await
        .map_err(|e| Unavailable(format!("SQLite baseline: {e}")))?
        .keeping(Arc::new(dir));
    Ok(Target {
        name: "sqlite",
        backend,
        baselines: vec![Arc::new(raw)],
    })
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite_target() -> Result<Target, Unavailable> {
    Err(Unavailable("built without the `sqlite` feature".into()))
}

/// Brings a backend's store to a steady state after a bulk set-up, so a
/// measurement that follows does not also pay for cleaning up the set-up:
/// on PostgreSQL, `VACUUM (ANALYZE)` of the queue table (the set-up's
/// updates leave dead tuples that autovacuum would otherwise clear in the
/// middle of the measurement). Nothing to do elsewhere.
pub async fn settle(name: &str) -> leaseq_core::Result<()> {
    match name {
        #[cfg(feature = "postgres")]
        "postgres" => {
            use sqlx::Connection;
            let url = database_url();
            let mut conn = sqlx::PgConnection::connect(&url).await.map_err(|e| {
                leaseq_core::Error::outcome_unknown(
                    format!("connecting to {}", leaseq_core::redact_url(&url)),
                    e,
                )
            })?;
            sqlx::query(&format!("VACUUM (ANALYZE) \"{NAMESPACE}\".leaseq_items"))
                .execute(&mut conn)
                .await
                .map_err(|e| leaseq_core::Error::outcome_unknown("vacuum", e))?;
            let _ = conn.close().await;
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod no_server_tests {
    #[test]
    fn the_reason_names_the_server_without_its_password() {
        let why = super::no_server(
            "PostgreSQL",
            "postgres://app:hunter2@db:5432/jobs",
            "refused",
        )
        .0;
        assert!(!why.contains("hunter2"), "{why}");
        assert!(why.contains("db:5432") && why.contains("refused"), "{why}");
    }
}
