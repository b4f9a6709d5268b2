//! Layers: backends that wrap another backend and change only what they
//! name.
//!
//! A layer implements [`LayeredBackend`]: it says where its inner backend is and
//! overrides the operations it changes; every other operation is forwarded
//! to the inner backend by the trait's defaults, and a blanket impl makes
//! every layer a [`Backend`]. Layers nest (`Sharded<Faults<PgBackend>>`) and
//! sit on any handle, including `Arc<dyn Backend>`.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use leaseq_core::{async_trait, Backend, LayeredBackend, LeaseKey, Result};
//!
//! /// Counts successful acks; everything else passes through untouched.
//! #[derive(Debug)]
//! struct CountAcks<B> {
//!     inner: B,
//!     acked: AtomicU64,
//! }
//!
//! #[async_trait]
//! impl<B: Backend> LayeredBackend for CountAcks<B> {
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
//! # Why forwarding defaults, and where they are refused
//! A hand-written wrapper that implements [`Backend`] itself must write
//! every operation (the core has no defaults). A [`LayeredBackend`]
//! forwards what it does not override, which is right for a layer that
//! only watches (counting acks, tracing): the inner backend sees each call
//! as it was made. It is the wrong default for a layer that translates
//! names or injects faults (the sharding layer, the fault layer): a new
//! operation forwarded untouched would reach the inner backend with the
//! logical queue name, un-sharded and un-faultable. Those layers carry
//! `#[deny(clippy::missing_trait_methods)]` on their impl, as do the
//! blanket impl and the impl for [`Arc`], so an operation added to
//! [`Backend`] fails `cargo clippy -D warnings` until each of them decides
//! what to do with it. The optional groups ([`crate::groups`]) forward
//! through [`LayeredBackend::groups`]: a layer that changes names offers
//! each group itself.
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

use crate::{
    Backend, Capabilities, ClaimSpec, Claimed, Enqueued, Extended, Groups, ItemId, ItemInfo,
    ItemState, LeaseFate, LeaseKey, LeaseToken, LeaseTtl, NewItem, QueueName, QueueStats,
    ReapReport, Released, Result, Timestamp,
};

/// A backend that wraps an inner backend (what OpenDAL calls a layered
/// accessor; the name says it is the wrapper, not a builder of one).
/// Override what the layer changes; every operation not overridden is
/// forwarded to [`LayeredBackend::inner`]. Every `LayeredBackend` is a
/// [`Backend`] through a blanket impl.
///
/// The methods mirror [`Backend`]'s one for one, with the same contract:
/// a layer that changes an operation keeps that operation's contract.
#[async_trait]
pub trait LayeredBackend: Send + Sync + std::fmt::Debug + 'static {
    /// The backend this layer wraps.
    type Inner: Backend + ?Sized;

    /// The wrapped backend.
    fn inner(&self) -> &Self::Inner;

    /// [`Backend::capabilities`], forwarded by default.
    fn capabilities(&self) -> Capabilities {
        self.inner().capabilities()
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
    /// [`LayeredBackend::ack`]).
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        self.inner().ack_many(leases).await
    }

    /// [`Backend::extend`], forwarded by default.
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
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

    /// [`Backend::wait_for_work`], forwarded by default.
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        self.inner().wait_for_work(queue, timeout).await
    }

    /// [`Backend::groups`], forwarded by default: the inner backend's
    /// groups, untouched by this layer. A layer that changes ids or queue
    /// names, or injects faults, must offer each group itself (or none).
    fn groups(&self) -> Groups<'_> {
        self.inner().groups()
    }
}

// A new `Backend` operation must be written here, not inherited.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<L: LayeredBackend> Backend for L {
    fn capabilities(&self) -> Capabilities {
        LayeredBackend::capabilities(self)
    }
    async fn now(&self) -> Result<Timestamp> {
        LayeredBackend::now(self).await
    }
    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        LayeredBackend::enqueue(self, queue, items).await
    }
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        LayeredBackend::enqueue_once(self, queue, request, items).await
    }
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        LayeredBackend::claim(self, queue, spec).await
    }
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        LayeredBackend::recover_claim(self, queue, spec).await
    }
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        LayeredBackend::lease_fate(self, lease, held_until).await
    }
    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        LayeredBackend::ack(self, lease).await
    }
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        LayeredBackend::ack_many(self, leases).await
    }
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        LayeredBackend::extend(self, lease, ttl).await
    }
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        LayeredBackend::release(self, lease, delay).await
    }
    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        LayeredBackend::give_back(self, lease).await
    }
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        LayeredBackend::fail(self, lease, reason).await
    }
    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        LayeredBackend::reap(self, queue).await
    }
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        LayeredBackend::stats(self, queue).await
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        LayeredBackend::queues(self).await
    }
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        LayeredBackend::peek(self, queue, state, limit).await
    }
    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        LayeredBackend::item(self, queue, id).await
    }
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        LayeredBackend::wait_for_work(self, queue, timeout).await
    }
    fn groups(&self) -> Groups<'_> {
        LayeredBackend::groups(self)
    }
}

/// A shared handle is a backend: `Arc<dyn Backend>` (what
/// `leaseq::connect` returns) can be wrapped by a layer.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
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
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
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
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        (**self).wait_for_work(queue, timeout).await
    }
    fn groups(&self) -> Groups<'_> {
        (**self).groups()
    }
}

#[cfg(test)]
mod tests;
