//! Queue depths as gauges: a task that samples [`Backend::stats`] at an
//! interval and reports `leaseq_queue_items{queue, state}` through the
//! [`metrics`] facade.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::worker::metric_names;
use crate::{Backend, ItemState, QueueName};

/// Samples `stats` of every queue in `queues` every `every` into the gauge
/// `leaseq_queue_items` (labels `queue` and `state`), until `stop` is
/// cancelled. A failed sample is logged and skipped. Run one per process
/// (or per fleet: the numbers are the store's, not this process's).
///
/// ```no_run
/// # async fn demo(backend: std::sync::Arc<dyn leaseq_core::Backend>) -> leaseq_core::Result<()> {
/// use std::time::Duration;
/// let stop = leaseq_core::CancellationToken::new();
/// let queues = vec![leaseq_core::QueueName::new("emails")?];
/// tokio::spawn(leaseq_core::export_queue_gauges(backend, queues, Duration::from_secs(10), stop));
/// # Ok(()) }
/// ```
pub async fn export_queue_gauges(
    backend: Arc<dyn Backend>,
    queues: Vec<QueueName>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        for queue in &queues {
            match backend.stats(queue).await {
                Ok(stats) => {
                    for state in ItemState::ALL {
                        metrics::gauge!(
                            metric_names::ITEMS,
                            "queue" => queue.to_string(),
                            "state" => state.as_str()
                        )
                        .set(stats.get(state) as f64);
                    }
                }
                Err(e) => tracing::warn!(queue = %queue, error = %e, "sampling queue stats failed"),
            }
        }
    }
}
