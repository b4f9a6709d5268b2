//! Queue depths as gauges: a task that samples [`Backend::stats`] at an
//! interval and reports `leaseq_queue_items{queue, state}` (and the
//! store's `leaseq_queue_completed_total{queue}`) through the [`metrics`]
//! facade.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::worker::metric_names;
use crate::{Backend, ItemState, QueueName, QueueStats};

/// Samples `stats` of every queue in `queues` every `every` into the gauge
/// `leaseq_queue_items` (labels `queue` and `state`), and the store's
/// completion counter ([`QueueStats::completed`], where the backend keeps
/// one) into the counter `leaseq_queue_completed_total` (label `queue`),
/// until `stop` is cancelled. A failed sample is logged and skipped. Run one per process
/// (or per fleet: the numbers are the store's, not this process's).
///
/// With `queues` empty it samples every queue [`Backend::queues`] lists,
/// listed again at each tick, so queues created later are picked up. A
/// queue listed at the previous tick and not at this one holds nothing
/// now: its gauges are set to 0, so a dashboard does not keep showing its
/// last counts, and its completion counter is read once more. A failed listing is logged and the tick skipped.
///
/// ```no_run
/// # async fn demo(backend: std::sync::Arc<dyn leaseq_core::Backend>) -> leaseq_core::Result<()> {
/// use std::time::Duration;
/// let stop = leaseq_core::CancellationToken::new();
/// let queues = vec![leaseq_core::QueueName::new("emails")?];
/// tokio::spawn(leaseq_core::export_queue_gauges(backend.clone(), queues, Duration::from_secs(10), stop.clone()));
/// // Every queue that holds items, whatever its name:
/// tokio::spawn(leaseq_core::export_queue_gauges(backend, Vec::new(), Duration::from_secs(10), stop));
/// # Ok(()) }
/// ```
pub async fn export_queue_gauges(
    backend: Arc<dyn Backend>,
    queues: Vec<QueueName>,
    every: Duration,
    stop: CancellationToken,
) {
    crate::describe_metrics();
    let every_queue = queues.is_empty();
    // Every-queue mode: the queues sampled at the last tick.
    let mut last: BTreeSet<QueueName> = BTreeSet::new();
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !every_queue {
            for queue in &queues {
                sample(backend.as_ref(), queue).await;
            }
            continue;
        }
        let listed = match backend.queues().await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(error = %e, "listing the queues to sample failed");
                continue;
            }
        };
        for queue in &listed {
            sample(backend.as_ref(), queue).await;
        }
        let listed: BTreeSet<QueueName> = listed.into_iter().collect();
        for gone in last.difference(&listed) {
            // Holds no item now; one more read catches the completions
            // since the last tick (a queue of kept items only is not
            // listed).
            let completed = match backend.stats(gone).await {
                Ok(stats) => stats.completed,
                Err(_) => None,
            };
            set(
                gone,
                &QueueStats {
                    completed,
                    ..QueueStats::default()
                },
            );
        }
        last = listed;
    }
}

/// Reads `queue`'s stats into its gauges; a failure is logged.
async fn sample(backend: &dyn Backend, queue: &QueueName) {
    match backend.stats(queue).await {
        Ok(stats) => set(queue, &stats),
        Err(e) => tracing::warn!(queue = %queue, error = %e, "sampling queue stats failed"),
    }
}

fn set(queue: &QueueName, stats: &QueueStats) {
    for state in ItemState::ALL {
        metrics::gauge!(
            metric_names::ITEMS,
            "queue" => queue.to_string(),
            "state" => state.as_str()
        )
        .set(stats.get(state) as f64);
    }
    // The store's own count, so every process exports the same figure;
    // a delete_queue starts it again at 0, which Prometheus reads as a
    // counter reset.
    if let Some(completed) = stats.completed {
        metrics::counter!(metric_names::COMPLETED, "queue" => queue.to_string())
            .absolute(completed);
    }
}
