//! One queue: its items, one ordered map per state, and the transitions,
//! each called under the backend's lock with the clock read there.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use leaseq_core::{
    Bytes, ItemId, ItemInfo, ItemState, Lease, LeaseKey, LeaseToken, QueueName, Repair, Timestamp,
};

use crate::Bug;

/// One item's record.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) payload: Bytes,
    pub(crate) priority: i32,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    pub(crate) dedup_key: Option<String>,
    pub(crate) state: ItemState,
    /// Scheduled: due time. Leased: expiry.
    pub(crate) due: Option<Timestamp>,
    /// Leased: the lease's token.
    pub(crate) token: Option<LeaseToken>,
    pub(crate) last_error: Option<String>,
    pub(crate) enqueued_at: Timestamp,
    /// Its key in the Ready map: priority, then place in claim order.
    pub(crate) place: u64,
    /// Dead: order of death.
    pub(crate) died: u64,
}

/// A queue's items and its state indexes.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// The last id handed out (ids are never reused, also after a purge).
    pub(crate) last_id: u64,
    /// The last place at the back of claim order handed out (only under
    /// [`Bug::ReleaseToBack`]; an item's place is otherwise its id).
    pub(crate) last_place: u64,
    pub(crate) last_death: u64,
    pub(crate) items: HashMap<u64, Item>,
    /// Ready: highest priority first, then place (enqueue order).
    pub(crate) ready: BTreeMap<(Reverse<i32>, u64), u64>,
    /// Scheduled: by due time.
    pub(crate) scheduled: BTreeMap<(Timestamp, u64), ()>,
    /// Leased: by expiry.
    pub(crate) leased: BTreeMap<(Timestamp, u64), ()>,
    /// Dead: by order of death.
    pub(crate) dead: BTreeMap<u64, u64>,
    /// Dedup key to the unacked item holding it.
    pub(crate) keys: HashMap<String, u64>,
}

impl Queue {
    /// Whether the queue holds no item.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Puts item `id` (already in `items`) into Ready.
    pub(crate) fn make_ready(&mut self, id: u64) {
        if let Some(item) = self.items.get_mut(&id) {
            item.state = ItemState::Ready;
            item.due = None;
            item.token = None;
            self.ready.insert((Reverse(item.priority), item.place), id);
        }
    }

    /// Puts item `id` into Scheduled, due at `at`.
    pub(crate) fn make_scheduled(&mut self, id: u64, at: Timestamp) {
        if let Some(item) = self.items.get_mut(&id) {
            item.state = ItemState::Scheduled;
            item.due = Some(at);
            item.token = None;
            self.scheduled.insert((at, id), ());
        }
    }

    /// Puts item `id` into Dead with `reason`.
    pub(crate) fn make_dead(&mut self, id: u64, reason: &str) {
        self.last_death += 1;
        if let Some(item) = self.items.get_mut(&id) {
            item.state = ItemState::Dead;
            item.due = None;
            item.token = None;
            item.last_error = Some(reason.to_owned());
            item.died = self.last_death;
            self.dead.insert(self.last_death, id);
        }
    }

    /// Takes item `id` out of whichever index its state names.
    pub(crate) fn unindex(&mut self, id: u64) {
        let Some(item) = self.items.get(&id) else {
            return;
        };
        match item.state {
            ItemState::Ready => {
                self.ready.remove(&(Reverse(item.priority), item.place));
            }
            ItemState::Scheduled => {
                if let Some(at) = item.due {
                    self.scheduled.remove(&(at, id));
                }
            }
            ItemState::Leased => {
                if let Some(at) = item.due {
                    self.leased.remove(&(at, id));
                }
            }
            ItemState::Dead => {
                self.dead.remove(&item.died);
            }
        }
    }

    /// Deletes item `id` and frees its dedup key.
    pub(crate) fn delete(&mut self, id: u64) {
        self.unindex(id);
        if let Some(item) = self.items.remove(&id) {
            if let Some(k) = item.dedup_key {
                if self.keys.get(&k) == Some(&id) {
                    self.keys.remove(&k);
                }
            }
        }
    }

    /// The item `id` if `token` holds its lease.
    pub(crate) fn fenced(&self, id: ItemId, token: LeaseToken) -> Option<&Item> {
        self.items
            .get(&id.get())
            .filter(|i| i.state == ItemState::Leased && i.token == Some(token))
    }

    /// Moves every Scheduled item due at `now` to Ready.
    pub(crate) fn promote_due(&mut self, now: Timestamp) {
        while let Some((&(at, id), _)) = self.scheduled.first_key_value() {
            if at > now {
                break;
            }
            self.scheduled.remove(&(at, id));
            self.make_ready(id);
        }
    }

    /// Leases up to `max` Ready items until `expires_at`, the `i`-th with
    /// `token(i)`; entries without an item are removed and reported.
    pub(crate) fn claim(
        &mut self,
        queue: &QueueName,
        max: usize,
        expires_at: Timestamp,
        token: impl Fn(u32) -> LeaseToken,
        repairs: &mut Vec<Repair>,
    ) -> Vec<Lease> {
        let mut leases = Vec::new();
        while leases.len() < max {
            let Some((_, id)) = self.ready.pop_first() else {
                break;
            };
            let Some(item) = self.items.get_mut(&id) else {
                repairs.push(Repair {
                    index: ItemState::Ready,
                    id: ItemId::new(id),
                    problem: "no item".into(),
                });
                continue;
            };
            let t = token(leases.len() as u32);
            item.attempts = item.attempts.saturating_add(1);
            item.state = ItemState::Leased;
            item.due = Some(expires_at);
            item.token = Some(t);
            self.leased.insert((expires_at, id), ());
            leases.push(Lease {
                key: LeaseKey {
                    queue: queue.clone(),
                    id: ItemId::new(id),
                    token: t,
                },
                payload: item.payload.clone(),
                attempts: item.attempts,
                max_attempts: item.max_attempts,
                priority: item.priority,
                expires_at,
                enqueued_at: item.enqueued_at,
            });
        }
        leases
    }

    /// Recovers up to `max` leases expired at `now` whose entries come
    /// after `after`: Ready, or Dead on their last attempt. Returns
    /// (requeued, dead, the last entry recovered).
    pub(crate) fn reap(
        &mut self,
        now: Timestamp,
        after: Option<(Timestamp, u64)>,
        max: usize,
        bug: Bug,
    ) -> (u64, u64, Option<(Timestamp, u64)>) {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let expired: Vec<(Timestamp, u64)> = if bug == Bug::ScanningReap {
            // Walks every lease, live ones included, to find the expired.
            let mut all: Vec<(Timestamp, u64)> = self
                .items
                .iter()
                .filter(|(_, i)| i.state == ItemState::Leased)
                .filter_map(|(id, i)| i.due.map(|at| (at, *id)))
                .filter(|(at, _)| *at <= now)
                .filter(|k| after.is_none_or(|a| *k > a))
                .collect();
            all.sort_unstable();
            all.truncate(max);
            all
        } else {
            self.leased
                .range((from, Bound::Included((now, u64::MAX))))
                .take(max)
                .map(|(k, _)| *k)
                .collect()
        };
        let last = expired.last().copied();
        let (mut requeued, mut dead) = (0, 0);
        for (at, id) in expired {
            if bug != Bug::ReapLeavesLeasedEntry {
                self.leased.remove(&(at, id));
            }
            let Some(item) = self.items.get(&id) else {
                continue;
            };
            if item.attempts >= item.max_attempts {
                self.make_dead(id, "lease expired on its last attempt");
                dead += 1;
            } else {
                self.make_ready(id);
                requeued += 1;
            }
            if bug == Bug::StrayEntryAfterReap {
                self.ready
                    .insert((Reverse(i32::MAX), u64::MAX - id), u64::MAX - id);
            }
        }
        (requeued, dead, last)
    }

    /// What inspection shows of item `id`.
    pub(crate) fn info(&self, id: u64) -> Option<ItemInfo> {
        self.items.get(&id).map(|i| ItemInfo {
            id: ItemId::new(id),
            state: i.state,
            payload: i.payload.clone(),
            priority: i.priority,
            attempts: i.attempts,
            max_attempts: i.max_attempts,
            dedup_key: i.dedup_key.clone(),
            due_at: i.due,
            last_error: i.last_error.clone(),
            enqueued_at: i.enqueued_at,
            progress: None,
            cancel_requested: false,
        })
    }

    /// The ids of `state`'s index, in its order.
    pub(crate) fn index(&self, state: ItemState) -> Vec<u64> {
        match state {
            ItemState::Ready => self.ready.values().copied().collect(),
            ItemState::Scheduled => self.scheduled.keys().map(|(_, id)| *id).collect(),
            ItemState::Leased => self.leased.keys().map(|(_, id)| *id).collect(),
            ItemState::Dead => self.dead.values().copied().collect(),
        }
    }
}
