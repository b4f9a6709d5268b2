//! One job's life inside a worker: run the handler, keep its lease alive,
//! record the outcome under the lease's fence.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{interval_at, Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::acker::{AckResult, Acker};
use super::handler::{error_text, Job, JobContext, Permanent};
use super::metrics::{Counter, JobOutcome};
use super::shared::Shared;
use crate::settle::Held;
use crate::{BoxError, Error, Lease, Released, Timestamp};

/// Aborts the handler's task when the job task goes away (a crash of the
/// worker, or shutdown's deadline).
struct AbortOnDrop(JoinHandle<Result<(), BoxError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How the handler's run ended.
enum Ran {
    Done(Result<Result<(), BoxError>, JoinError>),
    Abandoned,
}

/// Runs one leased job to its end. Holds `permit` (a handler slot) until
/// then.
pub(crate) async fn run(
    shared: Arc<Shared>,
    lease: Lease,
    permit: OwnedSemaphorePermit,
    abandon: CancellationToken,
    acker: Acker,
) {
    let span = tracing::info_span!(
        "job",
        queue = %lease.key.queue,
        id = %lease.key.id,
        attempt = lease.attempts,
    );
    run_inner(&shared, lease, abandon, &acker)
        .instrument(span)
        .await;
    drop(permit);
}

async fn run_inner(shared: &Shared, lease: Lease, abandon: CancellationToken, acker: &Acker) {
    let ctx = JobContext::new(lease.key.clone());
    let handler = shared.handler.clone();
    let job = Job::from_lease(&lease);
    let task_ctx = ctx.clone();
    let ran_since = Instant::now();
    shared.metrics.in_flight(1.0);
    let mut handle = AbortOnDrop(tokio::spawn(
        async move { handler.handle(job, task_ctx).await }.in_current_span(),
    ));

    let start = Instant::now() + shared.heartbeat;
    let mut beat = interval_at(start, shared.heartbeat);
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut lost = false;
    // The latest expiry the backend gave this lease: what settling a lost
    // reply compares against.
    let mut held_until = lease.expires_at;
    let ran = loop {
        tokio::select! {
            res = &mut handle.0 => break Ran::Done(res),
            _ = abandon.cancelled() => break Ran::Abandoned,
            _ = beat.tick(), if !lost => {
                // A heartbeat that hangs must not outlive the next one.
                let beat = tokio::time::timeout(shared.heartbeat, shared.backend.extend(&lease.key, shared.ttl));
                let res = beat.await.unwrap_or_else(|_| {
                    Err(Error::backend("heartbeat", std::io::Error::new(std::io::ErrorKind::TimedOut, "extend took longer than a heartbeat interval")))
                });
                match res {
                    Ok(until) => held_until = until,
                    Err(e) if e.is_lease_lost() => {
                        tracing::warn!("lease lost while the handler ran; its result will be discarded");
                        shared.metrics.inc(Counter::LeaseLost);
                        ctx.mark_lost();
                        lost = true;
                    }
                    Err(e) => {
                        shared.metrics.inc(Counter::BackendErrors);
                        tracing::warn!(error = %e, "heartbeat failed; trying again at the next beat");
                    }
                }
            }
        }
    };

    shared.metrics.in_flight(-1.0);
    shared.metrics.ran_for(ran_since.elapsed());
    match ran {
        Ran::Abandoned => {
            ctx.cancel();
            drop(handle);
            if lost {
                // Nothing to give back, but the job still ends with an event.
                shared
                    .events
                    .emit(lease.id(), lease.attempts, JobOutcome::LeaseLost);
            } else {
                release_unfinished(shared, &lease, held_until).await;
            }
        }
        Ran::Done(res) => {
            if lost {
                shared
                    .events
                    .emit(lease.id(), lease.attempts, JobOutcome::LeaseLost);
                return;
            }
            let outcome = match res {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e),
                Err(join) => {
                    shared.metrics.inc(Counter::Panicked);
                    let msg = panic_text(join);
                    tracing::error!(panic = %msg, "handler panicked");
                    Err(format!("handler panicked: {msg}").into())
                }
            };
            record(shared, &lease, held_until, outcome, acker).await;
        }
    }
}

/// Acks (in a batch, through `acker`), retries or kills the item according
/// to the handler's result.
async fn record(
    shared: &Shared,
    lease: &Lease,
    held_until: Timestamp,
    outcome: Result<(), BoxError>,
    acker: &Acker,
) {
    let held = Held {
        key: lease.key.clone(),
        until: held_until,
    };
    let b = shared.backend.as_ref();
    let (id, attempts) = (lease.id(), lease.attempts);
    match outcome {
        Ok(()) => match acker.ack(held).await {
            AckResult::Acked => {
                shared.metrics.inc(Counter::Acked);
                tracing::debug!("acked");
                shared.events.emit(id, attempts, JobOutcome::Acked);
            }
            AckResult::LeaseLost => lost_before_recording(shared, lease),
            AckResult::Failed(error) => not_recorded(shared, lease, error),
        },
        Err(err) => {
            let text = error_text(&*err);
            let permanent = err.downcast_ref::<Permanent>().is_some();
            if permanent || shared.retry.is_exhausted(attempts, lease.max_attempts) {
                let reason = text;
                match shared.settle.fail(b, &held, &reason).await {
                    Ok(()) => {
                        shared.metrics.inc(Counter::Dead);
                        tracing::warn!(error = %reason, "job failed for good; item is Dead");
                        shared
                            .events
                            .emit(id, attempts, JobOutcome::Dead { reason });
                    }
                    Err(e) => unrecorded(shared, lease, e),
                }
            } else {
                let delay = shared.retry.delay_for(attempts);
                match shared.settle.release(b, &held, delay).await {
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
                    Err(e) => unrecorded(shared, lease, e),
                }
            }
        }
    }
}

/// Gives an unfinished job's lease back at shutdown.
async fn release_unfinished(shared: &Shared, lease: &Lease, held_until: Timestamp) {
    let held = Held {
        key: lease.key.clone(),
        until: held_until,
    };
    let b = shared.backend.as_ref();
    // The job never ran to its end: give the attempt back too, so a deploy
    // never dead-letters work. A backend without give_back gets a release.
    let given = match shared.settle.give_back(b, &held).await {
        Err(Error::Unsupported { .. }) => shared
            .settle
            .release(b, &held, Duration::ZERO)
            .await
            .map(|_| ()),
        other => other,
    };
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
        Err(e) => unrecorded(shared, lease, e),
    }
}

fn unrecorded(shared: &Shared, lease: &Lease, e: Error) {
    if e.is_lease_lost() {
        lost_before_recording(shared, lease);
    } else {
        not_recorded(shared, lease, e.to_string());
    }
}

fn lost_before_recording(shared: &Shared, lease: &Lease) {
    shared.metrics.inc(Counter::LeaseLost);
    tracing::warn!("lease lost before the result was recorded; result discarded");
    shared
        .events
        .emit(lease.id(), lease.attempts, JobOutcome::LeaseLost);
}

fn not_recorded(shared: &Shared, lease: &Lease, error: String) {
    tracing::error!(error = %error, "could not record the job's result; a reaper will recover the item");
    shared
        .events
        .emit(lease.id(), lease.attempts, JobOutcome::Unrecorded { error });
}

fn panic_text(join: JoinError) -> String {
    if !join.is_panic() {
        return "handler task was cancelled".into();
    }
    let payload = join.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".into()
    }
}
