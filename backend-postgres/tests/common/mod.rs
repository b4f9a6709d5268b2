//! Shared by the integration tests: the server URL, a fresh schema per test
//! and its removal, and the loud skip when no server is reachable.
#![allow(dead_code, unreachable_pub)]

pub mod plans;

use std::time::Duration;

use leaseq_postgres::{PgBackend, PgOptions};
pub use leaseq_testkit::pg_schema::fresh_schema;
use leaseq_testkit::{env, pg_schema};

/// The server the tests use.
pub fn url() -> String {
    env::database_url()
}

/// Options for a test backend in `schema`.
pub fn options(schema: &str) -> PgOptions {
    PgOptions::new()
        .test_hooks(true)
        .schema(schema)
        .max_connections(8)
        .poll_interval(Duration::from_millis(200))
        .acquire_timeout(Duration::from_secs(10))
}

/// Whether the server answers, failing fast (one connection attempt).
pub async fn probe() -> Result<(), String> {
    pg_schema::probe(&url())
        .await
        .map_err(|e| format!("no PostgreSQL at {}: {e}", url()))
}

/// Whether the server answers; prints the skip line (or panics in CI) when
/// it does not.
pub async fn server_or_skip() -> bool {
    env::require_server("PostgreSQL", &url(), pg_schema::probe(&url()).await)
}

/// Drops `schema` and everything in it.
pub async fn drop_schema(schema: &str) {
    pg_schema::drop_schema(&url(), schema).await;
}

/// Drops `schema` from a thread of its own, so it works from `Drop` inside
/// or outside a runtime.
pub fn drop_schema_blocking(schema: String) {
    pg_schema::drop_schema_blocking(&url(), &schema);
}

/// A backend in a fresh schema, dropped with the guard.
pub struct TestDb {
    pub backend: PgBackend,
    pub schema: String,
}

impl TestDb {
    /// None (after the skip line) when no server is reachable.
    pub async fn new(tag: &str) -> Option<TestDb> {
        if !server_or_skip().await {
            return None;
        }
        let schema = fresh_schema(tag);
        let backend = PgBackend::connect(&url(), options(&schema))
            .await
            .expect("connect and migrate");
        Some(TestDb { backend, schema })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        drop_schema_blocking(self.schema.clone());
    }
}

/// A conformance factory: a fresh schema and pool per check, on the
/// server's clock, optionally sharded. The factory drops every schema it
/// made when it goes (the suite makes one factory per check), so cleanup
/// rides on the factory, not on a wrapper around the backend.
#[derive(Debug, Default)]
pub struct Factory {
    shards: Option<u16>,
    schemas: std::sync::Mutex<Vec<String>>,
}

impl Factory {
    /// Plain queues.
    pub fn new() -> Self {
        Factory::default()
    }

    /// Each logical queue sharded over `k` physical queues.
    pub fn sharded(k: u16) -> Self {
        Factory {
            shards: Some(k),
            schemas: std::sync::Mutex::default(),
        }
    }

    /// A plain backend in a fresh schema this factory drops.
    pub async fn backend(&self) -> Result<PgBackend, String> {
        probe().await?;
        let schema = fresh_schema("conf");
        self.schemas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(schema.clone());
        PgBackend::connect(&url(), options(&schema))
            .await
            .map_err(|e| format!("no PostgreSQL at {}: {e}", url()))
    }
}

impl Drop for Factory {
    fn drop(&mut self) {
        for schema in self
            .schemas
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            drop_schema_blocking(schema);
        }
    }
}

#[async_trait::async_trait]
impl leaseq_conformance::BackendFactory for Factory {
    fn name(&self) -> &str {
        match self.shards {
            None => "postgres",
            Some(_) => "postgres sharded",
        }
    }

    async fn backend(
        &self,
    ) -> Result<leaseq_conformance::TestBackend, leaseq_conformance::Unavailable> {
        let backend = Factory::backend(self)
            .await
            .map_err(leaseq_conformance::Unavailable)?;
        let backend: std::sync::Arc<dyn leaseq_core::Backend> = match self.shards {
            None => std::sync::Arc::new(backend),
            Some(k) => std::sync::Arc::new(
                leaseq_core::layer::shard::Sharded::new(backend, k)
                    .map_err(|e| leaseq_conformance::Unavailable(e.to_string()))?,
            ),
        };
        Ok(leaseq_conformance::TestBackend::real(backend))
    }
}
