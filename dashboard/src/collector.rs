//! The collector: a task that samples every queue's counts at an interval
//! into the [`History`], so the page's charts have a past when it opens or
//! reloads. It runs while the dashboard's router exists and stops when
//! the last copy of it is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use leaseq_core::{Backend, CancellationToken, QueueName, QueueStats};

use crate::history::{History, Sample};

/// The shortest interval accepted: each tick costs a `stats` call per queue.
pub(crate) const MIN_EVERY: Duration = Duration::from_millis(100);

/// The history and the task that fills it.
#[derive(Debug)]
pub(crate) struct Collector {
    history: Mutex<History>,
    every: Duration,
    capacity: usize,
    started: AtomicBool,
    stop: CancellationToken,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Collector {
    pub(crate) fn new(every: Duration, capacity: usize) -> Self {
        Self {
            history: Mutex::new(History::new(capacity)),
            every: every.max(MIN_EVERY),
            capacity: capacity.max(1),
            started: AtomicBool::new(false),
            stop: CancellationToken::new(),
        }
    }

    /// The interval between samples.
    pub(crate) fn every(&self) -> Duration {
        self.every
    }

    /// The most samples one ring keeps.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Starts the sampling task on the current tokio runtime, once; does
    /// nothing outside a runtime (the next request starts it).
    pub(crate) fn start(self: &Arc<Self>, backend: &Arc<dyn Backend>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        runtime.spawn(run(
            Arc::downgrade(self),
            self.stop.clone(),
            backend.clone(),
            self.every,
        ));
    }

    /// The samples after `t_ms` of one queue, or of all queues together.
    pub(crate) fn after(
        &self,
        queue: Option<&QueueName>,
        t_ms: Option<u64>,
    ) -> Option<Vec<Sample>> {
        self.lock().after(queue, t_ms)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        // A panic while recording leaves a ring whole (pushes and pops are
        // complete steps): the history stays usable.
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Samples every `every` until `stop`, or until the collector is gone.
async fn run(
    collector: Weak<Collector>,
    stop: CancellationToken,
    backend: Arc<dyn Backend>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    // A slow backend delays the next tick instead of bunching ticks up.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let sampled = sample(backend.as_ref()).await;
        let Some(collector) = collector.upgrade() else {
            return;
        };
        match sampled {
            Ok((t_ms, listed)) => {
                if failing {
                    tracing::info!("the dashboard's collector samples again");
                    failing = false;
                }
                collector.lock().record(t_ms, &listed);
            }
            // Once per outage, not at every tick; the chart shows the gap.
            Err(e) if !failing => {
                failing = true;
                let error = leaseq_core::redact_secrets(&e.to_string());
                tracing::warn!(%error, "the dashboard's collector cannot sample the queues");
            }
            Err(_) => {}
        }
    }
}

/// The backend's time and every listed queue's counts.
async fn sample(backend: &dyn Backend) -> leaseq_core::Result<(u64, Vec<(QueueName, QueueStats)>)> {
    let now = backend.now().await?;
    let names = backend.queues().await?;
    let stats = futures_util::future::join_all(names.iter().map(|q| backend.stats(q))).await;
    let mut listed = Vec::with_capacity(names.len());
    for (name, stats) in names.into_iter().zip(stats) {
        listed.push((name, stats?));
    }
    Ok((now.as_millis(), listed))
}
