//! One queue's items and its ordered state indexes, and every transition
//! between states. Everything here is synchronous and runs under the queue's
//! lock, so each transition is one critical section.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use leaseq_core::events::EventKind;
use leaseq_core::limits::LEASE_HORIZON;
use leaseq_core::{
    Bytes, Ending, ItemId, ItemState, Lease, LeaseKey, LeaseToken, QueueName, ReapReport, Repair,
    Timestamp,
};

use crate::hash::IdMap;

/// Ready index key: highest priority first, then enqueue order.
pub(crate) type ReadyKey = (Reverse<i32>, u64, u64);

/// Where an item is, with what that state needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// In `ready`.
    Ready,
    /// In `scheduled`, due at this ms.
    Scheduled { due: u64 },
    /// In `leased`, under `token` until `expires` (ms).
    Leased { expires: u64, token: LeaseToken },
    /// In `dead`, at this death sequence number, since `at` (ms).
    Dead { death: u64, at: u64 },
}

impl Slot {
    pub(crate) fn state(self) -> ItemState {
        match self {
            Slot::Ready => ItemState::Ready,
            Slot::Scheduled { .. } => ItemState::Scheduled,
            Slot::Leased { .. } => ItemState::Leased,
            Slot::Dead { .. } => ItemState::Dead,
        }
    }
}

/// One stored item.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) payload: Bytes,
    pub(crate) priority: i32,
    /// Enqueue sequence: FIFO order within a priority. Kept across retries.
    pub(crate) seq: u64,
    /// The backend's now (ms) at the enqueue that created it.
    pub(crate) enqueued_at: u64,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    pub(crate) dedup_key: Option<Arc<str>>,
    /// How long (ms) the dedup key stays held after the ack.
    pub(crate) unique_for: Option<u64>,
    pub(crate) last_error: Option<Box<str>>,
    pub(crate) slot: Slot,
    /// An operator asked to cancel it while it was leased: whatever ends
    /// the lease ends the item.
    pub(crate) cancel_requested: bool,
    /// The last progress a lease recorded, with that lease's token: shown
    /// only while that token holds the item.
    pub(crate) progress: Option<(LeaseToken, Bytes)>,
}

impl Item {
    /// The lease that hands item `id` of `queue` out under `token` until
    /// `expires_at` ms: what a claim returns, and a recovery again.
    pub(crate) fn lease(
        &self,
        queue: &QueueName,
        id: u64,
        token: LeaseToken,
        expires_at: u64,
    ) -> Lease {
        Lease {
            key: LeaseKey {
                queue: queue.clone(),
                id: ItemId::new(id),
                token,
            },
            payload: self.payload.clone(),
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            priority: self.priority,
            expires_at: Timestamp::from_millis(expires_at),
            enqueued_at: Timestamp::from_millis(self.enqueued_at),
        }
    }

    /// What a kept record takes from this item when it ends.
    pub(crate) fn ended(&self) -> crate::kept::Ended<'_> {
        crate::kept::Ended {
            payload: &self.payload,
            enqueued_at: self.enqueued_at,
            attempts: self.attempts,
            last_error: self.last_error.as_deref(),
        }
    }

    pub(crate) fn ready_key(&self, id: u64) -> ReadyKey {
        (Reverse(self.priority), self.seq, id)
    }
}

/// A fresh item for [`QueueState::insert`].
#[derive(Debug)]
pub(crate) struct Fresh {
    pub(crate) payload: Bytes,
    pub(crate) priority: i32,
    pub(crate) max_attempts: u32,
    pub(crate) dedup_key: Option<Arc<str>>,
    /// How long (ms) the dedup key stays held after the ack.
    pub(crate) unique_for: Option<u64>,
    /// Due time in ms, or `None` for Ready now.
    pub(crate) due: Option<u64>,
}

/// The items of one queue and its indexes. Each live id is in exactly one
/// index, the one its [`Slot`] names (INV-1).
#[derive(Debug, Default)]
pub(crate) struct QueueState {
    pub(crate) items: IdMap<Item>,
    pub(crate) ready: BTreeSet<ReadyKey>,
    pub(crate) scheduled: BTreeSet<(u64, u64, u64)>,
    pub(crate) leased: BTreeSet<(u64, u64)>,
    pub(crate) dead: BTreeSet<(u64, u64)>,
    pub(crate) dedup: HashMap<Arc<str>, u64>,
    /// Dedup keys held after their item's ack ([`leaseq_core::NewItem::unique_for`]):
    /// key → (the acked id, held until ms).
    pub(crate) held: HashMap<Arc<str>, (u64, u64)>,
    next_death: u64,
    /// `enqueue_once` requests seen lately, with their results.
    pub(crate) requests: Requests,
    /// Traces of the finishing calls of the last
    /// [`leaseq_core::limits::FINISH_MEMORY`].
    pub(crate) finished: Finishes,
    /// The queue's global limits (kept by purge).
    pub(crate) limits: leaseq_core::QueueLimits,
    /// The claims counted in the current rate window.
    pub(crate) window: Option<leaseq_core::queue_limits::RateWindow>,
    /// Paused: claims lease nothing (kept by purge).
    pub(crate) paused: bool,
    /// Kept finished items and the retention policy (the policy is kept
    /// by purge).
    pub(crate) kept: crate::kept::Kept,
    /// Items completed since the queue was made or deleted.
    pub(crate) completed: u64,
    /// Where this queue's job events go.
    pub(crate) events: crate::emitter::Emitter,
}

/// Recent `enqueue_once` requests: results by request id, forgotten once
/// their memory runs out (trimmed on each call, oldest first).
#[derive(Debug, Default)]
pub(crate) struct Requests {
    done: HashMap<u128, Vec<leaseq_core::Enqueued>>,
    expiry: BTreeSet<(u64, u128)>,
}

impl Requests {
    /// The results of `request` if it is remembered at `now`; forgets
    /// requests whose memory ran out.
    pub(crate) fn recall(
        &mut self,
        request: LeaseToken,
        now: u64,
    ) -> Option<Vec<leaseq_core::Enqueued>> {
        while let Some(&(until, id)) = self.expiry.first() {
            if until > now {
                break;
            }
            self.expiry.pop_first();
            self.done.remove(&id);
        }
        self.done.get(&request.as_u128()).cloned()
    }

    /// True when no request is remembered at `now`.
    pub(crate) fn is_empty(&mut self, now: u64) -> bool {
        let _ = self.recall(LeaseToken::from_u128(0), now);
        self.done.is_empty()
    }

    /// Remembers `request`'s results until `until` (ms).
    pub(crate) fn remember(
        &mut self,
        request: LeaseToken,
        done: Vec<leaseq_core::Enqueued>,
        until: u64,
    ) {
        self.expiry.insert((until, request.as_u128()));
        self.done.insert(request.as_u128(), done);
    }
}

/// The most traces one queue keeps.
const MAX_TRACES: usize = leaseq_core::limits::MAX_FINISH_TRACES;

/// The (item, token) of each lease its own finishing call ended lately,
/// for `lease_fate`; each forgotten once its memory has run out (trimmed
/// on each finishing call and read, oldest first), or once the queue holds
/// [`MAX_TRACES`] newer ones.
#[derive(Debug, Default)]
pub(crate) struct Finishes {
    keys: HashSet<(u64, u128)>,
    /// (forgotten at ms, id, token), in the order recorded: the queue's
    /// clock reads never go back under its lock.
    order: VecDeque<(u64, u64, u128)>,
}

impl Finishes {
    /// Forgets the traces whose memory ran out at `now`.
    fn trim(&mut self, now: u64) {
        while let Some(&(until, id, token)) = self.order.front() {
            if until > now {
                break;
            }
            self.order.pop_front();
            self.keys.remove(&(id, token));
        }
    }

    /// Records that `token`'s own call ended its lease on item `id` at
    /// `now`.
    pub(crate) fn record(&mut self, id: u64, token: LeaseToken, now: u64) {
        self.trim(now);
        let until = now.saturating_add(leaseq_core::limits::millis_ceil(
            leaseq_core::limits::FINISH_MEMORY,
        ));
        if self.keys.insert((id, token.as_u128())) {
            self.order.push_back((until, id, token.as_u128()));
        }
        while self.order.len() > MAX_TRACES {
            if let Some((_, id, token)) = self.order.pop_front() {
                self.keys.remove(&(id, token));
            }
        }
    }

    /// Whether a trace says `token`'s own call ended its lease on `id`.
    pub(crate) fn holds(&mut self, id: u64, token: LeaseToken, now: u64) -> bool {
        self.trim(now);
        self.keys.contains(&(id, token.as_u128()))
    }

    /// True when no trace is kept at `now`.
    pub(crate) fn is_empty(&mut self, now: u64) -> bool {
        self.trim(now);
        self.keys.is_empty()
    }
}

/// Whether a fenced operation found its lease current.
pub(crate) enum Fence<'a> {
    /// The item, whose current token is the lease's.
    Held(&'a mut Item, u64),
    /// Token stale, item gone, or not leased.
    Lost,
}

impl QueueState {
    /// Adds an item under `id` (from the backend's counter, which never
    /// hands out an id twice, also across purges and forgotten queues, and
    /// rises in the order of this queue's lock); returns it.
    pub(crate) fn insert(&mut self, fresh: Fresh, now: u64, id: u64) -> u64 {
        let slot = match fresh.due {
            Some(due) if due > now => {
                self.scheduled.insert((due, id, id));
                Slot::Scheduled { due }
            }
            _ => {
                self.ready.insert((Reverse(fresh.priority), id, id));
                Slot::Ready
            }
        };
        if let Some(key) = &fresh.dedup_key {
            self.dedup.insert(key.clone(), id);
        }
        self.events.emit(id, || EventKind::Enqueued);
        self.items.insert(
            id,
            Item {
                payload: fresh.payload,
                priority: fresh.priority,
                seq: id,
                enqueued_at: now,
                attempts: 0,
                max_attempts: fresh.max_attempts,
                dedup_key: fresh.dedup_key,
                unique_for: fresh.unique_for,
                last_error: None,
                cancel_requested: false,
                progress: None,
                slot,
            },
        );
        id
    }

    /// The id holding `key` at `now`, if any: an unacked item, or an
    /// acked one whose unique-for hold has not run out (a hold that ran
    /// out is dropped here).
    pub(crate) fn dedup_holder(&mut self, key: &str, now: u64) -> Option<u64> {
        if let Some(id) = self.dedup.get(key) {
            return Some(*id);
        }
        match self.held.get(key) {
            Some(&(id, until)) if until > now => Some(id),
            Some(_) => {
                self.held.remove(key);
                None
            }
            None => None,
        }
    }

    /// Moves every Scheduled item due at `now` to Ready. Entries without a
    /// matching item are removed and reported.
    pub(crate) fn promote_due(&mut self, now: u64, repairs: &mut Vec<Repair>) -> u64 {
        let mut moved = 0;
        while let Some(&(due, seq, id)) = self.scheduled.first() {
            if due > now {
                break;
            }
            self.scheduled.pop_first();
            match self.items.get_mut(&id) {
                Some(item) if item.slot == (Slot::Scheduled { due }) && item.seq == seq => {
                    item.slot = Slot::Ready;
                    self.ready.insert(item.ready_key(id));
                    moved += 1;
                }
                other => {
                    let problem = mismatch(other.map(|i| i.slot));
                    repairs.push(repair(ItemState::Scheduled, id, problem));
                }
            }
        }
        moved
    }

    /// Pops the next claimable item and leases it; `None` when Ready is
    /// empty. Entries without a matching item are removed and reported, and
    /// the search goes on.
    pub(crate) fn lease_next(
        &mut self,
        expires: u64,
        token: LeaseToken,
        repairs: &mut Vec<Repair>,
    ) -> Option<(u64, &Item)> {
        loop {
            let key = self.ready.pop_first()?;
            let id = key.2;
            let found = self.items.get(&id).map(|i| (i.slot, i.ready_key(id)));
            if found != Some((Slot::Ready, key)) {
                repairs.push(repair(ItemState::Ready, id, mismatch(found.map(|f| f.0))));
                continue;
            }
            let item = self.items.get_mut(&id)?;
            item.attempts = item.attempts.saturating_add(1);
            item.slot = Slot::Leased { expires, token };
            self.leased.insert((expires, id));
            let attempt = item.attempts;
            self.events.emit(id, || EventKind::Started { attempt });
            return Some((id, item));
        }
    }

    /// Looks up a lease: the item if `token` is its current token.
    pub(crate) fn fence(&mut self, id: u64, token: LeaseToken) -> Fence<'_> {
        match self.items.get_mut(&id) {
            Some(item) => match item.slot {
                Slot::Leased { expires, token: t } if t == token => Fence::Held(item, expires),
                _ => Fence::Lost,
            },
            None => Fence::Lost,
        }
    }

    /// Removes a leased item (ack) at `now`; a unique-for key stays held
    /// from `now` on. The caller checked the fence.
    pub(crate) fn remove_leased(&mut self, id: u64, expires: u64, now: u64) {
        self.complete_leased(id, expires, now, None);
    }

    /// [`Self::remove_leased`], recording the ending with the handler's
    /// `result` when the queue keeps completed items.
    pub(crate) fn complete_leased(
        &mut self,
        id: u64,
        expires: u64,
        now: u64,
        result: Option<Bytes>,
    ) {
        self.leased.remove(&(expires, id));
        if let Some(item) = self.items.remove(&id) {
            self.completed += 1;
            self.events
                .emit(id, || EventKind::completed(result.clone()));
            self.kept
                .record(id, item.ended(), Ending::Completed, now, result);
            self.drop_dedup(id, &item);
            if let (Some(key), Some(hold)) = (&item.dedup_key, item.unique_for) {
                self.held
                    .insert(key.clone(), (id, now.saturating_add(hold)));
            }
        }
    }

    /// Ends a leased item whose cancel was requested: it leaves the queue
    /// like a removed item (its dedup key free, no unique-for hold). The
    /// caller checked the fence.
    pub(crate) fn cancel_leased(&mut self, id: u64, expires: u64, now: u64) {
        self.leased.remove(&(expires, id));
        if let Some(item) = self.items.remove(&id) {
            self.events.emit(id, || EventKind::Cancelled);
            self.kept
                .record(id, item.ended(), Ending::Cancelled, now, None);
            self.drop_dedup(id, &item);
        }
    }

    /// Moves a leased item's expiry. The caller checked the fence.
    pub(crate) fn set_expiry(&mut self, id: u64, old: u64, new: u64) {
        if let Some(item) = self.items.get_mut(&id) {
            if let Slot::Leased { token, .. } = item.slot {
                item.slot = Slot::Leased {
                    expires: new,
                    token,
                };
                self.leased.remove(&(old, id));
                self.leased.insert((new, id));
            }
        }
    }

    /// Takes an item out of the leased index and puts it back to Ready, or
    /// Scheduled when `due > now`. The caller checked the fence.
    pub(crate) fn requeue_leased(
        &mut self,
        id: u64,
        expires: u64,
        due: u64,
        now: u64,
    ) -> ItemState {
        self.leased.remove(&(expires, id));
        let Some(item) = self.items.get_mut(&id) else {
            return ItemState::Ready;
        };
        // The lease's progress ends with it: a claim sent again under the
        // same token must not find it.
        item.progress = None;
        if due > now {
            item.slot = Slot::Scheduled { due };
            self.scheduled.insert((due, item.seq, id));
            ItemState::Scheduled
        } else {
            item.slot = Slot::Ready;
            self.ready.insert(item.ready_key(id));
            ItemState::Ready
        }
    }

    /// Takes an item out of the leased index and sends it Dead with `reason`.
    /// The caller checked the fence.
    pub(crate) fn kill_leased(&mut self, id: u64, expires: u64, reason: &str, now: u64) {
        self.leased.remove(&(expires, id));
        self.next_death += 1;
        let death = self.next_death;
        if let Some(item) = self.items.get_mut(&id) {
            self.events.emit(id, || EventKind::dead(reason));
            item.progress = None;
            item.slot = Slot::Dead { death, at: now };
            item.last_error = Some(reason.into());
            self.dead.insert((death, id));
        }
    }

    /// Leases expiring past [`LEASE_HORIZON`] (no claim or extend sets
    /// one; a clock that ran ahead did) expire now, at most `budget` of
    /// them, each reported.
    fn expire_past_horizon(&mut self, now: u64, budget: usize, repairs: &mut Vec<Repair>) {
        let horizon =
            now.saturating_add(u64::try_from(LEASE_HORIZON.as_millis()).unwrap_or(u64::MAX));
        let far: Vec<(u64, u64)> = self
            .leased
            .range((horizon.saturating_add(1), 0)..)
            .take(budget)
            .copied()
            .collect();
        for (expires, id) in far {
            match self.items.get(&id) {
                Some(item) if matches!(item.slot, Slot::Leased { expires: e, .. } if e == expires) =>
                {
                    self.set_expiry(id, expires, now);
                    tracing::warn!(
                        id,
                        "leaseq-memory: a lease expiring past the lease horizon expired now"
                    );
                    repairs.push(Repair::past_horizon(ItemId::new(id)));
                }
                other => {
                    let problem = mismatch(other.map(|i| i.slot));
                    self.leased.remove(&(expires, id));
                    repairs.push(repair(ItemState::Leased, id, problem));
                }
            }
        }
    }

    /// Recovers up to `budget` leases expired at `now` (expiry <= now), in
    /// expiry order, after expiring those past the horizon, counting them
    /// into `reaped`. Returns whether more may remain.
    pub(crate) fn reap_expired(
        &mut self,
        now: u64,
        budget: usize,
        reaped: &mut ReapReport,
    ) -> bool {
        let repairs = &mut reaped.repairs;
        self.expire_past_horizon(now, budget, repairs);
        for _ in 0..budget {
            let Some(&(expires, id)) = self.leased.first() else {
                return false;
            };
            if expires > now {
                return false;
            }
            let exhausted = match self.items.get(&id) {
                Some(item) if matches!(item.slot, Slot::Leased { expires: e, .. } if e == expires) =>
                {
                    if item.cancel_requested {
                        self.cancel_leased(id, expires, now);
                        reaped.cancelled += 1;
                        continue;
                    }
                    item.attempts >= item.max_attempts
                }
                other => {
                    self.leased.pop_first();
                    let problem = mismatch(other.map(|i| i.slot));
                    repairs.push(repair(ItemState::Leased, id, problem));
                    continue;
                }
            };
            if exhausted {
                self.kill_leased(id, expires, "lease expired on final attempt", now);
                reaped.dead += 1;
            } else {
                self.requeue_leased(id, expires, 0, now);
                self.events.emit(id, || EventKind::failed("lease expired"));
                reaped.requeued += 1;
            }
        }
        true
    }

    /// Moves up to `limit` Dead items, oldest death first, to Ready with
    /// attempts reset to 0. Returns how many moved.
    pub(crate) fn redrive(&mut self, limit: usize, repairs: &mut Vec<Repair>) -> u64 {
        let mut moved = 0;
        while moved < limit as u64 {
            let Some((death, id)) = self.dead.pop_first() else {
                break;
            };
            match self.items.get_mut(&id) {
                Some(item) if matches!(item.slot, Slot::Dead { death: d, .. } if d == death) => {
                    item.attempts = 0;
                    item.slot = Slot::Ready;
                    self.ready.insert(item.ready_key(id));
                    moved += 1;
                }
                other => {
                    let problem = mismatch(other.map(|i| i.slot));
                    repairs.push(repair(ItemState::Dead, id, problem));
                }
            }
        }
        moved
    }

    /// Whether any index holds an entry: what `stats` counts, so what
    /// `queues` lists.
    pub(crate) fn holds_entries(&self) -> bool {
        !(self.ready.is_empty()
            && self.scheduled.is_empty()
            && self.leased.is_empty()
            && self.dead.is_empty())
    }

    /// Moves the Dead item `id` to Ready with attempts reset to 0, to the
    /// place [`Self::redrive`] gives it. `None` when there is no such item,
    /// `Some(false)` when it is in another state (then nothing changes).
    pub(crate) fn redrive_one(&mut self, id: u64) -> Option<bool> {
        let item = self.items.get_mut(&id)?;
        let Slot::Dead { death, .. } = item.slot else {
            return Some(false);
        };
        self.dead.remove(&(death, id));
        item.attempts = 0;
        item.slot = Slot::Ready;
        self.ready.insert(item.ready_key(id));
        Some(true)
    }

    /// [`leaseq_core::Admin::remove_item`]: takes the item out of its
    /// index and forgets it, freeing its dedup key (no hold: it was not
    /// acked); `None` when there is no such item. The caller promoted due
    /// items first, so the state returned is the one inspection shows.
    pub(crate) fn remove(&mut self, id: u64) -> Option<ItemState> {
        let item = self.items.remove(&id)?;
        match item.slot {
            Slot::Ready => {
                self.ready.remove(&item.ready_key(id));
            }
            Slot::Scheduled { due } => {
                self.scheduled.remove(&(due, item.seq, id));
            }
            Slot::Leased { expires, .. } => {
                self.leased.remove(&(expires, id));
            }
            Slot::Dead { death, .. } => {
                self.dead.remove(&(death, id));
            }
        }
        self.drop_dedup(id, &item);
        Some(item.slot.state())
    }

    /// Deletes every item and index entry; returns how many items there were.
    /// Nothing left to keep: no item, no dedup key, no remembered request
    /// (as of `now`), no limits. Such a queue may be forgotten.
    pub(crate) fn is_idle(&mut self, now: u64) -> bool {
        self.held.retain(|_, &mut (_, until)| until > now);
        self.items.is_empty()
            && self.dedup.is_empty()
            && self.held.is_empty()
            && self.requests.is_empty(now)
            && self.finished.is_empty(now)
            && self.limits.is_none()
            && !self.paused
            && self.kept.is_empty()
    }

    pub(crate) fn purge(&mut self) -> u64 {
        let n = self.items.len() as u64;
        self.items = IdMap::default();
        self.ready = BTreeSet::new();
        self.scheduled = BTreeSet::new();
        self.leased = BTreeSet::new();
        self.dead = BTreeSet::new();
        self.dedup = HashMap::new();
        self.held = HashMap::new();
        self.kept.clear();
        n
    }

    /// [`leaseq_core::Admin::delete_queue`]: every item and everything
    /// else kept for the queue (limits, window, holds, requests). Ids come
    /// from the backend's counter, so none is reused after this.
    pub(crate) fn delete(&mut self) -> u64 {
        let n = self.items.len() as u64;
        let announce = self.kept.announce.take();
        let events = std::mem::take(&mut self.events);
        *self = QueueState::default();
        self.kept.announce = announce;
        self.events = events;
        n
    }

    /// Removes the dead letters `keep` no longer keeps at `now`: the
    /// oldest beyond its count, then those older than its age, stopping at
    /// the first one still kept. Answers how many.
    pub(crate) fn collect_dead(&mut self, keep: leaseq_core::Keep, now: u64) -> u64 {
        let age = keep
            .max_age
            .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX));
        let mut gone = 0;
        while let Some(&(_, id)) = self.dead.first() {
            let over_count = keep
                .max_count
                .is_some_and(|max| self.dead.len() as u64 > max);
            let died = match self.items.get(&id).map(|i| i.slot) {
                Some(Slot::Dead { at, .. }) => at,
                // An index entry without its item: drop it, it is no letter.
                _ => 0,
            };
            let too_old = age.is_some_and(|age| died.saturating_add(age) <= now);
            if !(over_count || too_old) {
                break;
            }
            self.dead.pop_first();
            if let Some(item) = self.items.remove(&id) {
                self.drop_dedup(id, &item);
                gone += 1;
            }
        }
        gone
    }

    /// The earliest due time among Scheduled items.
    pub(crate) fn earliest_due(&self) -> Option<u64> {
        self.scheduled.first().map(|e| e.0)
    }

    pub(crate) fn drop_dedup(&mut self, id: u64, item: &Item) {
        if let Some(key) = &item.dedup_key {
            if self.dedup.get(key) == Some(&id) {
                self.dedup.remove(key);
            }
        }
    }
}

/// What was wrong with an index entry whose item is `found`.
fn mismatch(found: Option<Slot>) -> &'static str {
    match found.map(Slot::state) {
        None => "no item",
        Some(ItemState::Ready) => "item is ready under another entry",
        Some(ItemState::Scheduled) => "item is scheduled under another entry",
        Some(ItemState::Leased) => "item is leased under another entry",
        Some(ItemState::Dead) => "item is dead under another entry",
    }
}

/// Builds a repair record and logs it.
fn repair(index: ItemState, id: u64, problem: &str) -> Repair {
    let id = ItemId::new(id);
    tracing::warn!(%index, %id, problem, "leaseq-memory: removed a corrupt index entry");
    Repair {
        index,
        id,
        problem: problem.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finishing_traces_are_bounded_per_queue() {
        let mut f = Finishes::default();
        let first = LeaseToken::random();
        f.record(0, first, 0);
        for id in 1..=MAX_TRACES as u64 {
            f.record(id, LeaseToken::random(), 0);
        }
        assert_eq!(f.order.len(), MAX_TRACES);
        assert_eq!(f.keys.len(), MAX_TRACES);
        assert!(!f.holds(0, first, 0), "the oldest trace is forgotten first");
    }

    fn fresh(priority: i32) -> Fresh {
        Fresh {
            payload: Bytes::from_static(b"x"),
            priority,
            max_attempts: 3,
            dedup_key: None,
            unique_for: None,
            due: None,
        }
    }

    #[test]
    fn reap_stops_at_the_first_live_lease() {
        let mut st = QueueState::default();
        for id in 1..=10_000 {
            st.insert(fresh(0), 0, id);
        }
        let mut repairs = Vec::new();
        for i in 0..10_000u64 {
            let expires = if i < 3 { 5 } else { 1_000 + i };
            st.lease_next(expires, LeaseToken::from_u128(u128::from(i)), &mut repairs);
        }
        // A budget of 4 is enough for 3 expired leases among 10,000: the
        // walk ends at the first live one instead of visiting them all.
        let mut reaped = ReapReport::default();
        assert!(!st.reap_expired(10, 4, &mut reaped));
        assert_eq!((reaped.requeued, reaped.dead, reaped.cancelled), (3, 0, 0));
        assert_eq!((st.leased.len(), st.ready.len()), (9_997, 3));
        assert!(repairs.is_empty() && reaped.repairs.is_empty());
    }

    #[test]
    fn redrive_one_moves_only_that_dead_item_to_its_place() {
        let mut st = QueueState::default();
        let ids: Vec<u64> = (1..=3).map(|id| st.insert(fresh(0), 0, id)).collect();
        for i in 0..3u64 {
            let (id, _) = st
                .lease_next(10, LeaseToken::from_u128(u128::from(i)), &mut Vec::new())
                .expect("leased");
            st.kill_leased(id, 10, "x", 10);
        }
        let late = st.insert(fresh(0), 0, 4);
        assert_eq!(st.redrive_one(ids[1]), Some(true));
        assert_eq!(st.redrive_one(ids[1]), Some(false), "already Ready");
        assert_eq!(st.redrive_one(99), None);
        let dead: Vec<u64> = st.dead.iter().map(|e| e.1).collect();
        assert_eq!(dead, [ids[0], ids[2]]);
        // Back at its place by enqueue order, before the later item.
        let ready: Vec<u64> = st.ready.iter().map(|e| e.2).collect();
        assert_eq!(ready, [ids[1], late]);
        assert_eq!(st.items.get(&ids[1]).map(|i| i.attempts), Some(0));
    }

    #[test]
    fn a_retry_keeps_its_place_in_enqueue_order() {
        let mut st = QueueState::default();
        let a = st.insert(fresh(0), 0, 1);
        let b = st.insert(fresh(0), 0, 2);
        let token = LeaseToken::from_u128(1);
        let (id, _) = st.lease_next(10, token, &mut Vec::new()).expect("a");
        assert_eq!(id, a);
        st.requeue_leased(a, 10, 0, 0);
        let order: Vec<u64> = st.ready.iter().map(|e| e.2).collect();
        assert_eq!(order, [a, b]);
    }
}
