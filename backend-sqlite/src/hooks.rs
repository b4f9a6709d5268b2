//! [`TestHooks`] on SQLite.
//!
//! A table has no separate index that could hold an id without its item.
//! The faithful equivalent is a row an index still serves as Ready whose
//! item data is gone: state `ready`, payload NULL. Claim meets it first,
//! deletes it, reports the repair and claims on.
//!
//! Of the [`Poison`] kinds, the STRICT table's types and checks hold only
//! two: an attempt counter at `i32::MAX` and a missing payload.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::{Error, IndexSnapshot, ItemId, Poison, QueueName, Result, TestHooks};

use crate::rows::{col, db, item_id, sql_id, state};
use crate::sql;
use crate::SqliteBackend;

#[async_trait]
impl TestHooks for SqliteBackend {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(sql::EXPIRE_LEASES)
            .bind(queue.as_str())
            .execute(&self.inner.writer)
            .await
            .map_err(db("expiring leases"))?;
        Ok(done.rows_affected())
    }

    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let done = sqlx::query(sql::POSTPONE_LEASES)
            .bind(queue.as_str())
            .bind(i64::try_from(by.as_millis()).unwrap_or(i64::MAX))
            .execute(&self.inner.writer)
            .await
            .map_err(db("postponing leases"))?;
        Ok(Some(done.rows_affected()))
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(sql::MAKE_DUE)
            .bind(queue.as_str())
            .execute(&self.inner.writer)
            .await
            .map_err(db("making items due"))?;
        Ok(done.rows_affected())
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let planted = sqlx::query(sql::PLANT_GHOST)
            .bind(sql_id(id)?)
            .bind(queue.as_str())
            .fetch_optional(&self.inner.writer)
            .await
            .map_err(db("planting a dangling entry"))?;
        match planted {
            Some(_) => Ok(()),
            None => Err(Error::invalid(format!(
                "item {id} exists; cannot plant a dangling entry"
            ))),
        }
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let rows = sqlx::query(sql::SNAPSHOT)
            .bind(queue.as_str())
            .fetch_all(&self.inner.reader)
            .await
            .map_err(db("snapshot"))?;
        let mut snap = IndexSnapshot::default();
        for row in &rows {
            let id = item_id(col(row, 0)?)?;
            let st = state(&col::<String>(row, 1)?)?;
            snap.indexes.entry(st).or_default().push(id);
            if col::<bool>(row, 2)? {
                snap.items.push(id);
            }
        }
        Ok(snap)
    }

    async fn plant_poison(&self, queue: &QueueName, id: ItemId, poison: Poison) -> Result<bool> {
        let text = match poison {
            Poison::AttemptsAtLimit => sql::PLANT_ATTEMPTS_AT_LIMIT,
            Poison::MissingPayload => sql::PLANT_MISSING_PAYLOAD,
            // The table is STRICT and checks its counters and priority.
            _ => return Ok(false),
        };
        let planted = sqlx::query(text)
            .bind(queue.as_str())
            .bind(sql_id(id)?)
            .fetch_optional(&self.inner.writer)
            .await
            .map_err(db("planting poison"))?;
        match planted {
            Some(_) => Ok(true),
            None => Err(Error::NotFound { id }),
        }
    }

    fn steps(&self, queue: &QueueName) -> Option<u64> {
        self.inner.steps.get(queue)
    }
}
