//! Periodic schedules: stored in a map every clone shares, fired in one
//! critical section (the schedule map's lock, then the queue's), so a
//! tick's last-tick check, its enqueue and its record are one step.

use std::sync::{MutexGuard, PoisonError};

use leaseq_core::limits::check_batch;
use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::{NewItem, Result, Timestamp};

use crate::backend::MemoryBackend;
use crate::ops::insert_batch;

type Map = std::collections::BTreeMap<ScheduleName, StoredSchedule>;

impl MemoryBackend {
    fn schedule_map(&self) -> MutexGuard<'_, Map> {
        // No update of the map panics midway, so a poisoned lock is taken over.
        self.shared
            .schedules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// [`leaseq_core::ScheduleStore::put_schedule`].
    pub(crate) fn store_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        schedule.check(&self.limits)?;
        let mut map = self.schedule_map();
        let now = self.clock.now();
        let spec = schedule.spec();
        let stored = match map.get(schedule.name()) {
            Some(old)
                if old.queue == *schedule.queue()
                    && old.spec == spec
                    && old.payload == *schedule.payload() =>
            {
                return Ok(old.clone());
            }
            Some(old) => StoredSchedule {
                name: schedule.name().clone(),
                queue: schedule.queue().clone(),
                spec,
                payload: schedule.payload().clone(),
                revision: old.revision + 1,
                defined_at: now,
                last_tick: old.last_tick,
            },
            None => StoredSchedule {
                name: schedule.name().clone(),
                queue: schedule.queue().clone(),
                spec,
                payload: schedule.payload().clone(),
                revision: 1,
                defined_at: now,
                last_tick: None,
            },
        };
        map.insert(stored.name.clone(), stored.clone());
        Ok(stored)
    }

    /// [`leaseq_core::ScheduleStore::remove_schedule`].
    pub(crate) fn drop_schedule(&self, name: &ScheduleName) -> bool {
        self.schedule_map().remove(name).is_some()
    }

    /// [`leaseq_core::ScheduleStore::schedules`].
    pub(crate) fn list_schedules(&self) -> Vec<StoredSchedule> {
        self.schedule_map().values().cloned().collect()
    }

    /// [`leaseq_core::ScheduleStore::fire_schedule`]: the map's lock is held from
    /// the check to the record, the queue's lock inside it for the enqueue.
    pub(crate) fn fire(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        let items = vec![item];
        check_batch(&items, &self.limits)?;
        let mut map = self.schedule_map();
        let now = self.now_ms();
        let record = map.get(&tick.name).map(|s| (s.revision, s.last_tick));
        if let Some(answer) = tick.refusal(record, Timestamp::from_millis(now)) {
            return Ok(answer);
        }
        let Some(stored) = map.get_mut(&tick.name) else {
            return Ok(Fired::Stale);
        };
        let queue = stored.queue.clone();
        let out = self.ensure(&queue, |q| {
            let mut st = q.lock();
            let (out, woke) = insert_batch(&mut st, &items, now, || self.next_id());
            drop(st);
            if woke {
                q.wake();
            }
            out
        });
        stored.last_tick = Some(tick.at);
        match out.into_iter().next() {
            Some(e) => Ok(Fired::Enqueued(e)),
            None => Err(leaseq_core::Error::Corrupt {
                what: "an enqueue of one item returned no result".into(),
            }),
        }
    }
}
