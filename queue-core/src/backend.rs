//! The storage trait every backend implements, with its contract: the
//! required core. Optional surfaces are groups of their own
//! ([`crate::groups`]), reached through [`Backend::groups`].

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Capabilities, ClaimSpec, Claimed, Enqueued, Extended, Groups, ItemId, ItemInfo, ItemState,
    LeaseFate, LeaseKey, LeaseToken, LeaseTtl, NewItem, QueueName, QueueStats, ReapReport,
    Released, Result, Timestamp,
};

/// The storage contract. Every method is one atomic step per item: no
/// transition is split across round trips, so concurrent callers (in this
/// process or others) can never observe or produce a half-done transition.
///
/// The trait is object safe: `Arc<dyn Backend>` is the usual handle.
///
/// # Implementing it
/// Put `#[leaseq_core::async_trait]` on the `impl` block, as on the trait:
/// an `impl` written with plain `async fn`s fails to compile with E0195
/// ("lifetime parameters or bounds on method do not match"). Twenty methods
/// are required; the optional groups ([`Backend::groups`]) are traits of
/// their own. `docs/backends.md` in the repository walks through writing
/// one and running the conformance suite on it, and
/// `examples/naive-backend` is a whole one, written from these docs.
///
/// # Contract (all methods)
/// - Bad input returns [`crate::Error::InvalidInput`] before anything is
///   written. Use the checks in [`crate::limits`].
/// - Server and connection failures return [`crate::Error::OutcomeUnknown`]; they
///   never panic, and the next call reconnects.
/// - Lease expiry is decided by the backend's own clock ([`Backend::now`]).
///   A lease is live while that clock reads before its expiry, and expired
///   from the millisecond of its expiry on (`now >= expires_at`); a
///   Scheduled item is due the same way (`now >= due time`).
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
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>>;

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
    ///   ([`crate::Throttles::set_queue_limits`]) allow fewer: then
    ///   [`Claimed::retry_after`] says when to come back.
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed>;

    /// The leases a claim with `spec` made that its tokens still hold: what
    /// a caller whose claim reply was lost uses instead of claiming again.
    /// Claims nothing new, so it borrows the spec the caller keeps.
    ///
    /// # Contract
    /// - Returns every item of `queue` whose current token belongs to
    ///   `spec`'s family ([`ClaimSpec::owns`]), as [`Backend::claim`] would
    ///   have returned it, in claim order: the live leases, and (with
    ///   [`Capabilities::lease_traces`]) the leases that expired but that
    ///   no reap or claim has taken yet. Those expired ones (only those: a
    ///   live lease keeps its expiry) are renewed in the same step to
    ///   expire at now + `spec.ttl()` (the returned expiry), so a lost
    ///   claim reply costs no attempt when no one else acted. A lease a reaper took first is not returned: the
    ///   reap ended its attempt by expiry (requeued, or Dead with a reason
    ///   that says the lease expired), never as if a handler had run.
    /// - Empty when the claim never ran (or leased nothing).
    /// - Its cost may grow with the queue's live leases: it is for the rare
    ///   call after a lost reply.
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed>;

    /// What became of `lease` after a call on it whose reply was lost.
    /// `held_until` is the latest expiry the caller knows for the lease (from
    /// the claim or the last extend).
    ///
    /// # Contract
    /// - [`LeaseFate::Held`] when the item's current token is `lease.token`.
    /// - Otherwise, when the backend's now is before `held_until`:
    ///   [`LeaseFate::Finished`] with the item's state (or `None` when it is
    ///   gone). No reaper could have taken the lease, so its own call ended
    ///   it, or the store lost it (a failover that lost writes, a purge, a
    ///   [`crate::Admin::remove_item`]). A caller that sent no call which
    ///   could have ended it knows it is the second: [`crate::settle`] then
    ///   reports [`crate::Error::LeaseVanished`].
    /// - Otherwise, with [`Capabilities::lease_traces`], the truth: Finished
    ///   when a finishing call of this lease (`ack`, `ack_many`, `release`,
    ///   `give_back`, `fail`) ended it, whether the lease had expired or
    ///   not, and [`LeaseFate::Lost`] when a reap or another claim took it.
    ///   The trace that tells the two apart is written in the same atomic
    ///   step as the call or the reap ([`crate::LeaseTraces`] says which),
    ///   so this holds when asked within [`crate::limits::FINISH_MEMORY`] of
    ///   both the lease's end and `held_until` (with
    ///   [`crate::LeaseTraces::Finishes`], while the queue has finished
    ///   fewer than [`crate::limits::MAX_FINISH_TRACES`] leases since);
    ///   later, a lease its own call
    ///   ended may be answered Lost. A lease a reap or a claim took is never
    ///   answered Finished. A lease the store lost may be answered either
    ///   way.
    /// - Otherwise (no traces) Lost.
    /// - One atomic read; changes nothing.
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate>;

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
    /// reaped or re-claimed succeeds. With [`Capabilities::lease_traces`]
    /// an ack whose reply was lost is known to have landed also once the
    /// lease has expired ([`Backend::lease_fate`]). When the item was enqueued with
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
    ///   batch.
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>>;

    /// Heartbeat: the lease now expires at `now + ttl`; returns that time,
    /// and whether an operator asked to cancel the item.
    ///
    /// # Contract
    /// - Fenced like [`Backend::ack`]: a lease that expired but that no
    ///   reap or claim has taken yet is still held, and is extended.
    /// - [`Extended::cancel_requested`] is true when a
    ///   [`crate::Control::cancel`] marked the item while this lease held
    ///   it (the lease is extended all the same, so the handler can stop
    ///   cleanly); always false on a backend without the Control group.
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended>;

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
    async fn give_back(&self, lease: &LeaseKey) -> Result<()>;

    /// Sends the item to Dead with `reason` (cut to
    /// [`crate::limits::MAX_REASON_LEN`] bytes).
    ///
    /// # Contract
    /// Fenced like [`Backend::ack`].
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()>;

    /// Garbage collection: every lease expired at the backend's now goes back
    /// to Ready, or to Dead when its attempts are exhausted (or ends
    /// Cancelled when a cancel was requested, [`crate::Control::cancel`]).
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
    ///
    /// # Contract
    /// - A count is exact while its state holds few items: up to 10,000 at
    ///   least (a backend may document a setting that lowers it). Above
    ///   that, a backend may report an estimate, so that the cost of a call
    ///   stays bounded however many items the queue holds; the estimate is
    ///   never below what counting up to that threshold found. The
    ///   PostgreSQL backend estimates above `PgOptions::stats_exact_up_to`
    ///   (default 10,000); the others count exactly.
    /// - Zero is always exact: an emptied queue reports all zeros.
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats>;

    /// The queues that hold at least one item, in any state, sorted by
    /// name.
    ///
    /// # Contract
    /// - A queue is listed from the return of the first call that gives it
    ///   an item (any call that creates items: [`Backend::enqueue`],
    ///   [`Backend::enqueue_once`], [`crate::ScheduleStore::fire_schedule`]) until it
    ///   holds no item: after [`crate::Admin::purge`], or once its last item is
    ///   acked (or otherwise deleted). Items count in every state: Ready,
    ///   Scheduled, Leased and Dead, the items [`Backend::stats`] counts.
    ///   A queue that only has limits set ([`crate::Throttles::set_queue_limits`])
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

    /// Waits until work may be available in `queue` or `timeout` passes,
    /// whichever is first. A wake-up is a hint, not a promise: the caller
    /// claims and may find nothing.
    ///
    /// # Contract
    /// - Returns by `timeout` at the latest, in every state of the queue.
    /// - A backend without a notification channel sleeps for `timeout` (a
    ///   poll); one with a channel returns early when an item may have
    ///   become claimable (an enqueue, a release, a reap, a redrive).
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration);

    /// The optional groups this backend offers ([`crate::groups`]): operator
    /// actions, throttles, schedules and test hooks. A backend with none
    /// returns [`Groups::none`].
    ///
    /// # Contract
    /// - The same answer for the life of the handle.
    /// - Test hooks are `None` unless the backend was built for tests.
    fn groups(&self) -> Groups<'_>;
}
