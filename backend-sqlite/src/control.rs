//! [`Control`] on SQLite: each call one statement (resume: one
//! transaction). A cancel request is a flag on the Leased row; whatever
//! moves the row out of Leased deletes it in the same statement, through
//! the trigger `leaseq_cancelled_end` of migration 0015, and an ack (a
//! delete) holds no `unique_for` key for it (`leaseq_hold_after_ack`). The
//! reap's takeover traces are written before its update, as for any lease,
//! so `lease_fate` stays truthful.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::events::EventKind;
use leaseq_core::limits::check_progress;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Bytes, Cancelled, Control, Error, ItemId, LeaseKey, QueueName, Released, Result,
};

use crate::control_sql as sql;
use crate::rows::{col, db, fenced_id, limit, sql_id, sql_token, state};
use crate::SqliteBackend;

#[async_trait]
impl Control for SqliteBackend {
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let events = self.watch([queue]).await;
        let row = sqlx::query(sql::CANCEL)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(self.write_on([queue]))
            .await
            .map_err(db("cancel"))?;
        let Some(row) = row else {
            return Err(Error::NotFound { id });
        };
        match state(&col::<String>(&row, 0)?)? {
            leaseq_core::ItemState::Leased => {
                self.inner.wakeups.cancel_requested(queue.as_str());
                Ok(Cancelled::Requested)
            }
            was => {
                self.inner.wakeups.finished(queue.as_str());
                if let Some(events) = events {
                    events.send(queue, id, EventKind::Cancelled);
                }
                Ok(Cancelled::Now { was })
            }
        }
    }

    async fn pause(&self, queue: &QueueName) -> Result<()> {
        self.write_pause(queue).await
    }

    async fn resume(&self, queue: &QueueName) -> Result<()> {
        self.clear_pause(queue).await
    }

    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        self.read_pause(queue).await
    }

    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.put_back(sql::SNOOZE, lease, delay, "snooze").await
    }

    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.move_to_ready(sql::RUN_NOW, queue, id, "run_now").await
    }

    async fn run_all_now(&self, queue: &QueueName, most: usize) -> Result<u64> {
        let moved = self
            .batches(sql::RUN_ALL_NOW, queue, limit(most), "run_all_now")
            .await?;
        if !moved.is_empty() {
            self.inner.wakeups.wake(queue.as_str());
        }
        Ok(u64::try_from(moved.len()).unwrap_or(u64::MAX))
    }

    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        check_progress(&value)?;
        let events = self.watch([&lease.queue]).await;
        let row = sqlx::query(sql::PROGRESS)
            .bind(fenced_id(lease.id))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(value.as_ref())
            .fetch_optional(self.write_on([&lease.queue]))
            .await
            .map_err(db("progress"))?;
        if row.is_none() {
            return Err(Self::lost(lease));
        }
        if let Some(events) = events {
            events.send(&lease.queue, lease.id, EventKind::Progress(value));
        }
        Ok(())
    }

    /// In-process only: SQLite cannot signal another process, whose
    /// cancels reach the worker at its next heartbeat.
    async fn cancel_signal(&self, queue: &QueueName) -> Result<Signal> {
        Ok(self.inner.wakeups.cancel_signal(queue.as_str()))
    }
}
