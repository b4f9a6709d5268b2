//! The Control group and the live-worker registry: cancel, pause, snooze,
//! run now and progress, each one critical section on the queue's state.

use std::time::Duration;

use leaseq_core::events::EventKind;
use leaseq_core::limits::{check_delay, check_progress};
use leaseq_core::signal::Signal;
use leaseq_core::{
    async_trait, Bytes, Cancelled, Control, Error, ItemId, ItemState, LeaseKey, QueueName,
    Released, Result, Timestamp, WorkerEntry, WorkerRegistry,
};

use crate::backend::MemoryBackend;
use crate::ops::due_after;
use crate::state::{Fence, QueueState, Slot};

impl QueueState {
    /// Cancels item `id`: ends it now unless it is leased, when it is
    /// marked. `None` when there is no such item.
    fn cancel(&mut self, id: u64, now: u64) -> Option<Cancelled> {
        let item = self.items.get_mut(&id)?;
        if let Slot::Leased { .. } = item.slot {
            item.cancel_requested = true;
            return Some(Cancelled::Requested);
        }
        let snapshot = item.clone();
        let was = self.remove(id)?;
        self.events.emit(id, || EventKind::Cancelled);
        self.kept.record(
            id,
            snapshot.ended(),
            leaseq_core::Ending::Cancelled,
            now,
            None,
        );
        Some(Cancelled::Now { was })
    }

    /// Moves the not-yet-due Scheduled item `id` to Ready.
    fn run_now(&mut self, id: u64) -> Option<bool> {
        let item = self.items.get_mut(&id)?;
        let Slot::Scheduled { due } = item.slot else {
            return Some(false);
        };
        self.scheduled.remove(&(due, item.seq, id));
        item.slot = Slot::Ready;
        self.ready.insert(item.ready_key(id));
        Some(true)
    }

    /// Moves up to `limit` Scheduled items, earliest due first, to Ready.
    fn run_all_now(&mut self, limit: usize) -> u64 {
        let mut moved = 0;
        while moved < limit as u64 {
            let Some(&(_, _, id)) = self.scheduled.first() else {
                break;
            };
            if self.run_now(id) != Some(true) {
                // An entry without its item: drop it and go on.
                self.scheduled.pop_first();
                continue;
            }
            moved += 1;
        }
        moved
    }
}

#[async_trait]
impl Control for MemoryBackend {
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let now = self.now_ms();
        let done = self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            st.cancel(id.get(), now)
        });
        self.forget_if_idle(queue);
        let done = done.flatten().ok_or(Error::NotFound { id })?;
        if done == Cancelled::Requested {
            self.shared.cancels.fire(queue.as_str());
        }
        Ok(done)
    }

    async fn pause(&self, queue: &QueueName) -> Result<()> {
        self.ensure(queue, |q| q.lock().paused = true);
        Ok(())
    }

    async fn resume(&self, queue: &QueueName) -> Result<()> {
        self.existing(queue, |q| {
            q.lock().paused = false;
            q.wake();
        });
        self.forget_if_idle(queue);
        Ok(())
    }

    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        Ok(self.existing(queue, |q| q.lock().paused).unwrap_or(false))
    }

    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        let id = lease.id.get();
        let lost = || Error::LeaseLost { id: lease.id };
        self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            let now = self.now_ms();
            let expires = match st.fence(id, lease.token) {
                Fence::Held(item, expires) if item.cancel_requested => {
                    st.cancel_leased(id, expires, now);
                    st.finished.record(id, lease.token, now);
                    return Ok(Released::Cancelled);
                }
                Fence::Held(item, expires) => {
                    item.attempts = item.attempts.saturating_sub(1);
                    expires
                }
                Fence::Lost => return Err(lost()),
            };
            st.finished.record(id, lease.token, now);
            let state = st.requeue_leased(id, expires, due_after(now, delay), now);
            st.events.emit(id, || EventKind::Released);
            drop(st);
            if state == ItemState::Ready {
                q.wake();
                Ok(Released::Ready)
            } else {
                Ok(Released::Scheduled)
            }
        })
        .unwrap_or_else(|| Err(lost()))
    }

    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let now = self.now_ms();
        let moved = self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            let moved = st.run_now(id.get());
            if moved == Some(true) {
                q.wake();
            }
            moved
        });
        moved.flatten().ok_or(Error::NotFound { id })
    }

    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let now = self.now_ms();
        let moved = self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            let moved = st.run_all_now(limit);
            if moved > 0 {
                q.wake();
            }
            moved
        });
        Ok(moved.unwrap_or(0))
    }

    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        check_progress(&value)?;
        let id = lease.id.get();
        self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            match st.fence(id, lease.token) {
                Fence::Held(item, _) => {
                    item.progress = Some((lease.token, value.clone()));
                    st.events.emit(id, || EventKind::Progress(value));
                    Ok(())
                }
                Fence::Lost => Err(Error::LeaseLost { id: lease.id }),
            }
        })
        .unwrap_or(Err(Error::LeaseLost { id: lease.id }))
    }

    /// In-process: a handle and its clones share one hub.
    async fn cancel_signal(&self, queue: &QueueName) -> Result<Signal> {
        Ok(self.shared.cancels.subscribe(queue.as_str()))
    }
}

#[async_trait]
impl WorkerRegistry for MemoryBackend {
    async fn register(&self, entry: &WorkerEntry, ttl: Duration) -> Result<Timestamp> {
        WorkerEntry::check_ttl(ttl)?;
        let text = entry.encode()?;
        let now = self.now_ms();
        let until = now.saturating_add(leaseq_core::limits::millis_ceil(ttl));
        let mut workers = self.worker_entries();
        workers.retain(|_, (_, expires)| *expires > now);
        workers.insert(entry.id.clone(), (text, until));
        Ok(Timestamp::from_millis(until))
    }

    async fn deregister(&self, id: &str) -> Result<bool> {
        Ok(self.worker_entries().remove(id).is_some())
    }

    async fn workers(&self) -> Result<Vec<WorkerEntry>> {
        let now = self.now_ms();
        let mut workers = self.worker_entries();
        workers.retain(|_, (_, expires)| *expires > now);
        workers
            .values()
            .map(|(text, expires)| WorkerEntry::decode(text, Timestamp::from_millis(*expires)))
            .collect()
    }
}
