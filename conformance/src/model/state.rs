//! The reference model: a plain, sequential reading of the contract. Each
//! method takes what the backend answered to one operation, checks it
//! against what the contract allows, and moves the model on.
//!
//! Where the contract leaves a choice to the backend (the place of a retried
//! item among items of its priority, which of several items that died in one
//! reap is "older"), the model accepts any allowed answer and follows it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use leaseq_core::limits::clamp_reason;
use leaseq_core::{
    Bytes, Claimed, Enqueued, Error, Extended, ItemId, ItemState, Lease, LeaseKey, LeaseToken,
    NewItem, ReapReport, Released, Result,
};

use super::window::Window;
use crate::outcome::ensure;
use crate::{Rule, Violation};

/// The reason `release` gives an item whose attempts are exhausted.
pub const EXHAUSTED: &str = "attempts exhausted";

/// Where an item is, as the model knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Claimable now.
    Ready,
    /// Claimable once `due` has passed (then it counts as Ready).
    Scheduled {
        /// When it becomes claimable.
        due: Window,
    },
    /// Held under `token` until `expires`; still held after that until a
    /// reap recovers it.
    Leased {
        /// The current token.
        token: LeaseToken,
        /// When the lease runs out.
        expires: Window,
    },
    /// Given up on. Items that died in one step share an epoch; a smaller
    /// epoch died earlier.
    Dead {
        /// The order of death.
        epoch: u64,
    },
}

/// What the model knows of an item's `last_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Exactly this.
    Is(Option<String>),
    /// Some non-empty reason (the wording is the backend's).
    Some,
    /// Not specified by the contract at this point.
    Free,
}

/// One live item of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Position in enqueue order.
    pub seq: u64,
    /// The payload as enqueued.
    pub payload: Bytes,
    /// Its priority.
    pub priority: i32,
    /// Claims so far.
    pub attempts: u32,
    /// Claims allowed.
    pub max_attempts: u32,
    /// Its dedup key.
    pub dedup: Option<String>,
    /// True while the item must keep its FIFO place: enqueued without a
    /// delay and never claimed since. The contract orders items FIFO
    /// "absent retries"; others may sit anywhere within their priority.
    pub fifo: bool,
    /// Its last error.
    pub note: Note,
    /// Its state.
    pub slot: Slot,
    /// A cancel was requested while it was leased: whatever ends the
    /// lease ends the item.
    pub cancel_requested: bool,
}

impl Entry {
    /// Checks that `lease`, as `op` returned it, carries this entry's
    /// payload, attempts, max attempts and priority.
    pub(super) fn carried_by(&self, lease: &Lease, rule: Rule, op: &str) -> Result<(), Violation> {
        let seen = (
            &lease.payload,
            lease.attempts,
            lease.max_attempts,
            lease.priority,
        );
        let want = (
            &self.payload,
            self.attempts,
            self.max_attempts,
            self.priority,
        );
        ensure!(
            seen == want,
            rule,
            "{op} returned item {} with (payload, attempts, max, priority) {seen:?}, expected \
             {want:?}",
            lease.id()
        );
        Ok(())
    }
}

/// The model of one queue.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub(crate) items: BTreeMap<ItemId, Entry>,
    pub(crate) gone: BTreeSet<ItemId>,
    /// Ids of items a purge deleted (also in `gone`).
    purged: BTreeSet<ItemId>,
    tokens: HashSet<LeaseToken>,
    /// The finishing traces: each lease its own fenced call ended, with
    /// the window of that call ([`leaseq_core::limits::FINISH_MEMORY`]
    /// from it on, the trace may be gone).
    pub(crate) traces: HashMap<(ItemId, LeaseToken), Window>,
    /// The window of the operation being judged (set by the driver).
    pub(crate) at: Window,
    /// The leases a reap took (Lost, whatever the backend's traces).
    pub(crate) taken: HashSet<(ItemId, LeaseToken)>,
    /// The backend's lease traces, which decide what `lease_fate` may
    /// answer past `held_until` and whether `recover_claim` renews
    /// ([`leaseq_core::Capabilities::lease_traces`]).
    pub lease_traces: leaseq_core::LeaseTraces,
    next_seq: u64,
    next_epoch: u64,
    /// False for a backend that keeps its orders per shard: then which of
    /// the items a claim, peek or redrive may take is not judged by order,
    /// only by membership and count.
    per_shard: bool,
    /// The queue is paused: claims lease nothing.
    pub(crate) paused: bool,
    /// The finished items the queue keeps, with how each ended, when the
    /// run keeps every ending (History group); `None` otherwise.
    pub(crate) kept: Option<BTreeMap<ItemId, leaseq_core::Ending>>,
    /// Completions so far: what `stats` counts on a backend with History.
    pub(crate) completed: u64,
}

fn contract(what: &'static str, msg: impl Into<String>) -> Violation {
    Violation::new(Rule::Contract(what), msg)
}

/// The driver used the model outside what it can decide.
pub(crate) fn undecidable(msg: impl Into<String>) -> Violation {
    Violation::new(
        Rule::Contract("model driver"),
        format!("the model cannot decide: {}", msg.into()),
    )
}

impl Model {
    /// An empty queue.
    pub fn new() -> Self {
        Model::default()
    }

    /// An empty queue of a backend that keeps its orders per shard
    /// ([`leaseq_core::Order::PerShard`]): every answer is judged as for
    /// one store but for the order of what claim, peek and redrive take.
    pub fn per_shard() -> Self {
        Model {
            per_shard: true,
            ..Model::default()
        }
    }

    /// True when orders are kept per shard, not judged.
    pub(crate) fn orders_per_shard(&self) -> bool {
        self.per_shard
    }

    /// The live items by id.
    pub fn items(&self) -> &BTreeMap<ItemId, Entry> {
        &self.items
    }

    /// Ids that were acked or purged: never to be seen again.
    pub fn gone(&self) -> &BTreeSet<ItemId> {
        &self.gone
    }

    /// True when `key` holds the item's current token (an expired lease not
    /// yet reaped or re-claimed still does).
    pub fn is_current(&self, key: &LeaseKey) -> bool {
        matches!(
            self.items.get(&key.id).map(|e| &e.slot),
            Some(Slot::Leased { token, .. }) if *token == key.token
        )
    }

    /// True when the item counts as Ready at `now` (Ready, or a Scheduled
    /// item whose due time has passed).
    pub(crate) fn claimable(e: &Entry, now: Window) -> Result<bool, Violation> {
        match &e.slot {
            Slot::Ready => Ok(true),
            Slot::Scheduled { due } => due
                .passed_at(now)
                .ok_or_else(|| undecidable(format!("a due time {due} at now {now}"))),
            _ => Ok(false),
        }
    }

    /// `enqueue(items)` at `now` answered `got`.
    pub fn enqueue(
        &mut self,
        items: &[NewItem],
        now: Window,
        got: &Result<Vec<Enqueued>>,
    ) -> Result<(), Violation> {
        let got = got
            .as_ref()
            .map_err(|e| contract("enqueue", format!("a valid batch failed: {e}")))?;
        ensure!(
            got.len() == items.len(),
            Rule::Contract("enqueue"),
            "{} results for {} items",
            got.len(),
            items.len()
        );
        for (i, (item, e)) in items.iter().zip(got).enumerate() {
            let holder = item.dedup_key.as_deref().and_then(|k| {
                self.items
                    .iter()
                    .find(|(_, m)| m.dedup.as_deref() == Some(k))
                    .map(|(id, _)| *id)
            });
            if let Some(id) = holder {
                ensure!(
                    e.id == id && e.deduplicated,
                    Rule::Inv9,
                    "item {i} of the batch: key {:?} is held by {id}, but enqueue returned {e:?}",
                    item.dedup_key.as_deref()
                );
                continue;
            }
            ensure!(
                !e.deduplicated,
                Rule::Inv9,
                "item {i} of the batch: reported deduplicated ({e:?}) but no item holds its key"
            );
            ensure!(
                !self.purged.contains(&e.id),
                Rule::Contract("enqueue"),
                "ids reused after a purge: item {i} of the batch got id {}, which an item deleted by an earlier purge had; ids are never handed out again, so the id counter must outlive a purge",
                e.id
            );
            ensure!(
                !self.items.contains_key(&e.id) && !self.gone.contains(&e.id),
                Rule::Contract("enqueue"),
                "item {i} of the batch got id {}, which was already used",
                e.id
            );
            let delay = u64::try_from(item.delay.as_millis()).unwrap_or(u64::MAX);
            let slot = if delay == 0 {
                Slot::Ready
            } else {
                Slot::Scheduled {
                    due: now.plus(delay),
                }
            };
            self.next_seq += 1;
            self.items.insert(
                e.id,
                Entry {
                    seq: self.next_seq,
                    payload: item.payload.clone(),
                    priority: item.priority,
                    attempts: 0,
                    max_attempts: item.max_attempts,
                    dedup: item.dedup_key.as_deref().map(str::to_owned),
                    fifo: delay == 0,
                    note: Note::Is(None),
                    slot,
                    cancel_requested: false,
                },
            );
        }
        Ok(())
    }

    /// `claim(max, ttl)` at `now` answered `got`.
    pub fn claim(
        &mut self,
        max: u32,
        ttl_ms: u64,
        now: Window,
        got: &Result<Claimed>,
    ) -> Result<(), Violation> {
        let got = got
            .as_ref()
            .map_err(|e| contract("claim", format!("a valid claim failed: {e}")))?;
        ensure!(
            got.repairs.is_empty(),
            Rule::Inv6,
            "a claim on a sound queue reported repairs: {:?}",
            got.repairs
        );
        ensure!(
            got.paused == self.paused,
            Rule::Contract("pause"),
            "a claim answered paused {} on a queue that is {}paused",
            got.paused,
            if self.paused { "" } else { "not " }
        );
        let mut candidates = Vec::new();
        for (id, e) in &self.items {
            if !self.paused && Self::claimable(e, now)? {
                candidates.push(*id);
            }
        }
        let want = candidates.len().min(max as usize);
        let ids: Vec<ItemId> = got.leases.iter().map(|l| l.id()).collect();
        if let Some(gone) = ids.iter().find(|id| self.gone.contains(id)) {
            return Err(Violation::new(
                Rule::Inv10,
                format!("a claim returned {gone}, which was acked or purged"),
            ));
        }
        for l in &got.leases {
            if let Some(Slot::Leased { expires, .. }) = self.items.get(&l.id()).map(|e| &e.slot) {
                return Err(Violation::new(
                    Rule::Inv2,
                    format!(
                        "a claim returned {}, which is leased until {expires} (now {now})",
                        l.id()
                    ),
                ));
            }
        }
        self.check_order("claim", &candidates, &ids)?;
        ensure!(
            ids.len() == want,
            Rule::Contract("claim"),
            "a claim of up to {max} returned {} leases with {} items claimable",
            ids.len(),
            candidates.len()
        );
        for l in &got.leases {
            ensure!(
                self.tokens.insert(l.token()),
                Rule::Inv2,
                "a claim handed out token {} a second time",
                l.token()
            );
            ensure!(
                now.plus(ttl_ms).contains(l.expires_at.as_millis()),
                Rule::Contract("claim"),
                "lease of {} expires at {}, expected now + ttl = {}",
                l.id(),
                l.expires_at,
                now.plus(ttl_ms)
            );
            let e = self
                .items
                .get_mut(&l.id())
                .ok_or_else(|| contract("claim", format!("{} is not in the queue", l.id())))?;
            e.attempts += 1;
            e.carried_by(l, Rule::Contract("claim"), "claim")?;
            e.fifo = false;
            e.slot = Slot::Leased {
                token: l.token(),
                expires: Window::exact(l.expires_at.as_millis()),
            };
        }
        Ok(())
    }

    /// Checks that `got` (in the order returned) is a valid claim order over
    /// `candidates`: higher priority first, and FIFO among items that keep
    /// their FIFO place, both within `got` and against what was left out.
    pub(crate) fn check_order(
        &self,
        what: &str,
        candidates: &[ItemId],
        got: &[ItemId],
    ) -> Result<(), Violation> {
        let mut seen = BTreeSet::new();
        for id in got {
            ensure!(seen.insert(*id), Rule::Inv2, "{what} returned {id} twice");
            ensure!(
                candidates.contains(id),
                Rule::Contract("claim"),
                "{what} returned {id}, which is not claimable"
            );
        }
        if self.per_shard {
            return Ok(());
        }
        let entry = |id: &ItemId| self.items.get(id);
        for pair in got.windows(2) {
            if let (Some(a), Some(b)) = (entry(&pair[0]), entry(&pair[1])) {
                ensure!(
                    a.priority >= b.priority,
                    Rule::Inv8,
                    "{what} order: {} (priority {}) before {} (priority {})",
                    pair[0],
                    a.priority,
                    pair[1],
                    b.priority
                );
            }
        }
        for (i, x) in got.iter().enumerate() {
            let Some(ex) = entry(x) else { continue };
            for y in &got[i + 1..] {
                if let Some(ey) = entry(y) {
                    ensure!(
                        !(ex.fifo && ey.fifo && ex.priority == ey.priority && ey.seq < ex.seq),
                        Rule::Inv8,
                        "{what} order: {x} came before {y}, which was enqueued earlier"
                    );
                }
            }
            for y in candidates.iter().filter(|y| !seen.contains(*y)) {
                let Some(ey) = entry(y) else { continue };
                ensure!(
                    ey.priority <= ex.priority,
                    Rule::Inv8,
                    "{what} returned {x} (priority {}) and left {y} (priority {})",
                    ex.priority,
                    ey.priority
                );
                ensure!(
                    !(ex.fifo && ey.fifo && ex.priority == ey.priority && ey.seq < ex.seq),
                    Rule::Inv8,
                    "{what} returned {x} and left {y}, which was enqueued earlier"
                );
            }
        }
        Ok(())
    }

    /// Fails unless a fenced call with a stale token said `LeaseLost`.
    pub(crate) fn expect_lost<T: std::fmt::Debug>(
        key: &LeaseKey,
        what: &str,
        got: &Result<T>,
    ) -> Result<(), Violation> {
        match got {
            Err(Error::LeaseLost { id }) if *id == key.id => Ok(()),
            other => Err(Violation::new(
                Rule::Inv3,
                format!(
                    "{what} of {} with a stale token answered {other:?}; expected LeaseLost",
                    key.id
                ),
            )),
        }
    }

    /// Fails unless a fenced call with the current token succeeded.
    pub(crate) fn expect_ok<'a, T: std::fmt::Debug>(
        key: &LeaseKey,
        what: &'static str,
        got: &'a Result<T>,
    ) -> Result<&'a T, Violation> {
        got.as_ref().map_err(|e| {
            contract(
                what,
                format!("{what} of {} with its current token failed: {e}", key.id),
            )
        })
    }

    fn entry_mut(&mut self, id: ItemId) -> Result<&mut Entry, Violation> {
        self.items
            .get_mut(&id)
            .ok_or_else(|| undecidable(format!("{id} is not modelled")))
    }

    fn kill(&mut self, id: ItemId, note: Note) -> Result<(), Violation> {
        self.next_epoch += 1;
        let epoch = self.next_epoch;
        let e = self.entry_mut(id)?;
        e.slot = Slot::Dead { epoch };
        e.note = note;
        Ok(())
    }

    /// `ack(key)` answered `got`.
    pub fn ack(&mut self, key: &LeaseKey, got: &Result<()>) -> Result<(), Violation> {
        if !self.is_current(key) {
            return Self::expect_lost(key, "ack", got);
        }
        Self::expect_ok(key, "ack", got)?;
        self.traces.insert((key.id, key.token), self.at);
        let cancelled = self.items.get(&key.id).is_some_and(|e| e.cancel_requested);
        let ending = if cancelled {
            leaseq_core::Ending::Cancelled
        } else {
            leaseq_core::Ending::Completed
        };
        self.finish(key.id, ending);
        Ok(())
    }

    /// The item `id` ends as `ending`: out of the queue, and kept when the
    /// run keeps endings.
    pub(crate) fn finish(&mut self, id: ItemId, ending: leaseq_core::Ending) {
        self.items.remove(&id);
        self.gone.insert(id);
        if ending == leaseq_core::Ending::Completed {
            self.completed += 1;
        }
        if let Some(kept) = &mut self.kept {
            kept.insert(id, ending);
        }
    }

    /// `ack_many(keys)` answered `got`: one result per key, each judged as
    /// an `ack` in order (so a lease named twice is acked once).
    pub fn ack_many(
        &mut self,
        keys: &[LeaseKey],
        got: Result<Vec<Result<()>>>,
    ) -> Result<(), Violation> {
        let results = got.map_err(|e| {
            Violation::new(
                Rule::Contract("ack_many"),
                format!("ack_many of {} leases failed: {e}", keys.len()),
            )
        })?;
        ensure!(
            results.len() == keys.len(),
            Rule::Contract("ack_many"),
            "ack_many of {} leases returned {} results",
            keys.len(),
            results.len()
        );
        for (key, r) in keys.iter().zip(&results) {
            self.ack(key, r)?;
        }
        Ok(())
    }

    /// `extend(key, ttl)` at `now` answered `got`.
    pub fn extend(
        &mut self,
        key: &LeaseKey,
        ttl_ms: u64,
        now: Window,
        got: &Result<Extended>,
    ) -> Result<(), Violation> {
        if !self.is_current(key) {
            return Self::expect_lost(key, "extend", got);
        }
        let extended = *Self::expect_ok(key, "extend", got)?;
        let until = extended.expires_at.as_millis();
        let requested = self.entry_mut(key.id)?.cancel_requested;
        ensure!(
            extended.cancel_requested == requested,
            Rule::Contract("cancel"),
            "extend of {} answered cancel_requested {}; the model says {requested}",
            key.id,
            extended.cancel_requested
        );
        ensure!(
            now.plus(ttl_ms).contains(until),
            Rule::Contract("extend"),
            "extend of {} returned {until}ms, expected now + ttl = {}",
            key.id,
            now.plus(ttl_ms)
        );
        let e = self.entry_mut(key.id)?;
        e.slot = Slot::Leased {
            token: key.token,
            expires: Window::exact(until),
        };
        Ok(())
    }

    /// `give_back(key)` answered `got`: Ready again, the claim's attempt
    /// returned.
    pub fn give_back(&mut self, key: &LeaseKey, got: &Result<()>) -> Result<(), Violation> {
        if !self.is_current(key) {
            return Self::expect_lost(key, "give_back", got);
        }
        Self::expect_ok(key, "give_back", got)?;
        self.traces.insert((key.id, key.token), self.at);
        if self.end_if_cancelled(key.id) {
            return Ok(());
        }
        let e = self.entry_mut(key.id)?;
        e.attempts = e.attempts.saturating_sub(1);
        e.slot = Slot::Ready;
        e.note = Note::Free;
        Ok(())
    }

    /// `release(key, delay)` at `now` answered `got`.
    pub fn release(
        &mut self,
        key: &LeaseKey,
        delay_ms: u64,
        now: Window,
        got: &Result<Released>,
    ) -> Result<(), Violation> {
        if !self.is_current(key) {
            return Self::expect_lost(key, "release", got);
        }
        let released = *Self::expect_ok(key, "release", got)?;
        self.traces.insert((key.id, key.token), now);
        if self.end_if_cancelled(key.id) {
            return Self::answered_cancelled(key, "release", released);
        }
        let e = self.entry_mut(key.id)?;
        let want = if e.attempts >= e.max_attempts {
            Released::Dead
        } else if delay_ms == 0 {
            Released::Ready
        } else {
            Released::Scheduled
        };
        ensure!(
            released == want,
            Rule::Contract("release"),
            "release of {} (attempt {} of {}, delay {delay_ms}ms) answered {released:?}, \
             expected {want:?}",
            key.id,
            e.attempts,
            e.max_attempts
        );
        match want {
            Released::Dead => return self.kill(key.id, Note::Is(Some(EXHAUSTED.into()))),
            Released::Ready => e.slot = Slot::Ready,
            _ => {
                e.slot = Slot::Scheduled {
                    due: now.plus(delay_ms),
                }
            }
        }
        e.note = Note::Free;
        Ok(())
    }

    /// `fail(key, reason)` answered `got`.
    pub fn fail(
        &mut self,
        key: &LeaseKey,
        reason: &str,
        got: &Result<()>,
    ) -> Result<(), Violation> {
        if !self.is_current(key) {
            return Self::expect_lost(key, "fail", got);
        }
        Self::expect_ok(key, "fail", got)?;
        self.traces.insert((key.id, key.token), self.at);
        if self.end_if_cancelled(key.id) {
            return Ok(());
        }
        self.kill(key.id, Note::Is(Some(clamp_reason(reason).to_owned())))
    }

    /// `reap()` at `now` answered `got`. The model's queues stay far below
    /// any backend's reap batch, so one reap recovers every expired lease.
    pub fn reap(&mut self, now: Window, got: &Result<ReapReport>) -> Result<(), Violation> {
        let got = got
            .as_ref()
            .map_err(|e| contract("reap", format!("reap failed: {e}")))?;
        ensure!(
            got.repairs.is_empty(),
            Rule::Inv6,
            "a reap on a sound queue reported repairs: {:?}",
            got.repairs
        );
        self.next_epoch += 1;
        let epoch = self.next_epoch;
        let (mut requeued, mut dead) = (0, 0);
        let mut cancelled = Vec::new();
        for (id, e) in self.items.iter_mut() {
            let Slot::Leased { expires, token } = e.slot else {
                continue;
            };
            let expired = expires.passed_at(now).ok_or_else(|| {
                undecidable(format!("lease of {id} expiring at {expires}, now {now}"))
            })?;
            if !expired {
                continue;
            }
            self.taken.insert((*id, token));
            if e.cancel_requested {
                cancelled.push(*id);
            } else if e.attempts >= e.max_attempts {
                e.slot = Slot::Dead { epoch };
                e.note = Note::Some;
                dead += 1;
            } else {
                e.slot = Slot::Ready;
                e.note = Note::Free;
                requeued += 1;
            }
        }
        ensure!(
            (got.requeued, got.dead, got.cancelled) == (requeued, dead, cancelled.len() as u64),
            Rule::Inv4,
            "reap at {now} answered requeued {}, dead {}, cancelled {}; expected {requeued}, \
             {dead}, {}",
            got.requeued,
            got.dead,
            got.cancelled,
            cancelled.len()
        );
        for id in cancelled {
            self.finish(id, leaseq_core::Ending::Cancelled);
        }
        Ok(())
    }

    /// The `expire_leases` hook, run no later than `hook.hi`, touched
    /// `touched` leases.
    pub fn expire_leases(&mut self, hook: Window, touched: u64) -> Result<(), Violation> {
        let (mut live, mut leased) = (0, 0);
        for e in self.items.values_mut() {
            if let Slot::Leased { expires, .. } = &mut e.slot {
                leased += 1;
                // Live or not, its expiry is now no later than the hook.
                match expires.passed_at(hook) {
                    Some(true) => {}
                    Some(false) => {
                        live += 1;
                        *expires = Window::up_to(hook.hi);
                    }
                    None => *expires = Window::up_to(hook.hi),
                }
            }
        }
        ensure!(
            (live..=leased).contains(&touched),
            Rule::Contract("TestHooks::expire_leases"),
            "expire_leases touched {touched} leases; {live} were live, {leased} leased"
        );
        Ok(())
    }

    /// The `make_due` hook, run no later than `hook.hi`, moved `moved` items.
    pub fn make_due(&mut self, hook: Window, moved: u64) -> Result<(), Violation> {
        let (mut waiting, mut scheduled) = (0, 0);
        for e in self.items.values_mut() {
            if let Slot::Scheduled { due } = &mut e.slot {
                scheduled += 1;
                if due.passed_at(hook) == Some(false) {
                    waiting += 1;
                }
                *due = Window::up_to(due.hi.min(hook.hi));
            }
        }
        ensure!(
            moved >= waiting && moved <= scheduled,
            Rule::Contract("TestHooks::make_due"),
            "make_due moved {moved} items; {waiting} were waiting, {scheduled} scheduled"
        );
        Ok(())
    }

    /// `redrive(limit)` answered `got`; `dead_after` is every Dead id
    /// afterwards (which ones moved is the backend's choice among items that
    /// died in one step).
    pub fn redrive(
        &mut self,
        limit: usize,
        got: &Result<u64>,
        dead_after: &[ItemId],
    ) -> Result<(), Violation> {
        let moved = *got
            .as_ref()
            .map_err(|e| contract("redrive", format!("redrive failed: {e}")))?;
        let dead: BTreeMap<ItemId, u64> = self
            .items
            .iter()
            .filter_map(|(id, e)| match e.slot {
                Slot::Dead { epoch } => Some((*id, epoch)),
                _ => None,
            })
            .collect();
        let want = dead.len().min(limit) as u64;
        ensure!(
            moved == want,
            Rule::Contract("redrive"),
            "redrive of up to {limit} with {} dead moved {moved}",
            dead.len()
        );
        let after: BTreeSet<ItemId> = dead_after.iter().copied().collect();
        ensure!(
            after.iter().all(|id| dead.contains_key(id))
                && after.len() + want as usize == dead.len(),
            Rule::Contract("redrive"),
            "after a redrive of {moved}, Dead holds {after:?}; before it held {:?}",
            dead.keys().collect::<Vec<_>>()
        );
        let moved_ids: Vec<ItemId> = dead
            .keys()
            .filter(|id| !after.contains(id))
            .copied()
            .collect();
        for m in moved_ids.iter().filter(|_| !self.per_shard) {
            for (stay, epoch) in dead.iter().filter(|(id, _)| after.contains(id)) {
                ensure!(
                    dead[m] <= *epoch,
                    Rule::Contract("redrive"),
                    "redrive moved {m} but left {stay}, which died earlier"
                );
            }
        }
        for id in moved_ids {
            let e = self.entry_mut(id)?;
            e.slot = Slot::Ready;
            e.attempts = 0;
            e.fifo = false;
            e.note = Note::Free;
        }
        Ok(())
    }

    /// `redrive_item(id)` answered `got`: a Dead item moves to Ready with
    /// attempts 0 (anywhere within its priority, as after `redrive`); an
    /// item in another state stays as it is; a gone id is `NotFound`.
    pub fn redrive_item(&mut self, id: ItemId, got: &Result<bool>) -> Result<(), Violation> {
        let Some(e) = self.items.get_mut(&id) else {
            return match got {
                Err(Error::NotFound { id: n }) if *n == id => Ok(()),
                other => Err(contract(
                    "redrive_item",
                    format!(
                        "redrive_item of {id}, acked or purged, answered {other:?}; \
                         expected NotFound"
                    ),
                )),
            };
        };
        let dead = matches!(e.slot, Slot::Dead { .. });
        match got {
            Ok(moved) if *moved == dead => {}
            other => {
                return Err(contract(
                    "redrive_item",
                    format!(
                        "redrive_item of {id} in {:?} answered {other:?}; expected Ok({dead})",
                        e.slot
                    ),
                ))
            }
        }
        if dead {
            e.slot = Slot::Ready;
            e.attempts = 0;
            e.fifo = false;
            e.note = Note::Free;
        }
        Ok(())
    }

    /// `remove_item(id)` at `now` answered `got`: a live item leaves in
    /// the state it was in (a Scheduled item past its due time as Ready),
    /// its lease and its dedup key with it; a gone id is `NotFound`.
    pub fn remove_item(
        &mut self,
        id: ItemId,
        now: Window,
        got: &Result<ItemState>,
    ) -> Result<(), Violation> {
        let Some(e) = self.items.get(&id) else {
            return match got {
                Err(Error::NotFound { id: n }) if *n == id => Ok(()),
                other => Err(contract(
                    "remove_item",
                    format!(
                        "remove_item of {id}, acked, purged or removed, answered {other:?}; \
                         expected NotFound"
                    ),
                )),
            };
        };
        let want = match e.slot {
            Slot::Ready => ItemState::Ready,
            Slot::Scheduled { .. } if Self::claimable(e, now)? => ItemState::Ready,
            Slot::Scheduled { .. } => ItemState::Scheduled,
            Slot::Leased { .. } => ItemState::Leased,
            Slot::Dead { .. } => ItemState::Dead,
        };
        match got {
            Ok(state) if *state == want => {}
            other => {
                return Err(contract(
                    "remove_item",
                    format!(
                        "remove_item of {id} in {:?} answered {other:?}; expected Ok({want:?})",
                        e.slot
                    ),
                ))
            }
        }
        self.items.remove(&id);
        self.gone.insert(id);
        Ok(())
    }

    /// `purge()` answered `got`.
    pub fn purge(&mut self, got: &Result<u64>) -> Result<(), Violation> {
        let n = *got
            .as_ref()
            .map_err(|e| contract("purge", format!("purge failed: {e}")))?;
        ensure!(
            n == self.items.len() as u64,
            Rule::Contract("purge"),
            "purge deleted {n} items; the queue held {}",
            self.items.len()
        );
        let ids: Vec<ItemId> = self.items.keys().copied().collect();
        self.purged.extend(ids.iter().copied());
        self.gone.extend(ids);
        self.items.clear();
        if let Some(kept) = &mut self.kept {
            kept.clear();
        }
        Ok(())
    }
}
