//! A correct backend with one seeded fault, as a wrapper: the fault is the
//! only difference, so a violation the suite reports is the fault's.

#![allow(dead_code)] // Each test crate that includes this file uses some of the faults.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::{
    Backend, Capabilities, ClaimSpec, Claimed, Enqueued, ItemId, ItemInfo, ItemState, Lease,
    LeaseKey, LeaseToken, LeaseTtl, Limits, NewItem, QueueName, QueueStats, ReapReport, Released,
    Result, TestHooks, Timestamp,
};

/// The fault seeded into the wrapped backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// None: the wrapper only passes calls through.
    None,
    /// No fault, but no test hooks either: checks that need them skip, the
    /// rest let time pass instead of expiring leases by hook.
    HideHooks,
    /// Ack ignores the token: it acks by id, with whatever token the item
    /// holds now (as a queue that completes "by job id" does).
    UnfencedAck,
    /// Claim fills a short batch from leases it handed out before that are
    /// still live, as a claim that reads the leased index without checking
    /// expiry would.
    DoubleClaim,
}

/// `inner` with `fault`.
#[derive(Debug)]
pub(crate) struct Faulty {
    inner: Arc<dyn Backend>,
    fault: Fault,
    /// The latest token handed out per item (what "by id" resolves to).
    current: Mutex<HashMap<(QueueName, ItemId), LeaseToken>>,
    /// Leases handed out, for the double claim to hand out again.
    handed: Mutex<Vec<Lease>>,
}

impl Faulty {
    pub(crate) fn new(inner: Arc<dyn Backend>, fault: Fault) -> Self {
        Faulty {
            inner,
            fault,
            current: Mutex::new(HashMap::new()),
            handed: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl Backend for Faulty {
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        if self.fault == Fault::HideHooks {
            caps.test_hooks = false;
        }
        caps
    }

    fn limits(&self) -> Limits {
        self.inner.limits()
    }

    async fn now(&self) -> Result<Timestamp> {
        self.inner.now().await
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.inner.enqueue(queue, items).await
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let mut claimed = self.inner.claim(queue, spec).await?;
        {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            for l in &claimed.leases {
                current.insert((queue.clone(), l.id()), l.token());
            }
        }
        if self.fault == Fault::DoubleClaim {
            let now = self.inner.now().await?;
            let mut handed = self.handed.lock().unwrap_or_else(|p| p.into_inner());
            let fresh = claimed.leases.clone();
            for old in handed.iter() {
                if claimed.leases.len() >= spec.max() as usize {
                    break;
                }
                let live = old.expires_at > now && old.key.queue == *queue;
                if live && !claimed.leases.iter().any(|l| l.id() == old.id()) {
                    claimed.leases.push(old.clone());
                }
            }
            handed.extend(fresh);
        }
        Ok(claimed)
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        if self.fault == Fault::UnfencedAck {
            let current = self
                .current
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(lease.queue.clone(), lease.id))
                .copied();
            if let Some(token) = current {
                return self
                    .inner
                    .ack(&LeaseKey {
                        token,
                        ..lease.clone()
                    })
                    .await;
            }
        }
        self.inner.ack(lease).await
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        self.inner.extend(lease, ttl).await
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.inner.release(lease, delay).await
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.inner.fail(lease, reason).await
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        self.inner.reap(queue).await
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        self.inner.stats(queue).await
    }

    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        self.inner.peek(queue, state, limit).await
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.inner.item(queue, id).await
    }

    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        self.inner.redrive(queue, limit).await
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        self.inner.purge(queue).await
    }

    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        match self.fault {
            Fault::HideHooks => None,
            _ => self.inner.test_hooks(),
        }
    }
}
