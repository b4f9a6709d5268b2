//! Periodic schedules on SQLite: one row per schedule in
//! `leaseq_schedules`. A fire is one `BEGIN IMMEDIATE` transaction (the
//! database's one writer lock): it checks the revision, the last tick and
//! SQLite's clock, enqueues the item with the ordinary enqueue statements
//! and records the tick, so racing fires of one tick take turns and only
//! the first finds the tick undone.

use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::Bytes;
use leaseq_core::{Error, NewItem, QueueName, Result};
use sqlx::sqlite::SqliteRow;

use crate::rows::{col, db, ts};
use crate::SqliteBackend;

/// Epoch ms of SQLite's clock, as the core counts time.
const NOW_MS: &str = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)";

/// The columns a schedule is read with.
const COLUMNS: &str = "name, queue, spec, payload, revision, defined_at, last_tick";

fn stored(row: &SqliteRow) -> Result<StoredSchedule> {
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
        let at = i64::try_from(tick.at.as_millis())
            .map_err(|_| Error::invalid(format!("tick {} is too far in the future", tick.at)))?;
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
        // Nothing written on the early returns: the transaction rolls back
        // as it drops.
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
            Err(Error::OutcomeUnknown { message, source }) => {
                return Err(Error::Unavailable { message, source })
            }
            Err(e) => return Err(e),
        };
        sqlx::query("UPDATE leaseq_schedules SET last_tick = ?2 WHERE name = ?1")
            .bind(tick.name.as_str())
            .bind(at)
            .execute(&mut *tx)
            .await
            .map_err(db("fire_schedule: recording the tick"))?;
        self.count([&queue]);
        tx.commit().await.map_err(db("fire_schedule: commit"))?;
        events.enqueued(&queue, &out);
        out.into_iter()
            .next()
            .map(Fired::Enqueued)
            .ok_or_else(|| Error::Corrupt {
                what: "an enqueue of one item returned no result".into(),
            })
    }
}
