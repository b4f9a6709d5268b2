//! The whole conformance suite against a real PostgreSQL server
//! (`LEASEQ_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`).
//! Each check gets a backend in a schema of its own, dropped afterwards.

mod common;

use std::sync::Arc;

use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_postgres::PgBackend;

use common::schema_guard::SchemaGuarded;

/// A fresh schema and pool per check, on the server's clock.
struct PostgresFactory;

#[async_trait::async_trait]
impl BackendFactory for PostgresFactory {
    fn name(&self) -> &str {
        "postgres"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        common::probe().await.map_err(Unavailable)?;
        let schema = common::fresh_schema("conf");
        let backend = PgBackend::connect(&common::url(), common::options(&schema))
            .await
            .map_err(|e| Unavailable(format!("no PostgreSQL at {}: {e}", common::url())))?;
        Ok(TestBackend::real(Arc::new(SchemaGuarded {
            inner: backend,
            schema,
        })))
    }
}

leaseq_conformance::suite!(PostgresFactory);
