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
use leaseq_core::testing::{IndexSnapshot, Poison, TestHooks};
use leaseq_core::{Error, ItemId, QueueName, Result};

use crate::rows::{col, db, item_id, sql_id, state};
use crate::SqliteBackend;

#[async_trait]
impl TestHooks for SqliteBackend {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(hook_sql::EXPIRE_LEASES)
            .bind(queue.as_str())
            .execute(&self.inner.writer)
            .await
            .map_err(db("expiring leases"))?;
        Ok(done.rows_affected())
    }

    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let done = sqlx::query(hook_sql::POSTPONE_LEASES)
            .bind(queue.as_str())
            .bind(i64::try_from(by.as_millis()).unwrap_or(i64::MAX))
            .execute(&self.inner.writer)
            .await
            .map_err(db("postponing leases"))?;
        Ok(Some(done.rows_affected()))
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(hook_sql::MAKE_DUE)
            .bind(queue.as_str())
            .execute(&self.inner.writer)
            .await
            .map_err(db("making items due"))?;
        Ok(done.rows_affected())
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let planted = sqlx::query(hook_sql::PLANT_GHOST)
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
        let rows = sqlx::query(hook_sql::SNAPSHOT)
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
            Poison::AttemptsAtLimit => hook_sql::PLANT_ATTEMPTS_AT_LIMIT,
            Poison::MissingPayload => hook_sql::PLANT_MISSING_PAYLOAD,
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

/// The statements of the test hooks, kept out of the production statements
/// in [`crate::sql`].
mod hook_sql {
    use crate::sql::{attempts_limit, now};

    /// `?1` queue.
    pub(crate) const EXPIRE_LEASES: &str = concat!(
        "UPDATE leaseq_items SET lease_expires_at = ",
        now!(),
        " - 1 WHERE queue = ?1 AND state = 'leased' AND lease_expires_at > ",
        now!(),
        " - 1"
    );

    /// `?1` queue, `?2` ms.
    pub(crate) const POSTPONE_LEASES: &str = concat!(
        "UPDATE leaseq_items SET lease_expires_at = lease_expires_at + ?2 ",
        "WHERE queue = ?1 AND state = 'leased' AND lease_expires_at > ",
        now!()
    );

    /// `?1` queue. Only the Scheduled rows not yet due: a due one is
    /// Ready already (its row says `scheduled` until a claim or promotion
    /// moves it), so it does not count as moved.
    pub(crate) const MAKE_DUE: &str = concat!(
        "UPDATE leaseq_items SET available_at = ",
        now!(),
        " - 1 WHERE queue = ?1 AND state = 'scheduled' AND available_at > ",
        now!()
    );

    /// `?1` id, `?2` queue. A row without its item at the head of
    /// the Ready index; AUTOINCREMENT moves past the id, so no item reuses it.
    pub(crate) const PLANT_GHOST: &str = concat!(
        "INSERT INTO leaseq_items (id, queue, state, priority, payload, max_attempts, ",
        "enqueued_at, available_at) VALUES (?1, ?2, 'ready', 2147483647, NULL, 1, ",
        now!(),
        ", ",
        now!(),
        ") ON CONFLICT (id) DO NOTHING RETURNING id"
    );

    /// `?1` queue, `?2` id.
    pub(crate) const PLANT_ATTEMPTS_AT_LIMIT: &str = concat!(
        "UPDATE leaseq_items SET attempts = ",
        attempts_limit!(),
        " WHERE queue = ?1 AND id = ?2 AND payload IS NOT NULL RETURNING id"
    );

    /// `?1` queue, `?2` id.
    pub(crate) const PLANT_MISSING_PAYLOAD: &str = "UPDATE leaseq_items SET payload = NULL \
         WHERE queue = ?1 AND id = ?2 AND payload IS NOT NULL RETURNING id";

    /// `?1` queue.
    pub(crate) const SNAPSHOT: &str = "SELECT id, state, payload IS NOT NULL FROM leaseq_items \
         WHERE queue = ?1 ORDER BY state, priority DESC, id";
}
