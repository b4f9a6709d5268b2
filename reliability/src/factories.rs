//! Backend factories for the model and the hostile-input check: memory on
//! a manual clock, Redis on either client under a private key prefix,
//! PostgreSQL in a schema of its own. Server factories hand every case the
//! same backend (cases isolate themselves by queue) and remove their prefix
//! or schema when dropped.

use std::sync::Arc;

use async_trait::async_trait;
use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::{Backend, ManualClock, Result};
use leaseq_memory::MemoryBackend;
use leaseq_postgres::{PgBackend, PgOptions};
use leaseq_redis::{FredBackend, RedisOptions, RedisRsBackend};
use tokio::sync::OnceCell;

use crate::env;

/// A fresh memory backend per case, on a manual clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryFactory;

#[async_trait]
impl BackendFactory for MemoryFactory {
    fn name(&self) -> &str {
        "memory"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        Ok(TestBackend::manual(Arc::new(backend), clock))
    }
}

/// A fresh memory backend per case, on the system clock (for storms that
/// run real workers).
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryRealClock;

#[async_trait]
impl BackendFactory for MemoryRealClock {
    fn name(&self) -> &str {
        "memory"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        Ok(TestBackend::real(Arc::new(MemoryBackend::new())))
    }
}

/// Which Redis client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisClient {
    /// The `redis` crate.
    RedisRs,
    /// The `fred` crate.
    Fred,
}

impl RedisClient {
    /// Both clients.
    pub const ALL: [RedisClient; 2] = [RedisClient::RedisRs, RedisClient::Fred];

    /// Its name in output.
    pub fn name(self) -> &'static str {
        match self {
            RedisClient::RedisRs => "redis-rs",
            RedisClient::Fred => "fred",
        }
    }

    /// A backend on this client.
    pub async fn connect(self, config: RedisOptions) -> Result<Arc<dyn Backend>> {
        Ok(match self {
            RedisClient::RedisRs => Arc::new(RedisRsBackend::connect(config).await?),
            RedisClient::Fred => Arc::new(FredBackend::connect(config).await?),
        })
    }
}

pub use leaseq_testkit::redis_prefix::delete_prefix as delete_redis_prefix;

/// Redis on one client under a key prefix of its own, deleted on drop.
#[derive(Debug)]
pub struct RedisFactory {
    client: RedisClient,
    url: String,
    prefix: String,
    backend: OnceCell<Result<Arc<dyn Backend>, String>>,
}

impl RedisFactory {
    /// A factory on `client` against [`env::redis_url`].
    pub fn new(client: RedisClient) -> Self {
        RedisFactory {
            client,
            url: env::redis_url(),
            prefix: format!("rel-{}-{}", client.name(), env::tag()),
            backend: OnceCell::new(),
        }
    }
}

impl Drop for RedisFactory {
    fn drop(&mut self) {
        delete_redis_prefix(&self.url, &self.prefix);
    }
}

#[async_trait]
impl BackendFactory for RedisFactory {
    fn name(&self) -> &str {
        self.client.name()
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let made = self
            .backend
            .get_or_init(|| async {
                let config = RedisOptions::new(&self.url)
                    .prefix(&self.prefix)
                    .test_hooks(true);
                self.client.connect(config).await.map_err(|e| e.to_string())
            })
            .await;
        match made {
            Ok(b) => Ok(TestBackend::real(b.clone())),
            Err(e) => Err(Unavailable(format!("no Redis at {}: {e}", self.url))),
        }
    }
}

/// A schema name no other test uses.
pub fn fresh_schema(tag: &str) -> String {
    leaseq_testkit::pg_schema::fresh_schema(&format!("rel_{tag}"))
}

/// Drops `schema`, from a thread of its own (so it works inside or outside
/// a runtime, e.g. from `Drop`).
pub fn drop_schema_blocking(schema: String) {
    leaseq_testkit::pg_schema::drop_schema_blocking(&env::database_url(), &schema);
}

/// PostgreSQL in a schema of its own, dropped on drop.
#[derive(Debug)]
pub struct PgFactory {
    schema: String,
    backend: OnceCell<Result<Arc<dyn Backend>, String>>,
}

impl PgFactory {
    /// A factory against [`env::database_url`].
    pub fn new(tag: &str) -> Self {
        PgFactory {
            schema: fresh_schema(tag),
            backend: OnceCell::new(),
        }
    }

    /// Options for a test backend in `schema`.
    pub fn options(schema: &str) -> PgOptions {
        PgOptions::new()
            .test_hooks(true)
            .schema(schema)
            .max_connections(4)
            .poll_interval(std::time::Duration::from_millis(200))
            .acquire_timeout(std::time::Duration::from_secs(10))
    }
}

impl Drop for PgFactory {
    fn drop(&mut self) {
        drop_schema_blocking(self.schema.clone());
    }
}

#[async_trait]
impl BackendFactory for PgFactory {
    fn name(&self) -> &str {
        "postgres"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let made = self
            .backend
            .get_or_init(|| async {
                let url = env::database_url();
                PgBackend::connect(&url, Self::options(&self.schema))
                    .await
                    .map(|b| Arc::new(b) as Arc<dyn Backend>)
                    .map_err(|e| format!("no PostgreSQL at {url}: {e}"))
            })
            .await;
        match made {
            Ok(b) => Ok(TestBackend::real(b.clone())),
            Err(e) => Err(Unavailable(e.clone())),
        }
    }
}
