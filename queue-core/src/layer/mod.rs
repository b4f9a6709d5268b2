//! Layers: backends that wrap another backend and change only what they
//! name.
//!
//! A layer implements [`Layer`]: it says where its inner backend is and
//! overrides the operations it changes; every other operation is forwarded
//! to the inner backend by the trait's defaults, and a blanket impl makes
//! every layer a [`Backend`]. Layers nest (`Sharded<Faults<PgBackend>>`) and
//! sit on any handle, including `Arc<dyn Backend>`.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use leaseq_core::{async_trait, Backend, Layer, LeaseKey, Result};
//!
//! /// Counts successful acks; everything else passes through untouched.
//! #[derive(Debug)]
//! struct CountAcks<B> {
//!     inner: B,
//!     acked: AtomicU64,
//! }
//!
//! #[async_trait]
//! impl<B: Backend> Layer for CountAcks<B> {
//!     type Inner = B;
//!     fn inner(&self) -> &B {
//!         &self.inner
//!     }
//!     async fn ack(&self, lease: &LeaseKey) -> Result<()> {
//!         self.inner.ack(lease).await?;
//!         self.acked.fetch_add(1, Ordering::Relaxed);
//!         Ok(())
//!     }
//! }
//!
//! // Any backend handle can be wrapped, `Arc<dyn Backend>` included.
//! fn count_acks(inner: std::sync::Arc<dyn Backend>) -> CountAcks<std::sync::Arc<dyn Backend>> {
//!     CountAcks { inner, acked: AtomicU64::new(0) }
//! }
//! ```
//!
//! # Why a trait with defaults
//! A hand-written wrapper that implements [`Backend`] itself gets the
//! trait's own defaults for the operations it does not write, so a wrapper
//! written before `ack_many` existed silently turned every batch ack into a
//! loop of single acks. A [`Layer`]'s defaults forward instead, and a test
//! in this module fails when an operation of [`Backend`] is not forwarded by
//! [`Layer`], by the blanket impl, or by the impl for [`Arc`].
//!
//! `Box<dyn Backend>` converts to the `Arc` form with `Arc::from(boxed)`.
//!
//! Call a layer's operations through [`Backend`], usually as
//! `Arc<dyn Backend>`: on the concrete layer type with both traits in
//! scope, `layer.ack(..)` names two methods and does not compile.

#[cfg(feature = "faults")]
pub mod fault;
pub mod shard;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::{
    Backend, Capabilities, ClaimSpec, Claimed, Enqueued, ItemId, ItemInfo, ItemState, LeaseFate,
    LeaseKey, LeaseToken, LeaseTtl, Limits, NewItem, QueueLimits, QueueName, QueueStats,
    ReapReport, Released, Result, TestHooks, Timestamp,
};

/// A backend that wraps an inner backend. Override what the layer changes;
/// every operation not overridden is forwarded to [`Layer::inner`]. Every
/// `Layer` is a [`Backend`] through a blanket impl.
///
/// The methods mirror [`Backend`]'s one for one, with the same contract:
/// a layer that changes an operation keeps that operation's contract.
#[async_trait]
pub trait Layer: Send + Sync + std::fmt::Debug + 'static {
    /// The backend this layer wraps.
    type Inner: Backend + ?Sized;

    /// The wrapped backend.
    fn inner(&self) -> &Self::Inner;

    /// [`Backend::capabilities`], forwarded by default.
    fn capabilities(&self) -> Capabilities {
        self.inner().capabilities()
    }

    /// [`Backend::limits`], forwarded by default.
    fn limits(&self) -> Limits {
        self.inner().limits()
    }

    /// [`Backend::now`], forwarded by default.
    async fn now(&self) -> Result<Timestamp> {
        self.inner().now().await
    }

    /// [`Backend::enqueue`], forwarded by default.
    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.inner().enqueue(queue, items).await
    }

    /// [`Backend::enqueue_once`], forwarded by default.
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.inner().enqueue_once(queue, request, items).await
    }

    /// [`Backend::claim`], forwarded by default.
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        self.inner().claim(queue, spec).await
    }

    /// [`Backend::recover_claim`], forwarded by default.
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        self.inner().recover_claim(queue, spec).await
    }

    /// [`Backend::lease_fate`], forwarded by default.
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        self.inner().lease_fate(lease, held_until).await
    }

    /// [`Backend::ack`], forwarded by default.
    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        self.inner().ack(lease).await
    }

    /// [`Backend::ack_many`], forwarded by default (never looped over
    /// [`Layer::ack`]).
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        self.inner().ack_many(leases).await
    }

    /// [`Backend::extend`], forwarded by default.
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        self.inner().extend(lease, ttl).await
    }

    /// [`Backend::release`], forwarded by default.
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.inner().release(lease, delay).await
    }

    /// [`Backend::give_back`], forwarded by default.
    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        self.inner().give_back(lease).await
    }

    /// [`Backend::fail`], forwarded by default.
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.inner().fail(lease, reason).await
    }

    /// [`Backend::reap`], forwarded by default.
    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        self.inner().reap(queue).await
    }

    /// [`Backend::stats`], forwarded by default.
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        self.inner().stats(queue).await
    }

    /// [`Backend::queues`], forwarded by default.
    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.inner().queues().await
    }

    /// [`Backend::peek`], forwarded by default.
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        self.inner().peek(queue, state, limit).await
    }

    /// [`Backend::item`], forwarded by default.
    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.inner().item(queue, id).await
    }

    /// [`Backend::redrive`], forwarded by default.
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        self.inner().redrive(queue, limit).await
    }

    /// [`Backend::redrive_item`], forwarded by default.
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.inner().redrive_item(queue, id).await
    }

    /// [`Backend::remove_item`], forwarded by default.
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        self.inner().remove_item(queue, id).await
    }

    /// [`Backend::purge`], forwarded by default.
    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        self.inner().purge(queue).await
    }

    /// [`Backend::delete_queue`], forwarded by default.
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        self.inner().delete_queue(queue).await
    }

    /// [`Backend::set_queue_limits`], forwarded by default.
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        self.inner().set_queue_limits(queue, limits).await
    }

    /// [`Backend::queue_limits`], forwarded by default.
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        self.inner().queue_limits(queue).await
    }

    /// [`Backend::wait_for_work`], forwarded by default.
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        self.inner().wait_for_work(queue, timeout).await
    }

    /// [`Backend::put_schedule`], forwarded by default.
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        self.inner().put_schedule(schedule).await
    }

    /// [`Backend::remove_schedule`], forwarded by default.
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        self.inner().remove_schedule(name).await
    }

    /// [`Backend::schedules`], forwarded by default.
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.inner().schedules().await
    }

    /// [`Backend::fire_schedule`], forwarded by default.
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        self.inner().fire_schedule(tick, item).await
    }

    /// [`Backend::test_hooks`], forwarded by default. A layer that changes
    /// ids or queue names must translate the hooks too (or return `None`).
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        self.inner().test_hooks()
    }
}

#[async_trait]
impl<L: Layer> Backend for L {
    fn capabilities(&self) -> Capabilities {
        Layer::capabilities(self)
    }
    fn limits(&self) -> Limits {
        Layer::limits(self)
    }
    async fn now(&self) -> Result<Timestamp> {
        Layer::now(self).await
    }
    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        Layer::enqueue(self, queue, items).await
    }
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        Layer::enqueue_once(self, queue, request, items).await
    }
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        Layer::claim(self, queue, spec).await
    }
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        Layer::recover_claim(self, queue, spec).await
    }
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        Layer::lease_fate(self, lease, held_until).await
    }
    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        Layer::ack(self, lease).await
    }
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        Layer::ack_many(self, leases).await
    }
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        Layer::extend(self, lease, ttl).await
    }
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        Layer::release(self, lease, delay).await
    }
    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        Layer::give_back(self, lease).await
    }
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        Layer::fail(self, lease, reason).await
    }
    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        Layer::reap(self, queue).await
    }
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        Layer::stats(self, queue).await
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        Layer::queues(self).await
    }
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        Layer::peek(self, queue, state, limit).await
    }
    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        Layer::item(self, queue, id).await
    }
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        Layer::redrive(self, queue, limit).await
    }
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        Layer::redrive_item(self, queue, id).await
    }
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        Layer::remove_item(self, queue, id).await
    }
    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        Layer::purge(self, queue).await
    }
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        Layer::delete_queue(self, queue).await
    }
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        Layer::set_queue_limits(self, queue, limits).await
    }
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        Layer::queue_limits(self, queue).await
    }
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        Layer::wait_for_work(self, queue, timeout).await
    }
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        Layer::put_schedule(self, schedule).await
    }
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        Layer::remove_schedule(self, name).await
    }
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        Layer::schedules(self).await
    }
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        Layer::fire_schedule(self, tick, item).await
    }
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        Layer::test_hooks(self)
    }
}

/// A shared handle is a backend: `Arc<dyn Backend>` (what
/// `leaseq::connect` returns) can be wrapped by a layer.
#[async_trait]
impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn limits(&self) -> Limits {
        (**self).limits()
    }
    async fn now(&self) -> Result<Timestamp> {
        (**self).now().await
    }
    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        (**self).enqueue(queue, items).await
    }
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        (**self).enqueue_once(queue, request, items).await
    }
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        (**self).claim(queue, spec).await
    }
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        (**self).recover_claim(queue, spec).await
    }
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        (**self).lease_fate(lease, held_until).await
    }
    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        (**self).ack(lease).await
    }
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        (**self).ack_many(leases).await
    }
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        (**self).extend(lease, ttl).await
    }
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        (**self).release(lease, delay).await
    }
    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        (**self).give_back(lease).await
    }
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        (**self).fail(lease, reason).await
    }
    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        (**self).reap(queue).await
    }
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        (**self).stats(queue).await
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        (**self).queues().await
    }
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        (**self).peek(queue, state, limit).await
    }
    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        (**self).item(queue, id).await
    }
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        (**self).redrive(queue, limit).await
    }
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        (**self).redrive_item(queue, id).await
    }
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        (**self).remove_item(queue, id).await
    }
    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        (**self).purge(queue).await
    }
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        (**self).delete_queue(queue).await
    }
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        (**self).set_queue_limits(queue, limits).await
    }
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        (**self).queue_limits(queue).await
    }
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        (**self).wait_for_work(queue, timeout).await
    }
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        (**self).put_schedule(schedule).await
    }
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        (**self).remove_schedule(name).await
    }
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        (**self).schedules().await
    }
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        (**self).fire_schedule(tick, item).await
    }
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        (**self).test_hooks()
    }
}

#[cfg(test)]
mod tests;
