//! What a user writes: a [`Handler`] that gets a [`Job`] and a
//! [`JobContext`], or a closure wrapped with [`handler_fn`].

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::{Backend, BackendExt, BoxError, ItemId, Lease, LeaseKey, QueueName};

/// One delivery of an item to a handler.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Job<T = Bytes> {
    /// The item's id.
    pub id: ItemId,
    /// The queue it came from.
    pub queue: QueueName,
    /// The payload: raw bytes, or the decoded value for a typed worker.
    pub payload: T,
    /// Claims so far, this one included (1 on the first delivery).
    pub attempts: u32,
    /// Claims allowed before the item goes Dead.
    pub max_attempts: u32,
    /// The item's priority.
    pub priority: i32,
}

impl Job<Bytes> {
    /// The job a lease delivers.
    pub fn from_lease(lease: &Lease) -> Self {
        Job {
            id: lease.id(),
            queue: lease.key.queue.clone(),
            payload: lease.payload.clone(),
            attempts: lease.attempts,
            max_attempts: lease.max_attempts,
            priority: lease.priority,
        }
    }
}

impl<T> Job<T> {
    /// True when this delivery is the last one the item is allowed.
    pub fn is_last_attempt(&self) -> bool {
        self.attempts >= self.max_attempts
    }

    /// The same job with its payload replaced.
    pub fn with_payload<U>(self, payload: U) -> Job<U> {
        Job {
            id: self.id,
            queue: self.queue,
            payload,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            priority: self.priority,
        }
    }
}

/// What a running handler can ask the worker: which lease it runs under, and
/// whether it should stop.
///
/// The cancellation token fires when the lease is lost (a heartbeat found
/// that another worker or a reaper took the item: the result will not be
/// acked, so the handler should stop), when an operator cancels the item
/// ([`JobContext::cancel_requested`]), and when the worker's shutdown
/// deadline passes (the handler is then aborted and its lease released).
#[derive(Debug, Clone)]
pub struct JobContext {
    lease: LeaseKey,
    signal: Arc<Signal>,
    /// The worker's backend, for [`JobContext::progress`]; `None` in a
    /// context made for a unit test.
    backend: Option<Arc<dyn Backend>>,
}

/// A job's stop signal. Most handlers never ask for a token, so it is made
/// on first request: a job then costs one allocation, not a token tree.
#[derive(Debug, Default)]
struct Signal {
    lost: AtomicBool,
    cancel_requested: AtomicBool,
    stopped: AtomicBool,
    token: OnceLock<CancellationToken>,
    /// What the handler returned ([`JobContext::set_result`]).
    result: std::sync::Mutex<Option<Bytes>>,
}

impl Signal {
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(token) = self.token.get() {
            token.cancel();
        }
    }

    fn token(&self) -> &CancellationToken {
        let token = self.token.get_or_init(CancellationToken::new);
        // A stop that raced the token's making may not have seen it.
        if self.stopped.load(Ordering::SeqCst) {
            token.cancel();
        }
        token
    }
}

impl JobContext {
    /// A context for `lease`, e.g. to unit-test a handler without a worker.
    pub fn new(lease: LeaseKey) -> Self {
        JobContext {
            lease,
            signal: Arc::default(),
            backend: None,
        }
    }

    /// The context a worker gives a job it runs on `backend`.
    pub(crate) fn on(lease: LeaseKey, backend: Arc<dyn Backend>) -> Self {
        JobContext {
            lease,
            signal: Arc::default(),
            backend: Some(backend),
        }
    }

    /// Records how far the job has got (a percentage, a step name, a small
    /// JSON object; at most [`crate::limits::MAX_PROGRESS_LEN`] bytes),
    /// shown by [`crate::Backend::item`] while the job runs
    /// ([`crate::Control::progress`]).
    ///
    /// Fenced by the job's lease: once the lease is lost this is
    /// [`crate::Error::LeaseLost`] and writes nothing. A backend without the
    /// Control group answers [`crate::Error::Unsupported`], as does a
    /// context made with [`JobContext::new`].
    pub async fn progress(&self, value: impl Into<Bytes>) -> crate::Result<()> {
        let backend = self
            .backend
            .as_ref()
            .ok_or_else(|| crate::Error::unsupported("progress outside a worker"))?;
        backend.control()?.progress(&self.lease, value.into()).await
    }

    /// Sets the job's result: the worker completes the item with it
    /// ([`crate::History::complete`]), and a queue that keeps completed
    /// items records it, for [`crate::BackendExt::wait_finished`] and the
    /// history. The last call wins. On a backend without the History group
    /// the item is acked and the result dropped.
    ///
    /// Over [`crate::finished::MAX_RESULT_LEN`] bytes is
    /// [`crate::Error::InvalidInput`], and nothing is set.
    pub fn set_result(&self, result: impl Into<Bytes>) -> crate::Result<()> {
        let result = result.into();
        crate::finished::check_result(&result)?;
        *self.signal.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        Ok(())
    }

    /// True when the handler set a result.
    pub(crate) fn has_result(&self) -> bool {
        self.signal
            .result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Takes the result the handler set, if any.
    pub(crate) fn take_result(&self) -> Option<Bytes> {
        self.signal
            .result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// The lease the job runs under (for logging; the worker acks for you).
    pub fn lease(&self) -> &LeaseKey {
        &self.lease
    }

    /// A token that is cancelled when the handler should stop.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.signal.token().clone()
    }

    /// True once the handler should stop.
    pub fn is_cancelled(&self) -> bool {
        self.signal.stopped.load(Ordering::SeqCst)
    }

    /// Completes when the handler should stop.
    pub async fn cancelled(&self) {
        self.signal.token().cancelled().await
    }

    /// True when the lease was lost: the result of this run will not count.
    pub fn lease_lost(&self) -> bool {
        self.signal.lost.load(Ordering::SeqCst)
    }

    /// True when an operator asked to cancel the item
    /// ([`crate::Control::cancel`]): the token is cancelled, and whatever the
    /// handler returns, the item ends Cancelled.
    pub fn cancel_requested(&self) -> bool {
        self.signal.cancel_requested.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_cancel_requested(&self) {
        self.signal.cancel_requested.store(true, Ordering::SeqCst);
        self.signal.stop();
    }

    pub(crate) fn mark_lost(&self) {
        self.signal.lost.store(true, Ordering::SeqCst);
        self.signal.stop();
    }

    pub(crate) fn cancel(&self) {
        self.signal.stop();
    }
}

/// Processes jobs. `Ok` acks the item; `Err` retries it with backoff until
/// its attempts run out, then sends it Dead with the error's text. Wrap an
/// error in [`Permanent`] to send it Dead at once. A panic counts as an
/// error.
///
/// Delivery is at-least-once: a handler may see an item again after a crash
/// or a lost lease, so it should be idempotent.
#[async_trait]
pub trait Handler<T: Send + 'static = Bytes>: Send + Sync + 'static {
    /// Runs one job.
    async fn handle(&self, job: Job<T>, ctx: JobContext) -> Result<(), BoxError>;
}

#[async_trait]
impl<T: Send + 'static, H: Handler<T> + ?Sized> Handler<T> for Arc<H> {
    async fn handle(&self, job: Job<T>, ctx: JobContext) -> Result<(), BoxError> {
        (**self).handle(job, ctx).await
    }
}

/// A [`Handler`] made from a closure; see [`handler_fn`].
#[derive(Clone)]
pub struct HandlerFn<F> {
    f: F,
}

impl<F> fmt::Debug for HandlerFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandlerFn")
    }
}

/// Turns an async closure `|job, ctx| async move { … }` into a [`Handler`].
/// The closure may return any error type that converts into [`BoxError`].
///
/// ```
/// use leaseq_core::{handler_fn, Job, JobContext};
/// let handler = handler_fn(|job: Job, _ctx: JobContext| async move {
///     let text = std::str::from_utf8(&job.payload)?;
///     println!("got {text}");
///     Ok::<_, std::str::Utf8Error>(())
/// });
/// # let _ = handler;
/// ```
pub fn handler_fn<F>(f: F) -> HandlerFn<F> {
    HandlerFn { f }
}

#[async_trait]
impl<T, F, Fut, E> Handler<T> for HandlerFn<F>
where
    T: Send + 'static,
    F: Fn(Job<T>, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError> + 'static,
{
    async fn handle(&self, job: Job<T>, ctx: JobContext) -> Result<(), BoxError> {
        (self.f)(job, ctx).await.map_err(Into::into)
    }
}

/// An error that must not be retried: the item goes Dead at once with this
/// error's text. Typed workers use it for payloads that do not decode.
#[derive(Debug)]
pub struct Permanent(BoxError);

impl Permanent {
    /// Marks `err` as permanent.
    pub fn new(err: impl Into<BoxError>) -> Self {
        Permanent(err.into())
    }

    /// Marks `err` as permanent, boxed, ready to return from a handler.
    pub fn boxed(err: impl Into<BoxError>) -> BoxError {
        Box::new(Permanent::new(err))
    }
}

impl fmt::Display for Permanent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Permanent {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// A handler's answer "run me again in `delay`": the item waits that
/// long, Scheduled, without spending the attempt (a rate-limited call, a
/// resource not ready yet). Return it as the handler's error:
///
/// ```
/// use leaseq_core::{handler_fn, Job, JobContext, Snooze};
/// use std::time::Duration;
/// let handler = handler_fn(|_job: Job, _ctx: JobContext| async move {
///     let ready = false;
///     if !ready {
///         return Err(Snooze::boxed(Duration::from_secs(30)));
///     }
///     Ok(())
/// });
/// # let _ = handler;
/// ```
///
/// On a backend without the Control group the item is released with the
/// delay instead, which spends the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snooze(pub Duration);

impl Snooze {
    /// "Run me again in `delay`", boxed, ready to return from a handler.
    pub fn boxed(delay: Duration) -> BoxError {
        Box::new(Snooze(delay))
    }
}

impl fmt::Display for Snooze {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snoozed for {:?}", self.0)
    }
}

impl std::error::Error for Snooze {}

/// The text recorded for a failed job: the error and its sources.
pub(crate) fn error_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ItemId, LeaseToken};

    fn ctx() -> JobContext {
        let queue = QueueName::new("q").expect("a valid name");
        JobContext::new(LeaseKey {
            queue,
            id: ItemId::new(1),
            token: LeaseToken::random(),
        })
    }

    #[tokio::test]
    async fn a_token_asked_for_before_or_after_the_stop_is_cancelled() {
        let before = ctx();
        let token = before.cancellation_token();
        assert!(!token.is_cancelled() && !before.is_cancelled());
        before.cancel();
        assert!(token.is_cancelled() && before.is_cancelled());
        assert!(!before.lease_lost());

        let after = ctx();
        after.clone().mark_lost();
        assert!(after.cancellation_token().is_cancelled());
        assert!(after.lease_lost());
        after.cancelled().await;
    }
}
