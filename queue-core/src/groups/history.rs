//! Finished items kept per queue: retention, results, and waiting for an
//! item to finish.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::signal::Signal;
use crate::{Ending, Finished, ItemId, LeaseKey, QueueName, Result, Retention};

/// What happened to finished items: a queue keeps its completed and
/// cancelled items as its [`Retention`] says, with the handler's result.
/// An optional group: a backend offers it through
/// [`Backend::groups`](crate::Backend::groups), whole or not at all.
///
/// A backend that offers this group keeps, in its core methods and in
/// [`crate::Control`]'s, the rule that records an ending:
/// - an [`ack`](crate::Backend::ack) (or `ack_many`) of an item of a queue
///   whose policy keeps completed items records it Completed, with no
///   result, in the ack's own atomic step;
/// - an item that ends Cancelled (at once, or when its cancel-requested
///   lease ends, a reap included) is recorded Cancelled when the policy
///   keeps cancelled items;
/// - nothing else records: a removal ([`crate::Admin::remove_item`]) is not
///   an ending, and Dead items stay in the queue as dead letters (for as
///   long as [`Retention::dead`] says);
/// - every completion (ack, `ack_many`, `complete`) counts in
///   [`QueueStats::completed`](crate::QueueStats::completed), kept or not,
///   in the same atomic step; [`crate::Admin::delete_queue`] sets it back
///   to 0, a purge does not.
///
/// A kept item is no longer in the queue: it holds no dedup key (a
/// `unique_for` hold works as without history), is not in
/// [`Backend::stats`](crate::Backend::stats)' counts, [`Backend::peek`](crate::Backend::peek) or
/// [`Backend::item`](crate::Backend::item), and a queue that holds only kept
/// items is not listed by [`Backend::queues`](crate::Backend::queues).
/// [`crate::Admin::purge`] and [`crate::Admin::delete_queue`] take the kept
/// items too; a purge keeps the policy, a delete forgets it.
#[async_trait]
pub trait History: Send + Sync {
    /// Stores `queue`'s retention policy, for every handle.
    ///
    /// # Contract
    /// - Applies to items that finish after it returned; items kept before
    ///   go by the new policy at the next [`History::collect`] (a smaller
    ///   `max_count` trims at the next ending too).
    /// - [`Retention::check`] failures are [`crate::Error::InvalidInput`].
    async fn set_retention(&self, queue: &QueueName, retention: Retention) -> Result<()>;

    /// `queue`'s retention policy; [`Retention::default`] when none was set.
    async fn retention(&self, queue: &QueueName) -> Result<Retention>;

    /// Acks the leased item, recording the handler's `result` with it when
    /// the queue keeps completed items.
    ///
    /// # Contract
    /// - Fenced and atomic like [`Backend::ack`](crate::Backend::ack): a
    ///   stale token is [`crate::Error::LeaseLost`] and changes nothing.
    /// - Over [`crate::finished::MAX_RESULT_LEN`] bytes is
    ///   [`crate::Error::InvalidInput`], and nothing changes.
    /// - When the policy keeps no completed items it is an ack, and the
    ///   result is not stored.
    /// - A cancel-requested item ends Cancelled, without the result.
    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()>;

    /// Up to `limit` kept items of `queue` (cut to
    /// [`crate::limits::MAX_PEEK`]), newest first (by finish time, then by
    /// id, highest first); only those of `ending` when it is `Some`.
    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        limit: usize,
    ) -> Result<Vec<Finished>>;

    /// The kept item `id`, or [`crate::Error::NotFound`] (never kept,
    /// collected, or still in the queue).
    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished>;

    /// Removes `queue`'s kept items that the policy no longer keeps (older
    /// than `max_age`, or beyond `max_count`), and its dead letters beyond
    /// [`Retention::dead`] (by the time they died); answers how many.
    ///
    /// # Contract
    /// - Costs what it removes: the same with 10 and with 100,000 kept
    ///   items (or dead letters) that have not expired.
    /// - Safe from any number of handles at once: each item is removed
    ///   once.
    /// - A dead letter removed here is gone as by
    ///   [`crate::Admin::remove_item`]: its dedup key is free.
    async fn collect(&self, queue: &QueueName) -> Result<u64>;

    /// Subscribes to `queue`'s endings: the [`Signal`] fires when an item
    /// of `queue` may have been recorded finished (not when one dies). A hint, like
    /// [`crate::Control::cancel_signal`]; see [`crate::BackendExt::wait_finished`]
    /// for waiting on one item.
    ///
    /// # Contract
    /// Fires after an ending recorded through this handle (or a clone of
    /// it); each backend documents whether an ending in another process
    /// fires it too. Costs nothing when the queue keeps nothing.
    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal>;
}

/// How long [`crate::BackendExt::wait_finished`] waits between looks when no
/// signal came: it bounds how late an ending the signal missed is seen,
/// and how late a death is seen (no signal fires when an item dies).
pub const FINISHED_POLL: Duration = Duration::from_millis(500);
