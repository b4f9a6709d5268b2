//! Conveniences over [`Backend`] for callers, with a blanket impl, so the
//! trait backends implement stays minimal.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::testing::TestHooks;
use crate::{
    Admin, Awaited, Backend, ClaimSpec, Claimed, Control, Error, Events, Finished, History, ItemId,
    ItemState, Lease, NewItem, QueueName, Result, ScheduleStore, Throttles, WorkerRegistry,
};

/// Single-item helpers and the optional groups' accessors on every
/// [`Backend`] (including `dyn Backend`).
#[async_trait]
pub trait BackendExt: Backend {
    /// The operator actions ([`Admin`]), or [`Error::Unsupported`] naming
    /// the group when the backend does not offer them.
    fn admin(&self) -> Result<&dyn Admin> {
        self.groups()
            .admin
            .ok_or_else(|| Error::unsupported("operator actions (the Admin group)"))
    }

    /// The queue limits ([`Throttles`]), or [`Error::Unsupported`].
    fn throttles(&self) -> Result<&dyn Throttles> {
        self.groups()
            .throttles
            .ok_or_else(|| Error::unsupported("queue limits (the Throttles group)"))
    }

    /// The periodic schedules ([`ScheduleStore`]), or
    /// [`Error::Unsupported`].
    fn schedule_store(&self) -> Result<&dyn ScheduleStore> {
        self.groups()
            .schedules
            .ok_or_else(|| Error::unsupported("periodic schedules (the ScheduleStore group)"))
    }

    /// Control of running work ([`Control`]), or [`Error::Unsupported`].
    fn control(&self) -> Result<&dyn Control> {
        self.groups()
            .control
            .ok_or_else(|| Error::unsupported("control of running work (the Control group)"))
    }

    /// Finished items ([`History`]), or [`Error::Unsupported`].
    fn history(&self) -> Result<&dyn History> {
        self.groups()
            .history
            .ok_or_else(|| Error::unsupported("finished items (the History group)"))
    }

    /// Live job events ([`Events`]), or [`Error::Unsupported`].
    fn events(&self) -> Result<&dyn Events> {
        self.groups()
            .events
            .ok_or_else(|| Error::unsupported("live job events (the Events group)"))
    }

    /// Waits until item `id` of `queue` finishes and is kept, or goes
    /// Dead, for at most `timeout`: a producer awaiting a job's result.
    ///
    /// Answers [`Awaited::Finished`] with the kept record;
    /// [`Awaited::Dead`] with the dead letter as soon as a look sees it
    /// Dead (it stays in the queue, so waiting on would only wait out the
    /// timeout); [`Awaited::Pending`] when `timeout` passed with the item
    /// still waiting or leased; [`Error::NotFound`] when the item is
    /// neither in the queue nor kept (never enqueued, or it ended in a way
    /// the queue's [`crate::Retention`] does not keep).
    ///
    /// It looks when the backend's [`History::finished_signal`] fires, and
    /// at least every [`crate::groups::FINISHED_POLL`] in case a signal was
    /// missed. No signal fires when an item dies, so a death is seen
    /// within [`crate::groups::FINISHED_POLL`] of it. It holds nothing once
    /// it returns.
    async fn wait_finished(
        &self,
        queue: &QueueName,
        id: ItemId,
        timeout: Duration,
    ) -> Result<Awaited> {
        let history = self.history()?;
        let mut signal = history.finished_signal(queue).await?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(done) = kept(history, queue, id).await? {
                return Ok(Awaited::Finished(done));
            }
            match self.item(queue, id).await {
                Ok(info) if info.state == ItemState::Dead => return Ok(Awaited::Dead(info)),
                Ok(_) => {}
                // Gone from the queue: kept just now, or not kept at all.
                Err(Error::NotFound { .. }) => {
                    return kept(history, queue, id)
                        .await?
                        .map(Awaited::Finished)
                        .ok_or(Error::NotFound { id })
                }
                Err(e) => return Err(e),
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(Awaited::Pending);
            }
            let look = left.min(crate::groups::FINISHED_POLL);
            let _ = tokio::time::timeout(look, signal.changed()).await;
        }
    }

    /// The live-worker registry ([`WorkerRegistry`]), or
    /// [`Error::Unsupported`].
    fn registry(&self) -> Result<&dyn WorkerRegistry> {
        self.groups()
            .registry
            .ok_or_else(|| Error::unsupported("live workers (the WorkerRegistry group)"))
    }

    /// The test hooks, `None` unless the backend was built for tests.
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        self.groups().test_hooks
    }

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

/// The kept record of `id`, if any.
async fn kept(history: &dyn History, queue: &QueueName, id: ItemId) -> Result<Option<Finished>> {
    match history.finished_item(queue, id).await {
        Ok(done) => Ok(Some(done)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}
