//! The worker's main loop: claim while there are free handler slots, wait
//! for work when there is none, and shut down gracefully.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::acker::{self, Acker};
use super::heartbeat::{self, Beats};
use super::inline::Inline;
use super::job::{Claimed, Crew};
use super::metrics::Counter;
use super::shared::Shared;
use super::slots::{Slots, GATHER_TURNS};
use super::{job, reaper};
use crate::backoff::Backoff;
use crate::spans;
use crate::{ClaimSpec, Error, Result};
use tracing::Instrument;

/// Runs until `shutdown` fires, then stops claiming, lets running handlers
/// finish until the shutdown deadline, releases the leases of those still
/// running, sends the acks still pending, and returns.
pub(crate) async fn run(shared: Arc<Shared>, shutdown: CancellationToken) -> Result<()> {
    let stop_reaper = CancellationToken::new();
    // Aborted if this future is dropped (a hard stop).
    let reaper = shared.reap_interval.map(|every| {
        AbortOnDrop(tokio::spawn(reaper::run(
            shared.clone(),
            every,
            stop_reaper.clone(),
        )))
    });
    let (acks, pending) = Acker::channel();
    let mut batcher = AbortOnDrop(tokio::spawn(acker::run(shared.clone(), pending)));
    let (beats, leases) = Beats::channel();
    let mut scheduler = AbortOnDrop(tokio::spawn(heartbeat::run(shared.clone(), leases)));
    let abandon = CancellationToken::new();
    let crew = Arc::new(Crew {
        shared: shared.clone(),
        slots: Slots::new(shared.concurrency, shared.prefetch),
        shutdown: shutdown.clone(),
        abandon: abandon.clone(),
        acker: acks,
        beats,
    });
    let mut jobs = JoinSet::new();

    let result = claim_loop(&crew, &mut jobs).await;

    let drained = tokio::time::timeout(shared.shutdown_deadline, drain(&mut jobs)).await;
    if drained.is_err() {
        tracing::info!(
            queue = %shared.queue,
            running = jobs.len(),
            "shutdown deadline passed; releasing unfinished leases"
        );
        abandon.cancel();
        drain(&mut jobs).await;
    }
    // Every job has handed over its ack by now; with the last handle gone
    // the batcher ends once its queue is empty.
    drop(crew);
    if let Err(e) = (&mut batcher.0).await {
        tracing::error!(error = %e, "ack batcher failed");
    }
    // No job runs any more: the scheduler's queue closes.
    if let Err(e) = (&mut scheduler.0).await {
        tracing::error!(error = %e, "heartbeat scheduler failed");
    }
    stop_reaper.cancel();
    if let Some(mut reaper) = reaper {
        let _ = (&mut reaper.0).await;
    }
    result
}

async fn drain(jobs: &mut JoinSet<()>) {
    while let Some(res) = jobs.join_next().await {
        log_job_task_failure(res);
    }
}

fn log_job_task_failure(res: std::result::Result<(), tokio::task::JoinError>) {
    if let Err(e) = res {
        tracing::error!(error = %e, "job task failed");
    }
}

async fn claim_loop(crew: &Arc<Crew>, jobs: &mut JoinSet<()>) -> Result<()> {
    let (shared, slots, shutdown) = (&crew.shared, &crew.slots, &crew.shutdown);
    let mut backoff = CLAIM_BACKOFF;
    let mut inline = Inline::default();
    loop {
        while let Some(res) = jobs.try_join_next() {
            log_job_task_failure(res);
        }
        let first = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return Ok(()),
            permit = slots.lease() => permit,
        };
        let want = loop {
            let demand = slots.demand().min(shared.prefetch as usize);
            if demand > 0 {
                break demand;
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                _ = slots.handler_ended() => {}
            }
        };
        let mut permits = vec![first];
        slots.gather(&mut permits, want);
        // Jobs that are finishing right now free their room within a
        // scheduler turn or two: let them, so one claim fills it all instead
        // of one claim per job. Costs no timer: at most a few turns.
        for _ in 0..GATHER_TURNS {
            if permits.len() >= want {
                break;
            }
            tokio::task::yield_now().await;
            slots.gather(&mut permits, want.min(slots.demand().max(1)));
        }
        let spec = ClaimSpec::new(permits.len() as u32, shared.ttl.get())?;
        // A claim is never cut short: its leases would dangle until expiry.
        // A claim whose reply was lost is recovered by its spec, never
        // claimed again on top.
        let span = spans::receive(&shared.span_names, &shared.queue);
        let claimed = shared
            .settle
            .claim(shared.backend.as_ref(), &shared.queue, spec)
            .instrument(span.clone())
            .await;
        let claimed_at = tokio::time::Instant::now();
        let claimed = match spans::outcome(&span, claimed) {
            Ok(c) => {
                span.record(spans::fields::BATCH_COUNT, spans::count(c.leases.len()));
                c
            }
            Err(e @ Error::InvalidInput { .. }) => return Err(e),
            Err(e) => {
                shared.metrics.inc(Counter::BackendErrors);
                let wait = backoff.next_wait();
                tracing::warn!(queue = %shared.queue, error = %e, ?wait, "claim failed; trying again");
                // The claim's span ends with the claim, not after the wait.
                drop(span);
                drop(permits);
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(wait) => continue,
                }
            }
        };
        backoff.reset();
        shared
            .metrics
            .add(Counter::Repaired, claimed.repairs.len() as u64);
        // A claim the queue's limits cut short says when to come back: wait
        // that long (new work would not help), whether or not it got any.
        let limited = claimed.retry_after.map(|d| d.min(LIMIT_WAIT_CAP));
        if claimed.leases.is_empty() {
            drop(span);
            drop(permits);
            if claimed.paused {
                // Woken by the resume (or by enqueues, which are not
                // enough: claims stay spaced out while the pause lasts).
                let spaced = tokio::time::Instant::now() + PAUSED_CLAIM_GAP;
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = async {
                        shared.backend.wait_for_work(&shared.queue, shared.idle_wait).await;
                        tokio::time::sleep_until(spaced).await;
                    } => continue,
                }
            }
            if let Some(wait) = limited {
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(wait) => continue,
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = shared.backend.wait_for_work(&shared.queue, shared.idle_wait) => continue,
            }
        }
        shared
            .metrics
            .add(Counter::Claimed, claimed.leases.len() as u64);
        slots.claimed(claimed.leases.len());
        let mut batch = Vec::with_capacity(claimed.leases.len());
        for (lease, room) in claimed.leases.into_iter().zip(permits.drain(..)) {
            // Opened here, while the claim's span is still open, so the
            // link to it can be made.
            let job_span = spans::process(
                &shared.span_names,
                &shared.queue,
                lease.id(),
                lease.attempts,
            );
            job_span.follows_from(&span);
            let job = Claimed {
                lease,
                room,
                at: claimed_at,
                span: job_span,
            };
            batch.push(Box::pin(job::run(crew.clone(), job)));
        }
        drop(span);
        inline.start(batch, jobs).await;
        // Room the claim did not fill is free again before any wait.
        drop(permits);
        if let Some(wait) = limited {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The least time between two claims of a worker on a paused queue, so
/// enqueues into it do not make the worker poll.
const PAUSED_CLAIM_GAP: Duration = Duration::from_millis(250);

/// The longest a worker waits on one `retry_after` before claiming again
/// (so limits raised or cleared meanwhile are seen within it).
const LIMIT_WAIT_CAP: Duration = Duration::from_secs(60);

/// Aborts a background task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Growing waits between failed claims: 100 ms doubling to 5 s.
const CLAIM_BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
