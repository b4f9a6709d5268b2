//! The backend: one mutex over every queue, each operation one critical
//! section with the clock read inside it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use leaseq_core::limits::{self, REQUEST_MEMORY};
use leaseq_core::testing::{StepCounter, TestHooks};
use leaseq_core::{
    async_trait, Backend, Capabilities, ClaimSpec, Claimed, Clock, Enqueued, Error, Extended,
    Groups, ItemId, ItemInfo, ItemState, LeaseFate, LeaseKey, LeaseToken, LeaseTtl, NewItem,
    QueueName, QueueStats, ReapReport, Released, Result, Timestamp,
};

use crate::queue::{Item, Queue};
use crate::Bug;

/// Leases one reap recovers per critical section.
const REAP_BATCH: usize = 1_000;

/// Everything the backend holds.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub(crate) queues: BTreeMap<QueueName, Queue>,
    /// `enqueue_once` requests: when first seen, and their results.
    requests: HashMap<(QueueName, LeaseToken), (Timestamp, Vec<Enqueued>)>,
}

/// A backend in process memory, with an optional seeded [`Bug`].
#[derive(Debug)]
pub struct NaiveBackend {
    store: Mutex<Store>,
    clock: Arc<dyn Clock>,
    bug: Bug,
    hooks: bool,
    pub(crate) steps: StepCounter,
}

impl NaiveBackend {
    /// A backend on `clock`, with `bug` seeded (or [`Bug::None`]).
    pub fn new(clock: Arc<dyn Clock>, bug: Bug) -> Self {
        NaiveBackend {
            store: Mutex::new(Store::default()),
            clock,
            bug,
            hooks: false,
            steps: StepCounter::new(false),
        }
    }

    /// With test hooks ([`Groups::test_hooks`]) and step counts on.
    #[must_use]
    pub fn with_test_hooks(mut self) -> Self {
        self.hooks = true;
        self.steps = StepCounter::new(true);
        self
    }

    pub(crate) fn bug(&self) -> Bug {
        self.bug
    }

    /// The store, locked: one atomic step.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The clock, read under the lock.
    pub(crate) fn clock_now(&self) -> Timestamp {
        let t = self.clock.now();
        if self.bug == Bug::SecondsClock {
            return Timestamp::from_millis(t.as_millis() / 1_000 * 1_000);
        }
        t
    }

    /// Runs `f` on `queue` (created if new) as one step.
    fn step<T>(&self, queue: &QueueName, f: impl FnOnce(&mut Store, Timestamp) -> T) -> T {
        let mut st = self.lock();
        self.steps.count(queue);
        let now = self.clock_now();
        f(&mut st, now)
    }

    /// Runs `f` on the lease's item if its token holds it, else `LeaseLost`.
    fn fenced<T>(
        &self,
        lease: &LeaseKey,
        f: impl FnOnce(&mut Queue, Item, Timestamp) -> T,
    ) -> Result<T> {
        self.step(&lease.queue, |st, now| {
            let q = st.queues.get_mut(&lease.queue);
            match q.and_then(|q| q.fenced(lease.id, lease.token).cloned().map(|i| (q, i))) {
                Some((q, item)) => Ok(f(q, item, now)),
                None => Err(Error::LeaseLost { id: lease.id }),
            }
        })
    }

    /// Writes `items` into `queue` (checked already).
    fn write(
        &self,
        st: &mut Store,
        queue: &QueueName,
        items: Vec<NewItem>,
        now: Timestamp,
    ) -> Vec<Enqueued> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let key = item.dedup_key.as_deref().map(str::to_owned);
            let holder = key.as_ref().and_then(|k| {
                if self.bug == Bug::SharedDedupKeys {
                    // Looked up in every queue, not in this one.
                    return st.queues.values().find_map(|q| q.keys.get(k).copied());
                }
                st.queues.get(queue).and_then(|q| q.keys.get(k).copied())
            });
            if let Some(holder) = holder {
                out.push(Enqueued {
                    id: ItemId::new(holder),
                    deduplicated: true,
                });
                continue;
            }
            let q = st.queues.entry(queue.clone()).or_default();
            q.last_id += 1;
            let id = q.last_id;
            if let Some(k) = &key {
                q.keys.insert(k.clone(), id);
            }
            q.items.insert(
                id,
                Item {
                    payload: item.payload.clone(),
                    priority: item.priority,
                    attempts: 0,
                    max_attempts: item.max_attempts,
                    dedup_key: key,
                    state: ItemState::Ready,
                    due: None,
                    token: None,
                    last_error: None,
                    enqueued_at: now,
                    place: id,
                    died: 0,
                },
            );
            let delay = item.delay;
            if delay.is_zero() {
                q.make_ready(id);
            } else {
                q.make_scheduled(id, due_after(now, delay));
            }
            out.push(Enqueued {
                id: ItemId::new(id),
                deduplicated: false,
            });
        }
        out
    }

    /// Gives the item back to Ready, Scheduled after `delay`, or Dead.
    fn put_back(q: &mut Queue, id: u64, delay: Duration, now: Timestamp, bug: Bug) -> Released {
        if bug == Bug::ReleaseToBack {
            // A fresh place after every id handed out so far.
            q.last_place = q.last_place.max(1 << 48) + 1;
            if let Some(item) = q.items.get_mut(&id) {
                item.place = q.last_place;
            }
        }
        if delay.is_zero() {
            q.make_ready(id);
            Released::Ready
        } else {
            q.make_scheduled(id, due_after(now, delay));
            Released::Scheduled
        }
    }
}

/// When an item delayed by `delay` at `now` falls due: whole milliseconds,
/// a part millisecond rounded up, so it is never due early.
fn due_after(now: Timestamp, delay: Duration) -> Timestamp {
    now.saturating_add(Duration::from_millis(leaseq_core::limits::millis_ceil(
        delay,
    )))
}

#[async_trait]
impl Backend for NaiveBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities::all_features()
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock_now())
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        limits::check_batch(&items, &self.capabilities().bounds)?;
        Ok(self.step(queue, |st, now| self.write(st, queue, items, now)))
    }

    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        limits::check_batch(&items, &self.capabilities().bounds)?;
        self.step(queue, |st, now| {
            st.requests
                .retain(|_, (at, _)| now.saturating_since(*at) < REQUEST_MEMORY);
            let key = (queue.clone(), request);
            if let Some((_, first)) = st.requests.get(&key) {
                if first.len() != items.len() {
                    return Err(Error::invalid(
                        "a different batch under a request id already used",
                    ));
                }
                return Ok(first.clone());
            }
            let out = self.write(st, queue, items, now);
            st.requests.insert(key, (now, out.clone()));
            Ok(out)
        })
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let read_before = if self.bug == Bug::ClockReadOutsideStep {
            let t = self.clock_now();
            // The round trip between reading the clock and the step.
            tokio::time::sleep(Duration::from_millis(2)).await;
            Some(t)
        } else {
            None
        };
        Ok(self.step(queue, |st, now| {
            let now = read_before.unwrap_or(now);
            let mut claimed = Claimed::default();
            if let Some(q) = st.queues.get_mut(queue) {
                q.promote_due(now);
                let expires_at = now.saturating_add(spec.ttl().get());
                claimed.leases = q.claim(
                    queue,
                    spec.max() as usize,
                    expires_at,
                    |i| spec.token(i),
                    &mut claimed.repairs,
                );
            }
            claimed
        }))
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        Ok(self.step(queue, |st, now| {
            let mut claimed = Claimed::default();
            let Some(q) = st.queues.get(queue) else {
                return claimed;
            };
            let mut mine: Vec<_> = q
                .items
                .iter()
                .filter(|(_, i)| i.state == ItemState::Leased)
                .filter(|(_, i)| i.token.is_some_and(|t| spec.owns(t)))
                .filter(|(_, i)| i.due.is_some_and(|at| at > now))
                .collect();
            mine.sort_by_key(|(_, i)| i.token.map(|t| t.as_u128()));
            for (id, i) in mine {
                if let (Some(token), Some(expires_at)) = (i.token, i.due) {
                    claimed.leases.push(leaseq_core::Lease {
                        key: LeaseKey {
                            queue: queue.clone(),
                            id: ItemId::new(*id),
                            token,
                        },
                        payload: i.payload.clone(),
                        attempts: i.attempts,
                        max_attempts: i.max_attempts,
                        priority: i.priority,
                        expires_at,
                        enqueued_at: i.enqueued_at,
                    });
                }
            }
            claimed
        }))
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        Ok(self.step(&lease.queue, |st, now| {
            let q = st.queues.get(&lease.queue);
            if q.and_then(|q| q.fenced(lease.id, lease.token)).is_some() {
                return LeaseFate::Held;
            }
            if now < held_until {
                // The state every read shows: a due Scheduled item is Ready.
                let state = st.queues.get_mut(&lease.queue).and_then(|q| {
                    q.promote_due(now);
                    q.items.get(&lease.id.get()).map(|i| i.state)
                });
                return LeaseFate::Finished { state };
            }
            LeaseFate::Lost
        }))
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        self.fenced(lease, |q, _, _| q.delete(lease.id.get()))
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        limits::check_ack_batch(leases.len())?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let mut st = self.lock();
        let named: HashSet<&QueueName> = leases.iter().map(|l| &l.queue).collect();
        for q in named {
            self.steps.count(q);
        }
        Ok(leases
            .iter()
            .map(|lease| {
                let q = st.queues.get_mut(&lease.queue);
                match q.filter(|q| q.fenced(lease.id, lease.token).is_some()) {
                    Some(q) => {
                        q.delete(lease.id.get());
                        Ok(())
                    }
                    None => Err(Error::LeaseLost { id: lease.id }),
                }
            })
            .collect())
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        self.fenced(lease, |q, _, now| {
            let id = lease.id.get();
            q.unindex(id);
            let at = now.saturating_add(ttl.get());
            if let Some(i) = q.items.get_mut(&id) {
                i.due = Some(at);
            }
            q.leased.insert((at, id), ());
            // No Control group: nobody can ask to cancel.
            Extended::until(at)
        })
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        limits::check_delay(delay)?;
        let bug = self.bug;
        self.fenced(lease, |q, item, now| {
            let id = lease.id.get();
            q.unindex(id);
            if item.attempts >= item.max_attempts {
                q.make_dead(id, "attempts exhausted");
                return Released::Dead;
            }
            Self::put_back(q, id, delay, now, bug)
        })
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        self.fenced(lease, |q, _, _| {
            let id = lease.id.get();
            q.unindex(id);
            if let Some(i) = q.items.get_mut(&id) {
                i.attempts = i.attempts.saturating_sub(1);
            }
            q.make_ready(id);
        })
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        let reason = limits::clamp_reason(reason);
        self.fenced(lease, |q, _, _| {
            let id = lease.id.get();
            q.unindex(id);
            q.make_dead(id, reason);
        })
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        let mut report = ReapReport::default();
        // Each batch starts after the last entry the one before recovered.
        let mut after = None;
        loop {
            let (requeued, dead, repairs, last) = self.step(queue, |st, now| {
                let Some(q) = st.queues.get_mut(queue) else {
                    return (0, 0, Vec::new(), None);
                };
                q.promote_due(now);
                // Entries a claim would meet first: stray ones are removed.
                let mut repairs = Vec::new();
                while let Some((&key, &id)) = q.ready.first_key_value() {
                    if q.items.contains_key(&id) {
                        break;
                    }
                    q.ready.remove(&key);
                    repairs.push(leaseq_core::Repair {
                        index: ItemState::Ready,
                        id: ItemId::new(id),
                        problem: "no item".into(),
                    });
                }
                let (r, d, last) = q.reap(now, after, REAP_BATCH, self.bug);
                (r, d, repairs, last)
            });
            report.requeued += requeued;
            report.dead += dead;
            report.repairs.extend(repairs);
            after = last;
            if requeued + dead < REAP_BATCH as u64 {
                return Ok(report);
            }
        }
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        Ok(self.step(queue, |st, now| {
            let mut s = QueueStats::default();
            if let Some(q) = st.queues.get_mut(queue) {
                q.promote_due(now);
                for i in q.items.values() {
                    match i.state {
                        ItemState::Ready => s.ready += 1,
                        ItemState::Scheduled => s.scheduled += 1,
                        ItemState::Leased => s.leased += 1,
                        ItemState::Dead => s.dead += 1,
                    }
                }
            }
            s
        }))
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let st = self.lock();
        Ok(st
            .queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(n, _)| n.clone())
            .collect())
    }

    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        let limit = if self.bug == Bug::UncappedPeek {
            limit
        } else {
            limit.min(limits::MAX_PEEK)
        };
        Ok(self.step(queue, |st, now| {
            let Some(q) = st.queues.get_mut(queue) else {
                return Vec::new();
            };
            q.promote_due(now);
            q.index(state)
                .into_iter()
                .filter_map(|id| q.info(id))
                .take(limit)
                .collect()
        }))
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.step(queue, |st, now| {
            let q = st.queues.get_mut(queue);
            q.and_then(|q| {
                q.promote_due(now);
                q.info(id.get())
            })
            .ok_or(Error::NotFound { id })
        })
    }

    /// No notification channel: a poll, as the contract allows.
    async fn wait_for_work(&self, _queue: &QueueName, timeout: Duration) {
        tokio::time::sleep(timeout).await;
    }

    /// The core alone; test hooks only when built with them.
    fn groups(&self) -> Groups<'_> {
        Groups::none().test_hooks(self.hooks.then_some(self as &dyn TestHooks))
    }
}
