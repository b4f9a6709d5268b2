//! [`TestHooks`] on PostgreSQL.
//!
//! A SQL table has no separate index that could hold an id without its
//! item. The faithful equivalent is a row that an index still serves as
//! Ready but whose item data is gone: state `ready`, payload NULL. Claim
//! meets it first, deletes it, reports the repair and claims on.
//!
//! Of the [`Poison`] kinds, the typed columns and the schema's checks hold
//! only two: an attempt counter at `i32::MAX` and a missing payload.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::testing::{IndexSnapshot, Poison, TestHooks};
use leaseq_core::{Error, ItemId, QueueName, Result};

use crate::rows::{col, db, item_id, sql_id, state};
use crate::sql::ATTEMPTS_LIMIT;
use crate::PgBackend;

#[async_trait]
impl TestHooks for PgBackend {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(&self.inner.hook_sql.expire_leases)
            .bind(queue.as_str())
            .execute(&self.inner.pool)
            .await
            .map_err(db("expiring leases"))?;
        Ok(done.rows_affected())
    }

    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let done = sqlx::query(&self.inner.hook_sql.postpone_leases)
            .bind(queue.as_str())
            .bind(i64::try_from(by.as_millis()).unwrap_or(i64::MAX))
            .execute(&self.inner.pool)
            .await
            .map_err(db("postponing leases"))?;
        Ok(Some(done.rows_affected()))
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(&self.inner.hook_sql.make_due)
            .bind(queue.as_str())
            .execute(&self.inner.pool)
            .await
            .map_err(db("making items due"))?;
        Ok(done.rows_affected())
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let planted = sqlx::query(&self.inner.hook_sql.plant_ghost)
            .bind(sql_id(id)?)
            .bind(queue.as_str())
            .fetch_optional(&self.inner.pool)
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
        let rows = sqlx::query(&self.inner.hook_sql.snapshot)
            .bind(queue.as_str())
            .fetch_all(&self.inner.pool)
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
        let sql = match poison {
            Poison::AttemptsAtLimit => &self.inner.hook_sql.plant_attempts_at_limit,
            Poison::MissingPayload => &self.inner.hook_sql.plant_missing_payload,
            // `attempts >= 0` and `max_attempts >= 1` are checks of the
            // schema; priority and the counters are typed `integer`.
            _ => return Ok(false),
        };
        let planted = sqlx::query(sql)
            .bind(queue.as_str())
            .bind(sql_id(id)?)
            .fetch_optional(&self.inner.pool)
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

/// The statements of the test hooks, with the table and sequence names of
/// one schema filled in: kept out of the production statements in
/// [`crate::sql`].
#[derive(Debug)]
pub(crate) struct HookSql {
    pub(crate) expire_leases: String,
    pub(crate) postpone_leases: String,
    pub(crate) make_due: String,
    pub(crate) plant_ghost: String,
    pub(crate) plant_attempts_at_limit: String,
    pub(crate) plant_missing_payload: String,
    pub(crate) snapshot: String,
}

impl HookSql {
    /// Renders the hooks' statements for `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Self {
        let t = format!("\"{schema}\".leaseq_items");
        let seq = format!("'\"{schema}\".leaseq_item_id'");
        HookSql {
            expire_leases: format!(
                "UPDATE {t} SET lease_expires_at = now() - interval '1 millisecond' \
                 WHERE queue = $1 AND state = 'leased' AND lease_expires_at > now() \
                   - interval '1 millisecond'"
            ),
            // $1 queue, $2 ms.
            postpone_leases: format!(
                "UPDATE {t} SET lease_expires_at = lease_expires_at + $2 * interval '1 millisecond' \
                 WHERE queue = $1 AND state = 'leased' AND lease_expires_at > now()"
            ),
            make_due: format!(
                "UPDATE {t} SET available_at = now() - interval '1 millisecond' \
                 WHERE queue = $1 AND state = 'scheduled'"
            ),
            // $1 id, $2 queue. At the head of the Ready index: top priority,
            // and the sequence is moved past the id so no item reuses it.
            plant_ghost: format!(
                "WITH s AS (SELECT setval({seq}, greatest($1, (SELECT last_value FROM \"{schema}\".leaseq_item_id))) AS v) \
                 INSERT INTO {t} (id, queue, state, priority, payload, max_attempts) \
                 SELECT $1, $2, 'ready', 2147483647, NULL, 1 FROM s \
                 ON CONFLICT (id) DO NOTHING RETURNING id"
            ),
            // $1 queue, $2 id: the poison kinds the schema can hold.
            plant_attempts_at_limit: format!(
                "UPDATE {t} SET attempts = {ATTEMPTS_LIMIT} \
                 WHERE queue = $1 AND id = $2 AND payload IS NOT NULL RETURNING id"
            ),
            plant_missing_payload: format!(
                "UPDATE {t} SET payload = NULL \
                 WHERE queue = $1 AND id = $2 AND payload IS NOT NULL RETURNING id"
            ),
            snapshot: format!(
                "SELECT id, state, payload IS NOT NULL FROM {t} WHERE queue = $1 \
                 ORDER BY state, priority DESC, id"
            ),
        }
    }
}
