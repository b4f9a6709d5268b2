//! Periodic schedules on PostgreSQL: one row per schedule in
//! `leaseq_schedules`. A fire is one transaction: it locks the schedule's
//! row (`FOR UPDATE`, so racing fires of one schedule queue up behind it),
//! checks the revision, the last tick and the server's clock, enqueues the
//! item with the ordinary enqueue statements, and records the tick; a
//! concurrent fire that waited on the lock then sees the new last tick.

use leaseq_core::schedule::{
    FireStep, Fired, Schedule, ScheduleName, ScheduleRecord, ScheduleTick, StoredSchedule,
    TickRecord,
};
use leaseq_core::{Error, NewItem, Result};
use sqlx::postgres::PgRow;

use crate::rows::{col, db, refused};
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
    StoredSchedule::try_from(ScheduleRecord {
        name: col(row, 0)?,
        queue: col(row, 1)?,
        spec: col(row, 2)?,
        payload: col(row, 3)?,
        revision: col(row, 4)?,
        defined_at_ms: col(row, 5)?,
        last_tick_ms: col(row, 6)?,
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
        let mut tx = crate::begin::begin(&self.inner.pool, None)
            .await
            .map_err(refused("fire_schedule: beginning a transaction"))?;
        let row = sqlx::query(&format!(
            "SELECT queue, revision, last_tick_ms, {NOW_MS} FROM {t} WHERE name = $1 FOR UPDATE"
        ))
        .bind(tick.name.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(refused("fire_schedule: locking the schedule"))?;
        let record = row.as_ref().map(record).transpose()?;
        // Nothing written on the early returns: the transaction rolls back
        // as it drops.
        let (queue, tick_ms) = match tick.next_step(record)? {
            FireStep::Answer(answer) => return Ok(answer),
            FireStep::Enqueue { queue, tick_ms } => (queue, tick_ms),
        };
        let out = self
            .enqueue_on(&mut tx, &queue, &items)
            .await
            .map_err(Error::uncommitted)?;
        sqlx::query(&format!("UPDATE {t} SET last_tick_ms = $2 WHERE name = $1"))
            .bind(tick.name.as_str())
            .bind(tick_ms)
            .execute(&mut *tx)
            .await
            .map_err(refused("fire_schedule: recording the tick"))?;
        tx.commit().await.map_err(db("fire_schedule: commit"))?;
        Fired::from_enqueued(out)
    }
}

/// The schedule's record as the fire reads it.
fn record(row: &PgRow) -> Result<TickRecord> {
    Ok(TickRecord {
        queue: col(row, 0)?,
        revision: col(row, 1)?,
        last_tick_ms: col(row, 2)?,
        now_ms: col(row, 3)?,
    })
}
