//! Control of running work: cancel an item, pause and resume a queue,
//! snooze a job, run a waiting item now, and a job's progress.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::signal::Signal;
use crate::{Cancelled, ItemId, LeaseKey, QueueName, Released, Result};

/// What an operator (or a handler, for its own lease) does to running and
/// waiting work. An optional group: a backend offers it through
/// [`Backend::groups`](crate::Backend::groups), and every method is
/// required, so a backend offers all of it or none.
///
/// A backend that offers this group also keeps, in its core methods, the
/// rules that come with a cancel request and a pause: see
/// [`Control::cancel`] and [`Control::pause`].
///
/// Each method is one atomic step per item, like every [`Backend`](crate::Backend) method,
/// under the same [contract for all methods](crate::Backend#contract-all-methods).
#[async_trait]
pub trait Control: Send + Sync {
    /// Cancels the item `id` of `queue`.
    ///
    /// # Contract
    /// - A Ready, Scheduled or Dead item is finished at once, as Cancelled:
    ///   it leaves the queue as [`crate::Admin::remove_item`] takes an item
    ///   out (gone from `item`, stats and peek, its dedup key free, no
    ///   `unique_for` hold), and no claim, reap, redrive or due time brings
    ///   it back. Answers [`Cancelled::Now`] with the state it was in (a
    ///   due Scheduled item was Ready).
    /// - A Leased item (an expired lease not yet reaped included) is marked
    ///   cancel-requested and answers [`Cancelled::Requested`]; so does a
    ///   second cancel of it. The lease stays valid, and
    ///   [`Backend::extend`](crate::Backend::extend) of it answers
    ///   [`Extended::cancel_requested`](crate::Extended::cancel_requested)
    ///   so the worker can stop the handler. Whatever ends the lease then
    ///   (an ack, a release, a give-back, a fail, a snooze, or expiry and a
    ///   reap), the item ends Cancelled in that step (its dedup key free,
    ///   no `unique_for` hold, even when an ack ended it) and never
    ///   returns to Ready: a release and a snooze answer [`Released::Cancelled`], and a
    ///   reap counts it in [`crate::ReapReport::cancelled`].
    /// - No item `id` in `queue` (never enqueued, finished, removed, or in
    ///   another queue): [`crate::Error::NotFound`], nothing changes.
    /// - Racing calls: of a cancel and a claim, either the cancel answers
    ///   `Now` and no claim returns the item, or the claim leases it and the
    ///   cancel answers `Requested`. Of a cancel and an ack, either the ack
    ///   lands first (the cancel is `NotFound`) or the cancel is `Requested`
    ///   and the ack ends the item. Each item ends exactly once.
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled>;

    /// Pauses `queue`: claims get nothing until [`Control::resume`].
    ///
    /// # Contract
    /// - Stored in the backend: no claim that starts after `pause` returned,
    ///   on any handle in any process, leases an item of `queue`. It answers
    ///   no leases with [`crate::Claimed::paused`] set.
    /// - Enqueues go on; leases already held run to their end; reaps,
    ///   releases and due times move items as usual.
    /// - Pausing a paused queue changes nothing. The pause survives
    ///   [`crate::Admin::purge`]; [`crate::Admin::delete_queue`] forgets it.
    /// - [`crate::Backend::stats`] reports it in
    ///   [`crate::QueueStats::paused`].
    async fn pause(&self, queue: &QueueName) -> Result<()>;

    /// Resumes a paused `queue`: claims that start after it returned lease
    /// items again, and consumers waiting in
    /// [`Backend::wait_for_work`](crate::Backend::wait_for_work) are woken
    /// as by an enqueue. Resuming a queue that is not paused changes
    /// nothing.
    async fn resume(&self, queue: &QueueName) -> Result<()>;

    /// Whether `queue` is paused, as every handle sees it.
    async fn is_paused(&self, queue: &QueueName) -> Result<bool>;

    /// Puts the leased item back to wait `delay` without spending an
    /// attempt: a handler's "run me again later" (a rate-limited call, a
    /// resource not ready yet).
    ///
    /// # Contract
    /// - Fenced like [`Backend::ack`](crate::Backend::ack): a stale token is
    ///   [`crate::Error::LeaseLost`] and changes nothing.
    /// - The item goes to Scheduled, due at now + `delay` (to Ready when
    ///   `delay` is zero), with `attempts - 1` (never below 0), and never
    ///   to Dead; answers [`Released::Scheduled`] or [`Released::Ready`].
    /// - A cancel-requested item ends Cancelled instead
    ///   ([`Released::Cancelled`]).
    /// - `delay` is checked with [`crate::limits::check_delay`].
    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released>;

    /// Moves the Scheduled item `id` (a delayed item, or a retry waiting
    /// out its backoff) to Ready now, at its place in claim order; answers
    /// whether it moved.
    ///
    /// # Contract
    /// - `Ok(true)`: it was Scheduled and not yet due; it is Ready now.
    /// - `Ok(false)`, nothing changed: the item is in another state (a due
    ///   Scheduled item is Ready already).
    /// - No item `id` in `queue`: [`crate::Error::NotFound`].
    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool>;

    /// Moves up to `limit` Scheduled items of `queue` (earliest due first)
    /// to Ready now, as [`Control::run_now`] does for one; answers how many
    /// moved. Call again until it answers 0 to move them all.
    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64>;

    /// Records the progress of the job running under `lease`: a small value
    /// the handler chooses (a percentage, a step name, a JSON object),
    /// shown by [`Backend::item`](crate::Backend::item) in
    /// [`crate::ItemInfo::progress`] while the lease holds.
    ///
    /// # Contract
    /// - Fenced like [`Backend::ack`](crate::Backend::ack): a lost lease
    ///   cannot write, and gets [`crate::Error::LeaseLost`].
    /// - Replaces the progress this lease recorded before. A new lease on
    ///   the item starts with none.
    /// - Over [`crate::limits::MAX_PROGRESS_LEN`] bytes is
    ///   [`crate::Error::InvalidInput`] and nothing is written.
    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()>;

    /// Subscribes to `queue`'s cancel requests: the returned [`Signal`]
    /// fires when a cancel may have been requested for a lease of `queue`,
    /// so a worker stops the handler at once instead of at its next
    /// heartbeat. A hint: the worker learns which lease through
    /// [`Backend::extend`](crate::Backend::extend).
    ///
    /// # Contract
    /// - Fires after a [`Control::cancel`] of a Leased item of `queue`
    ///   returned [`Cancelled::Requested`] through this handle (or a clone
    ///   of it). Each backend documents whether a cancel from another
    ///   process fires it too; one that cannot leaves those to the
    ///   heartbeat.
    /// - May fire without a cancel (a reconnect after which the backend
    ///   cannot know what it missed).
    /// - Costs nothing on the lease's hot path: no claim, ack or extend
    ///   does more work because someone subscribes.
    async fn cancel_signal(&self, queue: &QueueName) -> Result<Signal>;
}
