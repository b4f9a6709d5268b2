//! A queue's pause: the `paused` column of its limits row (migration
//! 0015), which every claim on a queue with a row reads inside its
//! transaction (src/limits.rs). A row that holds neither limits nor a pause
//! is deleted, so an unpaused queue without limits keeps the plain claim.

use leaseq_core::{QueueName, Result};

use crate::rows::{col, db};
use crate::SqliteBackend;

impl SqliteBackend {
    /// [`leaseq_core::Control::pause`]: one statement.
    pub(crate) async fn write_pause(&self, queue: &QueueName) -> Result<()> {
        sqlx::query(
            "INSERT INTO leaseq_queue_limits (queue, paused) VALUES (?1, 1) \
             ON CONFLICT (queue) DO UPDATE SET paused = 1",
        )
        .bind(queue.as_str())
        .execute(self.write_on([queue]))
        .await
        .map_err(db("pause"))?;
        Ok(())
    }

    /// [`leaseq_core::Control::resume`]: the pause cleared, in one
    /// transaction; wakes the queue's consumers.
    pub(crate) async fn clear_pause(&self, queue: &QueueName) -> Result<()> {
        self.clear_row(queue, Half::Pause, "resume").await?;
        self.inner.wakeups.wake(queue.as_str());
        Ok(())
    }

    /// [`leaseq_core::Control::is_paused`]: one read.
    pub(crate) async fn read_pause(&self, queue: &QueueName) -> Result<bool> {
        let row = sqlx::query(
            "SELECT coalesce((SELECT paused FROM leaseq_queue_limits WHERE queue = ?1), 0)",
        )
        .bind(queue.as_str())
        .fetch_one(self.read_on(queue))
        .await
        .map_err(db("reading the pause"))?;
        col(&row, 0)
    }

    /// Clears one half of `queue`'s limits row in one transaction: the row
    /// is deleted instead when that half is all it holds.
    pub(crate) async fn clear_row(
        &self,
        queue: &QueueName,
        half: Half,
        what: &'static str,
    ) -> Result<()> {
        let (delete, clear) = match half {
            Half::Limits => (
                "DELETE FROM leaseq_queue_limits WHERE queue = ?1 AND paused = 0",
                "UPDATE leaseq_queue_limits SET concurrency = NULL, rate = NULL, \
                 per_ms = NULL, window_start = NULL, window_used = 0 WHERE queue = ?1",
            ),
            Half::Pause => (
                "DELETE FROM leaseq_queue_limits WHERE queue = ?1 \
                 AND concurrency IS NULL AND rate IS NULL",
                "UPDATE leaseq_queue_limits SET paused = 0 WHERE queue = ?1",
            ),
        };
        let mut tx = self.begin_on(queue, what).await?;
        // Not committed on an error: rolled back as the transaction drops.
        let deleted = sqlx::query(delete)
            .bind(queue.as_str())
            .execute(&mut *tx)
            .await
            .map_err(crate::rows::unapplied(what))?;
        if deleted.rows_affected() == 0 {
            sqlx::query(clear)
                .bind(queue.as_str())
                .execute(&mut *tx)
                .await
                .map_err(crate::rows::unapplied(what))?;
        }
        tx.commit().await.map_err(db(what))
    }
}

/// What a limits row holds besides its queue.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Half {
    /// Concurrency and rate.
    Limits,
    /// The pause.
    Pause,
}
