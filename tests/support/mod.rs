//! Helpers shared by the runtime tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    async_trait, Backend, ClaimSpec, Claimed, Clock, JobEvent, LayeredBackend, LeaseKey,
    MemoryBackend, QueueName, Result, Timestamp,
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
    Arc::new(MemoryBackend::with_clock(Arc::new(TokioClock::new())).with_test_hooks())
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
    leaseq::Error::outcome_unknown("test", std::io::Error::other("connection reset"))
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

// A layer: only claims and acks are changed, every other call (limits and
// test hooks included) is forwarded to `inner` by `LayeredBackend`'s defaults.
#[async_trait]
impl LayeredBackend for CountingBackend {
    type Inner = Arc<dyn Backend>;
    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
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
    // The worker acks in batches. A failed ack fails its whole batch before
    // anything is acked, as the old loop of single acks did; a batch spends
    // one of `fail_acks`.
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        if !leases.is_empty() && take(&self.fail_acks) {
            return Err(connection_lost());
        }
        self.inner.ack_many(leases).await
    }
}

/// A handler that succeeds at once.
pub fn noop_handler() -> impl leaseq::Handler {
    leaseq::handler_fn(|_job: leaseq::Job, _ctx: leaseq::JobContext| async {
        Ok::<_, std::io::Error>(())
    })
}
