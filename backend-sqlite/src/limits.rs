//! Global queue limits on SQLite: one row per limited queue in
//! `leaseq_queue_limits` (migration 0002). A claim on a limited queue runs
//! as one `BEGIN IMMEDIATE` transaction, so it holds the file's write lock
//! throughout: it reads the limits and SQLite's clock, counts the queue's
//! Leased rows (through the leased partial index; expired leases not yet
//! reaped count), claims what [`Admission`] allows with the leases stamped
//! by that same clock, and counts the claim in the row's rate window. The
//! plain claim statement leases nothing on a queue with a row, so no claim
//! escapes the count, in this process or another.
//!
//! The row also holds the queue's pause (migration 0015, [`crate::pause`]):
//! a paused queue's claim reads it here and leases nothing. A row holds
//! limits, a pause, or both; it is deleted when it holds neither, so a
//! queue without either pays nothing on its claims.

use leaseq_core::queue_limits::{Admission, RateWindow};
use leaseq_core::{ClaimSpec, Claimed, Error, QueueLimits, QueueName, Result};

use crate::pause::Half;
use crate::rows::{col, db, unapplied};
use crate::SqliteBackend;

impl SqliteBackend {
    /// [`leaseq_core::Throttles::set_queue_limits`]: one statement.
    pub(crate) async fn write_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        limits.check()?;
        if limits.is_none() {
            // The row goes unless it holds a pause, which stays.
            return self
                .clear_row(queue, Half::Limits, "clearing queue limits")
                .await;
        }
        sqlx::query(
            "INSERT INTO leaseq_queue_limits (queue, concurrency, rate, per_ms) \
             VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency, \
               rate = excluded.rate, per_ms = excluded.per_ms, \
               window_start = CASE WHEN excluded.rate IS NULL THEN NULL ELSE window_start END, \
               window_used = CASE WHEN excluded.rate IS NULL THEN 0 ELSE window_used END",
        )
        .bind(queue.as_str())
        .bind(limits.concurrency.map(i64::from))
        .bind(limits.rate.map(|r| i64::from(r.claims())))
        .bind(
            limits
                .rate
                .map(|r| i64::try_from(r.per_millis()).unwrap_or(i64::MAX)),
        )
        .execute(self.write_on([queue]))
        .await
        .map_err(db("setting queue limits"))?;
        Ok(())
    }

    /// [`leaseq_core::Throttles::queue_limits`]: one statement.
    pub(crate) async fn read_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        let row = sqlx::query(
            "SELECT concurrency, rate, per_ms FROM leaseq_queue_limits WHERE queue = ?1",
        )
        .bind(queue.as_str())
        .fetch_optional(self.read_on(queue))
        .await
        .map_err(db("reading queue limits"))?;
        match row {
            None => Ok(QueueLimits::NONE),
            Some(row) => QueueLimits::from_stored(col(&row, 0)?, col(&row, 1)?, col(&row, 2)?),
        }
    }

    /// Whether `queue` has limits (one read).
    pub(crate) async fn has_limits(&self, queue: &QueueName) -> Result<bool> {
        let row = sqlx::query("SELECT EXISTS (SELECT 1 FROM leaseq_queue_limits WHERE queue = ?1)")
            .bind(queue.as_str())
            .fetch_one(self.read_on(queue))
            .await
            .map_err(db("reading queue limits"))?;
        Ok(col::<i64>(&row, 0)? == 1)
    }

    /// A claim under the queue's limits: one `BEGIN IMMEDIATE` transaction
    /// (see the module docs).
    pub(crate) async fn claim_limited(
        &self,
        queue: &QueueName,
        spec: &ClaimSpec,
    ) -> Result<Claimed> {
        let mut tx = self
            .begin_on(queue, "claim: beginning a transaction")
            .await?;
        let read = format!(
            "SELECT concurrency, rate, per_ms, window_start, window_used, {}, paused \
             FROM leaseq_queue_limits WHERE queue = ?1",
            crate::sql::NOW_MS
        );
        let row = sqlx::query(&read)
            .bind(queue.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(unapplied("claim: reading the queue's limits"))?;
        if let Some(row) = &row {
            if col::<bool>(row, 6)? {
                // Nothing written: give the lock back at once.
                if let Err(e) = tx.rollback().await {
                    tracing::debug!(error = %e, "leaseq-sqlite: paused claim: rollback failed");
                }
                return Ok(Claimed {
                    paused: true,
                    ..Claimed::default()
                });
            }
        }
        let limits = match &row {
            Some(row) => QueueLimits::from_stored(col(row, 0)?, col(row, 1)?, col(row, 2)?)?,
            None => QueueLimits::NONE,
        };
        let (window, now_ms) = match &row {
            Some(row) => {
                let window = col::<Option<i64>>(row, 3)?.map(|start| RateWindow {
                    start_ms: u64::try_from(start).unwrap_or(0),
                    used: 0,
                });
                let used: i64 = col(row, 4)?;
                let window = window.map(|w| RateWindow {
                    used: u64::try_from(used).unwrap_or(0),
                    ..w
                });
                (window, col::<i64>(row, 5)?)
            }
            None => (None, 0),
        };
        let leased: i64 = if limits.concurrency.is_some() {
            let row = sqlx::query(
                "SELECT count(*) FROM leaseq_items INDEXED BY leaseq_items_leased \
                 WHERE queue = ?1 AND state = 'leased'",
            )
            .bind(queue.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(unapplied("claim: counting the queue's leases"))?;
            col(&row, 0)?
        } else {
            0
        };
        let admission = Admission::new(
            &limits,
            u64::try_from(now_ms).unwrap_or(0),
            u64::try_from(leased).unwrap_or(0),
            window,
            spec.max(),
        );
        // No row (the limits went away meanwhile): a plain claim, in here.
        let held = row.is_some().then_some(now_ms);
        let (mut out, poison) = if admission.allow() > 0 {
            self.claim_rows(&mut *tx, queue, spec, admission.allow(), held)
                .await
                .map_err(|e| match e {
                    Error::OutcomeUnknown { message, source } => {
                        Error::Unavailable { message, source }
                    }
                    e => e,
                })?
        } else {
            (Claimed::default(), Vec::new())
        };
        let got = u32::try_from(out.leases.len()).unwrap_or(u32::MAX);
        if let (Some(w), true) = (admission.window_after(got), row.is_some()) {
            sqlx::query(
                "UPDATE leaseq_queue_limits SET window_start = ?2, window_used = ?3 WHERE queue = ?1",
            )
            .bind(queue.as_str())
            .bind(i64::try_from(w.start_ms).unwrap_or(i64::MAX))
            .bind(i64::try_from(w.used).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(unapplied("claim: counting the claim in the rate window"))?;
        }
        tx.commit().await.map_err(db("claim: commit"))?;
        out.retry_after = admission.retry_after(got);
        if !poison.is_empty() {
            out.repairs = self.move_aside(queue, &poison).await?;
        }
        Ok(out)
    }
}
