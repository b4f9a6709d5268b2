//! Operator actions: the optional group a dashboard's and a CLI's buttons
//! call.

use async_trait::async_trait;

use crate::{ItemId, ItemState, QueueName, Result};

/// Operator actions on dead letters, single items and whole queues. An
/// optional group: a backend offers it through [`Backend::groups`](crate::Backend::groups), and
/// every method is required, so a backend offers all of it or none.
///
/// Each method is one atomic step per item, like every [`Backend`](crate::Backend) method,
/// under the same [contract for all methods](crate::Backend#contract-all-methods).
#[async_trait]
pub trait Admin: Send + Sync {
    /// Moves up to `limit` Dead items (oldest death first) back to Ready with
    /// their attempts reset to 0; returns how many moved.
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64>;

    /// Moves the Dead item `id` back to Ready with its attempts reset to 0,
    /// as [`Admin::redrive`] does for the oldest ones; returns whether it
    /// moved. What a dashboard's "redrive" button on one dead job calls.
    ///
    /// # Contract
    /// - One atomic step: the item moves only if it is Dead at that step.
    ///   Of concurrent calls naming one id (and a [`Admin::redrive`] that
    ///   takes the same item), exactly one moves it; the others find it
    ///   Ready and return `Ok(false)`.
    /// - `Ok(true)`: the item is Ready with attempts 0, keeps its payload,
    ///   priority, max attempts and dedup key, and takes the place in claim
    ///   order that [`Admin::redrive`] gives the items it moves; waiting
    ///   consumers are woken as by [`Admin::redrive`].
    /// - `Ok(false)` and nothing changed: the item exists in another state
    ///   (Ready, Scheduled or Leased; a Leased item's lease stays valid).
    /// - [`crate::Error::NotFound`]: `queue` holds no item `id`, by the
    ///   same rules as [`Backend::item`](crate::Backend::item) (an id no backend can have handed
    ///   out is `NotFound` too).
    /// - [`crate::Error::Corrupt`] and nothing changed: a Dead item that was
    ///   quarantined for fields no claim can use, and whose fields are
    ///   still unusable; [`Admin::redrive`] leaves such items in Dead too.
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool>;

    /// Removes the item `id` of `queue`, whatever its state: a job that
    /// should not run after all (cancelled, or poison an operator wants
    /// gone) or a dead letter nobody will redrive. Returns the state it was
    /// in.
    ///
    /// # Contract
    /// - Afterwards the item is gone: [`Backend::item`](crate::Backend::item) answers
    ///   [`crate::Error::NotFound`], [`Backend::stats`](crate::Backend::stats) and [`Backend::peek`](crate::Backend::peek)
    ///   leave it out, and no claim, reap, redrive or due time brings it
    ///   back. Every other item keeps its state and its place.
    /// - The state returned is the one the item was in, as
    ///   [`Backend::item`](crate::Backend::item) would have shown it: a Scheduled item whose due
    ///   time has passed was Ready.
    /// - A lease held on it is lost: fenced calls on it fail with
    ///   [`crate::Error::LeaseLost`] and change nothing, and it no longer
    ///   counts against the queue's concurrency limit.
    /// - Its dedup key is free at once: a removed item was not acked, so no
    ///   [`NewItem::unique_for`](crate::NewItem::unique_for) hold starts.
    /// - No item `id` in `queue` (never enqueued, acked, purged, removed
    ///   before, or in another queue): [`crate::Error::NotFound`], nothing
    ///   changes. Ids are never reused, so a removed id is never answered
    ///   again.
    /// - Racing calls on the item: exactly one of a remove and an ack (or a
    ///   remove and another remove) succeeds; a claim that leased the item
    ///   before the remove holds a lost lease afterwards.
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState>;

    /// Deletes every item of the queue in every state, and its dedup keys
    /// (keys held after an ack too); returns how many items were deleted.
    /// Leases held on them are lost. Schedules that name the queue stay.
    async fn purge(&self, queue: &QueueName) -> Result<u64>;

    /// Deletes the queue: its items in every state (as [`Admin::purge`])
    /// and everything else the backend keeps under its name (dedup keys
    /// and holds, `enqueue_once` records, limits and their rate window, the
    /// id counter); returns how many items were deleted. What an operator
    /// calls for a queue that is gone for good, and what keeps a store
    /// bounded with short-lived queue names.
    ///
    /// # Contract
    /// - Afterwards the store holds nothing for the queue (a backend's
    ///   docs name any bounded exception): it is not listed by
    ///   [`Backend::queues`](crate::Backend::queues), its stats are zero, its limits are
    ///   [`crate::QueueLimits::NONE`], and a dedup key it held is free.
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
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64>;
}
