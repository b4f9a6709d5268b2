//! The scheduler runtime: loads the schedules from the backend, fires each
//! one's due tick through [`Backend::fire_schedule`], sleeps until the next
//! tick.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Fired, Missed, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::{Backend, Enqueued, Result, Timestamp};

/// The longest a scheduler sleeps after a failed pass.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Fires the schedules stored in a backend. Any number of schedulers, in
/// any number of processes, may run over the same backend at once: the
/// backend's atomic [`Backend::fire_schedule`] makes each tick enqueue one
/// item, whichever scheduler gets there first, and the backend's clock
/// decides when a tick is due, so a scheduler whose host clock runs ahead
/// cannot fire early.
///
/// Each pass ([`Scheduler::run_once`]) reads the backend's now and, for
/// every schedule, the latest tick at or before it. A tick after the
/// schedule's last fired tick (and after the time its current revision was
/// stored) is fired, unless the schedule's policy is [`Missed::Skip`] and
/// the tick is more than the grace period old. [`Scheduler::run`] repeats
/// passes, sleeping until the earliest next tick (never polling), and
/// reloads the definitions every [`Scheduler::reload_every`] and whenever
/// a fire finds the definition it used stale.
///
/// ```no_run
/// # async fn example(backend: std::sync::Arc<dyn leaseq_core::Backend>) -> leaseq_core::Result<()> {
/// use leaseq_core::schedule::{Schedule, Scheduler};
/// use leaseq_core::{CancellationToken, QueueName};
///
/// let every_minute = Schedule::cron("tick", QueueName::new("jobs")?, "* * * * *", "{}")?;
/// backend.put_schedule(&every_minute).await?;
/// let stop = CancellationToken::new();
/// Scheduler::new(backend).run(stop).await
/// # }
/// ```
#[derive(Debug)]
pub struct Scheduler {
    backend: Arc<dyn Backend>,
    reload_every: Duration,
    grace: Duration,
    loaded: BTreeMap<ScheduleName, Entry>,
    loaded_at: Option<tokio::time::Instant>,
    stale: bool,
}

/// One loaded schedule and the latest tick this scheduler knows is done
/// (fired by anyone, or skipped).
#[derive(Debug)]
struct Entry {
    stored: StoredSchedule,
    schedule: Schedule,
    done: Timestamp,
}

/// What one pass of a [`Scheduler`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pass {
    /// The backend's now at the start of the pass.
    pub now: Timestamp,
    /// The ticks this pass enqueued an item for.
    pub fired: Vec<(ScheduleName, Timestamp, Enqueued)>,
    /// The ticks this pass skipped ([`Missed::Skip`]).
    pub skipped: Vec<(ScheduleName, Timestamp)>,
    /// The earliest tick still to come, on the backend's clock.
    pub next_due: Option<Timestamp>,
    /// Fires that failed (logged; tried again on the next pass).
    pub errors: usize,
}

impl Scheduler {
    /// A scheduler over `backend`'s schedules: reloads every 30 s, grace
    /// 60 s.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Scheduler {
            backend,
            reload_every: Duration::from_secs(30),
            grace: Duration::from_secs(60),
            loaded: BTreeMap::new(),
            loaded_at: None,
            stale: false,
        }
    }

    /// How often the definitions are read again (at least 10 ms; default
    /// 30 s). A fire that meets a changed or removed definition reloads at
    /// once in any case, so this bounds how late a *new* schedule starts.
    #[must_use]
    pub fn reload_every(mut self, every: Duration) -> Self {
        self.reload_every = every.max(Duration::from_millis(10));
        self
    }

    /// How late a tick may still fire under [`Missed::Skip`] (default
    /// 60 s). Older ticks are skipped.
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Reads the definitions from the backend now. A definition that does
    /// not parse is logged and left out.
    pub async fn reload(&mut self) -> Result<()> {
        let stored = self.backend.schedules().await?;
        let mut loaded = BTreeMap::new();
        for s in stored {
            let schedule = match Schedule::from_stored(&s) {
                Ok(schedule) => schedule,
                Err(e) => {
                    tracing::warn!(schedule = %s.name, error = %e, "skipping a schedule that does not parse");
                    continue;
                }
            };
            // What this scheduler knew is kept while the revision is the same.
            let known = self
                .loaded
                .get(&s.name)
                .filter(|e| e.stored.revision == s.revision)
                .map_or(Timestamp::ZERO, |e| e.done);
            let done = known
                .max(s.defined_at)
                .max(s.last_tick.unwrap_or(Timestamp::ZERO));
            loaded.insert(
                s.name.clone(),
                Entry {
                    stored: s,
                    schedule,
                    done,
                },
            );
        }
        self.loaded = loaded;
        self.loaded_at = Some(tokio::time::Instant::now());
        self.stale = false;
        Ok(())
    }

    /// The schedules as last loaded.
    pub fn loaded(&self) -> impl Iterator<Item = &Schedule> {
        self.loaded.values().map(|e| &e.schedule)
    }

    fn reload_due(&self) -> bool {
        self.stale
            || self
                .loaded_at
                .is_none_or(|at| at.elapsed() >= self.reload_every)
    }

    /// One pass: reloads if due, then fires every schedule whose latest
    /// tick at the backend's now is not done yet. Errors of single fires
    /// are logged and counted in [`Pass::errors`]; an error reading the
    /// clock or the definitions fails the pass.
    pub async fn run_once(&mut self) -> Result<Pass> {
        if self.reload_due() {
            self.reload().await?;
        }
        let now = self.backend.now().await?;
        let mut pass = Pass {
            now,
            ..Pass::default()
        };
        for (name, entry) in &mut self.loaded {
            if let Some(tick) = entry.schedule.latest_tick(now).filter(|t| *t > entry.done) {
                let late = now.saturating_since(tick);
                if entry.schedule.missed_policy() == Missed::Skip && late > self.grace {
                    tracing::info!(schedule = %name, %tick, ?late, "skipping a missed tick");
                    entry.done = tick;
                    pass.skipped.push((name.clone(), tick));
                } else {
                    let fire = ScheduleTick {
                        name: name.clone(),
                        revision: entry.stored.revision,
                        at: tick,
                    };
                    match self
                        .backend
                        .fire_schedule(&fire, entry.schedule.item())
                        .await
                    {
                        Ok(Fired::Enqueued(e)) => {
                            tracing::info!(schedule = %name, %tick, id = %e.id, "fired");
                            entry.done = tick;
                            pass.fired.push((name.clone(), tick, e));
                        }
                        Ok(Fired::AlreadyFired { last_tick }) => {
                            entry.done = entry.done.max(last_tick);
                        }
                        Ok(Fired::NotDue { now }) => {
                            tracing::debug!(schedule = %name, %tick, %now, "tick not due yet on the backend's clock");
                            pass.next_due = Some(pass.next_due.map_or(tick, |d| d.min(tick)));
                            continue;
                        }
                        Ok(Fired::Stale) => {
                            self.stale = true;
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(schedule = %name, %tick, error = %e, "firing a tick failed; trying again");
                            pass.errors += 1;
                            continue;
                        }
                    }
                }
            }
            if let Some(next) = entry.schedule.next_tick(entry.done.max(now)) {
                pass.next_due = Some(pass.next_due.map_or(next, |d| d.min(next)));
            }
        }
        Ok(pass)
    }

    /// Runs passes until `stop` is cancelled, sleeping until the next tick
    /// (or the next reload) in between. A failed pass is logged and tried
    /// again after a backoff (1 s, doubling up to 30 s).
    pub async fn run(mut self, stop: CancellationToken) -> Result<()> {
        let mut backoff = Duration::from_secs(1);
        loop {
            let wait = match self.run_once().await {
                Ok(pass) => {
                    backoff = Duration::from_secs(1);
                    let until_tick = pass
                        .next_due
                        .map_or(self.reload_every, |t| t.saturating_since(pass.now));
                    let mut wait = until_tick.min(self.until_reload());
                    if pass.errors > 0 || self.stale {
                        wait = wait.min(Duration::from_secs(1));
                    }
                    wait.max(Duration::from_millis(1))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a scheduler pass failed; trying again");
                    let wait = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    self.stale = true;
                    wait
                }
            };
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn until_reload(&self) -> Duration {
        match self.loaded_at {
            Some(at) => self.reload_every.saturating_sub(at.elapsed()),
            None => Duration::ZERO,
        }
    }
}
