//! [`WorkerRegistry`] on PostgreSQL: one row per worker in
//! `leaseq_workers` (migration 0015), its entry stored as the core encodes
//! it, with an expiry on the server's clock.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::{Result, Timestamp, WorkerEntry, WorkerRegistry};

use crate::rows::{col, db, millis, ts};
use crate::PgBackend;

/// The registry's statements for one schema.
#[derive(Debug)]
pub(crate) struct RegistrySql {
    register: String,
    deregister: String,
    workers: String,
}

impl RegistrySql {
    /// Renders the statements for `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Self {
        let w = format!("\"{schema}\".leaseq_workers");
        // Expired entries (but `keep`'s), deleted through the expiry index.
        // Rows another call is deleting are skipped, not waited for: many
        // workers register at once, and the next call deletes what this
        // one skipped.
        let expired = |keep: &str| {
            format!(
                "expired AS ( \
                   DELETE FROM {w} WHERE id IN ( \
                     SELECT id FROM {w} WHERE expires_at <= now() {keep} \
                     FOR UPDATE SKIP LOCKED) \
                 )"
            )
        };
        let ms = "(floor(extract(epoch FROM expires_at) * 1000))::bigint";
        RegistrySql {
            // $1 id, $2 entry, $3 ttl (ms). The expiry of the entry written.
            // The entry's own row is left out of the expired ones: one
            // statement cannot both delete and write it.
            register: format!(
                "WITH {expired} \
                 INSERT INTO {w} AS x (id, entry, expires_at) \
                 VALUES ($1, $2, now() + $3 * interval '1 millisecond') \
                 ON CONFLICT (id) DO UPDATE SET entry = EXCLUDED.entry, \
                   expires_at = EXCLUDED.expires_at \
                 RETURNING {ms}",
                expired = expired("AND id <> $1"),
            ),
            // $1 id. Whether an entry that had not expired was removed.
            deregister: format!("DELETE FROM {w} WHERE id = $1 RETURNING expires_at > now()"),
            // The live entries, with their expiry.
            workers: format!(
                "WITH {expired} \
                 SELECT id, entry, {ms} FROM {w} WHERE expires_at > now()",
                expired = expired(""),
            ),
        }
    }
}

#[async_trait]
impl WorkerRegistry for PgBackend {
    async fn register(&self, entry: &WorkerEntry, ttl: Duration) -> Result<Timestamp> {
        WorkerEntry::check_ttl(ttl)?;
        let text = entry.encode()?;
        if entry.id.contains('\0') {
            return Err(leaseq_core::Error::invalid(
                "a worker id with a NUL character cannot be stored in PostgreSQL",
            ));
        }
        let row = sqlx::query(&self.inner.registry_sql.register)
            .bind(&entry.id)
            .bind(&text)
            .bind(millis(ttl))
            .fetch_one(&self.inner.pool)
            .await
            .map_err(db("registering a worker"))?;
        Ok(ts(col(&row, 0)?))
    }

    async fn deregister(&self, id: &str) -> Result<bool> {
        if id.contains('\0') {
            // `text` cannot hold it, so no entry has it.
            return Ok(false);
        }
        let row = sqlx::query(&self.inner.registry_sql.deregister)
            .bind(id)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db("deregistering a worker"))?;
        match row {
            Some(row) => col(&row, 0),
            None => Ok(false),
        }
    }

    async fn workers(&self) -> Result<Vec<WorkerEntry>> {
        let rows = sqlx::query(&self.inner.registry_sql.workers)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db("listing workers"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = col(row, 0)?;
            let text: String = col(row, 1)?;
            out.extend(WorkerEntry::decode_listed(&id, text.as_bytes(), ts(col(row, 2)?)));
        }
        // The database's collation may order ids otherwise than bytes.
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
