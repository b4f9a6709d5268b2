//! The collector: a task that samples every queue's counts at an interval
//! into the [`History`], so the page's charts have a past when it opens or
//! reloads. It runs while the dashboard's router exists and stops when
//! the last copy of it is dropped.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use leaseq_core::{Backend, CancellationToken, QueueName};

use crate::completions::Counters;
use crate::history::{Counts, History, Sample, MAX_QUEUES};

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
    // Each queue's completion counter at the last tick.
    let mut counters = Counters::default();
    // Queues with a completion counter that may still count: a queue whose
    // items all completed is no longer listed, but its last completions
    // still count at the next tick.
    let mut counting = BTreeSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let sampled = sample(backend.as_ref(), &mut counters, &counting).await;
        let Some(collector) = collector.upgrade() else {
            return;
        };
        match sampled {
            Ok((t_ms, listed)) => {
                if failing {
                    tracing::info!("the dashboard's collector samples again");
                    failing = false;
                }
                counting = still_counting(&listed);
                counters.retain(|q| listed.iter().any(|(name, _, _)| name == q));
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

/// The queues to sample again though not listed: those with a counter
/// that hold items or completed some in the last window, at most
/// [`MAX_QUEUES`].
fn still_counting(sampled: &[Counts]) -> BTreeSet<QueueName> {
    sampled
        .iter()
        .filter(|(_, stats, done)| done.is_some_and(|n| n > 0 || stats.total() > 0))
        .map(|(name, _, _)| name.clone())
        .take(MAX_QUEUES)
        .collect()
}

/// The backend's time and the counts of every listed queue and of those
/// in `counting`, each with its completions since the last tick.
async fn sample(
    backend: &dyn Backend,
    counters: &mut Counters,
    counting: &BTreeSet<QueueName>,
) -> leaseq_core::Result<(u64, Vec<Counts>)> {
    let now = backend.now().await?.as_millis();
    let mut names = backend.queues().await?;
    let listed: BTreeSet<_> = names.iter().cloned().collect();
    names.extend(counting.difference(&listed).cloned());
    let counts = futures_util::future::join_all(names.iter().map(|q| backend.stats(q))).await;
    let mut listed = Vec::with_capacity(names.len());
    for (name, stats) in names.into_iter().zip(counts) {
        let stats = stats?;
        let completed = counters.since_last(&name, &stats);
        listed.push((name, stats, completed));
    }
    Ok((now, listed))
}
