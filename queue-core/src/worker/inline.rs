//! Where a claimed job starts: in the claim loop's own task, or in a task
//! of its own.
//!
//! A task per job costs more than a whole claim and ack on a fast backend
//! (an allocation, a copy of the job's future, a trip through the
//! scheduler). So while jobs' first polls are short, the claim loop polls
//! each job of a claim once itself: a handler that completes at once costs
//! no task at all, and a job that has to wait (for I/O, a timer, a handler
//! slot) moves to a task of its own at that point, already started. Its
//! future is boxed, so moving it is moving a pointer; the task's first poll
//! registers the task's waker in place of the claim loop's.
//!
//! Jobs polled in the claim loop run one after another on one thread, so a
//! handler that computes for long before its first `.await` would hold up
//! the claim loop and lose the parallelism of a task each. The claim loop
//! therefore times its first polls (two clock reads per claim) and spawns
//! every job while they average more than [`INLINE_BELOW`] (or before the
//! first claim is measured), still polling
//! the last job of each claim itself (after spawning the others) to see
//! whether they have become short again.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

/// The longest mean first poll at which a claim's jobs still start in the
/// claim loop.
pub(crate) const INLINE_BELOW: Duration = Duration::from_micros(50);

/// The claim loop's running estimate of a first poll's cost.
#[derive(Debug, Default)]
pub(crate) struct Inline {
    /// Moving average of a job's first poll in nanoseconds; `None` until
    /// the first claim is measured.
    mean_ns: Option<u64>,
}

impl Inline {
    /// True while the jobs of a claim start in the claim loop.
    pub(crate) fn is_on(&self) -> bool {
        self.mean_ns
            .is_some_and(|ns| u128::from(ns) < INLINE_BELOW.as_nanos())
    }

    /// Starts a claim's jobs: polls them here (all while first polls are
    /// short, else the last one only, after spawning the rest) and spawns
    /// those that are not done into `tasks`.
    pub(crate) async fn start<F>(&mut self, mut batch: Vec<Pin<Box<F>>>, tasks: &mut JoinSet<()>)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let here = if self.is_on() { batch.len() } else { 1 };
        for job in batch.drain(..batch.len().saturating_sub(here)) {
            tasks.spawn(job);
        }
        if batch.is_empty() {
            return;
        }
        let began = Instant::now();
        for mut job in batch.drain(..) {
            let done = std::future::poll_fn(|cx| Poll::Ready(job.as_mut().poll(cx).is_ready()));
            if !done.await {
                tasks.spawn(job);
            }
        }
        self.record(began.elapsed() / here as u32);
    }

    fn record(&mut self, per_job: Duration) {
        let sample = u64::try_from(per_job.as_nanos()).unwrap_or(u64::MAX);
        // About the last eight claims.
        self.mean_ns = Some(match self.mean_ns {
            None => sample,
            Some(mean) => mean - mean / 8 + sample / 8,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A job that counts its polls, done at its first one or only after a
    /// yield.
    fn job(
        polls: &Arc<AtomicUsize>,
        waits: bool,
        busy: Duration,
    ) -> Pin<Box<impl Future<Output = ()> + Send>> {
        let polls = polls.clone();
        Box::pin(async move {
            polls.fetch_add(1, Ordering::SeqCst);
            let until = std::time::Instant::now() + busy;
            while std::time::Instant::now() < until {}
            if waits {
                tokio::task::yield_now().await;
                polls.fetch_add(1, Ordering::SeqCst);
            }
        })
    }

    #[tokio::test]
    async fn short_jobs_run_here_and_waiting_ones_move_to_tasks() {
        let mut inline = Inline::default();
        assert!(!inline.is_on(), "unmeasured: spawn");
        let polls = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        inline
            .start(vec![job(&polls, false, Duration::ZERO)], &mut tasks)
            .await;
        assert!(tasks.is_empty(), "done at its first poll: no task");
        assert!(inline.is_on(), "a short first poll turns inline starts on");

        let batch = (0..4)
            .map(|i| job(&polls, i % 2 == 0, Duration::ZERO))
            .collect();
        inline.start(batch, &mut tasks).await;
        assert_eq!(tasks.len(), 2, "the two that wait move to tasks");
        while tasks.join_next().await.is_some() {}
        assert_eq!(
            polls.load(Ordering::SeqCst),
            1 + 4 + 2,
            "each runs to its end once"
        );
    }

    #[tokio::test]
    async fn long_first_polls_turn_inline_starts_off_until_they_shorten() {
        let mut inline = Inline::default();
        let polls = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        let slow = INLINE_BELOW * 4;
        inline
            .start(vec![job(&polls, false, slow)], &mut tasks)
            .await;
        assert!(!inline.is_on(), "a long first poll keeps jobs in tasks");

        let batch = (0..4).map(|_| job(&polls, false, Duration::ZERO)).collect();
        inline.start(batch, &mut tasks).await;
        assert_eq!(tasks.len(), 3, "all but the last go to tasks");
        for _ in 0..40 {
            let batch = vec![job(&polls, false, Duration::ZERO)];
            inline.start(batch, &mut tasks).await;
        }
        assert!(inline.is_on(), "short first polls turn it back on");
        while tasks.join_next().await.is_some() {}
        assert_eq!(polls.load(Ordering::SeqCst), 1 + 4 + 40);
    }
}
