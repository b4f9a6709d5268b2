//! Conveniences over [`Backend`] for callers, with a blanket impl, so the
//! trait backends implement stays minimal.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::{Backend, ClaimSpec, Claimed, ItemId, Lease, NewItem, QueueName, Result};

/// Single-item helpers on every [`Backend`] (including `dyn Backend`).
#[async_trait]
pub trait BackendExt: Backend {
    /// Enqueues one item; returns its id (or the dedup key holder's id).
    /// Runs in a producer span `enqueue` ([`crate::spans`]).
    async fn enqueue_one(&self, queue: &QueueName, item: NewItem) -> Result<ItemId> {
        let out = crate::spans::enqueue(self, queue, vec![item]).await?;
        out.first()
            .map(|e| e.id)
            .ok_or_else(|| crate::Error::Corrupt {
                what: "enqueue of one item returned no result".into(),
            })
    }

    /// Enqueues one payload with default options.
    async fn push(
        &self,
        queue: &QueueName,
        payload: impl Into<Bytes> + Send + 'async_trait,
    ) -> Result<ItemId> {
        self.enqueue_one(queue, NewItem::new(payload)).await
    }

    /// Claims up to `max` items leased for `ttl`, validating both.
    async fn claim_up_to(&self, queue: &QueueName, max: u32, ttl: Duration) -> Result<Claimed> {
        let spec = ClaimSpec::new(max, ttl)?;
        self.claim(queue, spec).await
    }

    /// Claims at most one item.
    async fn claim_one(&self, queue: &QueueName, ttl: Duration) -> Result<Option<Lease>> {
        let claimed = self.claim_up_to(queue, 1, ttl).await?;
        Ok(claimed.leases.into_iter().next())
    }
}

impl<B: Backend + ?Sized> BackendExt for B {}
