//! A correct backend with one seeded fault in its Control or
//! WorkerRegistry group, as a wrapper: the fault is the only difference,
//! so a violation the suite reports is the fault's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Backend, BackendExt, Bytes, Cancelled, ClaimSpec, Claimed, Control, Error, Extended, Groups,
    ItemId, ItemInfo, ItemState, LayeredBackend, LeaseKey, LeaseTtl, QueueName, QueueStats,
    Released, Result, Timestamp, WorkerEntry, WorkerRegistry,
};

/// The fault seeded into the wrapped backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// None: the wrapper only passes calls through.
    None,
    /// Cancel reads the item's state, then removes it in a second round
    /// trip and answers the state it read: a claim in between leases an
    /// item the cancel then answers "cancelled now", and racing cancels
    /// all answer Now.
    CancelReadThenRemove,
    /// Cancel of a waiting item answers `Now { was: Ready }` whatever state
    /// it was in.
    CancelAnswersReady,
    /// A cancel request is kept beside the store: the lease's own calls
    /// (ack, release, give-back, fail, snooze) end the item after they
    /// land, but a reap knows nothing of it and requeues the item.
    ReapIgnoresCancel,
    /// The pause is read through a cache that a claim refreshes only once
    /// it is 50 ms old: claims right after a pause still lease.
    PauseSeenLate,
    /// Snooze is a release with a delay: it spends the attempt, and on the
    /// last attempt the item goes Dead.
    SnoozeSpendsAttempt,
    /// Progress is written by item id, whatever token the caller holds.
    ProgressUnfenced,
    /// `run_all_now` ignores its limit.
    RunAllNowUnbounded,
    /// The registry is a list the wrapper keeps: entries never expire.
    RegistryNeverExpires,
    /// The cancel signal never fires: workers learn of a cancel only at
    /// their next heartbeat.
    CancelSignalSilent,
}

/// `inner` with `fault`.
#[derive(Debug)]
pub(crate) struct Faulty {
    inner: Arc<dyn Backend>,
    fault: Fault,
    /// Cancel requests kept beside the store (ReapIgnoresCancel).
    requested: Mutex<BTreeSet<(QueueName, ItemId)>>,
    /// When each queue was paused (PauseSeenLate).
    paused: Mutex<HashMap<QueueName, Instant>>,
    /// Progress by item (ProgressUnfenced).
    progress: Mutex<HashMap<(QueueName, ItemId), Bytes>>,
    /// Every entry ever registered (RegistryNeverExpires).
    entries: Mutex<BTreeMap<String, WorkerEntry>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Faulty {
    pub(crate) fn new(inner: Arc<dyn Backend>, fault: Fault) -> Self {
        Faulty {
            inner,
            fault,
            requested: Mutex::default(),
            paused: Mutex::default(),
            progress: Mutex::default(),
            entries: Mutex::default(),
        }
    }

    /// Takes `lease`'s item out of the side list of cancel requests; true
    /// when it was there.
    fn take_request(&self, lease: &LeaseKey) -> bool {
        self.fault == Fault::ReapIgnoresCancel
            && locked(&self.requested).remove(&(lease.queue.clone(), lease.id))
    }

    /// Ends the item of a lease whose call just landed, when a cancel was
    /// requested beside the store.
    async fn end_if_requested(&self, lease: &LeaseKey) -> Result<bool> {
        if !self.take_request(lease) {
            return Ok(false);
        }
        match self
            .inner
            .admin()?
            .remove_item(&lease.queue, lease.id)
            .await
        {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn noted(&self, queue: &QueueName, mut info: ItemInfo) -> ItemInfo {
        if self.fault == Fault::ReapIgnoresCancel && info.state == ItemState::Leased {
            info.cancel_requested |= locked(&self.requested).contains(&(queue.clone(), info.id));
        }
        if self.fault == Fault::ProgressUnfenced && info.state == ItemState::Leased {
            info.progress = locked(&self.progress)
                .get(&(queue.clone(), info.id))
                .cloned();
        }
        info
    }

    fn paused_for(&self, queue: &QueueName) -> Option<Instant> {
        locked(&self.paused).get(queue).copied()
    }
}

#[async_trait]
impl LayeredBackend for Faulty {
    type Inner = Arc<dyn Backend>;

    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        if self.fault == Fault::PauseSeenLate {
            if let Some(at) = self.paused_for(queue) {
                if at.elapsed() >= Duration::from_millis(50) {
                    return Ok(Claimed {
                        paused: true,
                        ..Claimed::default()
                    });
                }
            }
        }
        self.inner.claim(queue, spec).await
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        self.inner.ack(lease).await?;
        self.take_request(lease);
        Ok(())
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        let out = self.inner.ack_many(leases).await?;
        for (lease, r) in leases.iter().zip(&out) {
            if r.is_ok() {
                self.take_request(lease);
            }
        }
        Ok(out)
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        let mut e = self.inner.extend(lease, ttl).await?;
        if self.fault == Fault::ReapIgnoresCancel {
            e.cancel_requested |=
                locked(&self.requested).contains(&(lease.queue.clone(), lease.id));
        }
        Ok(e)
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        let r = self.inner.release(lease, delay).await?;
        Ok(if self.end_if_requested(lease).await? {
            Released::Cancelled
        } else {
            r
        })
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        self.inner.give_back(lease).await?;
        self.end_if_requested(lease).await.map(drop)
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.inner.fail(lease, reason).await?;
        self.end_if_requested(lease).await.map(drop)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let mut s = self.inner.stats(queue).await?;
        if self.fault == Fault::PauseSeenLate {
            s.paused = self.paused_for(queue).is_some();
        }
        Ok(s)
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        let info = self.inner.item(queue, id).await?;
        Ok(self.noted(queue, info))
    }

    fn groups(&self) -> Groups<'_> {
        let mut groups = self.inner.groups();
        groups.control = groups.control.map(|_| self as &dyn Control);
        groups.registry = groups.registry.map(|_| self as &dyn WorkerRegistry);
        groups
    }
}

#[async_trait]
impl Control for Faulty {
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let control = self.inner.control()?;
        match self.fault {
            Fault::CancelReadThenRemove => {
                let was = self.inner.item(queue, id).await?.state;
                if was == ItemState::Leased {
                    return control.cancel(queue, id).await;
                }
                tokio::task::yield_now().await;
                let _ = self.inner.admin()?.remove_item(queue, id).await;
                Ok(Cancelled::Now { was })
            }
            Fault::CancelAnswersReady => match control.cancel(queue, id).await? {
                Cancelled::Now { .. } => Ok(Cancelled::Now {
                    was: ItemState::Ready,
                }),
                other => Ok(other),
            },
            Fault::ReapIgnoresCancel => {
                if self.inner.item(queue, id).await?.state == ItemState::Leased {
                    locked(&self.requested).insert((queue.clone(), id));
                    return Ok(Cancelled::Requested);
                }
                control.cancel(queue, id).await
            }
            _ => control.cancel(queue, id).await,
        }
    }

    async fn pause(&self, queue: &QueueName) -> Result<()> {
        if self.fault == Fault::PauseSeenLate {
            locked(&self.paused)
                .entry(queue.clone())
                .or_insert_with(Instant::now);
            return Ok(());
        }
        self.inner.control()?.pause(queue).await
    }

    async fn resume(&self, queue: &QueueName) -> Result<()> {
        if self.fault == Fault::PauseSeenLate {
            locked(&self.paused).remove(queue);
            return Ok(());
        }
        self.inner.control()?.resume(queue).await
    }

    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        if self.fault == Fault::PauseSeenLate {
            return Ok(self.paused_for(queue).is_some());
        }
        self.inner.control()?.is_paused(queue).await
    }

    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        let r = if self.fault == Fault::SnoozeSpendsAttempt {
            self.inner.release(lease, delay).await?
        } else {
            self.inner.control()?.snooze(lease, delay).await?
        };
        Ok(if self.end_if_requested(lease).await? {
            Released::Cancelled
        } else {
            r
        })
    }

    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.inner.control()?.run_now(queue, id).await
    }

    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let limit = match self.fault {
            Fault::RunAllNowUnbounded => usize::MAX,
            _ => limit,
        };
        self.inner.control()?.run_all_now(queue, limit).await
    }

    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        if self.fault == Fault::ProgressUnfenced {
            leaseq_core::limits::check_progress(&value)?;
            self.inner.item(&lease.queue, lease.id).await?;
            locked(&self.progress).insert((lease.queue.clone(), lease.id), value);
            return Ok(());
        }
        self.inner.control()?.progress(lease, value).await
    }

    async fn cancel_signal(&self, queue: &QueueName) -> Result<Signal> {
        if self.fault == Fault::CancelSignalSilent {
            return Ok(Signal::never());
        }
        self.inner.control()?.cancel_signal(queue).await
    }
}

#[async_trait]
impl WorkerRegistry for Faulty {
    async fn register(&self, entry: &WorkerEntry, ttl: Duration) -> Result<Timestamp> {
        let until = self.inner.registry()?.register(entry, ttl).await?;
        if self.fault == Fault::RegistryNeverExpires {
            let mut kept = entry.clone();
            kept.expires_at = until.as_millis();
            locked(&self.entries).insert(entry.id.clone(), kept);
        }
        Ok(until)
    }

    async fn deregister(&self, id: &str) -> Result<bool> {
        locked(&self.entries).remove(id);
        self.inner.registry()?.deregister(id).await
    }

    async fn workers(&self) -> Result<Vec<WorkerEntry>> {
        if self.fault == Fault::RegistryNeverExpires {
            return Ok(locked(&self.entries).values().cloned().collect());
        }
        self.inner.registry()?.workers().await
    }
}
