//! Bare SQL on SQLite: the statements `leaseq-sqlite` runs for a job's
//! life, stripped of the queue's semantics, on a file opened the same way.
//!
//! The table is a plain one (`id INTEGER PRIMARY KEY`, queue, payload, a
//! lease column) with one partial index over the unleased rows in claim
//! order. Each step is one autocommit statement, so one transaction (and,
//! at `synchronous=FULL`, one `fsync`), as each of the backend's is:
//!
//! | step | backend | baseline |
//! |---|---|---|
//! | enqueue a batch | one `INSERT … SELECT … FROM (VALUES …) RETURNING` | one `INSERT … VALUES (…), (…)` |
//! | claim n | one `UPDATE … FROM (heads of the Ready and Scheduled indexes) RETURNING` | one `UPDATE … WHERE id IN (SELECT … ORDER BY id LIMIT n) RETURNING` |
//! | ack one | one `DELETE` fenced by id, queue and token | one `DELETE … WHERE id = ?` |
//! | ack a batch | one `DELETE … WHERE id IN (… each lease fenced …) RETURNING` | one `DELETE … WHERE id IN (?, …)` |
//!
//! The file gets the backend's settings: WAL, the same `synchronous`
//! level, the same busy timeout, foreign keys off, and all writes through
//! one connection.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::{Error, Result};
use leaseq_sqlite::Durability;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;

use super::Baseline;

/// The busy timeout `leaseq_sqlite::SqliteOptions::new` sets.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The bare statements on their own file.
#[derive(Debug, Clone)]
pub struct SqliteRaw {
    pool: SqlitePool,
    path: PathBuf,
    durability: Durability,
    /// The scratch directory holding the file, removed when the last
    /// holder drops it.
    scratch: Option<Arc<tempfile::TempDir>>,
}

fn err(what: &str) -> impl FnOnce(sqlx::Error) -> Error + '_ {
    move |e| Error::outcome_unknown(format!("sqlite baseline: {what}"), e)
}

impl SqliteRaw {
    /// Opens (creating it if missing) the file at `path` with the backend's
    /// settings at `durability`, and creates the table.
    pub async fn open(path: &Path, durability: Durability) -> Result<Self> {
        let url = format!("sqlite://{}", path.display());
        let connect = SqliteConnectOptions::from_str(&url)
            .map_err(err("parsing the file name"))?
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(false)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Normal => SqliteSynchronous::Normal,
                _ => SqliteSynchronous::Full,
            });
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .connect_with(connect)
            .await
            .map_err(err("opening the file"))?;
        for stmt in [
            "CREATE TABLE IF NOT EXISTS raw_jobs (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, \
             payload BLOB NOT NULL, leased_until INTEGER)",
            "CREATE INDEX IF NOT EXISTS raw_jobs_ready ON raw_jobs (queue, id) \
             WHERE leased_until IS NULL",
        ] {
            sqlx::query(stmt)
                .execute(&pool)
                .await
                .map_err(err("creating the table"))?;
        }
        Ok(SqliteRaw {
            pool,
            path: path.to_owned(),
            durability,
            scratch: None,
        })
    }

    /// Keeps `dir` (the scratch directory holding the file) alive as long
    /// as this baseline.
    #[must_use]
    pub fn keeping(mut self, dir: Arc<tempfile::TempDir>) -> Self {
        self.scratch = Some(dir);
        self
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `synchronous` level it runs at.
    pub fn durability(&self) -> Durability {
        self.durability
    }
}

/// `?1, ?2, …, ?n` from `first`.
fn marks(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[async_trait]
impl Baseline for SqliteRaw {
    fn name(&self) -> &str {
        "sqlite-raw"
    }

    fn describe(&self) -> &str {
        "one multi-row INSERT; UPDATE … WHERE id IN (SELECT … ORDER BY id LIMIT n) RETURNING; \
         one DELETE … WHERE id IN (…) per batch; each an autocommit on one writer"
    }

    async fn push(&self, queue: &str, payloads: &[Bytes]) -> Result<()> {
        if payloads.is_empty() {
            return Ok(());
        }
        let values = (0..payloads.len())
            .map(|i| format!("(?1,?{})", i + 2))
            .collect::<Vec<_>>()
            .join(",");
        let text = format!("INSERT INTO raw_jobs (queue, payload) VALUES {values}");
        let mut q = sqlx::query(&text).bind(queue);
        for p in payloads {
            q = q.bind(p.as_ref());
        }
        q.execute(&self.pool).await.map_err(err("insert"))?;
        Ok(())
    }

    async fn pop(&self, queue: &str, n: usize) -> Result<usize> {
        let rows = sqlx::query(
            "UPDATE raw_jobs SET leased_until = CAST(round(unixepoch('subsec') * 1000) AS INTEGER) \
             + 60000 WHERE id IN (SELECT id FROM raw_jobs WHERE queue = ?1 \
             AND leased_until IS NULL ORDER BY id LIMIT ?2) RETURNING id, payload",
        )
        .bind(queue)
        .bind(i64::try_from(n).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(err("claim"))?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            ids.push(row.try_get::<i64, _>(0).map_err(err("reading an id"))?);
            // Read the payload as the backend does.
            let _: Vec<u8> = row.try_get(1).map_err(err("reading a payload"))?;
        }
        match ids.as_slice() {
            [] => {}
            [one] => {
                sqlx::query("DELETE FROM raw_jobs WHERE id = ?1")
                    .bind(one)
                    .execute(&self.pool)
                    .await
                    .map_err(err("delete"))?;
            }
            many => {
                let text = format!(
                    "DELETE FROM raw_jobs WHERE id IN ({})",
                    marks(1, many.len())
                );
                let mut q = sqlx::query(&text);
                for id in many {
                    q = q.bind(id);
                }
                q.execute(&self.pool).await.map_err(err("delete"))?;
            }
        }
        Ok(rows.len())
    }

    async fn clear(&self, queue: &str) -> Result<()> {
        sqlx::query("DELETE FROM raw_jobs WHERE queue = ?1")
            .bind(queue)
            .execute(&self.pool)
            .await
            .map_err(err("clear"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_goes_in_and_comes_out_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let raw = SqliteRaw::open(&dir.path().join("raw.db"), Durability::Normal)
            .await
            .expect("open");
        let payloads: Vec<Bytes> = (0..5).map(|_| crate::payload()).collect();
        raw.push("q", &payloads).await.expect("push");
        assert_eq!(raw.pop("q", 3).await.expect("pop"), 3);
        assert_eq!(raw.pop("q", 3).await.expect("pop"), 2);
        assert_eq!(raw.pop("q", 3).await.expect("pop"), 0);
        raw.push("q", &payloads[..1]).await.expect("push");
        assert_eq!(raw.pop("q", 1).await.expect("pop"), 1);
        raw.clear("q").await.expect("clear");
    }
}
