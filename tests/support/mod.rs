//! Helpers shared by the runtime tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    async_trait, Backend, Capabilities, ClaimSpec, Claimed, Clock, Enqueued, ItemId, ItemInfo,
    ItemState, JobEvent, LeaseKey, LeaseTtl, MemoryBackend, NewItem, QueueName, QueueStats,
    ReapReport, Released, Result, Timestamp,
};
use tokio::sync::mpsc;

/// A backend clock that follows tokio's (pausable) clock, so worker timers
/// and lease expiry move together in `start_paused` tests.
#[derive(Debug)]
pub struct TokioClock {
    start: tokio::time::Instant,
    base: Timestamp,
}

impl TokioClock {
    pub fn new() -> Self {
        TokioClock {
            start: tokio::time::Instant::now(),
            base: Timestamp::from_millis(1_704_067_200_000),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base.saturating_add(self.start.elapsed())
    }
}

/// A memory backend on tokio's clock.
pub fn tokio_backend() -> Arc<dyn Backend> {
    Arc::new(MemoryBackend::with_clock(Arc::new(TokioClock::new())))
}

pub fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue name")
}

/// Collects job events; `next()` waits for the next one.
pub struct Events {
    rx: mpsc::UnboundedReceiver<JobEvent>,
}

pub fn events() -> (impl Fn(&JobEvent) + Send + Sync + 'static, Events) {
    let (tx, rx) = mpsc::unbounded_channel();
    let f = move |e: &JobEvent| {
        let _ = tx.send(e.clone());
    };
    (f, Events { rx })
}

impl Events {
    pub async fn next(&mut self) -> JobEvent {
        tokio::time::timeout(Duration::from_secs(3600), self.rx.recv())
            .await
            .expect("an event within an hour of (paused) time")
            .expect("event channel open")
    }
}

/// Wraps a backend, counts claims (to prove idle workers do not poll), and
/// fails the next `fail_claims` claims and `fail_acks` acks with a
/// connection error.
#[derive(Debug)]
pub struct CountingBackend {
    pub inner: Arc<dyn Backend>,
    pub claims: AtomicU64,
    pub fail_claims: AtomicU64,
    pub fail_acks: AtomicU64,
}

fn take(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

fn connection_lost() -> leaseq::Error {
    leaseq::Error::backend("test", std::io::Error::other("connection reset"))
}

impl CountingBackend {
    pub fn new(inner: Arc<dyn Backend>) -> Self {
        CountingBackend {
            inner,
            claims: AtomicU64::new(0),
            fail_claims: AtomicU64::new(0),
            fail_acks: AtomicU64::new(0),
        }
    }

    pub fn claims(&self) -> u64 {
        self.claims.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Backend for CountingBackend {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn now(&self) -> Result<Timestamp> {
        self.inner.now().await
    }
    async fn enqueue(&self, q: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.inner.enqueue(q, items).await
    }
    async fn claim(&self, q: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        if take(&self.fail_claims) {
            return Err(connection_lost());
        }
        self.inner.claim(q, spec).await
    }
    async fn ack(&self, l: &LeaseKey) -> Result<()> {
        if take(&self.fail_acks) {
            return Err(connection_lost());
        }
        self.inner.ack(l).await
    }
    async fn extend(&self, l: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        self.inner.extend(l, ttl).await
    }
    async fn release(&self, l: &LeaseKey, delay: Duration) -> Result<Released> {
        self.inner.release(l, delay).await
    }
    async fn fail(&self, l: &LeaseKey, reason: &str) -> Result<()> {
        self.inner.fail(l, reason).await
    }
    async fn reap(&self, q: &QueueName) -> Result<ReapReport> {
        self.inner.reap(q).await
    }
    async fn stats(&self, q: &QueueName) -> Result<QueueStats> {
        self.inner.stats(q).await
    }
    async fn peek(&self, q: &QueueName, s: ItemState, limit: usize) -> Result<Vec<ItemInfo>> {
        self.inner.peek(q, s, limit).await
    }
    async fn item(&self, q: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.inner.item(q, id).await
    }
    async fn redrive(&self, q: &QueueName, limit: usize) -> Result<u64> {
        self.inner.redrive(q, limit).await
    }
    async fn purge(&self, q: &QueueName) -> Result<u64> {
        self.inner.purge(q).await
    }
    async fn wait_for_work(&self, q: &QueueName, timeout: Duration) {
        self.inner.wait_for_work(q, timeout).await
    }
}
