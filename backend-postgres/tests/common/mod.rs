//! Shared by the integration tests: the server URL, a fresh schema per test
//! and its removal, and the loud skip when no server is reachable.
#![allow(dead_code, unreachable_pub)]

pub mod schema_guard;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leaseq_postgres::{PgBackend, PgOptions};
use sqlx::{Connection, PgConnection};

/// The server the tests use.
pub fn url() -> String {
    std::env::var("LEASEQ_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// True when running in CI, where a missing server is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A schema name no other test uses.
pub fn fresh_schema(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let rand = leaseq_core::LeaseToken::random().as_u128() as u32;
    format!("lq_{tag}_{}_{n}_{rand:08x}", std::process::id())
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
    match PgConnection::connect(&url()).await {
        Ok(c) => {
            let _ = c.close().await;
            Ok(())
        }
        Err(e) => Err(format!("no PostgreSQL at {}: {e}", url())),
    }
}

/// Whether the server answers; prints the skip line (or panics in CI) when
/// it does not.
pub async fn server_or_skip() -> bool {
    match PgConnection::connect(&url()).await {
        Ok(c) => {
            let _ = c.close().await;
            true
        }
        Err(e) => {
            let msg = format!("skipped: no PostgreSQL at {}: {e}", url());
            assert!(!in_ci(), "{msg}");
            eprintln!("{msg}");
            false
        }
    }
}

/// Drops `schema` and everything in it.
pub async fn drop_schema(schema: &str) {
    if let Ok(mut c) = PgConnection::connect(&url()).await {
        let _ = sqlx::query("SET lock_timeout = '10s'")
            .execute(&mut c)
            .await;
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .execute(&mut c)
            .await;
        let _ = c.close().await;
    }
}

/// Drops `schema` from a thread of its own, so it works from `Drop` inside
/// or outside a runtime.
pub fn drop_schema_blocking(schema: String) {
    let t = std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            rt.block_on(drop_schema(&schema));
        }
    });
    let _ = t.join();
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
