//! A PostgreSQL schema per test: a name no other test uses, whether the
//! server answers, and the schema's removal (also from `Drop`, inside or
//! outside a runtime).

use sqlx::{Connection, PgConnection};

/// A schema name no other test uses: `lq_<tag>_<pid>_<random>`.
pub fn fresh_schema(tag: &str) -> String {
    format!("lq_{tag}_{}_{}", std::process::id(), crate::env::tag())
}

/// Whether the server at `url` answers, failing fast (one connection
/// attempt). Pass the outcome to [`crate::env::require_server`].
///
/// # Errors
/// The connection error, as text.
pub async fn probe(url: &str) -> Result<(), String> {
    let c = PgConnection::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.close().await;
    Ok(())
}

/// Drops `schema` and everything in it (best effort; waits at most 10 s
/// for locks).
pub async fn drop_schema(url: &str, schema: &str) {
    if let Ok(mut c) = PgConnection::connect(url).await {
        let _ = sqlx::query("SET lock_timeout = '10s'")
            .execute(&mut c)
            .await;
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .execute(&mut c)
            .await;
        let _ = c.close().await;
    }
}

/// [`drop_schema`] from a thread and runtime of its own, so it works from
/// `Drop` inside or outside a runtime.
pub fn drop_schema_blocking(url: &str, schema: &str) {
    let (url, schema) = (url.to_owned(), schema.to_owned());
    let t = std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            rt.block_on(drop_schema(&url, &schema));
        }
    });
    let _ = t.join();
}

/// Drops `schema` on the server at `url` when dropped.
#[derive(Debug)]
pub struct SchemaGuard {
    /// The server.
    pub url: String,
    /// The schema.
    pub schema: String,
}

impl SchemaGuard {
    /// A guard for a [`fresh_schema`] of `tag` on the server at `url`.
    pub fn fresh(url: &str, tag: &str) -> Self {
        SchemaGuard {
            url: url.to_owned(),
            schema: fresh_schema(tag),
        }
    }
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        drop_schema_blocking(&self.url, &self.schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env;

    fn exists(url: &str, schema: &str) -> bool {
        let (url, schema) = (url.to_owned(), schema.to_owned());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let mut c = PgConnection::connect(&url).await.expect("connect");
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_namespace WHERE nspname = $1")
                .bind(&schema)
                .fetch_one(&mut c)
                .await
                .expect("count");
            n == 1
        })
    }

    #[test]
    fn the_guard_drops_its_schema() {
        let url = env::database_url();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        if !env::require_server("PostgreSQL", &url, rt.block_on(probe(&url))) {
            return;
        }
        let guard = SchemaGuard::fresh(&url, "testkit");
        assert_ne!(guard.schema, fresh_schema("testkit"));
        rt.block_on(async {
            let mut c = PgConnection::connect(&url).await.expect("connect");
            sqlx::query(&format!("CREATE SCHEMA \"{}\"", guard.schema))
                .execute(&mut c)
                .await
                .expect("create schema");
        });
        let schema = guard.schema.clone();
        assert!(exists(&url, &schema));
        drop(guard);
        assert!(!exists(&url, &schema));
    }
}
