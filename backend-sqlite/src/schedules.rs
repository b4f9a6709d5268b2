//! Periodic schedules on SQLite: one row per schedule in
//! `leaseq_schedules`. A fire is one `BEGIN IMMEDIATE` transaction (the
//! database's one writer lock): it checks the revision, the last tick and
//! SQLite's clock, enqueues the item with the ordinary enqueue statements
//! and records the tick, so racing fires of one tick take turns and only
//! the first finds the tick undone.

use leaseq_core::schedule::{
    FireStep, Fired, Schedule, ScheduleName, ScheduleRecord, ScheduleTick, StoredSchedule,
    TickRecord,
};
use leaseq_core::{Error, NewItem, Result};
use sqlx::sqlite::SqliteRow;

use crate::rows::{col, db};
use crate::SqliteBackend;

/// Epoch ms of SQLite's clock, as the core counts time.
const NOW_MS: &str = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)";

/// The columns a schedule is read with.
const COLUMNS: &str = "name, queue, spec, payload, revision, defined_at, last_tick";

fn stored(row: &SqliteRow) -> Result<StoredSchedule> {
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

impl SqliteBackend {
    /// [`leaseq_core::ScheduleStore::put_schedule`]: one statement that inserts,
    /// updates when the queue, spec or payload differ, or changes nothing;
    /// then the row as stored.
    pub(crate) async fn store_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        schedule.check(&self.inner.options.limits)?;
        let spec = schedule.spec();
        let upsert = format!(
            "INSERT INTO leaseq_schedules (name, queue, spec, payload, revision, defined_at) \
             VALUES (?1, ?2, ?3, ?4, 1, {NOW_MS}) \
             ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, spec = excluded.spec, \
               payload = excluded.payload, revision = revision + 1, defined_at = {NOW_MS} \
             WHERE queue IS NOT excluded.queue OR spec IS NOT excluded.spec \
               OR payload IS NOT excluded.payload"
        );
        let mut tx = self
            .inner
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db("put_schedule: beginning a transaction"))?;
        sqlx::query(&upsert)
            .bind(schedule.name().as_str())
            .bind(schedule.queue().as_str())
            .bind(&spec)
            .bind(schedule.payload().as_ref())
            .execute(&mut *tx)
            .await
            .map_err(db("put_schedule"))?;
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM leaseq_schedules WHERE name = ?1"
        ))
        .bind(schedule.name().as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db("put_schedule: reading the schedule"))?;
        let out = stored(&row)?;
        tx.commit().await.map_err(db("put_schedule: commit"))?;
        Ok(out)
    }

    /// [`leaseq_core::ScheduleStore::remove_schedule`].
    pub(crate) async fn drop_schedule(&self, name: &ScheduleName) -> Result<bool> {
        let done = sqlx::query("DELETE FROM leaseq_schedules WHERE name = ?1")
            .bind(name.as_str())
            .execute(&self.inner.writer)
            .await
            .map_err(db("remove_schedule"))?;
        Ok(done.rows_affected() > 0)
    }

    /// [`leaseq_core::ScheduleStore::schedules`].
    pub(crate) async fn list_schedules(&self) -> Result<Vec<StoredSchedule>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM leaseq_schedules ORDER BY name"
        ))
        .fetch_all(&self.inner.writer)
        .await
        .map_err(db("schedules"))?;
        rows.iter().map(stored).collect()
    }

    /// [`leaseq_core::ScheduleStore::fire_schedule`]: one transaction.
    pub(crate) async fn fire(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        let items = vec![item];
        self.check_items(&items)?;
        // The queue is read inside the transaction: the order lock first.
        let events = self.inner.events.sender().await;
        let mut tx = self
            .inner
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db("fire_schedule: beginning a transaction"))?;
        let row = sqlx::query(&format!(
            "SELECT queue, revision, last_tick, {NOW_MS} FROM leaseq_schedules WHERE name = ?1"
        ))
        .bind(tick.name.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("fire_schedule: reading the schedule"))?;
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
        sqlx::query("UPDATE leaseq_schedules SET last_tick = ?2 WHERE name = ?1")
            .bind(tick.name.as_str())
            .bind(tick_ms)
            .execute(&mut *tx)
            .await
            .map_err(db("fire_schedule: recording the tick"))?;
        self.count([&queue]);
        tx.commit().await.map_err(db("fire_schedule: commit"))?;
        events.enqueued(&queue, &out);
        Fired::from_enqueued(out)
    }
}

/// The schedule's record as the fire reads it.
fn record(row: &SqliteRow) -> Result<TickRecord> {
    Ok(TickRecord {
        queue: col(row, 0)?,
        revision: col(row, 1)?,
        last_tick_ms: col(row, 2)?,
        now_ms: col(row, 3)?,
    })
}
