//! One job's life inside a worker: run the handler, keep its lease alive,
//! record the outcome under the lease's fence.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{interval_at, Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::acker::{AckResult, Acker};
use super::handler::{error_text, Job, JobContext, Permanent};
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

/// The job's part of its worker: the lease room it holds until its outcome
/// is recorded, the worker's slots, the two stop signals, and when and
/// under which span it was claimed.
pub(crate) struct Place {
    /// When the claim that leased the job returned (for the wait metric).
    pub(crate) claimed: Instant,
    /// The job's `process` span ([`crate::spans`]), opened at the claim.
    pub(crate) span: tracing::Span,
    pub(crate) room: OwnedSemaphorePermit,
    pub(crate) slots: Arc<Slots>,
    /// Shutdown: a job still waiting for a handler slot gives its lease back.
    pub(crate) shutdown: CancellationToken,
    /// The shutdown deadline passed: running handlers are dropped.
    pub(crate) abandon: CancellationToken,
}

/// Runs one claimed job to its end: waits for a handler slot (a job claimed
/// ahead), runs the handler, gives up the slot as soon as the handler ends
/// (so the next claim overlaps this job's ack), then records the outcome.
pub(crate) async fn run(shared: Arc<Shared>, lease: Lease, place: Place, acker: Acker) {
    let Place {
        claimed,
        span,
        room,
        slots,
        shutdown,
        abandon,
    } = place;
    let claimed_job = ClaimedJob {
        lease,
        claimed,
        span: span.clone(),
    };
    run_inner(
        &shared,
        claimed_job,
        room,
        &slots,
        &shutdown,
        &abandon,
        &acker,
    )
    .instrument(span)
    .await;
}

/// A claimed job: its lease, when the claim returned, and its span.
struct ClaimedJob {
    lease: Lease,
    claimed: Instant,
    span: tracing::Span,
}

impl ClaimedJob {
    /// How long ago the item was enqueued: up to the claim on the backend's
    /// clock (its `expires_at` less the ttl the claim asked for), since the
    /// claim on this process's monotonic clock.
    fn waited(&self, ttl: crate::LeaseTtl) -> Duration {
        let lease = &self.lease;
        let claimed_at = lease.expires_at.as_millis().saturating_sub(ttl.as_millis());
        Timestamp::from_millis(claimed_at).saturating_since(lease.enqueued_at)
            + self.claimed.elapsed()
    }

    fn failed(&self, error_type: &'static str) {
        spans::failed(&self.span, error_type);
    }
}

/// A handler run in progress, for the metrics; dropping it (at the end, or
/// when the run is dropped at the deadline) frees the handler slot.
struct Handling<'a> {
    shared: &'a Shared,
    since: Instant,
    _slot: Running,
}

impl<'a> Handling<'a> {
    fn start(shared: &'a Shared, slot: Running, job: &ClaimedJob) -> Self {
        shared.metrics.waited(job.waited(shared.ttl));
        shared.metrics.in_flight(1.0);
        Handling {
            shared,
            since: Instant::now(),
            _slot: slot,
        }
    }
}

impl Drop for Handling<'_> {
    fn drop(&mut self) {
        self.shared.metrics.in_flight(-1.0);
        self.shared.metrics.ran_for(self.since.elapsed());
    }
}

async fn run_inner(
    shared: &Shared,
    claimed_job: ClaimedJob,
    room: OwnedSemaphorePermit,
    slots: &Arc<Slots>,
    shutdown: &CancellationToken,
    abandon: &CancellationToken,
    acker: &Acker,
) {
    let lease = &claimed_job.lease;
    let ctx = JobContext::new(lease.key.clone());
    let job = Job::from_lease(lease);
    // The handler runs in this task (no second spawn per job); a panic is
    // caught here and counts as an error. Heartbeats run beside it, also
    // while a job claimed ahead waits for its slot.
    let handler = async {
        let slot = tokio::select! {
            biased;
            _ = shutdown.cancelled() => {
                slots.never_started();
                return None;
            }
            slot = slots.handler() => slot,
        };
        let _handling = Handling::start(shared, slot, &claimed_job);
        let run = AssertUnwindSafe(shared.handler.handle(job, ctx.clone()));
        Some(run.catch_unwind().await)
    };
    let mut lost = false;
    // The latest expiry the backend gave this lease: what settling a lost
    // reply compares against.
    let mut held_until = lease.expires_at;
    let ran = {
        let heartbeats = heartbeats(shared, lease, &ctx, &mut held_until, &mut lost);
        // Handler first: one that is done at its first poll never starts
        // the heartbeat timer.
        tokio::select! {
            biased;
            res = handler => res.map_or(Ran::Abandoned, Ran::Done),
            _ = abandon.cancelled() => Ran::Abandoned,
            _ = heartbeats => unreachable!("heartbeats never end on their own"),
        }
    };

    match ran {
        Ran::Abandoned => {
            ctx.cancel();
            if lost {
                // Nothing to give back, but the job still ends with an event.
                claimed_job.failed(error_types::LEASE_LOST);
                shared
                    .events
                    .emit(lease.id(), lease.attempts, JobOutcome::LeaseLost);
            } else {
                release_unfinished(shared, &claimed_job, held_until).await;
            }
        }
        Ran::Done(res) => {
            if lost {
                claimed_job.failed(error_types::LEASE_LOST);
                shared
                    .events
                    .emit(lease.id(), lease.attempts, JobOutcome::LeaseLost);
                return;
            }
            let outcome = match res {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => {
                    claimed_job.failed(if e.downcast_ref::<Permanent>().is_some() {
                        error_types::PERMANENT
                    } else if e.downcast_ref::<JobTimedOut>().is_some() {
                        error_types::TIMEOUT
                    } else {
                        error_types::HANDLER
                    });
                    Err(e)
                }
                Err(panic) => {
                    shared.metrics.inc(Counter::Panicked);
                    claimed_job.failed(error_types::PANIC);
                    let msg = panic_text(panic);
                    tracing::error!(panic = %msg, "handler panicked");
                    Err(format!("handler panicked: {msg}").into())
                }
            };
            record(shared, &claimed_job, held_until, outcome, acker, room).await;
        }
    }
}

/// Extends the lease every heartbeat interval while the handler runs;
/// never ends (once the lease is lost it only waits). Records each new
/// expiry in `held_until`; a lost lease cancels the handler's context.
async fn heartbeats(
    shared: &Shared,
    lease: &Lease,
    ctx: &JobContext,
    held_until: &mut Timestamp,
    lost: &mut bool,
) {
    let mut beat = interval_at(Instant::now() + shared.heartbeat, shared.heartbeat);
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        beat.tick().await;
        // A heartbeat that hangs must not outlive the next one.
        let extend = shared.backend.extend(&lease.key, shared.ttl);
        let res = tokio::time::timeout(shared.heartbeat, extend)
            .await
            .unwrap_or_else(|_| {
                let slow = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "extend took longer than a heartbeat interval",
                );
                Err(Error::backend("heartbeat", slow))
            });
        match res {
            Ok(until) => *held_until = until,
            Err(e) if e.is_lease_lost() => {
                let held = Held {
                    key: lease.key.clone(),
                    until: *held_until,
                };
                let b = shared.backend.as_ref();
                if shared
                    .settle
                    .lost_or_vanished(b, &held, e)
                    .await
                    .is_lease_vanished()
                {
                    tracing::error!("lease vanished while the handler ran (the store lost it); its result will be discarded");
                    shared.metrics.inc(Counter::LeaseVanished);
                } else {
                    tracing::warn!(
                        "lease lost while the handler ran; its result will be discarded"
                    );
                    shared.metrics.inc(Counter::LeaseLost);
                }
                ctx.mark_lost();
                *lost = true;
                return std::future::pending().await;
            }
            Err(e) => {
                shared.metrics.inc(Counter::BackendErrors);
                tracing::warn!(error = %e, "heartbeat failed; trying again at the next beat");
            }
        }
    }
}

/// Acks (in a batch, through `acker`), retries or kills the item according
/// to the handler's result.
async fn record(
    shared: &Shared,
    claimed_job: &ClaimedJob,
    held_until: Timestamp,
    outcome: Result<(), BoxError>,
    acker: &Acker,
    room: OwnedSemaphorePermit,
) {
    let lease = &claimed_job.lease;
    let held = Held {
        key: lease.key.clone(),
        until: held_until,
    };
    let b = shared.backend.as_ref();
    let (id, attempts) = (lease.id(), lease.attempts);
    match outcome {
        // The batcher frees the lease room of a whole batch at once, so the
        // next claim finds all of it.
        Ok(()) => match acker.ack(held, room).await {
            AckResult::Acked => {
                shared.metrics.inc(Counter::Acked);
                tracing::debug!("acked");
                shared.events.emit(id, attempts, JobOutcome::Acked);
            }
            AckResult::LeaseLost { vanished } => {
                lost_before_recording(shared, claimed_job, vanished)
            }
            AckResult::Failed(error) => not_recorded(shared, claimed_job, error),
        },
        Err(err) => {
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
                    Err(e) => unrecorded(shared, claimed_job, e),
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
                    Ok(_) => {
                        shared.metrics.inc(Counter::Retried);
                        tracing::info!(error = %text, ?delay, "job failed; retrying");
                        let outcome = JobOutcome::Retried { delay, error: text };
                        shared.events.emit(id, attempts, outcome);
                    }
                    Err(e) => unrecorded(shared, claimed_job, e),
                }
            }
        }
    }
}

/// Gives an unfinished job's lease back at shutdown.
async fn release_unfinished(shared: &Shared, claimed_job: &ClaimedJob, held_until: Timestamp) {
    let lease = &claimed_job.lease;
    let held = Held {
        key: lease.key.clone(),
        until: held_until,
    };
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
        Err(e) => unrecorded(shared, claimed_job, e),
    }
}

fn unrecorded(shared: &Shared, claimed_job: &ClaimedJob, e: Error) {
    if e.is_lease_lost() {
        lost_before_recording(shared, claimed_job, e.is_lease_vanished());
    } else {
        claimed_job.failed(spans::error_type(&e));
        not_recorded(shared, claimed_job, e.to_string());
    }
}

/// `vanished`: the store lost the lease (no reaper or worker took it), so
/// the item may come back, or may be gone for good.
fn lost_before_recording(shared: &Shared, claimed_job: &ClaimedJob, vanished: bool) {
    let lease = &claimed_job.lease;
    if vanished {
        claimed_job.failed(error_types::LEASE_VANISHED);
        shared.metrics.inc(Counter::LeaseVanished);
        tracing::error!(
            "lease vanished before the result was recorded: the store lost it (a failover that lost \
             writes, an older snapshot, or a purge); result discarded"
        );
    } else {
        claimed_job.failed(error_types::LEASE_LOST);
        shared.metrics.inc(Counter::LeaseLost);
        tracing::warn!("lease lost before the result was recorded; result discarded");
    }
    shared
        .events
        .emit(lease.id(), lease.attempts, JobOutcome::LeaseLost);
}

fn not_recorded(shared: &Shared, claimed_job: &ClaimedJob, error: String) {
    let lease = &claimed_job.lease;
    tracing::error!(error = %error, "could not record the job's result; a reaper will recover the item");
    shared
        .events
        .emit(lease.id(), lease.attempts, JobOutcome::Unrecorded { error });
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
