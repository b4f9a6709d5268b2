//! Throttles: the global concurrency and rate limits of a queue, stored in
//! the backend and enforced inside the claim.

use async_trait::async_trait;

use crate::{LimitScope, QueueLimits, QueueName, Result};

/// Global limits per queue ([`QueueLimits`], see [`crate::queue_limits`]).
/// An optional group: a backend offers it through [`Backend::groups`](crate::Backend::groups), and
/// every method is required.
#[async_trait]
pub trait Throttles: Send + Sync {
    /// How the limits are enforced: exactly over the whole queue, or split
    /// over shards.
    fn scope(&self) -> LimitScope;

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
    ///   none) and sets [`Claimed::retry_after`](crate::Claimed::retry_after).
    /// - Limits are per queue and survive [`crate::Admin::purge`].
    /// - Bad values are [`crate::Error::InvalidInput`] (see
    ///   [`QueueLimits::check`]) and nothing is written.
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()>;

    /// The global limits of `queue` as stored ([`QueueLimits::NONE`] when
    /// none are set).
    ///
    /// # Contract
    /// - Returns what the last [`Throttles::set_queue_limits`] stored, as
    ///   every handle sees it; changes nothing.
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits>;
}
