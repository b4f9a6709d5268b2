//! [`History`] on SQLite. The triggers of migration 0016 record an ending
//! inside the statement that ends the item (an ack's delete, the update
//! that ends a cancel-requested row), when the queue's row in
//! `leaseq_retention` keeps that ending, and trim to the count bound at
//! once; a queue without a row pays one probe of that small table per ack.
//! The calls here set the policy, read the kept items and collect them.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::finished::check_result;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Bytes, Ending, Error, Finished, History, ItemId, Keep, LeaseKey, QueueName, Result, Retention,
};
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::Sqlite;

use crate::history_sql as sql;
use crate::rows::{col, count, db, fenced_id, item_id, limit, millis, sql_id, ts, unapplied};
use crate::SqliteBackend;

/// Kept items removed per statement by `collect`: each statement holds the
/// write lock briefly, and the loop stops at the first short batch.
const COLLECT_BATCH: i64 = 1000;

/// A bound as stored: an age in nanoseconds, and a count.
fn stored(keep: Keep) -> Result<(Option<i64>, Option<i64>)> {
    // Within `MAX_RETENTION_AGE` (checked before), which fits.
    let age = keep
        .max_age
        .map(|a| i64::try_from(a.as_nanos()).unwrap_or(i64::MAX));
    let count = keep
        .max_count
        .map(|n| {
            i64::try_from(n).map_err(|_| {
                Error::invalid(format!(
                    "a retention count of {n}; the most is {}",
                    i64::MAX
                ))
            })
        })
        .transpose()?;
    Ok((age, count))
}

/// A bound as read back.
fn keep(age: Option<i64>, count: Option<i64>) -> Keep {
    Keep {
        max_age: age.map(|ns| Duration::from_nanos(u64::try_from(ns).unwrap_or(0))),
        max_count: count.map(|n| u64::try_from(n).unwrap_or(0)),
    }
}

fn finished(row: &SqliteRow) -> Result<Finished> {
    let ending: String = col(row, 1)?;
    Ok(Finished {
        id: item_id(col(row, 0)?)?,
        ending: ending.parse()?,
        finished_at: ts(col(row, 2)?),
        enqueued_at: ts(col(row, 3)?),
        attempts: count(col(row, 4)?, "attempts")?,
        payload: Bytes::from(col::<Vec<u8>>(row, 5)?),
        last_error: col(row, 6)?,
        result: col::<Option<Vec<u8>>>(row, 7)?.map(Bytes::from),
    })
}

impl SqliteBackend {
    /// Removes, in batches, `ending`'s kept items of `queue` finished at
    /// least `age` ago; answers how many.
    async fn collect_aged(&self, queue: &QueueName, ending: Ending, age: Duration) -> Result<u64> {
        let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        self.in_batches(queue, "collect", || {
            sqlx::query(sql::COLLECT)
                .bind(queue.as_str())
                .bind(ending.as_str())
                .bind(age)
        })
        .await
    }

    /// Removes, in batches, `queue`'s dead letters beyond `keep`'s count
    /// (oldest death first), then those that died at least its age ago;
    /// answers how many.
    async fn collect_dead(&self, queue: &QueueName, keep: Keep) -> Result<u64> {
        let (age, count) = (keep.max_age.map(millis), stored(keep)?.1);
        let mut gone = 0;
        for (text, bound) in [
            (sql::COLLECT_DEAD_COUNT, count),
            (sql::COLLECT_DEAD_AGED, age),
        ] {
            if let Some(bound) = bound {
                gone += self
                    .in_batches(queue, "collect: dead letters", || {
                        sqlx::query(text).bind(queue.as_str()).bind(bound)
                    })
                    .await?;
            }
        }
        Ok(gone)
    }

    /// Runs the delete `make` builds, with [`COLLECT_BATCH`] bound last,
    /// until a batch removes fewer rows than that; answers the rows
    /// removed. Each statement holds the write lock briefly.
    async fn in_batches<'q>(
        &self,
        queue: &QueueName,
        what: &'static str,
        make: impl Fn() -> Query<'q, Sqlite, SqliteArguments<'q>>,
    ) -> Result<u64> {
        let mut gone = 0;
        loop {
            let done = make()
                .bind(COLLECT_BATCH)
                .execute(self.write_on([queue]))
                .await
                .map_err(db(what))?;
            gone += done.rows_affected();
            if done.rows_affected() < COLLECT_BATCH.unsigned_abs() {
                return Ok(gone);
            }
        }
    }
}

#[async_trait]
impl History for SqliteBackend {
    // One transaction: the policy, then the trim to its counts, so no
    // reader sees more kept than the new count allows.
    async fn set_retention(&self, queue: &QueueName, retention: Retention) -> Result<()> {
        retention.check()?;
        let (completed, cancelled) = (stored(retention.completed)?, stored(retention.cancelled)?);
        let dead = stored(retention.dead)?;
        let mut tx = self
            .begin_on(queue, "set_retention: beginning a transaction")
            .await?;
        if retention == Retention::default() {
            for text in [sql::FORGET_RETENTION, sql::FORGET_FINISHED] {
                sqlx::query(text)
                    .bind(queue.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(unapplied("set_retention"))?;
            }
        } else {
            sqlx::query(sql::SET_RETENTION)
                .bind(queue.as_str())
                .bind(completed.0)
                .bind(completed.1)
                .bind(cancelled.0)
                .bind(cancelled.1)
                .bind(dead.0)
                .bind(dead.1)
                .execute(&mut *tx)
                .await
                .map_err(unapplied("set_retention"))?;
            for ending in Ending::ALL {
                sqlx::query(sql::TRIM)
                    .bind(queue.as_str())
                    .bind(ending.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(unapplied("set_retention: trimming"))?;
            }
        }
        tx.commit().await.map_err(db("set_retention: commit"))
    }

    async fn retention(&self, queue: &QueueName) -> Result<Retention> {
        let row = sqlx::query(sql::RETENTION)
            .bind(queue.as_str())
            .fetch_optional(self.read_on(queue))
            .await
            .map_err(db("retention"))?;
        let Some(row) = row else {
            return Ok(Retention::default());
        };
        Ok(Retention {
            completed: keep(col(&row, 0)?, col(&row, 1)?),
            cancelled: keep(col(&row, 2)?, col(&row, 3)?),
            dead: keep(col(&row, 4)?, col(&row, 5)?),
        })
    }

    // One transaction: the ack (whose trigger keeps the item), then the
    // result on the kept row, if there is one.
    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        check_result(&result)?;
        let events = self.watch([&lease.queue]).await;
        let mut tx = self
            .begin_on(&lease.queue, "complete: beginning a transaction")
            .await?;
        let acked = Self::end_lease(&mut *tx, crate::sql::ACK, lease, None, events.is_some())
            .await
            .map_err(unapplied("complete"))?;
        let Some(cancelled) = acked else {
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "leaseq-sqlite: complete: rollback failed");
            }
            return Err(Self::lost(lease));
        };
        sqlx::query(sql::SET_RESULT)
            .bind(fenced_id(lease.id))
            .bind(result.as_ref())
            .execute(&mut *tx)
            .await
            .map_err(unapplied("complete: storing the result"))?;
        tx.commit().await.map_err(db("complete: commit"))?;
        self.inner.wakeups.finished(lease.queue.as_str());
        if let Some(events) = events {
            events.acked(&lease.queue, lease.id, cancelled, Some(result));
        }
        Ok(())
    }

    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        most: usize,
    ) -> Result<Vec<Finished>> {
        let most = limit(most.min(MAX_PEEK));
        let query = match ending {
            Some(e) => sqlx::query(sql::FINISHED_OF)
                .bind(queue.as_str())
                .bind(e.as_str())
                .bind(most),
            None => sqlx::query(sql::FINISHED_ALL)
                .bind(queue.as_str())
                .bind(most),
        };
        let rows = query
            .fetch_all(self.read_on(queue))
            .await
            .map_err(db("finished"))?;
        rows.iter().map(finished).collect()
    }

    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let row = sqlx::query(sql::FINISHED_ITEM)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(self.read_on(queue))
            .await
            .map_err(db("finished_item"))?;
        row.as_ref()
            .map(finished)
            .transpose()?
            .ok_or(Error::NotFound { id })
    }

    // Count bounds first (trimmed at each ending already, unless the policy
    // was lowered by hand in the file), then ages, each a prefix of the
    // order index. Each statement holds the write lock, so racing collects
    // remove each item once.
    async fn collect(&self, queue: &QueueName) -> Result<u64> {
        let policy = self.retention(queue).await?;
        if policy == Retention::default() {
            return Ok(0);
        }
        let mut gone = 0;
        for ending in Ending::ALL {
            let done = sqlx::query(sql::TRIM)
                .bind(queue.as_str())
                .bind(ending.as_str())
                .execute(self.write_on([queue]))
                .await
                .map_err(db("collect: trimming"))?;
            gone += done.rows_affected();
            if let Some(age) = policy.of(ending).max_age {
                gone += self.collect_aged(queue, ending, age).await?;
            }
        }
        gone += self.collect_dead(queue, policy.dead).await?;
        Ok(gone)
    }

    /// In-process: every handle on the same file in this process shares
    /// one hub; an ending in another process is seen at the waiter's poll
    /// ([`leaseq_core::groups::FINISHED_POLL`]).
    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        Ok(self.inner.wakeups.finished_signal(queue.as_str()))
    }
}
