//! The worker runtime: what a user runs to process a queue.
//!
//! A [`Worker`] claims items in batches for its free handler slots,
//! runs a [`Handler`] for each, extends each running job's lease at a third
//! of its ttl (heartbeats), and records the outcome under the lease's fence:
//! `Ok` acks; `Err` releases the item with backoff ([`RetryPolicy`]) until
//! its attempts run out, then sends it Dead with the error's text; a panic
//! counts as an error. When a heartbeat finds the lease lost, the handler's
//! [`JobContext`] is cancelled and its result is discarded. A background
//! reaper recovers expired leases. Shutdown stops claiming, lets running
//! handlers finish until a deadline, then releases the rest at once.

mod acker;
mod builder;
mod decoding;
mod ending;
mod handler;
mod heartbeat;
mod inline;
mod job;
mod metric_help;
mod metrics;
mod reaper;
mod retry;
mod run;
mod shared;
mod slots;
mod timeout;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use builder::WorkerBuilder;
pub use handler::{handler_fn, Handler, HandlerFn, Job, JobContext, Permanent, Snooze};
pub use metric_help::describe_metrics;
pub use metrics::{names as metric_names, JobEvent, JobOutcome, MetricsSnapshot, WorkerMetrics};
pub use retry::RetryPolicy;
pub use timeout::JobTimedOut;

use crate::{Backend, QueueName, Result};

/// Processes one queue with a [`Handler`].
///
/// A worker claims items in batches for its free handler slots (and, while
/// handlers are short, a few ahead), runs the handler for each, extends each running job's lease at a third of its
/// ttl (heartbeats), and records the outcome under the lease's fence: `Ok`
/// acks; `Err` releases the item with backoff ([`RetryPolicy`]) until its
/// attempts run out, then sends it Dead with the error's text; a panic
/// counts as an error. When a heartbeat finds the lease lost, the handler's
/// [`JobContext`] is cancelled and its result is discarded. A background
/// reaper recovers expired leases of the queue. Shutdown stops claiming,
/// lets running handlers finish until a deadline, then releases the rest at
/// once. Idle workers wait in [`Backend::wait_for_work`], not in a poll loop.
///
/// Acks go out in batches ([`Backend::ack_many`]) with no added delay: a
/// lone ack is sent at once, and the jobs that finish while a batch is on
/// its way share the next one. Each job still gets its own lease's result
/// (acked, lease lost, or not recorded), and shutdown sends every pending
/// ack before [`Worker::run`] returns.
///
/// While handlers return quickly from their first poll (under 50 µs on
/// average), the claim loop polls each claimed job once itself: a job done
/// at once costs no task, and a job that has to wait (for I/O, a timer, a
/// free slot) moves to a task of its own at that point. Handlers that
/// compute for longer before their first `.await` each start in a task of
/// their own, so they run side by side on a multi-thread runtime.
///
/// Heartbeats come from one scheduler per worker (one task, one timer),
/// which extends every lease whose handler is still running or waiting for
/// a slot; a handler done at its first poll never registers.
///
/// Each job runs in a `tracing` span `job` with its queue, id and attempt,
/// and claims and acks run in spans of their own, all with OpenTelemetry's
/// messaging fields ([`crate::spans`]); [`Worker::metrics`] counts what
/// happened, and the `metrics` facade gets the counters and histograms in
/// [`crate::metric_names`].
///
/// ```no_run
/// # async fn example(backend: std::sync::Arc<dyn leaseq_core::Backend>) -> leaseq_core::Result<()> {
/// use leaseq_core::{handler_fn, CancellationToken, Job, JobContext, RetryPolicy, Worker};
/// use std::time::Duration;
///
/// let worker = Worker::builder(backend, "emails")
///     .concurrency(4)
///     .lease_ttl(Duration::from_secs(30))
///     .retry(RetryPolicy::exponential(Duration::from_secs(1)))
///     .build(handler_fn(|job: Job, _ctx: JobContext| async move {
///         println!("sending {} bytes", job.payload.len());
///         Ok::<_, std::io::Error>(())
///     }))?;
/// let shutdown = CancellationToken::new(); // cancel it on Ctrl-C
/// worker.run(shutdown).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a worker does nothing until `run` is awaited"]
pub struct Worker {
    shared: Arc<shared::Shared>,
}

impl Worker {
    /// Starts configuring a worker for `queue` on `backend`. The queue name
    /// and settings are checked by the build step.
    pub fn builder(backend: Arc<dyn Backend>, queue: impl AsRef<str>) -> WorkerBuilder {
        WorkerBuilder::new(backend, queue.as_ref().to_string())
    }

    /// The queue this worker processes.
    pub fn queue(&self) -> &QueueName {
        &self.shared.queue
    }

    /// A live handle on this worker's counters.
    pub fn metrics(&self) -> WorkerMetrics {
        self.shared.metrics.clone()
    }

    /// Processes the queue until `shutdown` is cancelled, then shuts down
    /// gracefully (see [`Worker`]). Backend errors are logged
    /// and the claim is tried again with backoff; only
    /// [`crate::Error::InvalidInput`] from a claim ends the run early.
    ///
    /// Dropping the returned future instead is a hard stop, like a crash:
    /// running handlers are aborted and their leases are left to expire.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        run::run(self.shared, shutdown).await
    }
}
