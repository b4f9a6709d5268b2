//! Shared by the integration tests: the server URL, a fresh schema per test
//! and its removal, and the loud skip when no server is reachable.
#![allow(dead_code, unreachable_pub)]

pub mod schema_guard;

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
