//! [`WorkerRegistry`] on SQLite: the table `leaseq_workers` (migration
//! 0015), one row per worker. A register deletes the expired rows through
//! the expiry index and writes its own in one transaction; the listing
//! reads the unexpired rows by id. Both cost what the workers do, never
//! what the jobs do.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::{Result, Timestamp, WorkerEntry, WorkerRegistry};

use crate::control_sql as sql;
use crate::rows::{col, db, millis, ts};
use crate::SqliteBackend;

#[async_trait]
impl WorkerRegistry for SqliteBackend {
    async fn register(&self, entry: &WorkerEntry, ttl: Duration) -> Result<Timestamp> {
        WorkerEntry::check_ttl(ttl)?;
        let text = entry.encode()?;
        let mut tx = self
            .begin_write("register: beginning a transaction")
            .await?;
        // Not committed on an error: rolled back as the transaction drops.
        sqlx::query(sql::SWEEP_WORKERS)
            .execute(&mut *tx)
            .await
            .map_err(crate::rows::unapplied("register: deleting expired workers"))?;
        let row = sqlx::query(sql::REGISTER)
            .bind(&entry.id)
            .bind(text)
            .bind(millis(ttl))
            .fetch_one(&mut *tx)
            .await
            .map_err(crate::rows::unapplied("register"))?;
        let expires = ts(col(&row, 0)?);
        tx.commit().await.map_err(db("register: commit"))?;
        Ok(expires)
    }

    async fn deregister(&self, id: &str) -> Result<bool> {
        let done = sqlx::query(sql::DEREGISTER)
            .bind(id)
            .execute(&self.inner.writer)
            .await
            .map_err(db("deregister"))?;
        Ok(done.rows_affected() > 0)
    }

    async fn workers(&self) -> Result<Vec<WorkerEntry>> {
        let rows = sqlx::query(sql::WORKERS)
            .fetch_all(&self.inner.reader)
            .await
            .map_err(db("workers"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = col(row, 0)?;
            let text: String = col(row, 1)?;
            out.extend(WorkerEntry::decode_listed(&id, text.as_bytes(), ts(col(row, 2)?)));
        }
        Ok(out)
    }
}
