//! What a running worker's tasks share: its settings, handler, metrics
//! and how it settles lost replies. Built once by the builder, then
//! read-only.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::handler::Handler;
use super::metrics::{EventSink, WorkerMetrics};
use super::RetryPolicy;
use crate::{Backend, LeaseTtl, QueueName};

/// Everything a running worker shares between its tasks.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) queue: QueueName,
    /// The names of the spans the worker opens on `queue`.
    pub(crate) span_names: crate::spans::WorkerSpanNames,
    pub(crate) handler: Arc<dyn Handler<Bytes>>,
    pub(crate) ttl: LeaseTtl,
    pub(crate) heartbeat: Duration,
    pub(crate) concurrency: usize,
    pub(crate) prefetch: u32,
    pub(crate) retry: RetryPolicy,
    pub(crate) shutdown_deadline: Duration,
    pub(crate) reap_interval: Option<Duration>,
    pub(crate) idle_wait: Duration,
    pub(crate) metrics: WorkerMetrics,
    pub(crate) events: EventSink,
    /// How calls whose reply is lost are settled (retries count as
    /// backend errors in the metrics).
    pub(crate) settle: crate::settle::Settle,
}

impl std::fmt::Debug for dyn Handler<Bytes> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

/// Four tries, 50 ms doubling; every retry counts as a backend error.
pub(crate) fn settle_for(metrics: &WorkerMetrics) -> crate::settle::Settle {
    let metrics = metrics.clone();
    crate::settle::Settle::new()
        .attempts(4)
        .pauses(Duration::from_millis(50), Duration::from_secs(1))
        .on_retry(Arc::new(move |e| {
            metrics.inc(super::metrics::Counter::BackendErrors);
            tracing::warn!(error = %e, "backend call failed; settling it");
        }))
}
