//! One job's life inside a worker: run the handler, keep its lease alive,
//! record the outcome under the lease's fence.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::acker::{Acker, Finished};
use super::ending::JobTag;
use super::handler::{error_text, Job, JobContext, Permanent, Snooze};
use super::heartbeat::{Beat, Beats};
use super::metrics::{Counter, JobOutcome};
use super::shared::Shared;
use super::slots::{Running, Slots};
use super::timeout::JobTimedOut;
use crate::settle::Held;
use crate::spans::{self, error_types};
use crate::{BoxError, Error, Lease, Released, Timestamp};

/// How the handler's run ended: its result, or the payload of its panic.
enum Ran {
    Done(std::thread::Result<Result<(), BoxError>>),
    Abandoned,
}

/// What every job of one worker run shares: the worker, its slots, the two
/// stop signals and the ack batcher. One `Arc` per job instead of a clone
/// of each (a token clone takes a lock).
#[derive(Debug)]
pub(crate) struct Crew {
    pub(crate) shared: Arc<Shared>,
    pub(crate) slots: Arc<Slots>,
    /// Shutdown: a job still waiting for a handler slot gives its lease back.
    pub(crate) shutdown: CancellationToken,
    /// The shutdown deadline passed: running handlers are dropped.
    pub(crate) abandon: CancellationToken,
    pub(crate) acker: Acker,
    pub(crate) beats: Beats,
}

/// A claimed job: its lease, the lease room it holds until its outcome is
/// recorded, when the claim returned (for the wait metric) and its
/// `process` span ([`crate::spans`]), opened at the claim.
pub(crate) struct Claimed {
    pub(crate) lease: Lease,
    pub(crate) room: OwnedSemaphorePermit,
    pub(crate) at: Instant,
    pub(crate) span: tracing::Span,
}

/// Runs one claimed job to its end: waits for a handler slot (a job claimed
/// ahead), runs the handler, gives up the slot as soon as the handler ends
/// (so the next claim overlaps this job's ack), then records the outcome.
/// A success is handed to the ack batcher, which finishes the job: a
/// handler that completes at once leaves a future that completes at its
/// first poll.
pub(crate) fn run(crew: Arc<Crew>, job: Claimed) -> impl Future<Output = ()> + Send {
    let span = job.span.clone();
    run_inner(crew, job).instrument(span)
}

impl Claimed {
    fn tag(&self) -> JobTag {
        JobTag {
            id: self.lease.id(),
            attempts: self.lease.attempts,
            span: self.span.clone(),
        }
    }

    fn held(&self, until: Timestamp) -> Held {
        Held {
            key: self.lease.key.clone(),
            until,
        }
    }
}

/// A handler run in progress, for the metrics; dropping it (at the end, or
/// when the run is dropped at the deadline) frees the handler slot.
struct Handling<'a> {
    shared: &'a Shared,
    slot: Running,
}

impl<'a> Handling<'a> {
    fn start(shared: &'a Shared, slot: Running, job: &Claimed) -> Self {
        // How long ago the item was enqueued: up to the claim on the
        // backend's clock (its expiry less the ttl the claim asked for),
        // since the claim on this process's monotonic clock.
        let lease = &job.lease;
        let claimed_at = lease
            .expires_at
            .as_millis()
            .saturating_sub(shared.ttl.as_millis());
        let waited = Timestamp::from_millis(claimed_at).saturating_since(lease.enqueued_at)
            + slot.started().saturating_duration_since(job.at);
        shared.metrics.waited(waited);
        shared.metrics.in_flight(1.0);
        Handling { shared, slot }
    }
}

impl Drop for Handling<'_> {
    fn drop(&mut self) {
        self.shared.metrics.in_flight(-1.0);
        self.shared.metrics.ran_for(self.slot.end());
    }
}

// Not `async fn`s: an `async fn` keeps a second copy of its arguments in
// its future (which is copied into its box); an `async move` block keeps
// its captures once.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn stores its arguments twice"
)]
fn run_inner(crew: Arc<Crew>, job: Claimed) -> impl Future<Output = ()> + Send {
    async move {
        let shared = &*crew.shared;
        let lease = &job.lease;
        let ctx = JobContext::on(lease.key.clone(), shared.backend.clone());
        // A free slot is taken at once; a job claimed ahead waits for one with
        // its lease kept alive, and gives it back if shutdown comes first. The
        // wait is boxed: most jobs never wait, and its state would size every
        // job's future.
        let mut beat = None;
        let slot = if crew.shutdown.is_cancelled() {
            None
        } else if let Some(slot) = crew.slots.try_handler() {
            Some(slot)
        } else {
            beat = Some(keep_alive(&crew, &job, &ctx));
            Box::pin(wait_for_slot(&crew)).await
        };
        let ran = match slot {
            None => {
                crew.slots.never_started();
                Ran::Abandoned
            }
            Some(slot) => {
                let handling = Handling::start(shared, slot, &job);
                // The handler runs in the job's future (in the claim loop, or in
                // the job's task: see `inline`); a panic is caught here and
                // counts as an error. Its future is boxed, so it can move into
                // the boxed wait below after its first poll.
                let mut run =
                    AssertUnwindSafe(shared.handler.handle(Job::from_lease(lease), ctx.clone()))
                        .catch_unwind();
                let first = std::future::poll_fn(|cx| Poll::Ready(run.poll_unpin(cx))).await;
                let ran = match first {
                    Poll::Ready(res) => Ran::Done(res),
                    Poll::Pending => {
                        beat.get_or_insert_with(|| keep_alive(&crew, &job, &ctx));
                        Box::pin(finish_running(&crew, run)).await
                    }
                };
                // The slot frees as soon as the handler ends, so the next claim
                // overlaps this job's ack.
                drop(handling);
                ran
            }
        };
        // The latest expiry the backend gave this lease (what settling a lost
        // reply compares against), and whether a heartbeat found it lost.
        let (held_until, lost) = match beat.take() {
            Some(beat) => (beat.until(), beat.lost()),
            None => (lease.expires_at, false),
        };

        if lost {
            // Nothing to record, but the job still ends with an event.
            ctx.cancel();
            let tag = job.tag();
            tag.failed(error_types::LEASE_LOST);
            tag.lease_lost(shared);
            return;
        }
        if ctx.cancel_requested() {
            // Whatever the handler returned, the item ends Cancelled.
            return Box::pin(record_cancel(shared, &job, held_until)).await;
        }
        match ran {
            Ran::Done(Ok(Ok(())))
                if ctx.has_result()
                    && crate::BackendExt::history(shared.backend.as_ref()).is_ok() =>
            {
                let result = ctx.take_result().unwrap_or_default();
                Box::pin(record_completion(shared, &job, held_until, result)).await;
            }
            Ran::Done(Ok(Ok(()))) => {
                // The batcher frees the lease room of a whole batch at once, so
                // the next claim finds all of it.
                let finished = Finished {
                    lease: job.held(held_until),
                    tag: job.tag(),
                    _room: job.room,
                };
                crew.acker.finish(shared, finished);
            }
            // The rarer endings are boxed, so they do not size every job's
            // future.
            Ran::Done(res) => Box::pin(record_failure(shared, &job, held_until, res)).await,
            Ran::Abandoned => {
                ctx.cancel();
                Box::pin(release_unfinished(shared, &job, held_until)).await;
            }
        }
    }
}

/// Registers the job's lease with the worker's heartbeat scheduler.
fn keep_alive(crew: &Crew, job: &Claimed, ctx: &JobContext) -> Beat {
    let lease = &job.lease;
    crew.beats.keep(
        lease.key.clone(),
        lease.expires_at,
        lease.attempts,
        ctx.clone(),
        job.span.clone(),
    )
}

/// Waits for a handler slot; `None` if shutdown comes first.
async fn wait_for_slot(crew: &Crew) -> Option<Running> {
    tokio::select! {
        biased;
        _ = crew.shutdown.cancelled() => None,
        slot = crew.slots.handler() => Some(slot),
    }
}

/// Lets a handler that did not finish at its first poll run to its end,
/// unless the shutdown deadline passes first.
async fn finish_running<F>(crew: &Crew, run: F) -> Ran
where
    F: Future<Output = std::thread::Result<Result<(), BoxError>>>,
{
    tokio::select! {
        biased;
        res = run => Ran::Done(res),
        _ = crew.abandon.cancelled() => Ran::Abandoned,
    }
}

/// Retries or kills the item after a handler error or panic.
async fn record_failure(
    shared: &Shared,
    job: &Claimed,
    held_until: Timestamp,
    res: std::thread::Result<Result<(), BoxError>>,
) {
    let tag = job.tag();
    let err: BoxError = match res {
        Ok(Ok(())) => unreachable!("a success is acked, not recorded as a failure"),
        Ok(Err(e)) => {
            tag.failed(if e.downcast_ref::<Permanent>().is_some() {
                error_types::PERMANENT
            } else if e.downcast_ref::<JobTimedOut>().is_some() {
                error_types::TIMEOUT
            } else {
                error_types::HANDLER
            });
            e
        }
        Err(panic) => {
            shared.metrics.inc(Counter::Panicked);
            tag.failed(error_types::PANIC);
            let msg = panic_text(panic);
            tracing::error!(panic = %msg, "handler panicked");
            format!("handler panicked: {msg}").into()
        }
    };
    let lease = &job.lease;
    let held = job.held(held_until);
    let b = shared.backend.as_ref();
    let (id, attempts) = (lease.id(), lease.attempts);
    if let Some(&Snooze(delay)) = err.downcast_ref::<Snooze>() {
        return record_snooze(shared, job, &held, delay).await;
    }
    let text = error_text(&*err);
    let permanent = err.downcast_ref::<Permanent>().is_some();
    if permanent || shared.retry.is_exhausted(attempts, lease.max_attempts) {
        let reason = text;
        let span = spans::settle("fail", &lease.key.queue, id);
        let res = shared
            .settle
            .fail(b, &held, &reason)
            .instrument(span.clone())
            .await;
        match spans::outcome(&span, res) {
            Ok(()) => {
                shared.metrics.inc(Counter::Dead);
                tracing::warn!(error = %reason, "job failed for good; item is Dead");
                shared
                    .events
                    .emit(id, attempts, JobOutcome::Dead { reason });
            }
            Err(e) => tag.unrecorded(shared, e),
        }
    } else {
        let delay = shared.retry.delay_for(attempts);
        let span = spans::settle("release", &lease.key.queue, id);
        let res = shared
            .settle
            .release(b, &held, delay)
            .instrument(span.clone())
            .await;
        match spans::outcome(&span, res) {
            Ok(Released::Dead) => {
                shared.metrics.inc(Counter::Dead);
                let reason = "attempts exhausted".to_string();
                shared
                    .events
                    .emit(id, attempts, JobOutcome::Dead { reason });
            }
            // Cancelled between the last heartbeat and the release.
            Ok(Released::Cancelled) => {
                shared.metrics.inc(Counter::Cancelled);
                shared.events.emit(id, attempts, JobOutcome::Cancelled);
            }
            Ok(_) => {
                shared.metrics.inc(Counter::Retried);
                tracing::info!(error = %text, ?delay, "job failed; retrying");
                let outcome = JobOutcome::Retried { delay, error: text };
                shared.events.emit(id, attempts, outcome);
            }
            Err(e) => tag.unrecorded(shared, e),
        }
    }
    // The lease room goes with `job`, after the outcome is recorded.
}

/// Completes the item with the handler's result
/// ([`crate::History::complete`]): one call, outside the ack batches, as
/// results are the rarer case.
async fn record_completion(shared: &Shared, job: &Claimed, held_until: Timestamp, result: Bytes) {
    let lease = &job.lease;
    let span = spans::settle("complete", &lease.key.queue, lease.id());
    let res = shared
        .settle
        .complete(shared.backend.as_ref(), &job.held(held_until), result)
        .instrument(span.clone())
        .await;
    match spans::outcome(&span, res) {
        Ok(()) => {
            // The ack batcher counts its acks a batch at a time; this one
            // is not in a batch.
            shared.metrics.inc(Counter::Acked);
            job.tag().acked(shared);
        }
        Err(e) => job.tag().unrecorded(shared, e),
    }
}

/// Ends the item of a job an operator cancelled while it ran: a fail,
/// which the backend turns into Cancelled for a cancel-requested item.
async fn record_cancel(shared: &Shared, job: &Claimed, held_until: Timestamp) {
    let lease = &job.lease;
    let span = spans::settle("fail", &lease.key.queue, lease.id());
    let res = shared
        .settle
        .fail(shared.backend.as_ref(), &job.held(held_until), "cancelled")
        .instrument(span.clone())
        .await;
    match spans::outcome(&span, res) {
        Ok(()) => {
            shared.metrics.inc(Counter::Cancelled);
            tracing::info!("job cancelled by an operator; item ended Cancelled");
            shared
                .events
                .emit(lease.id(), lease.attempts, JobOutcome::Cancelled);
        }
        Err(e) => job.tag().unrecorded(shared, e),
    }
}

/// Puts the item back to wait `delay` without spending the attempt; a
/// backend without the Control group gets a release (which spends it).
async fn record_snooze(shared: &Shared, job: &Claimed, held: &Held, delay: Duration) {
    let lease = &job.lease;
    let b = shared.backend.as_ref();
    let span = spans::settle("snooze", &lease.key.queue, lease.id());
    let res = match shared
        .settle
        .snooze(b, held, delay)
        .instrument(span.clone())
        .await
    {
        Err(Error::Unsupported { .. }) => {
            shared
                .settle
                .release(b, held, delay)
                .instrument(span.clone())
                .await
        }
        other => other,
    };
    let (id, attempts) = (lease.id(), lease.attempts);
    match spans::outcome(&span, res) {
        Ok(Released::Cancelled) => {
            shared.metrics.inc(Counter::Cancelled);
            shared.events.emit(id, attempts, JobOutcome::Cancelled);
        }
        Ok(Released::Dead) => {
            shared.metrics.inc(Counter::Dead);
            let reason = "attempts exhausted".to_string();
            shared
                .events
                .emit(id, attempts, JobOutcome::Dead { reason });
        }
        Ok(_) => {
            shared.metrics.inc(Counter::Snoozed);
            tracing::info!(?delay, "job snoozed");
            shared
                .events
                .emit(id, attempts, JobOutcome::Snoozed { delay });
        }
        Err(e) => job.tag().unrecorded(shared, e),
    }
}

/// Gives an unfinished job's lease back at shutdown.
async fn release_unfinished(shared: &Shared, job: &Claimed, held_until: Timestamp) {
    let lease = &job.lease;
    let held = job.held(held_until);
    let b = shared.backend.as_ref();
    // The job never ran to its end: give the attempt back too, so a deploy
    // never dead-letters work. A backend without give_back gets a release.
    let span = spans::settle("give_back", &lease.key.queue, lease.id());
    let given = match shared
        .settle
        .give_back(b, &held)
        .instrument(span.clone())
        .await
    {
        Err(Error::Unsupported { .. }) => shared
            .settle
            .release(b, &held, Duration::ZERO)
            .instrument(span.clone())
            .await
            .map(|_| ()),
        other => other,
    };
    let given = spans::outcome(&span, given);
    match given {
        Ok(()) => {
            shared.metrics.inc(Counter::Released);
            tracing::info!(
                "shutdown deadline passed; lease given back without spending the attempt"
            );
            shared
                .events
                .emit(lease.id(), lease.attempts, JobOutcome::Released);
        }
        Err(e) => job.tag().unrecorded(shared, e),
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".into()
    }
}
