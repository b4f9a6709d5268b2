//! Periodic schedules on Redis.
//!
//! | key | type | holds |
//! |-----|------|-------|
//! | `{p:_}:schedules` | hash | the index: schedule name → its queue |
//! | `{p:q}:sched:<name>` | hash | one schedule: `name`, `spec`, `p` payload, `rev`, `def` (defined at, ms), `last` (last tick, ms) |
//!
//! A schedule's record lives in its queue's slot, so `schedule_fire` checks
//! the revision and the last tick, enqueues the item and records the tick
//! in one script (valid on Redis Cluster). The index only routes a name to
//! its queue; a record the index does not name is never listed, and one
//! the index names but that is gone counts as removed.
//!
//! Moving a schedule to another queue is two scripts on two slots: the old
//! record is taken (read and deleted) first, then written under the new
//! queue with its revision raised and its last tick kept. A fire of the
//! old revision in between finds no record (`Stale`), so no tick fires
//! twice across a move; a crash between the two loses the schedule until
//! it is put again.

use bytes::Bytes;
use leaseq_core::limits::check_batch;
use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::{Error, NewItem, QueueName, Result, Timestamp};

use crate::decode::enqueued;
use crate::ops::log_note;
use crate::scripts::arg;
use crate::{RedisBackend, Reply, ScriptClient};

/// The queue whose hash tag the index of schedules carries.
const INDEX_QUEUE: &str = "_";

/// A tick field: `''` is none.
fn opt_ms(r: &Reply) -> Result<Option<Timestamp>> {
    let t = r.text()?;
    if t.is_empty() {
        return Ok(None);
    }
    t.parse::<u64>()
        .map(|ms| Some(Timestamp::from_millis(ms)))
        .map_err(|_| Error::Corrupt {
            what: format!("a schedule's tick field holds {t:?}"),
        })
}

impl<C: ScriptClient> RedisBackend<C> {
    fn index_queue() -> Result<QueueName> {
        QueueName::new(INDEX_QUEUE)
    }

    /// The key of the index of schedules.
    pub fn schedule_index_key(&self) -> Result<String> {
        Ok(format!(
            "{}:schedules",
            self.keys(&Self::index_queue()?)?.tag()
        ))
    }

    /// The key of one schedule's record, in its queue's slot.
    pub fn schedule_key(&self, queue: &QueueName, name: &ScheduleName) -> Result<String> {
        Ok(format!("{}:sched:{}", self.keys(queue)?.tag(), name))
    }

    async fn index(&self, args: Vec<Bytes>) -> Result<Reply> {
        let key = self.schedule_index_key()?;
        self.run_with_keys(
            &self.scripts.schedule_index,
            &Self::index_queue()?,
            vec![key],
            args,
        )
        .await
    }

    /// The queue the index names for `name`.
    async fn queue_of(&self, name: &ScheduleName) -> Result<Option<QueueName>> {
        let r = self
            .index(vec![arg("get"), arg(name.as_str())])
            .await?
            .opt_text()?;
        match r {
            None => Ok(None),
            Some(q) => QueueName::new(&q).map(Some).map_err(|e| Error::Corrupt {
                what: format!("the index of schedules names queue {q:?} for {name}: {e}"),
            }),
        }
    }

    /// The record of `name` in `queue`'s slot; deleted too when `take`.
    async fn record(
        &self,
        queue: &QueueName,
        name: &ScheduleName,
        take: bool,
    ) -> Result<Option<StoredSchedule>> {
        let key = self.schedule_key(queue, name)?;
        let r = self
            .run_with_keys(
                &self.scripts.schedule_get,
                queue,
                vec![key],
                vec![arg(u8::from(take))],
            )
            .await?;
        if r == Reply::Nil {
            return Ok(None);
        }
        let f = r.tuple(5)?;
        Ok(Some(StoredSchedule {
            name: name.clone(),
            queue: queue.clone(),
            spec: f[0].text()?,
            payload: f[1].bytes()?,
            revision: f[2].uint()?,
            defined_at: Timestamp::from_millis(f[3].uint()?),
            last_tick: opt_ms(&f[4])?,
        }))
    }

    /// [`leaseq_core::ScheduleStore::put_schedule`].
    pub(crate) async fn store_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        schedule.check(&self.config.limits)?;
        let (name, queue) = (schedule.name(), schedule.queue());
        let mut carried = (String::new(), String::new());
        if let Some(old) = self.queue_of(name).await?.filter(|q| q != queue) {
            if let Some(prev) = self.record(&old, name, true).await? {
                carried = (
                    prev.revision.to_string(),
                    prev.last_tick
                        .map(|t| t.as_millis().to_string())
                        .unwrap_or_default(),
                );
            }
        }
        let spec = schedule.spec();
        let key = self.schedule_key(queue, name)?;
        let r = self
            .run_with_keys(
                &self.scripts.schedule_put,
                queue,
                vec![key],
                vec![
                    arg(name.as_str()),
                    Bytes::from(spec.clone()),
                    schedule.payload().clone(),
                    Bytes::from(carried.0),
                    Bytes::from(carried.1),
                ],
            )
            .await?;
        let f = r.tuple(3)?;
        let stored = StoredSchedule {
            name: name.clone(),
            queue: queue.clone(),
            spec,
            payload: schedule.payload().clone(),
            revision: f[0].uint()?,
            defined_at: Timestamp::from_millis(f[1].uint()?),
            last_tick: opt_ms(&f[2])?,
        };
        self.index(vec![arg("set"), arg(name.as_str()), arg(queue.as_str())])
            .await?;
        Ok(stored)
    }

    /// [`leaseq_core::ScheduleStore::remove_schedule`].
    pub(crate) async fn drop_schedule(&self, name: &ScheduleName) -> Result<bool> {
        let Some(queue) = self.queue_of(name).await? else {
            return Ok(false);
        };
        let existed = self.record(&queue, name, true).await?.is_some();
        self.index(vec![arg("del"), arg(name.as_str())]).await?;
        Ok(existed)
    }

    /// [`leaseq_core::ScheduleStore::schedules`].
    pub(crate) async fn list_schedules(&self) -> Result<Vec<StoredSchedule>> {
        let r = self.index(vec![arg("all")]).await?;
        let pairs = r.array()?;
        let mut out = Vec::with_capacity(pairs.len() / 2);
        for pair in pairs.chunks(2) {
            let [name, queue] = pair else {
                return Err(Error::Corrupt {
                    what: "the index of schedules answered an odd number of fields".into(),
                });
            };
            let (Ok(name), Ok(queue)) = (
                ScheduleName::new(name.text()?),
                QueueName::new(queue.text()?),
            ) else {
                tracing::warn!(
                    ?pair,
                    "leaseq-redis: skipping a malformed entry of the index of schedules"
                );
                continue;
            };
            if let Some(s) = self.record(&queue, &name, false).await? {
                out.push(s);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// [`leaseq_core::ScheduleStore::fire_schedule`]: one script in the queue's slot.
    pub(crate) async fn fire(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        let items = vec![item];
        check_batch(&items, &self.config.limits)?;
        let Some(queue) = self.queue_of(&tick.name).await? else {
            return Ok(Fired::Stale);
        };
        self.may_add_items("schedule_fire", &queue).await?;
        let key = self.schedule_key(&queue, &tick.name)?;
        let head = [arg(tick.revision), arg(tick.at.as_millis())];
        let r = self
            .run_registered(
                &self.scripts.schedule_fire,
                &queue,
                vec![key],
                &head,
                &items,
            )
            .await?;
        let f = r.array()?;
        let what = f.first().map(Reply::text).transpose()?.unwrap_or_default();
        match (what.as_str(), f) {
            ("stale", _) => Ok(Fired::Stale),
            ("done", [_, last]) => Ok(Fired::AlreadyFired {
                last_tick: Timestamp::from_millis(last.uint()?),
            }),
            ("early", [_, now]) => Ok(Fired::NotDue {
                now: Timestamp::from_millis(now.uint()?),
            }),
            ("fired", [_, rows, note]) => {
                log_note(&queue, note)?;
                let out = enqueued(rows.array()?, 1)?;
                self.floors.saw(&queue, out.iter().map(|e| e.id));
                out.into_iter()
                    .next()
                    .map(Fired::Enqueued)
                    .ok_or_else(|| Error::Corrupt {
                        what: "a fire answered no item".into(),
                    })
            }
            _ => Err(Error::Corrupt {
                what: format!("unexpected reply of schedule_fire: {r:?}"),
            }),
        }
    }
}
