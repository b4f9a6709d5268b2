//! Job timeouts: a handler wrapper that races each run against a deadline.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::handler::{Handler, Job, JobContext};
use crate::BoxError;

/// The error a job gets when its handler ran past the worker's job timeout
/// ([`crate::WorkerBuilder::job_timeout`]). It is an ordinary error: the
/// job is retried per the retry policy, and goes Dead (with this text) when
/// its attempts are exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobTimedOut {
    /// The timeout that passed.
    pub after: Duration,
}

impl fmt::Display for JobTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job timed out after {:?}", self.after)
    }
}

impl std::error::Error for JobTimedOut {}

/// Runs the inner handler for at most `after`. When the time is up, the
/// job's context is cancelled (for code that watches it) and the handler's
/// future is dropped, which cancels it at its next `.await`; the run ends
/// with [`JobTimedOut`].
pub(crate) struct Timeout<H> {
    pub(crate) inner: H,
    pub(crate) after: Duration,
}

impl<H> fmt::Debug for Timeout<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("after", &self.after)
            .finish()
    }
}

#[async_trait]
impl<H: Handler<Bytes>> Handler<Bytes> for Timeout<H> {
    async fn handle(&self, job: Job<Bytes>, ctx: JobContext) -> Result<(), BoxError> {
        match tokio::time::timeout(self.after, self.inner.handle(job, ctx.clone())).await {
            Ok(done) => done,
            Err(_) => {
                ctx.cancel();
                Err(Box::new(JobTimedOut { after: self.after }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::worker::handler::handler_fn;
    use crate::{ItemId, LeaseKey, LeaseToken, QueueName};

    fn job() -> (Job<Bytes>, JobContext) {
        let queue = QueueName::new("q").expect("queue");
        let lease = LeaseKey {
            queue: queue.clone(),
            id: ItemId::new(1),
            token: LeaseToken::random(),
        };
        let job = Job {
            id: ItemId::new(1),
            queue,
            payload: Bytes::new(),
            attempts: 1,
            max_attempts: 3,
            priority: 0,
        };
        (job, JobContext::new(lease))
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_past_its_time_is_cancelled_with_an_error() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        struct SetOnDrop(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let flag = dropped.clone();
        let slow = handler_fn(move |_job: Job, _ctx: JobContext| {
            let guard = SetOnDrop(flag.clone());
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(guard);
                Ok::<_, BoxError>(())
            }
        });
        let t = Timeout {
            inner: slow,
            after: Duration::from_secs(5),
        };
        let (job, ctx) = job();
        let err = t.handle(job, ctx.clone()).await.expect_err("timed out");
        assert_eq!(
            err.downcast_ref::<JobTimedOut>(),
            Some(&JobTimedOut {
                after: Duration::from_secs(5)
            })
        );
        assert!(ctx.is_cancelled(), "the context is cancelled");
        assert!(
            dropped.load(std::sync::atomic::Ordering::SeqCst),
            "the handler was dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_within_its_time_keeps_its_result() {
        let quick = handler_fn(|_job: Job, _ctx: JobContext| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err::<(), _>("its own error")
        });
        let t = Timeout {
            inner: quick,
            after: Duration::from_secs(5),
        };
        let (job, ctx) = job();
        let err = t.handle(job, ctx.clone()).await.expect_err("its error");
        assert_eq!(err.to_string(), "its own error");
        assert!(!ctx.is_cancelled());
    }
}
