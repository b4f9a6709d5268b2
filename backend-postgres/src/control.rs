//! [`Control`] on PostgreSQL: each call one statement.
//!
//! A cancel request is a column of the item's row (migration 0015); the
//! statements that end a lease (in [`crate::sql`]) delete a row that has
//! one. A pause is a column of the queue's limits row, which the claim
//! statement reads anyway (see `Sql::claim`'s gate).

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::limits::check_progress;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Bytes, Cancelled, Control, Error, ItemId, LeaseKey, QueueName, Released, Result,
};

use crate::rows::{col, db, sql_token, state};
use crate::PgBackend;

/// The statements of the Control group (those that end a lease, `snooze`
/// among them, live with the others in [`crate::sql::Sql`]).
#[derive(Debug)]
pub(crate) struct ControlSql {
    cancel: String,
    run_now: String,
    run_all_now: String,
    pause: String,
    resume: String,
    is_paused: String,
    /// Deletes a queue's limits row that holds neither limits nor a pause.
    pub(crate) forget_limits_row: String,
}

impl ControlSql {
    /// Renders the statements for `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Self {
        let t = format!("\"{schema}\".leaseq_items");
        let lim = crate::limits::table(schema);
        // The row by the primary key alone (no state named, as for
        // `Sql::redrive_item`), locked, so the statement acts on its latest
        // version: a claim or an ack that holds it finishes first.
        let locked = |cols: &str, lock: &str| {
            format!(
                "c AS MATERIALIZED ( \
                   SELECT {cols} FROM {t} WHERE id = $2 AND queue = $1 AND payload IS NOT NULL \
                   FOR {lock} \
                 )"
            )
        };
        ControlSql {
            // $1 queue, $2 id, $3 notify channel. One row when the item
            // exists: its effective state as it was, and how many rows
            // changed (1). A Leased row gets its cancel request, and the
            // workers of the queue a `cancel <queue>` notification (no queue
            // name holds a space, so it is never a work wake-up); any other
            // row is deleted, as
            // `remove_item` does (no key held), and recorded Cancelled when
            // the queue keeps cancelled items (`history::record`). The flag is written as
            // `state = 'leased'`, not `true`: when a claim leased the row
            // after this statement's snapshot, the UPDATE first builds its
            // row from the Ready version it saw, and PostgreSQL checks
            // `leaseq_items_cancel_leased` on that row before it redoes the
            // update on the Leased one (the suite's `cancel_races_claims`).
            cancel: format!(
                "WITH {c}, gone AS ( \
                   DELETE FROM {t} i USING c WHERE i.id = c.id AND c.state <> 'leased' \
                   RETURNING i.id, i.queue, i.enqueued_at, i.attempts, i.payload, i.last_error \
                 ), {kept}, asked AS ( \
                   UPDATE {t} i SET cancel_requested = (i.state = 'leased') \
                   FROM c WHERE i.id = c.id AND c.state = 'leased' RETURNING i.id \
                 ), hint AS ( \
                   SELECT count(pg_notify($3, 'cancel ' || $1)) AS n FROM asked \
                 ), {events} \
                 SELECT CASE WHEN c.state = 'scheduled' AND c.due THEN 'ready' ELSE c.state END, \
                        (SELECT count(*) FROM gone) + (SELECT count(*) FROM asked) \
                 FROM c, hint, done, events",
                kept = crate::history::record(schema, "gone", "'cancelled'", "NULL::bytea", "$3"),
                // Cancelled at once; a cancel-requested lease reports when it ends.
                events = crate::events::cte(
                    schema,
                    "$3",
                    crate::events::Gate::Queue("$1"),
                    &format!(
                        "SELECT $1::text AS q, {} AS w FROM gone",
                        crate::events::wire::bare("cancelled", "id")
                    ),
                ),
                c = locked("id, state, available_at <= now() AS due", "UPDATE"),
            ),
            // $1 queue, $2 id, $3 notify channel. One row: rows moved (0 or
            // 1) and rows found (0: no such item). Ready at its place in
            // claim order: the Ready index orders by priority and id.
            run_now: format!(
                "WITH {c}, r AS ( \
                   UPDATE {t} i SET state = 'ready', available_at = now() \
                   FROM c WHERE i.id = c.id AND c.state = 'scheduled' AND c.waiting \
                   RETURNING i.id \
                 ), hint AS ( \
                   SELECT count(pg_notify($3, $1)) AS n FROM (SELECT 1 FROM r LIMIT 1) x \
                 ) \
                 SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM c) FROM hint",
                c = locked("id, state, available_at > now() AS waiting", "NO KEY UPDATE"),
            ),
            // $1 queue, $2 batch, $3 notify channel, $4 and $5 the key
            // (available_at as text, id) to start after: the Scheduled items
            // not yet due, earliest first, walked through the scheduled index
            // as `Sql::promote` walks the due ones.
            run_all_now: crate::sql::to_ready_walk(
                &t,
                "available_at",
                "state = 'scheduled' AND available_at > now()",
                "state = 'ready', available_at = now()",
            ),
            // $1 queue.
            pause: format!(
                "INSERT INTO {lim} (queue, paused) VALUES ($1, true) \
                 ON CONFLICT (queue) DO UPDATE SET paused = true"
            ),
            // $1 queue, $2 notify channel: wakes the queue's consumers when
            // it was paused.
            resume: format!(
                "WITH r AS (UPDATE {lim} SET paused = false WHERE queue = $1 AND paused RETURNING 1) \
                 SELECT count(pg_notify($2, $1)) FROM r"
            ),
            is_paused: format!(
                "SELECT coalesce(bool_or(paused), false) FROM {lim} WHERE queue = $1"
            ),
            // Re-checked on the row's latest version, so a pause or limits
            // set meanwhile keep it.
            forget_limits_row: format!(
                "DELETE FROM {lim} WHERE queue = $1 AND NOT paused \
                   AND concurrency IS NULL AND rate IS NULL"
            ),
        }
    }
}

impl PgBackend {
    /// Deletes `queue`'s limits row if it holds neither limits nor a pause
    /// (after a resume, or limits cleared): housekeeping only, the claim
    /// reads the columns, not the row's presence.
    pub(crate) async fn forget_empty_limits(&self, queue: &QueueName) -> Result<()> {
        sqlx::query(&self.inner.control_sql.forget_limits_row)
            .bind(queue.as_str())
            .execute(&self.inner.pool)
            .await
            .map_err(db("forgetting an empty limits row"))?;
        Ok(())
    }
}

#[async_trait]
impl Control for PgBackend {
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let row = self
            .item_row(&self.inner.control_sql.cancel, queue, id, true, "cancel")
            .await?;
        let was = state(&col::<String>(&row, 0)?)?;
        let changed: i64 = col(&row, 1)?;
        match (was, changed) {
            (leaseq_core::ItemState::Leased, 1) => Ok(Cancelled::Requested),
            (was, 1) => Ok(Cancelled::Now { was }),
            (_, n) => Err(Error::Corrupt {
                what: format!("cancel of item {id} changed {n} rows"),
            }),
        }
    }

    async fn pause(&self, queue: &QueueName) -> Result<()> {
        sqlx::query(&self.inner.control_sql.pause)
            .bind(queue.as_str())
            .execute(self.statement_on([queue]))
            .await
            .map_err(db("pause"))?;
        Ok(())
    }

    async fn resume(&self, queue: &QueueName) -> Result<()> {
        sqlx::query(&self.inner.control_sql.resume)
            .bind(queue.as_str())
            .bind(&self.inner.channel)
            .execute(self.statement_on([queue]))
            .await
            .map_err(db("resume"))?;
        self.forget_empty_limits(queue).await
    }

    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        let row = sqlx::query(&self.inner.control_sql.is_paused)
            .bind(queue.as_str())
            .fetch_one(self.statement_on([queue]))
            .await
            .map_err(db("is_paused"))?;
        col(&row, 0)
    }

    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.put_back(&self.inner.sql.snooze, lease, delay, "snooze")
            .await
    }

    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let row = self
            .item_row(&self.inner.control_sql.run_now, queue, id, true, "run_now")
            .await?;
        match (col::<i64>(&row, 0)?, col::<i64>(&row, 1)?) {
            (_, 0) => Err(Error::NotFound { id }),
            (moved, _) => Ok(moved > 0),
        }
    }

    async fn run_all_now(&self, queue: &QueueName, n: usize) -> Result<u64> {
        self.move_up_to(&self.inner.control_sql.run_all_now, queue, n, "run_all_now")
            .await
    }

    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        check_progress(&value)?;
        let row = sqlx::query(&self.inner.sql.progress)
            .bind(crate::ops::fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(value.as_ref())
            .bind(&self.inner.channel)
            .fetch_one(self.statement_on([&lease.queue]))
            .await
            .map_err(db("progress"))?;
        if col::<i64>(&row, 0)? == 0 {
            return Err(Error::LeaseLost { id: lease.id });
        }
        Ok(())
    }

    /// Fed by the backend's `LISTEN` connection: a cancel made by any
    /// process on the database fires it.
    async fn cancel_signal(&self, queue: &QueueName) -> Result<Signal> {
        Ok(self.inner.wakeups.cancel_signal(queue.as_str()))
    }
}
