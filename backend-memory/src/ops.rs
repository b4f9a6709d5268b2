//! The [`Backend`] contract: validation first, then one critical section per
//! call on the queue's state.

use std::sync::Arc;
use std::time::Duration;

use leaseq_core::events::EventKind;
use leaseq_core::limits::{
    check_ack_batch, check_batch, check_delay, clamp_reason, millis_ceil, REQUEST_MEMORY,
};
use leaseq_core::queue_limits::Admission;
use leaseq_core::testing::TestHooks;
use leaseq_core::{
    async_trait, Admin, Backend, Capabilities, ClaimSpec, Claimed, Enqueued, Error, Extended,
    Groups, ItemId, ItemInfo, ItemState, Lease, LeaseFate, LeaseKey, LeaseToken, LeaseTtl,
    LimitScope, NewItem, QueueLimits, QueueName, QueueStats, ReapReport, Released, Result,
    ScheduleStore, Throttles, Timestamp,
};

use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};

use crate::backend::MemoryBackend;
use crate::state::{Fence, Fresh, QueueState, Slot};

/// Expired leases recovered per lock hold; a reap of many expired leases
/// lets other callers in between batches.
const REAP_BATCH: usize = 1_024;

/// `now + delay` in ms, rounding a part-millisecond delay up so a delay never
/// makes an item due earlier than asked.
pub(crate) fn due_after(now: u64, delay: Duration) -> u64 {
    now.saturating_add(millis_ceil(delay))
}

fn lost(lease: &LeaseKey) -> Error {
    Error::LeaseLost { id: lease.id }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities::all_features()
            .bounds(self.limits)
            .unique_for(true)
            .lease_traces(leaseq_core::LeaseTraces::Finishes)
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.limits)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now_ms();
        Ok(self.ensure(queue, |q| {
            let mut st = q.lock();
            let (out, woke) = insert_batch(&mut st, &items, now, || self.next_id());
            drop(st);
            if woke {
                q.wake();
            }
            out
        }))
    }

    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.limits)?;
        let now = self.now_ms();
        self.ensure(queue, |q| {
            let mut st = q.lock();
            let remember = now.saturating_add(millis_ceil(REQUEST_MEMORY));
            if let Some(done) = st.requests.recall(request, now) {
                if done.len() != items.len() {
                    return Err(Error::invalid(format!(
                        "request {request} was first sent with {} items, now with {}",
                        done.len(),
                        items.len()
                    )));
                }
                return Ok(done);
            }
            let (out, woke) = insert_batch(&mut st, &items, now, || self.next_id());
            st.requests.remember(request, out.clone(), remember);
            drop(st);
            if woke {
                q.wake();
            }
            Ok(out)
        })
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let max = spec.max() as usize;
        let claimed = self.existing(queue, |q| {
            let mut st = q.lock();
            // Read the clock under the lock, so a lease is never stamped with
            // a time earlier than a transition already made on this queue.
            let now = self.now_ms();
            let expires = now.saturating_add(spec.ttl().as_millis());
            let mut repairs = Vec::new();
            st.promote_due(now, &mut repairs);
            if st.paused {
                return Claimed {
                    repairs,
                    paused: true,
                    ..Claimed::default()
                };
            }
            // The queue's limits, in the same critical section as the claim.
            let admission = (!st.limits.is_none()).then(|| {
                let leased = st.leased.len() as u64;
                Admission::new(&st.limits, now, leased, st.window, spec.max())
            });
            let max = admission.map_or(max, |a| a.allow() as usize);
            let mut leases = Vec::with_capacity(max.min(st.ready.len()));
            while leases.len() < max && !st.ready.is_empty() {
                let token = spec.token(u32::try_from(leases.len()).unwrap_or(u32::MAX));
                let Some((id, item)) = st.lease_next(expires, token, &mut repairs) else {
                    break;
                };
                leases.push(item.lease(queue, id, token, expires));
            }
            let got = u32::try_from(leases.len()).unwrap_or(u32::MAX);
            let mut retry_after = None;
            if let Some(a) = admission {
                st.window = a.window_after(got);
                retry_after = a.retry_after(got);
            }
            Claimed {
                leases,
                repairs,
                retry_after,
                paused: false,
            }
        });
        Ok(claimed.unwrap_or_default())
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let leases = self.existing(queue, |q| {
            let mut st = q.lock();
            let now = self.now_ms();
            let renewed = now.saturating_add(spec.ttl().as_millis());
            // Every lease of the family, live or expired but not yet taken
            // by a reap or a claim (its token still holds the item).
            let mine: Vec<(u64, u64)> = st
                .leased
                .iter()
                .filter(|&&(_, id)| {
                    st.items.get(&id).is_some_and(
                        |i| matches!(i.slot, Slot::Leased { token, .. } if spec.owns(token)),
                    )
                })
                .copied()
                .collect();
            let mut found: Vec<(LeaseToken, Lease)> = Vec::with_capacity(mine.len());
            for (mut expires, id) in mine {
                if expires <= now {
                    // Renewed in this step: no reaper can take it now.
                    st.set_expiry(id, expires, renewed);
                    expires = renewed;
                }
                let Some(item) = st.items.get(&id) else {
                    continue;
                };
                let Slot::Leased { token, .. } = item.slot else {
                    continue;
                };
                found.push((token, item.lease(queue, id, token, expires)));
            }
            // Slot order is claim order.
            found.sort_by_key(|(token, _)| token.as_u128());
            found.into_iter().map(|(_, l)| l).collect()
        });
        Ok(Claimed {
            leases: leases.unwrap_or_default(),
            ..Claimed::default()
        })
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        let fate = self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            let now = self.now_ms();
            let id = lease.id.get();
            let traced = st.finished.holds(id, lease.token, now);
            let item = st.items.get(&id);
            match item.map(|i| i.slot) {
                Some(Slot::Leased { token, .. }) if token == lease.token => LeaseFate::Held,
                // A due Scheduled item is Ready to every read, moved or not.
                slot if traced || now < held_until.as_millis() => LeaseFate::Finished {
                    state: slot.map(|s| match s {
                        Slot::Scheduled { due } if due <= now => ItemState::Ready,
                        s => s.state(),
                    }),
                },
                _ => LeaseFate::Lost,
            }
        });
        Ok(fate.unwrap_or(if self.now_ms() < held_until.as_millis() {
            LeaseFate::Finished { state: None }
        } else {
            LeaseFate::Lost
        }))
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        let id = lease.id.get();
        let (done, emptied) = self
            .existing(&lease.queue, |q| {
                let mut st = q.lock();
                match st.fence(id, lease.token) {
                    Fence::Held(item, expires) => {
                        let now = self.now_ms();
                        if item.cancel_requested {
                            st.cancel_leased(id, expires, now);
                        } else {
                            st.remove_leased(id, expires, now);
                        }
                        st.finished.record(id, lease.token, now);
                        (Ok(()), st.items.is_empty())
                    }
                    Fence::Lost => (Err(lost(lease)), false),
                }
            })
            .unwrap_or_else(|| (Err(lost(lease)), false));
        if emptied {
            self.forget_if_idle(&lease.queue);
        }
        done
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases.len())?;
        let mut out: Vec<Result<()>> = leases.iter().map(|l| Err(lost(l))).collect();
        // One lock hold per queue named in the batch, in order of first use.
        let mut groups: Vec<(&QueueName, Vec<usize>)> = Vec::new();
        for (i, lease) in leases.iter().enumerate() {
            match groups.iter_mut().find(|(q, _)| *q == &lease.queue) {
                Some((_, at)) => at.push(i),
                None => groups.push((&lease.queue, vec![i])),
            }
        }
        for (queue, at) in groups {
            let emptied = self.existing(queue, |q| {
                let mut st = q.lock();
                for i in at {
                    let lease = &leases[i];
                    let id = lease.id.get();
                    if let Fence::Held(item, expires) = st.fence(id, lease.token) {
                        let now = self.now_ms();
                        if item.cancel_requested {
                            st.cancel_leased(id, expires, now);
                        } else {
                            st.remove_leased(id, expires, now);
                        }
                        st.finished.record(id, lease.token, now);
                        out[i] = Ok(());
                    }
                }
                st.items.is_empty()
            });
            if emptied == Some(true) {
                self.forget_if_idle(queue);
            }
        }
        Ok(out)
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        let id = lease.id.get();
        self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            let new = self.now_ms().saturating_add(ttl.as_millis());
            match st.fence(id, lease.token) {
                Fence::Held(item, old) => {
                    let cancel_requested = item.cancel_requested;
                    st.set_expiry(id, old, new);
                    Ok(Extended {
                        expires_at: Timestamp::from_millis(new),
                        cancel_requested,
                    })
                }
                Fence::Lost => Err(lost(lease)),
            }
        })
        .unwrap_or_else(|| Err(lost(lease)))
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        let id = lease.id.get();
        self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            let now = self.now_ms();
            let expires = match st.fence(id, lease.token) {
                Fence::Held(item, expires) if item.cancel_requested => {
                    st.cancel_leased(id, expires, now);
                    st.finished.record(id, lease.token, now);
                    return Ok(());
                }
                Fence::Held(item, expires) => {
                    item.attempts = item.attempts.saturating_sub(1);
                    expires
                }
                Fence::Lost => return Err(lost(lease)),
            };
            st.requeue_leased(id, expires, now, now);
            st.events.emit(id, || EventKind::Released);
            st.finished.record(id, lease.token, now);
            drop(st);
            q.wake();
            Ok(())
        })
        .unwrap_or_else(|| Err(lost(lease)))
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        let id = lease.id.get();
        self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            let now = self.now_ms();
            let (expires, exhausted, cancelled) = match st.fence(id, lease.token) {
                Fence::Held(item, expires) => (
                    expires,
                    item.attempts >= item.max_attempts,
                    item.cancel_requested,
                ),
                Fence::Lost => return Err(lost(lease)),
            };
            st.finished.record(id, lease.token, now);
            if cancelled {
                st.cancel_leased(id, expires, now);
                return Ok(Released::Cancelled);
            }
            if exhausted {
                st.kill_leased(id, expires, "attempts exhausted", now);
                return Ok(Released::Dead);
            }
            let due = if delay.is_zero() {
                now
            } else {
                due_after(now, delay)
            };
            let state = st.requeue_leased(id, expires, due, now);
            st.events.emit(id, || EventKind::Released);
            drop(st);
            if state == ItemState::Ready {
                q.wake();
                Ok(Released::Ready)
            } else {
                Ok(Released::Scheduled)
            }
        })
        .unwrap_or_else(|| Err(lost(lease)))
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        let reason = clamp_reason(reason);
        let id = lease.id.get();
        self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            match st.fence(id, lease.token) {
                Fence::Held(item, expires) => {
                    if item.cancel_requested {
                        st.cancel_leased(id, expires, self.now_ms());
                    } else {
                        st.kill_leased(id, expires, reason, self.now_ms());
                    }
                    st.finished.record(id, lease.token, self.now_ms());
                    Ok(())
                }
                Fence::Lost => Err(lost(lease)),
            }
        })
        .unwrap_or_else(|| Err(lost(lease)))
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        let mut report = ReapReport::default();
        loop {
            let more = self.existing(queue, |q| {
                let mut st = q.lock();
                let now = self.now_ms();
                let promoted = st.promote_due(now, &mut report.repairs);
                let requeued_before = report.requeued;
                let more = st.reap_expired(now, REAP_BATCH, &mut report);
                drop(st);
                if report.requeued > requeued_before || promoted > 0 {
                    q.wake();
                }
                more
            });
            if more != Some(true) {
                return Ok(report);
            }
        }
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let now = self.now_ms();
        let stats = self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            QueueStats {
                ready: st.ready.len() as u64,
                scheduled: st.scheduled.len() as u64,
                leased: st.leased.len() as u64,
                dead: st.dead.len() as u64,
                paused: st.paused,
                completed: Some(st.completed),
            }
        });
        Ok(stats.unwrap_or_else(|| QueueStats {
            completed: Some(self.forgotten_completions(queue)),
            ..QueueStats::default()
        }))
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        Ok(self.listed())
    }

    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        let now = self.now_ms();
        let infos = self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            let st = &*st;
            let ids: Box<dyn Iterator<Item = u64> + '_> = match state {
                ItemState::Ready => Box::new(st.ready.iter().map(|e| e.2)),
                ItemState::Scheduled => Box::new(st.scheduled.iter().map(|e| e.2)),
                ItemState::Leased => Box::new(st.leased.iter().map(|e| e.1)),
                ItemState::Dead => Box::new(st.dead.iter().map(|e| e.1)),
            };
            ids.filter_map(|id| info(st, id))
                .take(limit.min(leaseq_core::limits::MAX_PEEK))
                .collect::<Vec<_>>()
        });
        Ok(infos.unwrap_or_default())
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        let now = self.now_ms();
        self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            info(&st, id.get())
        })
        .flatten()
        .ok_or(Error::NotFound { id })
    }

    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        self.wait_on(queue, timeout).await;
        // The wait may have made the queue; drop it again if it is idle.
        self.forget_if_idle(queue);
    }

    fn groups(&self) -> Groups<'_> {
        Groups::none()
            .admin(self)
            .throttles(self)
            .schedules(self)
            .control(self)
            .registry(self)
            .history(self)
            .events(self)
            .test_hooks(self.test_hooks.then_some(self as &dyn TestHooks))
    }
}

#[async_trait]
impl Admin for MemoryBackend {
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let moved = self.existing(queue, |q| {
            let moved = q.lock().redrive(limit, &mut Vec::new());
            if moved > 0 {
                q.wake();
            }
            moved
        });
        Ok(moved.unwrap_or(0))
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let moved = self.existing(queue, |q| {
            let moved = q.lock().redrive_one(id.get());
            if moved == Some(true) {
                q.wake();
            }
            moved
        });
        moved.flatten().ok_or(Error::NotFound { id })
    }

    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let now = self.now_ms();
        let removed = self.existing(queue, |q| {
            let mut st = q.lock();
            st.promote_due(now, &mut Vec::new());
            st.remove(id.get())
        });
        self.forget_if_idle(queue);
        removed.flatten().ok_or(Error::NotFound { id })
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let n = self.existing(queue, |q| q.lock().purge()).unwrap_or(0);
        self.forget_if_idle(queue);
        Ok(n)
    }

    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let n = self.existing(queue, |q| q.lock().delete()).unwrap_or(0);
        self.forget_completions(queue);
        self.forget_if_idle(queue);
        Ok(n)
    }
}

#[async_trait]
impl Throttles for MemoryBackend {
    fn scope(&self) -> LimitScope {
        LimitScope::Global
    }

    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        limits.check()?;
        self.ensure(queue, |q| {
            let mut st = q.lock();
            st.limits = limits;
            if limits.rate.is_none() {
                st.window = None;
            }
        });
        if limits.is_none() {
            self.forget_if_idle(queue);
        }
        Ok(())
    }

    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        Ok(self
            .existing(queue, |q| q.lock().limits)
            .unwrap_or_default())
    }
}

#[async_trait]
impl ScheduleStore for MemoryBackend {
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        self.store_schedule(schedule)
    }

    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        Ok(self.drop_schedule(name))
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        Ok(self.list_schedules())
    }

    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        self.fire(tick, item)
    }
}

impl MemoryBackend {
    /// Waits for a wake-up of `queue` (or for its earliest due item).
    async fn wait_on(&self, queue: &QueueName, timeout: Duration) {
        let q = self.handle(queue);
        let _waiter = q.waiter();
        let notified = q.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let wait = {
            let now = self.now_ms();
            let st = q.lock();
            if !st.ready.is_empty() {
                return;
            }
            match st.earliest_due() {
                Some(due) if due <= now => return,
                Some(due) => timeout.min(Duration::from_millis(due - now)),
                None => timeout,
            }
        };
        let _ = tokio::time::timeout(wait, notified).await;
    }
}

/// What inspection shows of one item, if it exists.
pub(crate) fn info(st: &QueueState, id: u64) -> Option<ItemInfo> {
    use crate::state::Slot;
    let item = st.items.get(&id)?;
    let due_at = match item.slot {
        Slot::Scheduled { due } => Some(Timestamp::from_millis(due)),
        Slot::Leased { expires, .. } => Some(Timestamp::from_millis(expires)),
        Slot::Ready | Slot::Dead { .. } => None,
    };
    Some(ItemInfo {
        id: ItemId::new(id),
        state: item.slot.state(),
        payload: item.payload.clone(),
        priority: item.priority,
        attempts: item.attempts,
        max_attempts: item.max_attempts,
        dedup_key: item.dedup_key.as_deref().map(str::to_owned),
        due_at,
        last_error: item.last_error.as_deref().map(str::to_owned),
        enqueued_at: Timestamp::from_millis(item.enqueued_at),
        progress: match (item.slot, &item.progress) {
            (Slot::Leased { token, .. }, Some((wrote, value))) if *wrote == token => {
                Some(value.clone())
            }
            _ => None,
        },
        cancel_requested: item.cancel_requested && matches!(item.slot, Slot::Leased { .. }),
    })
}

/// Inserts `items` into `st` at `now`: their results, and whether any is
/// Ready at once (so waiters should wake).
pub(crate) fn insert_batch(
    st: &mut QueueState,
    items: &[NewItem],
    now: u64,
    next_id: impl Fn() -> u64,
) -> (Vec<Enqueued>, bool) {
    let mut out = Vec::with_capacity(items.len());
    let mut woke = false;
    for item in items {
        let dedup_key = match item.dedup_key.as_deref() {
            Some(key) => {
                if let Some(id) = st.dedup_holder(key, now) {
                    out.push(Enqueued {
                        id: ItemId::new(id),
                        deduplicated: true,
                    });
                    continue;
                }
                Some(Arc::<str>::from(key))
            }
            None => None,
        };
        let delay = item.delay;
        let due = (!delay.is_zero()).then(|| due_after(now, delay));
        woke |= due.is_none();
        let id = st.insert(
            Fresh {
                payload: item.payload.clone(),
                priority: item.priority,
                max_attempts: item.max_attempts,
                dedup_key,
                unique_for: item.unique_for.map(millis_ceil),
                due,
            },
            now,
            next_id(),
        );
        out.push(Enqueued {
            id: ItemId::new(id),
            deduplicated: false,
        });
    }
    (out, woke)
}
