//! One heartbeat scheduler per worker: it extends the lease of every job
//! that is still running (or waiting for a handler slot) once per heartbeat
//! interval, from one task with one timer, instead of a timer per job.
//!
//! A job registers its lease only when its handler did not finish at the
//! first poll, and unregisters when the handler ends; the scheduler keeps
//! the lease's latest expiry (what settling a lost reply compares against)
//! and, when an extend finds the lease gone, marks the job lost and cancels
//! its handler's context; when an extend says an operator asked to cancel
//! the item, it cancels the handler's context and keeps the lease alive
//! while the handler winds down. The backend's cancel signal (see
//! [`crate::Control::cancel_signal`]) makes every kept lease beat at once,
//! so a cancel reaches its handler without waiting for the next beat.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::handler::JobContext;
use super::metrics::Counter;
use super::shared::Shared;
use crate::settle::Held;
use crate::signal::Signal;
use crate::{
    BackendExt, Error, Extended, LeaseKey, LeaseToken, Result, RunningJob, Timestamp, WorkerEntry,
};
use std::time::Duration;

/// The jobs' side of the scheduler; clones share one scheduler.
#[derive(Debug, Clone)]
pub(crate) struct Beats(mpsc::UnboundedSender<Registration>);

/// What jobs tell the scheduler.
#[derive(Debug)]
pub(crate) enum Registration {
    Keep(u64, Arc<Lease>),
    Forget(u64),
}

/// A lease the scheduler keeps alive, as the job and the scheduler share
/// it.
#[derive(Debug)]
pub(crate) struct Lease {
    key: LeaseKey,
    ctx: JobContext,
    span: tracing::Span,
    /// The latest expiry the backend gave, in milliseconds.
    until: AtomicU64,
    /// The claim's expiry, in milliseconds: the claim's time plus the ttl.
    claimed_until: u64,
    /// The item's attempt this lease runs.
    attempt: u32,
    lost: AtomicBool,
    /// The handler ended: results of extends still on their way no longer
    /// count (the job may have acked already).
    over: AtomicBool,
}

/// A job's registration: read its lease's latest expiry and whether it was
/// lost; dropping it stops the heartbeats.
#[derive(Debug)]
pub(crate) struct Beat {
    n: u64,
    lease: Arc<Lease>,
    beats: Beats,
}

impl Beat {
    /// The latest expiry the backend gave this lease.
    pub(crate) fn until(&self) -> Timestamp {
        Timestamp::from_millis(self.lease.until.load(Ordering::SeqCst))
    }

    /// True once an extend found the lease gone.
    pub(crate) fn lost(&self) -> bool {
        self.lease.lost.load(Ordering::SeqCst)
    }
}

impl Drop for Beat {
    fn drop(&mut self) {
        self.lease.over.store(true, Ordering::SeqCst);
        let _ = self.beats.0.send(Registration::Forget(self.n));
    }
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Beats {
    /// A handle, and the queue the scheduler (see [`run`]) reads.
    pub(crate) fn channel() -> (Beats, mpsc::UnboundedReceiver<Registration>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Beats(tx), rx)
    }

    /// Keeps `key` alive from one heartbeat interval from now until the
    /// returned [`Beat`] is dropped. A lost lease cancels `ctx`.
    pub(crate) fn keep(
        &self,
        key: LeaseKey,
        until: Timestamp,
        attempt: u32,
        ctx: JobContext,
        span: tracing::Span,
    ) -> Beat {
        let lease = Arc::new(Lease {
            key,
            attempt,
            ctx,
            span,
            until: AtomicU64::new(until.as_millis()),
            claimed_until: until.as_millis(),
            lost: AtomicBool::new(false),
            over: AtomicBool::new(false),
        });
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // A scheduler that has stopped (a hard stop) keeps nothing alive;
        // the lease then expires and a reaper recovers the item.
        let _ = self.0.send(Registration::Keep(n, lease.clone()));
        Beat {
            n,
            lease,
            beats: self.clone(),
        }
    }
}

/// The leases being kept, in the order their next heartbeat is due.
#[derive(Default)]
struct Schedule {
    leases: HashMap<u64, (Option<Instant>, Arc<Lease>)>,
    due: BTreeSet<(Instant, u64)>,
}

impl Schedule {
    fn keep(&mut self, n: u64, at: Instant, lease: Arc<Lease>) {
        self.leases.insert(n, (Some(at), lease));
        self.due.insert((at, n));
    }

    fn forget(&mut self, n: u64) {
        if let Some((Some(at), _)) = self.leases.remove(&n) {
            self.due.remove(&(at, n));
        }
    }

    /// Takes the next lease due by `now`, marking its extend as on its way.
    fn next_due(&mut self, now: Instant) -> Option<(u64, Arc<Lease>)> {
        let &(at, n) = self.due.first().filter(|(at, _)| *at <= now)?;
        self.due.remove(&(at, n));
        let entry = self.leases.get_mut(&n)?;
        entry.0 = None;
        Some((n, entry.1.clone()))
    }

    /// Schedules a lease whose extend came back, if the job still runs.
    fn again(&mut self, n: u64, at: Instant) {
        if let Some(entry) = self.leases.get_mut(&n) {
            entry.0 = Some(at);
            self.due.insert((at, n));
        }
    }

    /// Takes every lease whose extend is not on its way: a cancel may have
    /// been requested for one of them, and only an extend tells which.
    fn take_all(&mut self) -> Vec<(u64, Arc<Lease>)> {
        self.due.clear();
        self.leases
            .iter_mut()
            .filter_map(|(n, entry)| entry.0.take().map(|_| (*n, entry.1.clone())))
            .collect()
    }

    fn first_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }
}

/// Runs the scheduler until every [`Beats`] handle and [`Beat`] is gone.
/// On a backend with the live-worker registry it also registers the worker
/// once per heartbeat interval, with the jobs it keeps alive, and removes
/// the entry when it ends.
pub(crate) async fn run(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Registration>) {
    let every = shared.heartbeat;
    let mut schedule = Schedule::default();
    let mut on_their_way = FuturesUnordered::new();
    let mut presence = Presence::start(&shared).await;
    let mut registering = FuturesUnordered::new();
    let mut next_register = Instant::now();
    let mut cancels = cancel_signal(&shared).await;
    loop {
        let wake = schedule.first_due();
        let register_at = presence.as_ref().map(|_| next_register);
        tokio::select! {
            message = queue.recv() => match message {
                Some(Registration::Keep(n, lease)) => schedule.keep(n, Instant::now() + every, lease),
                Some(Registration::Forget(n)) => schedule.forget(n),
                None => {
                    if let Some(p) = presence.take() {
                        p.leave(&shared).await;
                    }
                    return;
                }
            },
            Some(()) = registering.next() => {}
            _ = sleep_until(register_at) => {
                next_register = Instant::now() + every;
                if let (Some(p), true) = (&mut presence, registering.is_empty()) {
                    let entry = p.entry(&shared, &schedule);
                    let shared = &*shared;
                    registering.push(async move { Presence::register(shared, entry).await });
                }
            }
            Some((n, keep_going)) = on_their_way.next() => {
                if keep_going {
                    schedule.again(n, Instant::now() + every);
                } else {
                    schedule.forget(n);
                }
            }
            () = cancels.changed() => {
                for (n, lease) in schedule.take_all() {
                    on_their_way.push(numbered_beat(&shared, n, lease));
                }
            }
            _ = sleep_until(wake) => {
                let now = Instant::now();
                while let Some((n, lease)) = schedule.next_due(now) {
                    on_their_way.push(numbered_beat(&shared, n, lease));
                }
            }
        }
    }
}

/// The backend's signal of cancel requests on this worker's queue, so a
/// cancelled handler stops at once rather than at its next beat; one that
/// never fires without the Control group (or if subscribing failed).
async fn cancel_signal(shared: &Shared) -> Signal {
    let Ok(control) = shared.backend.control() else {
        return Signal::never();
    };
    control
        .cancel_signal(&shared.queue)
        .await
        .unwrap_or_else(|e| {
            tracing::debug!(error = %e, "no cancel signal; cancels are seen at the next heartbeat");
            Signal::never()
        })
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// [`beat`], answering with the lease's number in the schedule.
async fn numbered_beat(shared: &Shared, n: u64, lease: Arc<Lease>) -> (u64, bool) {
    (n, beat(shared, &lease).await)
}

/// One heartbeat for `lease`; false once it is lost (no more beats).
async fn beat(shared: &Shared, lease: &Lease) -> bool {
    if lease.over.load(Ordering::SeqCst) {
        return false;
    }
    // A heartbeat that hangs must not outlive the next one.
    let extend = shared.backend.extend(&lease.key, shared.ttl);
    let res: Result<Extended> = tokio::time::timeout(shared.heartbeat, extend)
        .await
        .unwrap_or_else(|_| {
            let slow = std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "extend took longer than a heartbeat interval",
            );
            Err(Error::outcome_unknown("heartbeat", slow))
        });
    // The handler ended while the extend was on its way: whatever it
    // found (a lease the job's own ack ended, say) is no news.
    if lease.over.load(Ordering::SeqCst) {
        return false;
    }
    match res {
        Ok(extended) => {
            lease
                .until
                .fetch_max(extended.expires_at.as_millis(), Ordering::SeqCst);
            if extended.cancel_requested && !lease.ctx.cancel_requested() {
                tracing::info!(parent: &lease.span, "cancel requested by an operator; stopping the handler");
                lease.ctx.mark_cancel_requested();
            }
            // Beats go on: the handler winds down under a live lease.
            true
        }
        Err(e) if e.is_lease_lost() => {
            let held = Held {
                key: lease.key.clone(),
                until: Timestamp::from_millis(lease.until.load(Ordering::SeqCst)),
            };
            let b = shared.backend.as_ref();
            let fate = shared.settle.lost_or_vanished(b, &held, e).await;
            if fate.is_lease_vanished() {
                tracing::error!(parent: &lease.span, "lease vanished while the handler ran (the store lost it, or it was purged or removed); its result will be discarded");
                shared.metrics.inc(Counter::LeaseVanished);
            } else {
                tracing::warn!(parent: &lease.span, "lease lost while the handler ran; its result will be discarded");
                shared.metrics.inc(Counter::LeaseLost);
            }
            lease.lost.store(true, Ordering::SeqCst);
            lease.ctx.mark_lost();
            false
        }
        Err(e) => {
            shared.metrics.inc(Counter::BackendErrors);
            tracing::warn!(parent: &lease.span, error = %e, "heartbeat failed; trying again at the next beat");
            true
        }
    }
}

/// This worker's entry in the live-worker registry.
struct Presence {
    entry: WorkerEntry,
}

impl Presence {
    /// `None` on a backend without the registry.
    async fn start(shared: &Shared) -> Option<Presence> {
        shared.backend.registry().ok()?;
        let started = shared
            .backend
            .now()
            .await
            .unwrap_or_else(|_| Timestamp::now_system());
        let id = format!("{}-{}", shared.queue, LeaseToken::random());
        Some(Presence {
            entry: WorkerEntry::new(id, &shared.queue, shared.concurrency, started),
        })
    }

    /// The entry now: the jobs the scheduler keeps alive, oldest first.
    fn entry(&mut self, shared: &Shared, schedule: &Schedule) -> WorkerEntry {
        let ttl = shared.ttl.as_millis();
        let mut jobs: Vec<RunningJob> = schedule
            .leases
            .values()
            .map(|(_, lease)| RunningJob {
                id: lease.key.id,
                attempt: lease.attempt,
                started_at: lease.claimed_until.saturating_sub(ttl),
            })
            .collect();
        jobs.sort_by_key(|j| j.started_at);
        jobs.truncate(WorkerEntry::MAX_JOBS);
        self.entry.jobs = jobs;
        self.entry.clone()
    }

    async fn register(shared: &Shared, entry: WorkerEntry) {
        let ttl = shared
            .heartbeat
            .saturating_mul(3)
            .max(Duration::from_secs(1));
        let Ok(registry) = shared.backend.registry() else {
            return;
        };
        let res = tokio::time::timeout(shared.heartbeat, registry.register(&entry, ttl)).await;
        if let Ok(Err(e)) = res {
            tracing::debug!(error = %e, "could not register the worker; trying again at the next beat");
        }
    }

    async fn leave(self, shared: &Shared) {
        if let Ok(registry) = shared.backend.registry() {
            let gone = registry.deregister(&self.entry.id);
            if let Ok(Err(e)) = tokio::time::timeout(shared.heartbeat, gone).await {
                tracing::debug!(error = %e, "could not deregister the worker; its entry expires");
            }
        }
    }
}
