//! A layer that injects faults into chosen operations: delay a call, fail
//! it before it runs, or run it and then drop its reply (a "lost reply":
//! the store changed, the caller sees an error). For testing code that runs
//! on a backend; built with the `faults` feature.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use leaseq_core::layer::fault::{Fault, Faults, Op};
//! use leaseq_core::Backend;
//!
//! fn flaky(backend: Arc<dyn Backend>) -> Faults<Arc<dyn Backend>> {
//!     let faults = Faults::new(backend);
//!     // The next two acks run, but their replies are lost.
//!     faults.inject(Op::Ack, Fault::LoseReply, 2);
//!     // Every claim waits 50 ms first.
//!     faults.inject(Op::Claim, Fault::Delay(Duration::from_millis(50)), u32::MAX);
//!     faults
//! }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Admin, Backend, BackendExt, Cancelled, Capabilities, ClaimSpec, Claimed, Control, Enqueued,
    Error, Extended, Groups, ItemId, ItemInfo, ItemState, LayeredBackend, LeaseFate, LeaseKey,
    LeaseToken, LeaseTtl, NewItem, QueueName, QueueStats, ReapReport, Released, Result, Timestamp,
};

/// An operation a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Op {
    /// [`Backend::now`]
    Now,
    /// [`Backend::enqueue`]
    Enqueue,
    /// [`Backend::enqueue_once`]
    EnqueueOnce,
    /// [`Backend::claim`]
    Claim,
    /// [`Backend::recover_claim`]
    RecoverClaim,
    /// [`Backend::lease_fate`]
    LeaseFate,
    /// [`Backend::ack`]
    Ack,
    /// [`Backend::ack_many`]
    AckMany,
    /// [`Backend::extend`]
    Extend,
    /// [`Backend::release`]
    Release,
    /// [`Backend::give_back`]
    GiveBack,
    /// [`Backend::fail`]
    Fail,
    /// [`Backend::reap`]
    Reap,
    /// [`Backend::stats`]
    Stats,
    /// [`Backend::queues`]
    Queues,
    /// [`Backend::peek`]
    Peek,
    /// [`Backend::item`]
    Item,
    /// [`crate::Admin::redrive`]
    Redrive,
    /// [`crate::Admin::redrive_item`]
    RedriveItem,
    /// [`crate::Admin::remove_item`]
    RemoveItem,
    /// [`crate::Admin::purge`]
    Purge,
    /// [`crate::Admin::delete_queue`]
    DeleteQueue,
    /// [`crate::Control::cancel`]
    Cancel,
    /// [`crate::Control::pause`] and [`crate::Control::resume`]
    Pause,
    /// [`crate::Control::snooze`]
    Snooze,
    /// [`crate::Control::run_now`] and [`crate::Control::run_all_now`]
    RunNow,
    /// [`crate::Control::progress`]
    Progress,
}

/// What happens to a targeted call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Waits this long, then runs the call normally.
    Delay(Duration),
    /// Returns an error without running the call: nothing changed.
    Refuse,
    /// Returns [`Error::Rejected`] without running the call, as a server
    /// that denies it for good (a missing grant, an unknown table) would.
    Reject,
    /// Runs the call, then returns an error instead of its reply: the store
    /// changed as if the call had succeeded (or failed) normally.
    LoseReply,
}

/// One armed fault: how many more calls it hits.
#[derive(Debug, Clone, Copy)]
struct Armed {
    op: Op,
    fault: Fault,
    left: u32,
    /// Hits one call in `every` (1: every call).
    every: u32,
    seen: u32,
}

/// A layer that injects [`Fault`]s into chosen [`Op`]s of its inner backend;
/// every other call passes through untouched.
pub struct Faults<B> {
    inner: B,
    armed: Mutex<Vec<Armed>>,
    fired: AtomicU64,
}

impl<B: fmt::Debug> fmt::Debug for Faults<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("inner", &self.inner)
            .field(
                "armed",
                &*self.armed.lock().unwrap_or_else(PoisonError::into_inner),
            )
            .field("fired", &self.fired.load(Ordering::Relaxed))
            .finish()
    }
}

impl<B: Backend> Faults<B> {
    /// `inner` with no fault armed.
    pub fn new(inner: B) -> Self {
        Faults {
            inner,
            armed: Mutex::new(Vec::new()),
            fired: AtomicU64::new(0),
        }
    }

    /// Arms `fault` for the next `times` calls of `op` (`u32::MAX`: every
    /// call). Faults armed for one op fire in the order they were armed.
    pub fn inject(&self, op: Op, fault: Fault, times: u32) {
        self.inject_every(op, fault, 1, times);
    }

    /// Arms `fault` for one call of `op` in `every` (the `every`-th,
    /// `2 * every`-th, …), `times` times in all (`u32::MAX`: no end): a
    /// steady rate of faults for a storm, the same on every run.
    pub fn inject_every(&self, op: Op, fault: Fault, every: u32, times: u32) {
        if times > 0 {
            self.lock().push(Armed {
                op,
                fault,
                left: times,
                every: every.max(1),
                seen: 0,
            });
        }
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// How many calls a fault has hit so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Armed>> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fault for this call of `op`, if one is armed (spending one use).
    fn take(&self, op: Op) -> Option<Fault> {
        let mut armed = self.lock();
        let pos = armed.iter().position(|a| a.op == op)?;
        armed[pos].seen = armed[pos].seen.wrapping_add(1);
        if !armed[pos].seen.is_multiple_of(armed[pos].every) {
            return None;
        }
        let fault = armed[pos].fault;
        if armed[pos].left != u32::MAX {
            armed[pos].left -= 1;
        }
        if armed[pos].left == 0 {
            armed.remove(pos);
        }
        self.fired.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }

    /// Runs `call` under whatever fault is armed for `op`.
    async fn run<T, Fut>(&self, op: Op, call: Fut) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        match self.take(op) {
            None => call.await,
            Some(Fault::Delay(d)) => {
                tokio::time::sleep(d).await;
                call.await
            }
            Some(Fault::Refuse) => Err(Error::unavailable(
                format!("{op:?} refused by an injected fault"),
                InjectedFault(op, "refused before it ran"),
            )),
            Some(Fault::Reject) => Err(Error::rejected(
                format!("{op:?} rejected by an injected fault"),
                InjectedFault(op, "rejected for good"),
            )),
            Some(Fault::LoseReply) => {
                let _ = call.await;
                Err(Error::outcome_unknown(
                    format!("{op:?}: the reply was lost (injected fault)"),
                    InjectedFault(op, "ran, reply dropped"),
                ))
            }
        }
    }
}

/// The source of an injected error.
#[derive(Debug)]
struct InjectedFault(Op, &'static str);

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected fault on {:?}: {}", self.0, self.1)
    }
}

impl std::error::Error for InjectedFault {}

// Every operation decides whether it can be faulted: none is forwarded
// unseen.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> LayeredBackend for Faults<B> {
    type Inner = B;

    fn inner(&self) -> &B {
        &self.inner
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn now(&self) -> Result<Timestamp> {
        self.run(Op::Now, self.inner.now()).await
    }
    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.run(Op::Enqueue, self.inner.enqueue(queue, items))
            .await
    }
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.run(
            Op::EnqueueOnce,
            self.inner.enqueue_once(queue, request, items),
        )
        .await
    }
    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        self.run(Op::Claim, self.inner.claim(queue, spec)).await
    }
    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        self.run(Op::RecoverClaim, self.inner.recover_claim(queue, spec))
            .await
    }
    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        self.run(Op::LeaseFate, self.inner.lease_fate(lease, held_until))
            .await
    }
    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        self.run(Op::Ack, self.inner.ack(lease)).await
    }
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        self.run(Op::AckMany, self.inner.ack_many(leases)).await
    }
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        self.run(Op::Extend, self.inner.extend(lease, ttl)).await
    }
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.run(Op::Release, self.inner.release(lease, delay))
            .await
    }
    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        self.run(Op::GiveBack, self.inner.give_back(lease)).await
    }
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.run(Op::Fail, self.inner.fail(lease, reason)).await
    }
    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        self.run(Op::Reap, self.inner.reap(queue)).await
    }
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        self.run(Op::Stats, self.inner.stats(queue)).await
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.run(Op::Queues, self.inner.queues()).await
    }
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        self.run(Op::Peek, self.inner.peek(queue, state, limit))
            .await
    }
    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.run(Op::Item, self.inner.item(queue, id)).await
    }
    /// Not faulted: a wait is a hint, and its timeout is its own fault.
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        self.inner.wait_for_work(queue, timeout).await
    }
    /// Operator actions and control through this layer (faulted); the
    /// other groups are the inner backend's, not faulted.
    fn groups(&self) -> Groups<'_> {
        let inner = self.inner.groups();
        Groups {
            admin: inner.admin.map(|_| self as &dyn Admin),
            control: inner.control.map(|_| self as &dyn Control),
            ..inner
        }
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> Admin for Faults<B> {
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let admin = self.inner.admin()?;
        self.run(Op::Redrive, admin.redrive(queue, limit)).await
    }
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let admin = self.inner.admin()?;
        self.run(Op::RedriveItem, admin.redrive_item(queue, id))
            .await
    }
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let admin = self.inner.admin()?;
        self.run(Op::RemoveItem, admin.remove_item(queue, id)).await
    }
    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let admin = self.inner.admin()?;
        self.run(Op::Purge, admin.purge(queue)).await
    }
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let admin = self.inner.admin()?;
        self.run(Op::DeleteQueue, admin.delete_queue(queue)).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> Control for Faults<B> {
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let control = self.inner.control()?;
        self.run(Op::Cancel, control.cancel(queue, id)).await
    }
    async fn pause(&self, queue: &QueueName) -> Result<()> {
        let control = self.inner.control()?;
        self.run(Op::Pause, control.pause(queue)).await
    }
    async fn resume(&self, queue: &QueueName) -> Result<()> {
        let control = self.inner.control()?;
        self.run(Op::Pause, control.resume(queue)).await
    }
    /// Not faulted: a read, like `stats`'s view of the pause.
    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        self.inner.control()?.is_paused(queue).await
    }
    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        let control = self.inner.control()?;
        self.run(Op::Snooze, control.snooze(lease, delay)).await
    }
    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let control = self.inner.control()?;
        self.run(Op::RunNow, control.run_now(queue, id)).await
    }
    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let control = self.inner.control()?;
        self.run(Op::RunNow, control.run_all_now(queue, limit))
            .await
    }
    async fn progress(&self, lease: &LeaseKey, value: bytes::Bytes) -> Result<()> {
        let control = self.inner.control()?;
        self.run(Op::Progress, control.progress(lease, value)).await
    }
    /// Passed through: a signal is a hint, and a lost one only falls back
    /// to the heartbeat.
    async fn cancel_signal(&self, queue: &QueueName) -> Result<crate::signal::Signal> {
        self.inner.control()?.cancel_signal(queue).await
    }
}
