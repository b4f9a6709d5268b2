//! A correct backend with one seeded fault, as a wrapper: the fault is the
//! only difference, so a violation the suite reports is the fault's.

#![allow(dead_code)] // Each test crate that includes this file uses some of the faults.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::{
    Admin, Backend, BackendExt, Capabilities, ClaimSpec, Claimed, Enqueued, Error, Groups, ItemId,
    ItemState, LayeredBackend, Lease, LeaseFate, LeaseKey, LeaseToken, LeaseTraces, LimitScope,
    NewItem, QueueLimits, QueueName, ReapReport, Released, Result, ScheduleStore, Throttles,
    Timestamp,
};

/// The fault seeded into the wrapped backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// None: the wrapper only passes calls through.
    None,
    /// No fault, but no test hooks either: checks that need them skip, the
    /// rest let time pass instead of expiring leases by hook.
    HideHooks,
    /// Ack ignores the token: it acks by id, with whatever token the item
    /// holds now (as a queue that completes "by job id" does).
    UnfencedAck,
    /// Claim fills a short batch from leases it handed out before that are
    /// still live, as a claim that reads the leased index without checking
    /// expiry would.
    DoubleClaim,
    /// `ack_many` loops over `ack`, as the trait's default does: what a
    /// wrapper that does not forward batch operations silently runs.
    LoopedBatchAck,
    /// `give_back` ignores the token: it gives the item back by id, with
    /// whatever token the item holds now.
    UnfencedGiveBack,
    /// `recover_claim` finds the right leases but reads each one's attempts
    /// from the item's max attempts (two fields read in the wrong order).
    RecoverMixesFields,
    /// `lease_fate` says Lost for a lease past its expiry, even while its
    /// token still holds the item (a fate that reads the clock before the
    /// item).
    FateOfExpiredIsLost,
    /// `set_queue_limits` replaces the limits by clearing them first, so a
    /// change of the rate forgets the window's count.
    RateForgottenOnChange,
    /// A claim that a limit cut short reports the concurrency hint
    /// whenever the queue has a concurrency limit, also when the rate's
    /// wait is the longer.
    ConcurrencyHintAlways,
    /// `put_schedule` compares only the queue and the payload with what is
    /// stored: a new cadence alone keeps the old schedule.
    CadenceChangeIgnored,
    /// `enqueue_once` remembers a request for 600 ms, not 600 s (the
    /// memory's seconds taken for milliseconds): a resend after that is
    /// written again.
    RequestMemoryInMillis,
    /// `recover_claim` finds nothing and `lease_fate` says every lease is
    /// still held: a backend that cannot tell what a lost call did, so a
    /// caller claims again and resends finished calls.
    Amnesia,
    /// A reap leaves a stray entry in Ready (planted after each reap), which
    /// the next claim or reap cleans up and reports as a repair.
    StrayAfterReap,
    /// The clock ticks once a second (`now` is cut to whole seconds).
    CoarseClock,
    /// Dedup keys are global: a key held in any queue deduplicates an item
    /// of another queue.
    GlobalDedup,
    /// A release requeues the job as a new item at the back of the queue
    /// (ack, then enqueue a copy).
    ReleaseToBack,
    /// As `ReleaseToBack`, and the copy is enqueued at priority 0: a
    /// release that requeues without the item's priority.
    ReleaseDropsPriority,
    /// Queue limits are accepted and read back but never enforced: the
    /// wrapper keeps them and claims pass through unlimited.
    IgnoredLimits,
    /// The concurrency limit is enforced in the client: it reads the
    /// Leased count, then claims what is left, in two steps (a round trip
    /// apart), so racing claimers all see the same free slots.
    LimitCheckedInClient,
    /// Every claim hands out the tokens of the first spec the wrapper saw,
    /// whatever spec it is given: what a caller that kept one spec for all
    /// its claims would send.
    OneSpecForAll,
    /// `redrive_item` checks that the named item is Dead, then moves the
    /// oldest Dead item (a `redrive` of one) instead of the one named.
    RedriveOldest,
    /// `redrive_item` split into steps: it reads the item's state, then
    /// moves it in a second round trip and says it moved whatever that
    /// step found, so racing callers all answer `true`.
    SplitRedriveItem,
    /// `remove_item` split into steps: it reads the item's state, then
    /// removes it in a second round trip and answers the state it read,
    /// whatever that step found, so racing removes (and a remove racing an
    /// ack) all succeed.
    SplitRemove,
    /// `fire_schedule` split into steps, as a scheduler that reads the
    /// last tick, enqueues and then records the tick would run it: read,
    /// enqueue, write, each on its own.
    SplitFire,
    /// A claim reports the claim's time as the item's enqueue time (as a
    /// backend that never stored it would).
    ClaimTimeAsEnqueueTime,
    /// `queues` also lists every queue ever enqueued through the wrapper,
    /// as a list of queue names that is added to and never pruned.
    ListedAfterPurge,
    /// `queues` leaves out queues whose items are all Dead, as a listing
    /// that reads only the indexes of live work.
    DeadHidden,
    /// `queues` is a list the client keeps from its own calls: a queue is
    /// added once an enqueue returns, removed once a purge returns or an
    /// ack leaves the queue empty (a round trip after the call). Right when
    /// calls come one at a time; when they race, a purge's removal lands
    /// after an enqueue's addition, and the other way round.
    ListingKeptByCalls,
    /// `delete_queue` only purges: the items go, the queue's limits stay
    /// (what a delete built from the purge it already had leaves behind).
    DeleteAsPurge,
    /// A reap that first visits every live lease of the queue (each lease
    /// the wrapper handed out, checked against the clock), as a reaper
    /// that walks the leases instead of seeking an expiry-ordered index.
    ScanningReap,
    /// The concurrency limit is kept as a count of held slots that claims
    /// add to and only acks and reaps take from: a release, fail,
    /// `give_back` or purge keeps its slot for good.
    SlotFreedOnlyByAck,
    /// `enqueue_once` in steps: look the request up, enqueue, record the
    /// request, each a round trip of its own, so resends in flight at once
    /// all miss the record and all write.
    SplitEnqueueOnce,
    /// A delayed item falls due 1 ms before its delay has passed, as an
    /// enqueue that rounds the due time down would make it.
    DueEarly,
    /// `peek` of Ready reads only items filed Ready: a delayed item that
    /// fell due is missing from it until a claim has moved it (the wrapper
    /// files delayed items by id and drops them from the filing when
    /// claimed).
    PeekMissesDue,
    /// A resent `enqueue_once` gives back the first call's ids but says
    /// every entry was written anew, as a record that keeps only the ids.
    ReplayForgetsDedup,
    /// Every state's listing and the redrive go by item id, as a backend
    /// that reads its items by primary key instead of each state's index:
    /// `peek` of any state sorted by id, `redrive` moving the lowest ids of
    /// Dead first (each through `redrive_item`).
    ById,
    /// `lease_fate` keeps no finishing trace: past `held_until` a lease
    /// whose token no longer holds the item is Lost, also when its own
    /// call ended it (the fate before finishing traces).
    FateWithoutTrace,
    /// `recover_claim` returns only the leases still live: the expired,
    /// unreaped ones are left to a reaper (it reaps the queue first).
    RecoverLeavesExpired,
    /// Claims takeover traces ([`LeaseTraces::Takeovers`]) but its reap
    /// leaves none: a lease a reaper took is answered Finished, as if its
    /// own call had ended it.
    TakeoverWithoutTrace,
    /// Claims takeover traces, and a claim that leases an item again
    /// under the token a reap took leaves that trace (the first takeover
    /// protocol): the new lease's landed ack is answered Lost.
    ClaimKeepsTakeoverTrace,
}

/// `inner` with `fault`.
#[derive(Debug)]
pub(crate) struct Faulty {
    inner: Arc<dyn Backend>,
    fault: Fault,
    /// The latest token handed out per item (what "by id" resolves to).
    current: Mutex<HashMap<(QueueName, ItemId), LeaseToken>>,
    /// Leases handed out, for the double claim to hand out again.
    handed: Mutex<Vec<Lease>>,
    /// Dedup keys seen, by key: the item holding it (for GlobalDedup).
    keys: Mutex<HashMap<String, ItemId>>,
    /// Limits kept by the wrapper (IgnoredLimits, LimitCheckedInClient).
    limits: Mutex<HashMap<QueueName, QueueLimits>>,
    /// Last fired tick per schedule (for SplitFire).
    ticks: Mutex<HashMap<ScheduleName, Timestamp>>,
    /// The wrapper's own listing (ListedAfterPurge, ListingKeptByCalls).
    listing: Mutex<BTreeSet<QueueName>>,
    /// The request of the first claim (for OneSpecForAll).
    first_request: Mutex<Option<LeaseToken>>,
    /// Each lease's expiry as handed out, by queue (what ScanningReap walks).
    expiries: Mutex<HashMap<QueueName, HashMap<ItemId, Timestamp>>>,
    /// Slots held per queue (SlotFreedOnlyByAck).
    slots: Mutex<HashMap<QueueName, u64>>,
    /// Delayed items not claimed since their enqueue (PeekMissesDue).
    delayed: Mutex<BTreeSet<(QueueName, ItemId)>>,
    /// Requests recorded by the split `enqueue_once` (SplitEnqueueOnce).
    requests: Mutex<HashMap<(QueueName, LeaseToken), Vec<Enqueued>>>,
    /// When each request was first seen (RequestMemoryInMillis).
    first_seen: Mutex<HashMap<(QueueName, LeaseToken), std::time::Instant>>,
    /// Items a reap took a lease of, never forgotten
    /// (ClaimKeepsTakeoverTrace).
    taken: Mutex<BTreeSet<(QueueName, ItemId)>>,
}

impl Faulty {
    pub(crate) fn new(inner: Arc<dyn Backend>, fault: Fault) -> Self {
        Faulty {
            inner,
            fault,
            current: Mutex::new(HashMap::new()),
            handed: Mutex::new(Vec::new()),
            keys: Mutex::new(HashMap::new()),
            limits: Mutex::new(HashMap::new()),
            ticks: Mutex::new(HashMap::new()),
            listing: Mutex::new(BTreeSet::new()),
            first_request: Mutex::new(None),
            expiries: Mutex::new(HashMap::new()),
            slots: Mutex::new(HashMap::new()),
            requests: Mutex::new(HashMap::new()),
            first_seen: Mutex::new(HashMap::new()),
            delayed: Mutex::new(BTreeSet::new()),
            taken: Mutex::new(BTreeSet::new()),
        }
    }
}

impl Faulty {
    /// `lease` under the latest token the wrapper handed out for its item
    /// (unchanged when it handed out none): what an operation "by id"
    /// resolves to.
    fn by_id(&self, lease: &LeaseKey) -> LeaseKey {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(lease.queue.clone(), lease.id))
            .copied();
        LeaseKey {
            token: current.unwrap_or(lease.token),
            ..lease.clone()
        }
    }

    /// Adds `queue` to the wrapper's own listing, or takes it out.
    fn note_listed(&self, queue: &QueueName, listed: bool) {
        let mut listing = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        if listed {
            listing.insert(queue.clone());
        } else {
            listing.remove(queue);
        }
    }

    /// After an ack of `queue` returned (ListingKeptByCalls): a round
    /// trip, then the queue leaves the listing if it looks empty.
    async fn after_ack(&self, queue: &QueueName) -> Result<()> {
        if self.fault == Fault::ListingKeptByCalls {
            tokio::task::yield_now().await;
            if self.inner.stats(queue).await?.total() == 0 {
                self.note_listed(queue, false);
            }
        }
        Ok(())
    }

    /// The limits the wrapper keeps for `queue`.
    /// Adds `n` to the slots `queue` holds (SlotFreedOnlyByAck); a
    /// negative `n` frees them.
    fn hold_slots(&self, queue: &QueueName, n: i64) {
        if self.fault != Fault::SlotFreedOnlyByAck {
            return;
        }
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let held = slots.entry(queue.clone()).or_default();
        *held = held.saturating_add_signed(n);
    }

    /// A claim cut to the `limit` slots less the `held` ones the wrapper
    /// counted itself; a claim cut short says when to come back.
    async fn claim_within(
        &self,
        queue: &QueueName,
        spec: &ClaimSpec,
        limit: u32,
        held: u64,
    ) -> Result<Claimed> {
        let left = u64::from(limit).saturating_sub(held);
        let want = u32::try_from(left).unwrap_or(u32::MAX).min(spec.max());
        if want == 0 {
            return Ok(Claimed {
                retry_after: Some(Duration::from_millis(100)),
                ..Claimed::default()
            });
        }
        let sub = ClaimSpec::with_request(want, spec.ttl().get(), spec.request())?;
        let mut c = self.inner.claim(queue, sub).await?;
        if want < spec.max() {
            c.retry_after = Some(Duration::from_millis(100));
        }
        Ok(c)
    }

    fn kept_limits(&self, queue: &QueueName) -> QueueLimits {
        self.limits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(queue)
            .copied()
            .unwrap_or_default()
    }
}

#[async_trait]
impl LayeredBackend for Faulty {
    type Inner = Arc<dyn Backend>;

    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    fn capabilities(&self) -> Capabilities {
        let caps = self.inner.capabilities();
        if matches!(
            self.fault,
            Fault::TakeoverWithoutTrace | Fault::ClaimKeepsTakeoverTrace
        ) {
            return caps.lease_traces(LeaseTraces::Takeovers);
        }
        caps
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        if self.fault == Fault::OneSpecForAll {
            let first = *self
                .first_request
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(spec.request());
            let reused = ClaimSpec::with_request(spec.max(), spec.ttl().get(), first)?;
            return self.inner.claim(queue, reused).await;
        }
        if self.fault == Fault::LimitCheckedInClient {
            if let Some(k) = self.kept_limits(queue).concurrency {
                let leased = self.inner.stats(queue).await?.leased;
                // The round trip between the read and the claim.
                tokio::time::sleep(Duration::from_millis(1)).await;
                return self.claim_within(queue, &spec, k, leased).await;
            }
        }
        if self.fault == Fault::SlotFreedOnlyByAck {
            if let Some(k) = self.kept_limits(queue).concurrency {
                let held = self
                    .slots
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(queue)
                    .copied()
                    .unwrap_or(0);
                let c = self.claim_within(queue, &spec, k, held).await?;
                self.hold_slots(queue, c.leases.len() as i64);
                return Ok(c);
            }
        }
        let max = spec.max() as usize;
        let ttl = spec.ttl();
        let mut claimed = self.inner.claim(queue, spec).await?;
        if self.fault == Fault::ConcurrencyHintAlways
            && claimed.retry_after.is_some()
            && self
                .inner
                .throttles()?
                .queue_limits(queue)
                .await?
                .concurrency
                .is_some()
        {
            claimed.retry_after = Some(leaseq_core::queue_limits::CONCURRENCY_RETRY);
        }
        if self.fault == Fault::ClaimTimeAsEnqueueTime {
            for l in &mut claimed.leases {
                l.enqueued_at = Timestamp::from_millis(
                    l.expires_at.as_millis().saturating_sub(ttl.as_millis()),
                );
            }
        }
        {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            for l in &claimed.leases {
                current.insert((queue.clone(), l.id()), l.token());
            }
        }
        if self.fault == Fault::PeekMissesDue {
            let mut filed = self.delayed.lock().unwrap_or_else(|p| p.into_inner());
            for l in &claimed.leases {
                filed.remove(&(queue.clone(), l.id()));
            }
        }
        if self.fault == Fault::ScanningReap {
            let mut expiries = self.expiries.lock().unwrap_or_else(|p| p.into_inner());
            let mine = expiries.entry(queue.clone()).or_default();
            for l in &claimed.leases {
                mine.insert(l.id(), l.expires_at);
            }
        }
        if self.fault == Fault::DoubleClaim {
            let now = self.inner.now().await?;
            let mut handed = self.handed.lock().unwrap_or_else(|p| p.into_inner());
            let fresh = claimed.leases.clone();
            for old in handed.iter() {
                if claimed.leases.len() >= max {
                    break;
                }
                let live = old.expires_at > now && old.key.queue == *queue;
                if live && !claimed.leases.iter().any(|l| l.id() == old.id()) {
                    claimed.leases.push(old.clone());
                }
            }
            handed.extend(fresh);
        }
        Ok(claimed)
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        if self.fault == Fault::SlotFreedOnlyByAck {
            self.inner.ack(lease).await?;
            self.hold_slots(&lease.queue, -1);
            return Ok(());
        }
        if self.fault == Fault::ListingKeptByCalls {
            self.inner.ack(lease).await?;
            return self.after_ack(&lease.queue).await;
        }
        if self.fault == Fault::UnfencedAck {
            return self.inner.ack(&self.by_id(lease)).await;
        }
        self.inner.ack(lease).await
    }

    async fn now(&self) -> Result<Timestamp> {
        let t = self.inner.now().await?;
        if self.fault == Fault::CoarseClock {
            return Ok(Timestamp::from_millis(t.as_millis() / 1000 * 1000));
        }
        Ok(t)
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        if matches!(
            self.fault,
            Fault::ListedAfterPurge | Fault::ListingKeptByCalls
        ) {
            let out = self.inner.enqueue(queue, items).await?;
            tokio::task::yield_now().await;
            self.note_listed(queue, true);
            return Ok(out);
        }
        if self.fault == Fault::PeekMissesDue {
            let delayed: Vec<bool> = items.iter().map(|i| !i.delay.is_zero()).collect();
            let out = self.inner.enqueue(queue, items).await?;
            let mut filed = self.delayed.lock().unwrap_or_else(|p| p.into_inner());
            for (e, later) in out.iter().zip(delayed) {
                if later && !e.deduplicated {
                    filed.insert((queue.clone(), e.id));
                }
            }
            return Ok(out);
        }
        if self.fault == Fault::DueEarly {
            let items = items
                .into_iter()
                .map(|item| {
                    let delay = item.delay;
                    if delay.is_zero() {
                        item
                    } else {
                        item.delay(delay.saturating_sub(Duration::from_millis(1)))
                    }
                })
                .collect();
            return self.inner.enqueue(queue, items).await;
        }
        if self.fault != Fault::GlobalDedup {
            return self.inner.enqueue(queue, items).await;
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let key = item.dedup_key.as_deref().map(str::to_owned);
            let held = key.as_ref().and_then(|k| {
                self.keys
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(k)
                    .copied()
            });
            if let Some(id) = held {
                out.push(Enqueued {
                    id,
                    deduplicated: true,
                });
                continue;
            }
            let e = self.inner.enqueue(queue, vec![item]).await?;
            if let (Some(k), Some(first)) = (key, e.first()) {
                self.keys
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(k, first.id);
            }
            out.extend(e);
        }
        Ok(out)
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        if self.fault == Fault::ScanningReap {
            let now = self.inner.now().await?;
            let expiries = self.expiries.lock().unwrap_or_else(|p| p.into_inner());
            let due = expiries
                .get(queue)
                .map_or(0, |m| m.values().filter(|t| **t <= now).count());
            std::hint::black_box(due);
        }
        let leased_before = if self.fault == Fault::ClaimKeepsTakeoverTrace {
            self.inner.peek(queue, ItemState::Leased, 1_000).await?
        } else {
            Vec::new()
        };
        let r = self.inner.reap(queue).await?;
        if !leased_before.is_empty() {
            let still: BTreeSet<ItemId> = self
                .inner
                .peek(queue, ItemState::Leased, 1_000)
                .await?
                .into_iter()
                .map(|i| i.id)
                .collect();
            let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
            for info in leased_before.iter().filter(|i| !still.contains(&i.id)) {
                taken.insert((queue.clone(), info.id));
            }
        }
        self.hold_slots(queue, -i64::try_from(r.recovered()).unwrap_or(i64::MAX));
        if self.fault == Fault::StrayAfterReap && r.recovered() > 0 {
            if let Some(h) = self.inner.test_hooks() {
                h.plant_dangling_ready(queue, ItemId::new(u64::MAX / 2))
                    .await?;
            }
        }
        Ok(r)
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        let priority = match self.fault {
            Fault::ReleaseToBack => None,
            Fault::ReleaseDropsPriority => Some(0),
            _ => return self.inner.release(lease, delay).await,
        };
        let info = self.inner.item(&lease.queue, lease.id).await?;
        self.inner.ack(lease).await?;
        let copy = NewItem::new(info.payload).priority(priority.unwrap_or(info.priority));
        self.inner.enqueue(&lease.queue, vec![copy]).await?;
        Ok(Released::Ready)
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        if self.fault == Fault::Amnesia {
            return Ok(Claimed::default());
        }
        if self.fault == Fault::RecoverLeavesExpired {
            self.inner.reap(queue).await?;
        }
        let mut found = self.inner.recover_claim(queue, spec).await?;
        if self.fault == Fault::RecoverMixesFields {
            for l in &mut found.leases {
                l.attempts = l.max_attempts;
            }
        }
        Ok(found)
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        if self.fault == Fault::Amnesia {
            return Ok(LeaseFate::Held);
        }
        if self.fault == Fault::FateOfExpiredIsLost && self.inner.now().await? >= held_until {
            return Ok(LeaseFate::Lost);
        }
        let fate = self.inner.lease_fate(lease, held_until).await?;
        if self.fault == Fault::TakeoverWithoutTrace && fate == LeaseFate::Lost {
            let state = match self.inner.item(&lease.queue, lease.id).await {
                Ok(info) => Some(info.state),
                Err(Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            return Ok(LeaseFate::Finished { state });
        }
        if self.fault == Fault::ClaimKeepsTakeoverTrace
            && matches!(fate, LeaseFate::Finished { .. })
            && self.inner.now().await? >= held_until
            && self
                .taken
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&(lease.queue.clone(), lease.id))
        {
            return Ok(LeaseFate::Lost);
        }
        if self.fault == Fault::FateWithoutTrace
            && matches!(fate, LeaseFate::Finished { .. })
            && self.inner.now().await? >= held_until
        {
            return Ok(LeaseFate::Lost);
        }
        Ok(fate)
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        if self.fault == Fault::UnfencedGiveBack {
            return self.inner.give_back(&self.by_id(lease)).await;
        }
        self.inner.give_back(lease).await
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        if self.fault == Fault::ListingKeptByCalls {
            let out = self.inner.ack_many(leases).await?;
            for lease in leases {
                self.after_ack(&lease.queue).await?;
            }
            return Ok(out);
        }
        if self.fault == Fault::SlotFreedOnlyByAck {
            let out = self.inner.ack_many(leases).await?;
            for (l, r) in leases.iter().zip(&out) {
                if r.is_ok() {
                    self.hold_slots(&l.queue, -1);
                }
            }
            return Ok(out);
        }
        if self.fault != Fault::LoopedBatchAck {
            return self.inner.ack_many(leases).await;
        }
        let mut out = Vec::with_capacity(leases.len());
        for lease in leases {
            out.push(self.inner.ack(lease).await);
        }
        Ok(out)
    }

    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        if self.fault == Fault::RequestMemoryInMillis {
            let memory = Duration::from_millis(leaseq_core::limits::REQUEST_MEMORY.as_secs());
            let first_seen = *self
                .first_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry((queue.clone(), request))
                .or_insert_with(std::time::Instant::now);
            if first_seen.elapsed() > memory {
                return self.inner.enqueue(queue, items).await;
            }
        }
        if self.fault == Fault::ReplayForgetsDedup {
            let mut out = self.inner.enqueue_once(queue, request, items).await?;
            let replay = self
                .requests
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert((queue.clone(), request), out.clone())
                .is_some();
            if replay {
                for e in &mut out {
                    e.deduplicated = false;
                }
            }
            return Ok(out);
        }
        if self.fault != Fault::SplitEnqueueOnce {
            return self.inner.enqueue_once(queue, request, items).await;
        }
        let key = (queue.clone(), request);
        let seen = self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(first) = seen {
            return Ok(first);
        }
        // The enqueue and the record are round trips of their own.
        tokio::task::yield_now().await;
        let written = self.inner.enqueue(queue, items).await?;
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, written.clone());
        Ok(written)
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let listing = || {
            self.listing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        };
        match self.fault {
            Fault::ListedAfterPurge => {
                let mut all: BTreeSet<QueueName> = self.inner.queues().await?.into_iter().collect();
                all.extend(listing());
                Ok(all.into_iter().collect())
            }
            Fault::DeadHidden => {
                let mut out = Vec::new();
                for q in self.inner.queues().await? {
                    let s = self.inner.stats(&q).await?;
                    if s.total() > s.dead {
                        out.push(q);
                    }
                }
                Ok(out)
            }
            Fault::ListingKeptByCalls => Ok(listing().into_iter().collect()),
            _ => self.inner.queues().await,
        }
    }

    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<leaseq_core::ItemInfo>> {
        if self.fault == Fault::PeekMissesDue && state == ItemState::Ready {
            let mut listed = self.inner.peek(queue, state, limit).await?;
            let filed = self.delayed.lock().unwrap_or_else(|p| p.into_inner());
            listed.retain(|i| !filed.contains(&(queue.clone(), i.id)));
            return Ok(listed);
        }
        if self.fault != Fault::ById {
            return self.inner.peek(queue, state, limit).await;
        }
        let max = leaseq_core::limits::MAX_PEEK;
        let mut all = self.inner.peek(queue, state, max).await?;
        all.sort_by_key(|i| i.id);
        all.truncate(limit.min(max));
        Ok(all)
    }

    fn groups(&self) -> Groups<'_> {
        let inner = self.inner.groups();
        Groups::none()
            .admin(self)
            .throttles(self)
            .schedules(self)
            .test_hooks(match self.fault {
                Fault::HideHooks => None,
                _ => inner.test_hooks,
            })
    }
}

#[async_trait]
impl Admin for Faulty {
    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let n = self.inner.admin()?.purge(queue).await?;
        if self.fault == Fault::ListingKeptByCalls {
            tokio::task::yield_now().await;
            self.note_listed(queue, false);
        }
        Ok(n)
    }

    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        if self.fault == Fault::DeleteAsPurge {
            return self.inner.admin()?.purge(queue).await;
        }
        self.inner.admin()?.delete_queue(queue).await
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        if !matches!(self.fault, Fault::RedriveOldest | Fault::SplitRedriveItem) {
            return self.inner.admin()?.redrive_item(queue, id).await;
        }
        if self.inner.item(queue, id).await?.state != ItemState::Dead {
            return Ok(false);
        }
        if self.fault == Fault::RedriveOldest {
            return Ok(self.inner.admin()?.redrive(queue, 1).await? == 1);
        }
        // The round trip between the read and the move.
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.inner.admin()?.redrive_item(queue, id).await?;
        Ok(true)
    }

    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        if self.fault != Fault::SplitRemove {
            return self.inner.admin()?.remove_item(queue, id).await;
        }
        let state = self.inner.item(queue, id).await?.state;
        // The round trip between the read and the removal.
        tokio::time::sleep(Duration::from_millis(1)).await;
        match self.inner.admin()?.remove_item(queue, id).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(state),
            Err(e) => Err(e),
        }
    }

    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        if self.fault != Fault::ById {
            return self.inner.admin()?.redrive(queue, limit).await;
        }
        let mut moved = 0;
        for dead in LayeredBackend::peek(self, queue, ItemState::Dead, limit).await? {
            moved += u64::from(self.inner.admin()?.redrive_item(queue, dead.id).await?);
        }
        Ok(moved)
    }
}

#[async_trait]
impl Throttles for Faulty {
    fn scope(&self) -> LimitScope {
        self.inner
            .throttles()
            .map_or(LimitScope::Global, |t| t.scope())
    }

    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        if self.fault == Fault::RateForgottenOnChange && limits != QueueLimits::NONE {
            limits.check()?;
            self.inner
                .throttles()?
                .set_queue_limits(queue, QueueLimits::NONE)
                .await?;
        }
        if !matches!(
            self.fault,
            Fault::IgnoredLimits | Fault::LimitCheckedInClient | Fault::SlotFreedOnlyByAck
        ) {
            return self
                .inner
                .throttles()?
                .set_queue_limits(queue, limits)
                .await;
        }
        limits.check()?;
        self.limits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(queue.clone(), limits);
        Ok(())
    }

    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        if !matches!(
            self.fault,
            Fault::IgnoredLimits | Fault::LimitCheckedInClient | Fault::SlotFreedOnlyByAck
        ) {
            return self.inner.throttles()?.queue_limits(queue).await;
        }
        Ok(self.kept_limits(queue))
    }
}

#[async_trait]
impl ScheduleStore for Faulty {
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        if self.fault == Fault::CadenceChangeIgnored {
            let same = self
                .inner
                .schedule_store()?
                .schedules()
                .await?
                .into_iter()
                .find(|s| {
                    &s.name == schedule.name()
                        && &s.queue == schedule.queue()
                        && s.payload == schedule.payload()
                });
            if let Some(kept) = same {
                return Ok(kept);
            }
        }
        self.inner.schedule_store()?.put_schedule(schedule).await
    }

    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        if self.fault != Fault::SplitFire {
            return self.inner.schedule_store()?.fire_schedule(tick, item).await;
        }
        // Step 1: read the definition and the last tick.
        let Some(stored) = self
            .inner
            .schedule_store()?
            .schedules()
            .await?
            .into_iter()
            .find(|s| s.name == tick.name && s.revision == tick.revision)
        else {
            return Ok(Fired::Stale);
        };
        let last = self
            .ticks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&tick.name)
            .copied()
            .max(stored.last_tick);
        if let Some(last_tick) = last.filter(|l| *l >= tick.at) {
            return Ok(Fired::AlreadyFired { last_tick });
        }
        let now = self.inner.now().await?;
        if tick.at > now {
            return Ok(Fired::NotDue { now });
        }
        // Step 2: enqueue. Step 3: record the tick. Each step is a round
        // trip of its own, where other callers run.
        tokio::task::yield_now().await;
        let e = self.inner.enqueue(&stored.queue, vec![item]).await?;
        self.ticks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tick.name.clone(), tick.at);
        match e.into_iter().next() {
            Some(e) => Ok(Fired::Enqueued(e)),
            None => Ok(Fired::Stale),
        }
    }

    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        self.inner.schedule_store()?.remove_schedule(name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.inner.schedule_store()?.schedules().await
    }
}
