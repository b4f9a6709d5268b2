//! Periodic schedules on PostgreSQL: one row per schedule in
//! `leaseq_schedules`. A fire is one transaction: it locks the schedule's
//! row (`FOR UPDATE`, so racing fires of one schedule queue up behind it),
//! checks the revision, the last tick and the server's clock, enqueues the
//! item with the ordinary enqueue statements, and records the tick; a
//! concurrent fire that waited on the lock then sees the new last tick.

use bytes::Bytes;
use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::{Error, NewItem, QueueName, Result};
use sqlx::postgres::PgRow;

use crate::rows::{col, db, refused, ts};
use crate::PgBackend;

/// Epoch ms of the server's now, as the core counts time.
const NOW_MS: &str = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint";

/// The columns a schedule is read with.
const COLUMNS: &str = "name, queue, spec, payload, revision, \
     (floor(extract(epoch FROM defined_at) * 1000))::bigint, last_tick_ms";

fn table(b: &PgBackend) -> String {
    format!("\"{}\".leaseq_schedules", b.inner.options.schema)
}

fn stored(row: &PgRow) -> Result<StoredSchedule> {
    let name: String = col(row, 0)?;
    let queue: String = col(row, 1)?;
    let corrupt = |what: String| Error::Corrupt { what };
    let payload: Vec<u8> = col(row, 3)?;
    let revision: i64 = col(row, 4)?;
    let last: Option<i64> = col(row, 6)?;
    Ok(StoredSchedule {
        name: ScheduleName::new(&name)
            .map_err(|e| corrupt(format!("a schedule is named {name:?}: {e}")))?,
        queue: QueueName::new(&queue)
            .map_err(|e| corrupt(format!("schedule {name} names queue {queue:?}: {e}")))?,
        spec: col(row, 2)?,
        payload: Bytes::from(payload),
        revision: u64::try_from(revision)
            .map_err(|_| corrupt(format!("schedule {name} has revision {revision}")))?,
        defined_at: ts(col(row, 5)?),
        last_tick: last.map(ts),
    })
}

impl PgBackend {
    /// [`leaseq_core::ScheduleStore::put_schedule`]: an insert, or an update when
    /// the queue, spec or payload differ; then the row as stored.
    pub(crate) async fn store_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        schedule.check(&self.inner.options.limits)?;
        let t = table(self);
        let upsert = format!(
            "INSERT INTO {t} AS s (name, queue, spec, payload, revision, defined_at) \
             VALUES ($1, $2, $3, $4, 1, now()) \
             ON CONFLICT (name) DO UPDATE SET queue = EXCLUDED.queue, spec = EXCLUDED.spec, \
               payload = EXCLUDED.payload, revision = s.revision + 1, defined_at = now() \
             WHERE (s.queue, s.spec, s.payload) IS DISTINCT FROM \
                   (EXCLUDED.queue, EXCLUDED.spec, EXCLUDED.payload) \
             RETURNING {COLUMNS}"
        );
        let spec = schedule.spec();
        let row = sqlx::query(&upsert)
            .bind(schedule.name().as_str())
            .bind(schedule.queue().as_str())
            .bind(&spec)
            .bind(schedule.payload().as_ref())
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db("put_schedule"))?;
        if let Some(row) = row {
            return stored(&row);
        }
        // Unchanged: the row as it is.
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM {t} WHERE name = $1"))
            .bind(schedule.name().as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db("put_schedule: reading the schedule"))?;
        match row {
            Some(row) => stored(&row),
            // Removed between the two statements: put it again.
            None => Err(Error::unavailable(
                "put_schedule",
                "the schedule was removed while it was put; put it again",
            )),
        }
    }

    /// [`leaseq_core::ScheduleStore::remove_schedule`].
    pub(crate) async fn drop_schedule(&self, name: &ScheduleName) -> Result<bool> {
        let done = sqlx::query(&format!("DELETE FROM {} WHERE name = $1", table(self)))
            .bind(name.as_str())
            .execute(&self.inner.pool)
            .await
            .map_err(db("remove_schedule"))?;
        Ok(done.rows_affected() > 0)
    }

    /// [`leaseq_core::ScheduleStore::schedules`].
    pub(crate) async fn list_schedules(&self) -> Result<Vec<StoredSchedule>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM {} ORDER BY name COLLATE \"C\"",
            table(self)
        ))
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db("schedules"))?;
        rows.iter().map(stored).collect()
    }

    /// [`leaseq_core::ScheduleStore::fire_schedule`]: one transaction.
    pub(crate) async fn fire(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        let items = vec![item];
        self.check_items(&items)?;
        let t = table(self);
        let at = i64::try_from(tick.at.as_millis()).map_err(|_| {
            Error::invalid(format!("tick {} is past the year 292 million", tick.at))
        })?;
        let mut tx = self
            .inner
            .pool
            .begin()
            .await
            .map_err(refused("fire_schedule: beginning a transaction"))?;
        let row = sqlx::query(&format!(
            "SELECT queue, revision, last_tick_ms, {NOW_MS} FROM {t} WHERE name = $1 FOR UPDATE"
        ))
        .bind(tick.name.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(refused("fire_schedule: locking the schedule"))?;
        let Some(row) = row else {
            return Ok(Fired::Stale);
        };
        let queue: String = col(&row, 0)?;
        let revision: i64 = col(&row, 1)?;
        let last: Option<i64> = col(&row, 2)?;
        let now: i64 = col(&row, 3)?;
        let record = u64::try_from(revision).ok().map(|r| (r, last.map(ts)));
        if let Some(answer) = tick.refusal(record, ts(now)) {
            return Ok(answer);
        }
        let queue = QueueName::new(&queue).map_err(|e| Error::Corrupt {
            what: format!("schedule {} names queue {queue:?}: {e}", tick.name),
        })?;
        let out = match self.enqueue_on(&mut tx, &queue, &items).await {
            Ok(out) => out,
            // Not committed: rolled back whatever went wrong.
            Err(Error::OutcomeUnknown { message, source }) => {
                return Err(Error::Unavailable { message, source })
            }
            Err(e) => return Err(e),
        };
        sqlx::query(&format!("UPDATE {t} SET last_tick_ms = $2 WHERE name = $1"))
            .bind(tick.name.as_str())
            .bind(at)
            .execute(&mut *tx)
            .await
            .map_err(refused("fire_schedule: recording the tick"))?;
        tx.commit().await.map_err(db("fire_schedule: commit"))?;
        out.into_iter()
            .next()
            .map(Fired::Enqueued)
            .ok_or_else(|| Error::Corrupt {
                what: "an enqueue of one item returned no result".into(),
            })
    }
}
