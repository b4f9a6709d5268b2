//! Configuring a [`Worker`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::decoding::Decoding;
use super::handler::Handler;
use super::metrics::{EventSink, JobEvent, WorkerMetrics};
use super::shared::{settle_for, Shared};
use super::timeout::Timeout;
use super::{RetryPolicy, Worker};
use crate::codec::{Codec, JsonCodec};
use crate::limits::MAX_CLAIM;
use crate::{Backend, Error, LeaseTtl, QueueName, Result};

// The default prefetch is a claim's size, and `clamp` needs it below the cap.
const _: () = assert!(WorkerBuilder::DEFAULT_PREFETCH <= MAX_CLAIM);

/// Builds a [`Worker`]; start with [`Worker::builder`].
///
/// Defaults: concurrency 8, lease ttl 30 s, heartbeat every third of the
/// ttl, claims of up to [`WorkerBuilder::DEFAULT_PREFETCH`] items (see
/// [`WorkerBuilder::prefetch`]), [`RetryPolicy::default`], shutdown
/// deadline 30 s, a reaper every 5 s, and at most 1 s of idle waiting
/// between claims when the backend gives no wake-up.
#[derive(Debug)]
pub struct WorkerBuilder {
    backend: Arc<dyn Backend>,
    queue: String,
    ttl: Duration,
    heartbeat: Option<Duration>,
    concurrency: usize,
    prefetch: Option<u32>,
    retry: RetryPolicy,
    shutdown_deadline: Duration,
    reap_interval: Option<Duration>,
    idle_wait: Duration,
    metrics: WorkerMetrics,
    events: EventSink,
    job_timeout: Option<Duration>,
}

impl WorkerBuilder {
    /// Handler slots unless [`WorkerBuilder::concurrency`] says otherwise.
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// The most items a claim asks for unless [`WorkerBuilder::prefetch`]
    /// says otherwise (twice the concurrency when that is more). A claim
    /// asks for this many only while handlers finish in microseconds.
    pub const DEFAULT_PREFETCH: u32 = 100;

    /// The most handler slots a worker takes (more than any one process
    /// can run; it keeps the worker's own bookkeeping in range).
    pub const MAX_CONCURRENCY: usize = 1 << 20;

    /// How often the background reaper runs unless
    /// [`WorkerBuilder::reap_interval`] says otherwise; its first round runs
    /// as the worker starts. Each round reaps
    /// expired leases and, on a backend with the History group, collects
    /// the finished items the queue's retention no longer keeps, so a kept
    /// item outlives its age by up to this much.
    pub const DEFAULT_REAP_INTERVAL: Duration = Duration::from_secs(5);

    pub(crate) fn new(backend: Arc<dyn Backend>, queue: String) -> Self {
        WorkerBuilder {
            backend,
            queue,
            ttl: Duration::from_secs(30),
            heartbeat: None,
            concurrency: Self::DEFAULT_CONCURRENCY,
            prefetch: None,
            retry: RetryPolicy::default(),
            shutdown_deadline: Duration::from_secs(30),
            reap_interval: Some(Self::DEFAULT_REAP_INTERVAL),
            idle_wait: Duration::from_secs(1),
            metrics: WorkerMetrics::default(),
            events: EventSink(None),
            job_timeout: None,
        }
    }

    /// How many handlers may run at once (1 to
    /// [`WorkerBuilder::MAX_CONCURRENCY`]).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// How long each claim leases an item for. Heartbeats keep a running
    /// job's lease alive, so this bounds how long a crashed worker's items
    /// wait before a reaper frees them.
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How often a running job's lease is extended (default: a third of the
    /// lease ttl). Must be shorter than the ttl.
    #[must_use]
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.heartbeat = Some(every);
        self
    }

    /// The most items one claim asks for (1 to 1,000; default
    /// [`WorkerBuilder::DEFAULT_PREFETCH`], or twice the concurrency if
    /// more). A claim asks for the free handler slots and, while handlers
    /// finish within 10 ms on average, for jobs that wait for a slot with
    /// their leases kept alive: `concurrency` of them, or as many as the
    /// handlers get through in about a millisecond when that is more (up
    /// to `prefetch`). One round trip then serves many short jobs. Long
    /// handlers claim for free slots only, so no job waits out another's
    /// run while a different worker could start it.
    #[must_use]
    pub fn prefetch(mut self, k: u32) -> Self {
        self.prefetch = Some(k);
        self
    }

    /// How failed jobs are retried.
    #[must_use]
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// How long shutdown lets running handlers finish before their leases
    /// are given back (30 s unless set). A job cut short by the deadline
    /// gets its attempt back too ([`crate::Backend::give_back`]): a deploy
    /// never dead-letters work, whatever attempt the job was on. A backend
    /// that answers `give_back` with [`crate::Error::Unsupported`] gets a
    /// release instead, which spends the attempt (an item on its last one
    /// goes Dead), as [`crate::Backend::release`] says.
    #[must_use]
    pub fn shutdown_deadline(mut self, deadline: Duration) -> Self {
        self.shutdown_deadline = deadline;
        self
    }

    /// How often this worker's background reaper runs (default
    /// [`WorkerBuilder::DEFAULT_REAP_INTERVAL`]); `None` runs none, and
    /// then nothing this worker runs collects the queue's expired finished
    /// items. Any number of workers may reap one queue at once.
    #[must_use]
    pub fn reap_interval(mut self, every: Option<Duration>) -> Self {
        self.reap_interval = every;
        self
    }

    /// The longest an idle worker waits for a wake-up before it claims
    /// again (backends without notifications poll at this pace).
    #[must_use]
    pub fn idle_wait(mut self, wait: Duration) -> Self {
        self.idle_wait = wait;
        self
    }

    /// Shares these counters instead of fresh ones (e.g. one set for many
    /// workers).
    #[must_use]
    pub fn metrics(mut self, metrics: WorkerMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Calls `f` once at the end of every job with its outcome.
    #[must_use]
    pub fn on_event(mut self, f: impl Fn(&JobEvent) + Send + Sync + 'static) -> Self {
        self.events = EventSink(Some(Arc::new(f)));
        self
    }

    /// Cancels a handler that runs longer than `timeout` (none by
    /// default): its future is dropped, its [`super::JobContext`] cancelled,
    /// and the run counts as failed with [`super::JobTimedOut`], so the job
    /// is retried per the retry policy, or goes Dead when its attempts are
    /// exhausted. Keep it below the time a job may hold its lease without
    /// heartbeats only if heartbeats are off; with heartbeats (the default)
    /// any timeout works. Zero is rejected by `build`.
    #[must_use]
    pub fn job_timeout(mut self, timeout: Duration) -> Self {
        self.job_timeout = Some(timeout);
        self
    }

    /// A worker that hands raw payloads to `handler`.
    pub fn build(self, handler: impl Handler<Bytes>) -> Result<Worker> {
        self.finish(Arc::new(handler))
    }

    /// A worker that decodes each payload as JSON into `T` first; a payload
    /// that does not decode goes Dead with the decode error.
    pub fn build_typed<T>(self, handler: impl Handler<T>) -> Result<Worker>
    where
        T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        self.build_with_codec(JsonCodec, handler)
    }

    /// A worker that decodes each payload with `codec` first.
    pub fn build_with_codec<T, C>(self, codec: C, handler: impl Handler<T>) -> Result<Worker>
    where
        T: Send + 'static,
        C: Codec<T>,
    {
        self.finish(Arc::new(Decoding::new(codec, handler)))
    }

    fn finish(self, handler: Arc<dyn Handler<Bytes>>) -> Result<Worker> {
        let queue = QueueName::new(&self.queue)?;
        let handler: Arc<dyn Handler<Bytes>> = match self.job_timeout {
            Some(d) if d.is_zero() => return Err(Error::invalid("job timeout is zero")),
            Some(after) => Arc::new(Timeout {
                inner: handler,
                after,
            }),
            None => handler,
        };
        self.metrics.export_as(queue.as_str());
        let ttl = LeaseTtl::new(self.ttl)?;
        if self.concurrency == 0 || self.concurrency > Self::MAX_CONCURRENCY {
            return Err(Error::invalid(format!(
                "worker concurrency {} is outside 1..={}",
                self.concurrency,
                Self::MAX_CONCURRENCY
            )));
        }
        let prefetch = match self.prefetch {
            Some(k) if k == 0 || k > MAX_CLAIM => {
                return Err(Error::invalid(format!(
                    "prefetch {k} is outside 1..={MAX_CLAIM}"
                )))
            }
            Some(k) => k,
            None => u32::try_from(self.concurrency.saturating_mul(2))
                .map_or(MAX_CLAIM, |n| n.clamp(Self::DEFAULT_PREFETCH, MAX_CLAIM)),
        };
        let heartbeat = self
            .heartbeat
            .unwrap_or(ttl.get() / 3)
            .max(Duration::from_millis(1));
        if heartbeat >= ttl.get() {
            return Err(Error::invalid(format!(
                "heartbeat interval {heartbeat:?} is not shorter than the lease ttl {:?}",
                ttl.get()
            )));
        }
        if matches!(self.reap_interval, Some(d) if d.is_zero()) {
            return Err(Error::invalid("reap interval is zero"));
        }
        Ok(Worker {
            shared: Arc::new(Shared {
                backend: self.backend,
                span_names: crate::spans::WorkerSpanNames::new(&queue),
                queue,
                handler,
                ttl,
                heartbeat,
                concurrency: self.concurrency,
                prefetch,
                retry: self.retry,
                shutdown_deadline: self.shutdown_deadline,
                reap_interval: self.reap_interval,
                idle_wait: self.idle_wait.max(Duration::from_millis(1)),
                settle: settle_for(&self.metrics),
                metrics: self.metrics,
                events: self.events,
            }),
        })
    }
}
