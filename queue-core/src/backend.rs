//! The storage trait every backend implements, with its contract.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::{
    ClaimSpec, Claimed, Enqueued, ItemId, ItemInfo, ItemState, LeaseFate, LeaseKey, LeaseToken,
    LeaseTtl, LimitScope, Limits, NewItem, QueueLimits, QueueName, QueueStats, ReapReport,
    Released, Result, TestHooks, Timestamp,
};

/// What a backend supports and guarantees, as data. The conformance suite
/// picks its checks from it and prints every check it skips and why.
///
/// Built readably at the call site:
///
/// ```
/// use leaseq_core::{Capabilities, Order};
/// let caps = Capabilities::all_features().durable(true).shared(true);
/// assert!(caps.durable && caps.dedup && caps.order == Order::Global);
/// let sharded = caps.order(Order::PerShard).atomic_batch(false);
/// assert!(!sharded.atomic_batch);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// Items survive a crash of the storage server (or of the process, for an
    /// embedded store).
    pub durable: bool,
    /// Several processes can share one queue through this backend.
    pub shared: bool,
    /// Dedup keys are honoured.
    pub dedup: bool,
    /// Priorities are honoured.
    pub priorities: bool,
    /// Delays are honoured.
    pub delays: bool,
    /// Over which items priority and FIFO order hold.
    pub order: Order,
    /// A batch [`Backend::enqueue`] is written whole or not at all, even when
    /// the server fails midway.
    pub atomic_batch: bool,
    /// How [`Backend::set_queue_limits`] is enforced, if at all.
    pub queue_limits: LimitScope,
    /// Periodic schedules are stored and fired ([`Backend::put_schedule`],
    /// [`Backend::fire_schedule`], …).
    pub schedules: bool,
    /// [`NewItem::unique_for`] is honoured: a dedup key stays held after
    /// its item is acked.
    pub unique_for: bool,
    /// [`Backend::delete_queue`] forgets a queue entirely.
    pub delete_queue: bool,
    /// [`Backend::remove_item`] takes one item out of its queue.
    pub remove_item: bool,
}

/// Over which items a backend keeps claim order (priority, then FIFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Order {
    /// One order over every item of a queue (INV-8 as written).
    #[default]
    Global,
    /// Order holds within each shard of a queue, not across shards.
    PerShard,
}

impl Capabilities {
    /// Every feature of the core operations (dedup, priorities, delays,
    /// global order, atomic batches), neither durable nor shared: add those
    /// with [`Self::durable`] and [`Self::shared`]. Schedules and
    /// unique-for keys need operations of their own: add them with
    /// [`Self::schedules`] and [`Self::unique_for`].
    pub const fn all_features() -> Self {
        Capabilities {
            durable: false,
            shared: false,
            dedup: true,
            priorities: true,
            delays: true,
            order: Order::Global,
            atomic_batch: true,
            queue_limits: LimitScope::Unsupported,
            schedules: false,
            unique_for: false,
            delete_queue: false,
            remove_item: false,
        }
    }

    /// With `durable` set.
    #[must_use]
    pub const fn durable(mut self, yes: bool) -> Self {
        self.durable = yes;
        self
    }

    /// With `shared` set.
    #[must_use]
    pub const fn shared(mut self, yes: bool) -> Self {
        self.shared = yes;
        self
    }

    /// With `dedup` set.
    #[must_use]
    pub const fn dedup(mut self, yes: bool) -> Self {
        self.dedup = yes;
        self
    }

    /// With `priorities` set.
    #[must_use]
    pub const fn priorities(mut self, yes: bool) -> Self {
        self.priorities = yes;
        self
    }

    /// With `delays` set.
    #[must_use]
    pub const fn delays(mut self, yes: bool) -> Self {
        self.delays = yes;
        self
    }

    /// With `order` set.
    #[must_use]
    pub const fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// With `atomic_batch` set.
    #[must_use]
    pub const fn atomic_batch(mut self, yes: bool) -> Self {
        self.atomic_batch = yes;
        self
    }

    /// With `queue_limits` set.
    #[must_use]
    pub const fn queue_limits(mut self, scope: LimitScope) -> Self {
        self.queue_limits = scope;
        self
    }

    /// With `schedules` set.
    #[must_use]
    pub const fn schedules(mut self, yes: bool) -> Self {
        self.schedules = yes;
        self
    }

    /// With `unique_for` set.
    #[must_use]
    pub const fn unique_for(mut self, yes: bool) -> Self {
        self.unique_for = yes;
        self
    }

    /// With `delete_queue` set.
    #[must_use]
    pub const fn delete_queue(mut self, yes: bool) -> Self {
        self.delete_queue = yes;
        self
    }

    /// With `remove_item` set.
    #[must_use]
    pub const fn remove_item(mut self, yes: bool) -> Self {
        self.remove_item = yes;
        self
    }
}

/// The storage contract. Every method is one atomic step per item: no
/// transition is split across round trips, so concurrent callers (in this
/// process or others) can never observe or produce a half-done transition.
///
/// The trait is object safe: `Arc<dyn Backend>` is the usual handle.
///
/// # Contract (all methods)
/// - Bad input returns [`crate::Error::InvalidInput`] before anything is
///   written. Use the checks in [`crate::limits`].
/// - Server and connection failures return [`crate::Error::Backend`]; they
///   never panic, and the next call reconnects.
/// - Lease expiry is decided by the backend's own clock ([`Backend::now`]).
/// - A Scheduled item whose due time has passed on that clock is Ready to
///   every caller: [`Backend::stats`] counts it as Ready, [`Backend::peek`]
///   and [`Backend::item`] show it as Ready (in its place in claim order),
///   and claims take it, whether or not the store has moved it yet.
/// - An item that comes back to Ready (a release, a reap, a redrive, a
///   delay falling due) takes its place by priority and enqueue order, as
///   if it had never left: not the back of the queue.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// What this backend supports.
    fn capabilities(&self) -> Capabilities;

    /// The limits this backend enforces.
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// The backend's clock, the one that decides lease expiry.
    async fn now(&self) -> Result<Timestamp>;

    /// Adds a batch of items to `queue`.
    ///
    /// # Contract
    /// - The whole batch is checked first; a bad item rejects the batch and
    ///   nothing is written.
    /// - Items without delay are Ready, with a delay Scheduled.
    /// - Each new item records the backend's now as its `enqueued_at`
    ///   ([`crate::Lease::enqueued_at`], [`ItemInfo::enqueued_at`]), which
    ///   claims, `peek` and `item` return unchanged until it is acked
    ///   (through releases, reaps, fails and redrives).
    /// - An item whose dedup key is held by an unacked item (any state) is
    ///   not written; its entry in the result carries the holder's id and
    ///   `deduplicated: true`. With [`Capabilities::unique_for`], a key is
    ///   also held by an item acked less than its
    ///   [`NewItem::unique_for`] ago on the backend's clock (the result
    ///   then carries the acked item's id); once the hold has passed the
    ///   key is free. Concurrent enqueues with one key create one item
    ///   (INV-9). Within one batch the first item with a key wins.
    /// - Results are in the order of `items`.
    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>>;

    /// [`Backend::enqueue`] under a caller-chosen `request` id, so a batch
    /// sent again after a lost reply is written once.
    ///
    /// # Contract
    /// - Exactly like [`Backend::enqueue`] the first time `request` is seen
    ///   on `queue`.
    /// - Sent again with the same `request` on the same queue within
    ///   [`crate::limits::REQUEST_MEMORY`], it writes nothing and returns
    ///   the first call's results (`deduplicated` as the first call said).
    ///   This holds also when the first call's reply was lost.
    /// - The batch must be the same; a different batch under a request id
    ///   already used is [`crate::Error::InvalidInput`] (its size differs) or
    ///   gets the first batch's results.
    /// - The default returns [`crate::Error::Unsupported`].
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        let _ = (queue, request, items);
        Err(crate::Error::unsupported("enqueue_once"))
    }

    /// Leases up to `spec.max()` claimable items.
    ///
    /// # Contract
    /// - Highest priority first, FIFO by enqueue order within a priority
    ///   (INV-8). Due Scheduled items are claimable.
    /// - Each lease gets a distinct token of the spec's family
    ///   ([`ClaimSpec::owns`]; a plain backend gives the `i`-th lease in
    ///   claim order [`ClaimSpec::token`]`(i)`, a layer may use other
    ///   tokens of the family), `attempts + 1`, and expires at `now + ttl`
    ///   on the backend's clock. Tokens come from the caller's spec so that
    ///   a claim whose reply was lost can be recovered
    ///   ([`Backend::recover_claim`]). The spec is taken by value: one
    ///   spec, one claim ([`ClaimSpec`]).
    /// - MUST NOT return an item whose lease is live (INV-2).
    /// - An index entry without its item, or with corrupt data, is removed,
    ///   logged, reported in [`Claimed::repairs`], and the claim goes on to
    ///   the next entry (INV-6). It returns fewer than `max` only when fewer
    ///   are claimable, or when the queue's limits
    ///   ([`Backend::set_queue_limits`]) allow fewer: then
    ///   [`Claimed::retry_after`] says when to come back.
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed>;

    /// The leases a claim with `spec` made that its tokens still hold: what
    /// a caller whose claim reply was lost uses instead of claiming again.
    /// Claims nothing, so it borrows the spec the caller keeps.
    ///
    /// # Contract
    /// - Returns every item of `queue` whose current token belongs to
    ///   `spec`'s family ([`ClaimSpec::owns`]) and whose lease is live, as
    ///   [`Backend::claim`] would have returned it, in claim order.
    /// - Empty when the claim never ran (or leased nothing).
    /// - Its cost may grow with the queue's live leases: it is for the rare
    ///   call after a lost reply.
    /// - The default returns [`crate::Error::Unsupported`].
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let _ = (queue, spec);
        Err(crate::Error::unsupported("recover_claim"))
    }

    /// What became of `lease` after a call on it whose reply was lost.
    /// `held_until` is the latest expiry the caller knows for the lease (from
    /// the claim or the last extend).
    ///
    /// # Contract
    /// - [`LeaseFate::Held`] when the item's current token is `lease.token`.
    /// - Otherwise [`LeaseFate::Finished`] with the item's state (or `None`
    ///   when it is gone) if the backend's now is before `held_until`: no
    ///   reaper could have taken the lease, so its own call ended it, or
    ///   the store lost it (a failover that lost writes, a purge, a
    ///   [`Backend::remove_item`]). A caller
    ///   that sent no call which could have ended it knows it is the
    ///   second: [`crate::settle`] then reports
    ///   [`crate::Error::LeaseVanished`].
    /// - Otherwise [`LeaseFate::Lost`].
    /// - One atomic read; changes nothing.
    /// - The default returns [`crate::Error::Unsupported`].
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        let _ = (lease, held_until);
        Err(crate::Error::unsupported("lease_fate"))
    }

    /// Removes the item: the work is done.
    ///
    /// # Contract
    /// Only if the item's current token is `lease.token` and the lease has
    /// not been reaped; otherwise [`crate::Error::LeaseLost`] and nothing
    /// changes (INV-3). A lease the store lost (its item gone or no longer
    /// Leased under the token before the lease expired, by no call of its
    /// own) is `LeaseLost` here too: a backend never answers
    /// [`crate::Error::LeaseVanished`] itself; [`crate::settle`] tells the
    /// two apart through [`Backend::lease_fate`]. After a successful ack no claim returns the item
    /// again (INV-10). An ack of a lease that expired but was not yet
    /// reaped or re-claimed succeeds. When the item was enqueued with
    /// [`NewItem::unique_for`] (and the backend has
    /// [`Capabilities::unique_for`]), the same step keeps its dedup key
    /// held from the backend's now for that long.
    async fn ack(&self, lease: &LeaseKey) -> Result<()>;

    /// Acks a batch of leases; returns one result per lease, in the order of
    /// `leases`: `Ok(())` or [`crate::Error::LeaseLost`].
    ///
    /// # Contract
    /// - Each lease is fenced on its own exactly like [`Backend::ack`]: a
    ///   stale, forged or spent token gets `LeaseLost` in its own slot,
    ///   changes nothing for its item, and does not affect the other leases
    ///   (INV-3). Each item's ack is atomic; the batch as a whole is not a
    ///   transaction.
    /// - A lease named twice is acked once: the second occurrence gets
    ///   `LeaseLost`.
    /// - Leases may name different queues.
    /// - An empty slice returns an empty vec without touching the store;
    ///   more than [`crate::limits::MAX_ACK_BATCH`] leases is
    ///   [`crate::Error::InvalidInput`] and nothing is acked.
    /// - The outer `Err` is for backend failures only. As with a failed
    ///   [`Backend::ack`], some of the leases may have been acked by then;
    ///   acking them again returns `LeaseLost` for those.
    /// - Server backends spend at most one round trip per queue named in the
    ///   batch. The default loops over [`Backend::ack`] (one round trip per
    ///   lease); backends override it.
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        crate::limits::check_ack_batch(leases.len())?;
        let mut out = Vec::with_capacity(leases.len());
        for lease in leases {
            match self.ack(lease).await {
                Ok(()) => out.push(Ok(())),
                Err(crate::Error::LeaseLost { id }) => {
                    out.push(Err(crate::Error::LeaseLost { id }))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Heartbeat: the lease now expires at `now + ttl`; returns that time.
    ///
    /// # Contract
    /// Fenced like [`Backend::ack`].
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp>;

    /// Gives the item back without waiting for expiry (a retry): Ready, or
    /// Scheduled after `delay`. When its attempts are exhausted it goes Dead
    /// instead, with the reason "attempts exhausted".
    ///
    /// # Contract
    /// Fenced like [`Backend::ack`]. `delay` is checked with
    /// [`crate::limits::check_delay`].
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released>;

    /// Gives the item back to Ready without spending an attempt: what a
    /// worker does with a job it never ran to the end (shutdown, a lease it
    /// stopped heartbeating). Unlike [`Backend::release`] it takes back the
    /// attempt its claim counted, so a deploy never dead-letters work.
    ///
    /// # Contract
    /// - Fenced like [`Backend::ack`].
    /// - The item goes to Ready at its place by enqueue order, with
    ///   `attempts - 1` (never below 0), and never to Dead.
    /// - Which operations spend an attempt: only a claim (counted when it
    ///   hands the item out). `release`, `fail` and reaping spend none of
    ///   their own; `give_back` returns the claim's; `redrive` resets to 0.
    /// - The default returns [`crate::Error::Unsupported`] (callers then use
    ///   `release`).
    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        let _ = lease;
        Err(crate::Error::unsupported("give_back"))
    }

    /// Sends the item to Dead with `reason` (cut to
    /// [`crate::limits::MAX_REASON_LEN`] bytes).
    ///
    /// # Contract
    /// Fenced like [`Backend::ack`].
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()>;

    /// Garbage collection: every lease expired at the backend's now goes back
    /// to Ready, or to Dead when its attempts are exhausted.
    ///
    /// # Contract
    /// - Any number of reapers may run at once: each expired lease is
    ///   recovered exactly once (INV-4).
    /// - Cost grows with the number of expired leases, not with the number of
    ///   leases (INV-7); work is done in bounded batches.
    /// - Due Scheduled items may be promoted to Ready on the way.
    /// - A lease whose expiry lies more than
    ///   [`crate::limits::LEASE_HORIZON`] past the backend's now (which no
    ///   claim or extend writes: a clock that ran ahead left it, or it was
    ///   planted) is expired: it is recovered like any other, and each such
    ///   lease is reported as a [`crate::Repair`] of the Leased index.
    async fn reap(&self, queue: &QueueName) -> Result<ReapReport>;

    /// Items per state.
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats>;

    /// The queues that hold at least one item, in any state, sorted by
    /// name.
    ///
    /// # Contract
    /// - A queue is listed from the return of the first call that gives it
    ///   an item (any call that creates items: [`Backend::enqueue`],
    ///   [`Backend::enqueue_once`], [`Backend::fire_schedule`]) until it
    ///   holds no item: after [`Backend::purge`], or once its last item is
    ///   acked (or otherwise deleted). Items count in every state: Ready,
    ///   Scheduled, Leased and Dead, the items [`Backend::stats`] counts.
    ///   A queue that only has limits set ([`Backend::set_queue_limits`])
    ///   or a schedule naming it, and no item, is not listed.
    /// - Sorted by name (the order of [`QueueName`]), each queue once.
    /// - Cost grows with the number of queues, not the number of items:
    ///   no scan of the whole store (on Redis no `KEYS` or `SCAN`), and it
    ///   works on Redis Cluster.
    /// - Concurrent enqueues and purges or acks never leave a phantom (an
    ///   empty queue listed once those calls have returned) and never hide
    ///   a queue that holds an item.
    async fn queues(&self) -> Result<Vec<QueueName>>;

    /// Up to `limit` items in `state`, in the order that state's index keeps
    /// (claim order for Ready, due time for Scheduled, expiry for Leased,
    /// death order for Dead).
    ///
    /// # Contract
    /// A `limit` over [`crate::limits::MAX_PEEK`] is cut to it.
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>>;

    /// One item, or [`crate::Error::NotFound`].
    ///
    /// # Contract
    /// An id no backend can have handed out (e.g. over `i64::MAX` on a
    /// store of signed ids) is `NotFound`, as is any other unknown id; a
    /// fenced call naming such an id is `LeaseLost`.
    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo>;

    /// Moves up to `limit` Dead items (oldest death first) back to Ready with
    /// their attempts reset to 0; returns how many moved.
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64>;

    /// Moves the Dead item `id` back to Ready with its attempts reset to 0,
    /// as [`Backend::redrive`] does for the oldest ones; returns whether it
    /// moved. What a dashboard's "redrive" button on one dead job calls.
    ///
    /// # Contract
    /// - One atomic step: the item moves only if it is Dead at that step.
    ///   Of concurrent calls naming one id (and a [`Backend::redrive`] that
    ///   takes the same item), exactly one moves it; the others find it
    ///   Ready and return `Ok(false)`.
    /// - `Ok(true)`: the item is Ready with attempts 0, keeps its payload,
    ///   priority, max attempts and dedup key, and takes the place in claim
    ///   order that [`Backend::redrive`] gives the items it moves; waiting
    ///   consumers are woken as by [`Backend::redrive`].
    /// - `Ok(false)` and nothing changed: the item exists in another state
    ///   (Ready, Scheduled or Leased; a Leased item's lease stays valid).
    /// - [`crate::Error::NotFound`]: `queue` holds no item `id`, by the
    ///   same rules as [`Backend::item`] (an id no backend can have handed
    ///   out is `NotFound` too).
    /// - [`crate::Error::Corrupt`] and nothing changed: a Dead item that was
    ///   quarantined for fields no claim can use, and whose fields are
    ///   still unusable; [`Backend::redrive`] leaves such items in Dead too.
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool>;

    /// Removes the item `id` of `queue`, whatever its state: a job that
    /// should not run after all (cancelled, or poison an operator wants
    /// gone) or a dead letter nobody will redrive. Returns the state it was
    /// in.
    ///
    /// # Contract
    /// - Afterwards the item is gone: [`Backend::item`] answers
    ///   [`crate::Error::NotFound`], [`Backend::stats`] and [`Backend::peek`]
    ///   leave it out, and no claim, reap, redrive or due time brings it
    ///   back. Every other item keeps its state and its place.
    /// - The state returned is the one the item was in, as
    ///   [`Backend::item`] would have shown it: a Scheduled item whose due
    ///   time has passed was Ready.
    /// - A lease held on it is lost: fenced calls on it fail with
    ///   [`crate::Error::LeaseLost`] and change nothing, and it no longer
    ///   counts against the queue's concurrency limit.
    /// - Its dedup key is free at once: a removed item was not acked, so no
    ///   [`NewItem::unique_for`] hold starts.
    /// - No item `id` in `queue` (never enqueued, acked, purged, removed
    ///   before, or in another queue): [`crate::Error::NotFound`], nothing
    ///   changes. Ids are never reused, so a removed id is never answered
    ///   again.
    /// - Racing calls on the item: exactly one of a remove and an ack (or a
    ///   remove and another remove) succeeds; a claim that leased the item
    ///   before the remove holds a lost lease afterwards.
    /// - The default returns [`crate::Error::Unsupported`]; a backend that
    ///   overrides it says so in [`Capabilities::remove_item`].
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let _ = (queue, id);
        Err(crate::Error::unsupported("remove_item"))
    }

    /// Deletes every item of the queue in every state, and its dedup keys
    /// (keys held after an ack too); returns how many items were deleted.
    /// Leases held on them are lost. Schedules that name the queue stay.
    async fn purge(&self, queue: &QueueName) -> Result<u64>;

    /// Deletes the queue: its items in every state (as [`Backend::purge`])
    /// and everything else the backend keeps under its name (dedup keys
    /// and holds, `enqueue_once` records, limits and their rate window, the
    /// id counter); returns how many items were deleted. What an operator
    /// calls for a queue that is gone for good, and what keeps a store
    /// bounded with short-lived queue names.
    ///
    /// # Contract
    /// - Afterwards the store holds nothing for the queue (a backend's
    ///   docs name any bounded exception): it is not listed by
    ///   [`Backend::queues`], its stats are zero, its limits are
    ///   [`QueueLimits::NONE`], and a dedup key it held is free.
    /// - Ids are never reused: an item enqueued into the queue later gets
    ///   an id above every id the queue handed out before the delete.
    /// - Leases held on its items are lost: fenced calls on them fail as
    ///   for any lost lease and change nothing.
    /// - An `enqueue_once` request resent after the delete is a new
    ///   request: its batch is written again.
    /// - Schedules that name the queue stay (they are stored by name);
    ///   their next fire fills the queue again.
    /// - Calls racing the delete: an item enqueued by a call that returned
    ///   before the delete started is deleted; one enqueued by a call that
    ///   started after the delete returned is kept, whole; items of calls
    ///   in between are either deleted or kept whole, and a kept item is
    ///   listed and counted like any other.
    /// - The default returns [`crate::Error::Unsupported`]; a backend that
    ///   overrides it says so in [`Capabilities::delete_queue`].
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let _ = queue;
        Err(crate::Error::unsupported("delete_queue"))
    }

    /// Sets the global limits of `queue`, replacing both;
    /// [`QueueLimits::NONE`] clears them. See [`crate::queue_limits`].
    ///
    /// # Contract
    /// - Stored in the backend: every handle in every process obeys them
    ///   from the next claim that starts after this returns (a claim
    ///   already running finishes under the limits it read).
    /// - Enforced inside the claim's atomic step. Concurrency K: a claim
    ///   never makes more than K items of `queue` Leased at once; every
    ///   Leased item counts, expired leases not yet reaped included, until
    ///   it is acked, released, given back, failed or reaped. Lowering K
    ///   below the leases held takes none back: claims get nothing until
    ///   the count is under K.
    /// - Rate N per `per`: the items claims lease within one fixed window
    ///   of the backend's clock (window `i` is `[i * per, (i + 1) * per)`
    ///   ms since the epoch) add up to at most N. The window's count is
    ///   kept while the rate changes, and forgotten when the limits are
    ///   cleared.
    /// - A claim a limit cuts short returns fewer than it asked (maybe
    ///   none) and sets [`Claimed::retry_after`].
    /// - Limits are per queue and survive [`Backend::purge`].
    /// - Bad values are [`crate::Error::InvalidInput`] (see
    ///   [`QueueLimits::check`]) and nothing is written.
    /// - The default returns [`crate::Error::Unsupported`]; a backend that
    ///   overrides it says so in [`Capabilities::queue_limits`].
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        let _ = (queue, limits);
        Err(crate::Error::unsupported("set_queue_limits"))
    }

    /// The global limits of `queue` as stored ([`QueueLimits::NONE`] when
    /// none are set).
    ///
    /// # Contract
    /// - Returns what the last [`Backend::set_queue_limits`] stored, as
    ///   every handle sees it; changes nothing.
    /// - The default returns [`crate::Error::Unsupported`].
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        let _ = queue;
        Err(crate::Error::unsupported("queue_limits"))
    }

    /// Waits until work may be available in `queue` or `timeout` passes,
    /// whichever is first. A wake-up is a hint, not a promise: the caller
    /// claims and may find nothing. The default sleeps for `timeout` (a
    /// poll); backends override it with a real notification.
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        let _ = queue;
        tokio::time::sleep(timeout).await;
    }

    /// Stores `schedule` under its name: creates it, or replaces the one of
    /// that name. Returns the schedule as stored.
    ///
    /// # Contract
    /// - Checked first with [`Schedule::check`]; bad input writes nothing.
    /// - Created: revision 1, `defined_at` = the backend's now, no last tick.
    /// - Replaced with a different queue, spec or payload: revision + 1,
    ///   `defined_at` = the backend's now, the last tick kept (a changed
    ///   schedule never fires a tick it fired before).
    /// - Put again unchanged: nothing changes (same revision and
    ///   `defined_at`), so every process may put its schedules at start.
    /// - The default returns [`crate::Error::Unsupported`].
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        let _ = schedule;
        Err(crate::Error::unsupported("put_schedule"))
    }

    /// Removes the schedule; returns whether it existed. Items it enqueued
    /// stay. A fire of any of its revisions is [`Fired::Stale`] from here
    /// on.
    ///
    /// # Contract
    /// The default returns [`crate::Error::Unsupported`].
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        let _ = name;
        Err(crate::Error::unsupported("remove_schedule"))
    }

    /// Every stored schedule, by name.
    ///
    /// # Contract
    /// - Sorted by name; what [`Backend::put_schedule`] stored, with the
    ///   last tick fired.
    /// - The default returns [`crate::Error::Unsupported`].
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        Err(crate::Error::unsupported("schedules"))
    }

    /// Fires one tick of a schedule: the step that makes a periodic job
    /// run once per tick however many schedulers race for it.
    ///
    /// # Contract
    /// In ONE atomic step (one script, one transaction, one critical
    /// section), in this order:
    /// - The schedule is gone or its revision is not `tick.revision`:
    ///   [`Fired::Stale`], nothing written.
    /// - Its last tick is at or after `tick.at`: [`Fired::AlreadyFired`]
    ///   with the last tick, nothing written. This holds whatever became of
    ///   the item of that tick (acked, Dead, purged) and across restarts.
    /// - `tick.at` is after the backend's now ([`Backend::now`]; a client's
    ///   clock never decides): [`Fired::NotDue`] with the backend's now,
    ///   nothing written.
    /// - Otherwise `item` is enqueued into the schedule's queue exactly as
    ///   [`Backend::enqueue`] would (dedup and unique-for keys included)
    ///   and the last tick becomes `tick.at`: [`Fired::Enqueued`].
    ///
    /// So any number of concurrent calls for one tick enqueue exactly one
    /// item, and a tick never fires twice. `item` is checked like an
    /// enqueue first (bad input writes nothing). A call whose reply was
    /// lost is safe to send again: it then says `AlreadyFired`.
    /// The default returns [`crate::Error::Unsupported`].
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        let _ = (tick, item);
        Err(crate::Error::unsupported("fire_schedule"))
    }

    /// Hooks that let the conformance suite plant stale or corrupt state.
    /// `None` unless the backend was built for tests (each backend says how:
    /// a constructor or an option the test factory sets, never a default),
    /// so a production handle cannot expire live leases or plant entries.
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        None
    }
}
