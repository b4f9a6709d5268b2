//! Job events, live: what happens to each job of a queue, as it happens.

use async_trait::async_trait;

use crate::events::EventStream;
use crate::{QueueName, Result};

/// Live job events per queue: enqueued, started, progress, completed (with
/// a small result), failed, released, dead, cancelled. An optional group:
/// a backend offers it through [`Backend::groups`](crate::Backend::groups).
///
/// Delivery is at most once ([`crate::events`]): the durable record is the
/// history ([`crate::History`]).
#[async_trait]
pub trait Events: Send + Sync {
    /// Subscribes to `queue`'s job events.
    ///
    /// # Contract
    /// - Every event of an operation that began after `subscribe` returned
    ///   reaches the stream, whichever handle of the same store made it
    ///   (each backend documents whether a handle in another process
    ///   counts), unless the stream lagged or its connection to the store
    ///   dropped.
    /// - One job's events arrive in the order they happened.
    /// - The events are those of [`crate::events::EventKind`], one for each
    ///   change: an enqueue that deduplicated, a removal, a purge, a
    ///   redrive and a promotion of a scheduled item make none.
    /// - A stream holds at most [`crate::events::EVENT_BUFFER`] unread
    ///   events: one that falls further behind loses the oldest, yields
    ///   [`crate::Error::Lagged`] with how many, and goes on with the
    ///   events it still holds; memory stays bounded.
    /// - Costs the operations nothing measurable on a queue nobody
    ///   subscribes to.
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream>;
}
