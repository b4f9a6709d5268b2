//! Periodic jobs: schedules stored in the backend, fired exactly once per
//! tick by any number of [`Scheduler`]s.
//!
//! A [`Schedule`] names a queue, a cadence (a cron expression in a time
//! zone, or a fixed interval), a payload and a [`Missed`] policy. It is
//! stored in the backend ([`crate::ScheduleStore::put_schedule`]), so every
//! scheduler of every process sees the same definitions, and a change or a
//! removal takes effect for all of them.
//!
//! The one step that makes "exactly one item per tick" hold is
//! [`crate::ScheduleStore::fire_schedule`]: in one atomic step the backend
//! enqueues the tick's item only if the schedule's last fired tick is older
//! than the tick and the tick is not in the future on the backend's own
//! clock, and records the tick as fired. Schedulers never lock anything on
//! the client side; they only decide which tick is due and ask the backend.
//!
//! ```
//! # #[cfg(feature = "cron")] {
//! use leaseq_core::schedule::{Missed, Schedule};
//! use leaseq_core::QueueName;
//! use std::time::Duration;
//!
//! // Every weekday at 07:30 in Berlin; after an outage, run once for the
//! // latest missed tick.
//! let report = Schedule::cron("daily-report", QueueName::new("reports")?, "30 7 * * MON-FRI", "{}")?
//!     .time_zone("Europe/Berlin")?
//!     .missed(Missed::EnqueueLatest);
//! // Every 30 seconds, on the 30-second marks of the Unix epoch.
//! let ping = Schedule::every("ping", QueueName::new("health")?, Duration::from_secs(30), "ping")?;
//! assert_eq!(report.name().as_str(), "daily-report");
//! assert_eq!(ping.missed_policy(), Missed::Skip);
//! # }
//! # Ok::<(), leaseq_core::Error>(())
//! ```

mod cadence;
mod records;
mod scheduler;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::{Enqueued, Error, NewItem, QueueName, Result, Timestamp};

use cadence::Zone;
pub use cadence::{Cadence, CronExpr};
pub use records::{FireStep, ScheduleRecord, TickRecord};
pub use scheduler::{Pass, Scheduler};

/// A validated schedule name: the same rules as a [`QueueName`] (1 to 128
/// bytes of ASCII letters, digits, `-`, `_`, `.` and `:`), so a name is safe
/// in a Redis key, a SQL literal and a shell alike.
///
/// ```
/// use leaseq_core::schedule::ScheduleName;
/// assert!(ScheduleName::new("nightly.cleanup").is_ok());
/// assert!(ScheduleName::new("no spaces").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScheduleName(QueueName);

impl ScheduleName {
    /// Validates `name`; [`Error::InvalidInput`] says what is wrong with it.
    pub fn new(name: impl AsRef<str>) -> Result<Self> {
        QueueName::new(name.as_ref())
            .map(ScheduleName)
            .map_err(|e| match e {
                Error::InvalidInput { what } => {
                    Error::invalid(what.replacen("queue", "schedule", 1))
                }
                other => other,
            })
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Debug for ScheduleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ScheduleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScheduleName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ScheduleName::new(s)
    }
}

impl AsRef<str> for ScheduleName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// What a scheduler does with ticks that passed while no scheduler ran (or
/// while the schedulers were late by more than their grace period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Missed {
    /// Missed ticks are skipped: a tick fires only while it is on time
    /// (within the scheduler's grace period, see [`Scheduler::grace`]);
    /// the next tick fires as usual.
    #[default]
    Skip,
    /// One item is enqueued for the latest missed tick (never one per
    /// missed tick), then the schedule goes on as usual.
    EnqueueLatest,
}

impl Missed {
    /// The name used in storage and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::EnqueueLatest => "enqueue-latest",
        }
    }
}

impl fmt::Display for Missed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Missed {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "skip" => Ok(Missed::Skip),
            "enqueue-latest" | "latest" => Ok(Missed::EnqueueLatest),
            _ => Err(Error::invalid(format!(
                "unknown missed-tick policy {s:?}; expected skip or enqueue-latest"
            ))),
        }
    }
}

/// How a schedule is written down in storage: everything but the name,
/// the queue and the payload, as one JSON text the backends keep opaque.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Spec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    #[serde(default = "utc")]
    tz: String,
    #[serde(default)]
    missed: Missed,
    #[serde(default)]
    priority: i32,
    #[serde(default = "default_attempts")]
    max_attempts: u32,
}

fn utc() -> String {
    "UTC".into()
}

fn default_attempts() -> u32 {
    NewItem::DEFAULT_MAX_ATTEMPTS
}

/// A periodic job: a name, the queue its items go to, a [`Cadence`], a time
/// zone, a payload and a [`Missed`] policy, plus the priority and attempts
/// each item gets. Built with [`Schedule::cron`] or [`Schedule::every`] and
/// chained setters; stored with [`crate::ScheduleStore::put_schedule`].
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    name: ScheduleName,
    queue: QueueName,
    cadence: Cadence,
    tz: Zone,
    payload: Bytes,
    missed: Missed,
    priority: i32,
    max_attempts: u32,
}

impl Schedule {
    /// The most bytes a stored spec may have (it is generated, so only a
    /// very long cron expression comes near it).
    pub const MAX_SPEC_LEN: usize = 4_096;

    /// A schedule on a cron expression (5 fields, or 6 with seconds first;
    /// names such as `MON` and `JAN` and nicknames such as `@hourly` work),
    /// in UTC until [`Schedule::time_zone`] says otherwise. Needs the `cron`
    /// feature; without it the answer is [`Error::Unsupported`].
    pub fn cron(
        name: impl AsRef<str>,
        queue: QueueName,
        expr: &str,
        payload: impl Into<Bytes>,
    ) -> Result<Self> {
        Self::with(name, queue, Cadence::cron(expr)?, payload)
    }

    /// A schedule that fires every `every` (at least 1 ms, whole
    /// milliseconds), on the multiples of `every` since the Unix epoch, so
    /// every scheduler agrees on the ticks.
    pub fn every(
        name: impl AsRef<str>,
        queue: QueueName,
        every: Duration,
        payload: impl Into<Bytes>,
    ) -> Result<Self> {
        Self::with(name, queue, Cadence::every(every)?, payload)
    }

    /// A schedule on `cadence`.
    pub fn with(
        name: impl AsRef<str>,
        queue: QueueName,
        cadence: Cadence,
        payload: impl Into<Bytes>,
    ) -> Result<Self> {
        Ok(Schedule {
            name: ScheduleName::new(name)?,
            queue,
            cadence,
            tz: Zone::UTC,
            payload: payload.into(),
            missed: Missed::Skip,
            priority: 0,
            max_attempts: NewItem::DEFAULT_MAX_ATTEMPTS,
        })
    }

    /// The time zone cron fields are read in (an IANA name such as
    /// `Europe/Berlin`). It changes nothing for an interval. A zone other
    /// than `UTC` needs the `cron` feature.
    pub fn time_zone(mut self, tz: &str) -> Result<Self> {
        self.tz = Zone::parse(tz)?;
        Ok(self)
    }

    /// The missed-tick policy (default [`Missed::Skip`]).
    #[must_use]
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }

    /// The priority of each item (default 0).
    #[must_use]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The attempts each item gets (default
    /// [`NewItem::DEFAULT_MAX_ATTEMPTS`]; 0 is rejected by the enqueue).
    #[must_use]
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.min(crate::limits::MAX_ATTEMPTS);
        self
    }

    /// The same schedule for another queue (what a layer that maps queue
    /// names uses).
    #[must_use]
    pub fn with_queue(mut self, queue: QueueName) -> Self {
        self.queue = queue;
        self
    }

    /// The name.
    pub fn name(&self) -> &ScheduleName {
        &self.name
    }

    /// The queue items go to.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }

    /// The cadence.
    pub fn cadence(&self) -> &Cadence {
        &self.cadence
    }

    /// The time zone's IANA name.
    pub fn tz_name(&self) -> &'static str {
        self.tz.name()
    }

    /// The payload of each item.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The missed-tick policy.
    pub fn missed_policy(&self) -> Missed {
        self.missed
    }

    /// Everything but the name, the queue and the payload as one text, the
    /// form backends store (and compare, to tell a change from a repeat).
    pub fn spec(&self) -> String {
        let (cron, every_ms) = match &self.cadence {
            Cadence::Cron(c) => (Some(c.expr().to_owned()), None),
            Cadence::Every(d) => (None, Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))),
        };
        let spec = Spec {
            cron,
            every_ms,
            tz: self.tz.name().to_owned(),
            missed: self.missed,
            priority: self.priority,
            max_attempts: self.max_attempts,
        };
        // A struct of strings and numbers always serializes.
        serde_json::to_string(&spec).unwrap_or_default()
    }

    /// The schedule a stored record describes; [`Error::Corrupt`] when its
    /// spec does not parse, [`Error::Unsupported`] when it names a cron
    /// expression or a time zone and this build lacks the `cron` feature.
    pub fn from_stored(stored: &StoredSchedule) -> Result<Self> {
        let spec: Spec = serde_json::from_str(&stored.spec).map_err(|e| Error::Corrupt {
            what: format!(
                "schedule {}: spec {:?} does not parse: {e}",
                stored.name, stored.spec
            ),
        })?;
        // What this build cannot read (a cron expression or a time zone
        // without the `cron` feature) is no damage to the store.
        let corrupt = |e: Error| match e {
            Error::Unsupported { what } => Error::Unsupported {
                what: format!("schedule {}: {what}", stored.name),
            },
            e => Error::Corrupt {
                what: format!("schedule {}: {e}", stored.name),
            },
        };
        let cadence = match (spec.cron, spec.every_ms) {
            (Some(expr), None) => Cadence::cron(&expr).map_err(corrupt)?,
            (None, Some(ms)) => Cadence::every(Duration::from_millis(ms)).map_err(corrupt)?,
            _ => {
                return Err(Error::Corrupt {
                    what: format!(
                        "schedule {}: spec {:?} names neither a cron expression nor an interval",
                        stored.name, stored.spec
                    ),
                })
            }
        };
        Schedule::with(
            stored.name.as_str(),
            stored.queue.clone(),
            cadence,
            stored.payload.clone(),
        )?
        .time_zone(&spec.tz)
        .map(|s| {
            s.missed(spec.missed)
                .priority(spec.priority)
                .max_attempts(spec.max_attempts)
        })
        .map_err(corrupt)
    }

    /// Checks what a backend stores: the spec's length and the payload
    /// against `limits`. Backends call it first in `put_schedule`.
    pub fn check(&self, limits: &crate::Bounds) -> Result<()> {
        if self.spec().len() > Self::MAX_SPEC_LEN {
            return Err(Error::invalid(format!(
                "schedule {}: the spec is over {} bytes",
                self.name,
                Self::MAX_SPEC_LEN
            )));
        }
        crate::limits::check_batch(std::slice::from_ref(&self.item()), limits)
            .map_err(|e| Error::invalid(format!("schedule {}: {e}", self.name)))
    }

    /// The item each tick enqueues.
    pub fn item(&self) -> NewItem {
        NewItem::new(self.payload.clone())
            .priority(self.priority)
            .max_attempts(self.max_attempts)
    }

    /// The latest tick at or before `t`, if there is one.
    pub fn latest_tick(&self, t: Timestamp) -> Option<Timestamp> {
        self.cadence.latest_at_or_before(t, self.tz)
    }

    /// The first tick after `t`, if there is one.
    pub fn next_tick(&self, t: Timestamp) -> Option<Timestamp> {
        self.cadence.first_after(t, self.tz)
    }
}

/// A schedule as the backend stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchedule {
    /// The schedule's name (unique per backend).
    pub name: ScheduleName,
    /// The queue its items go to.
    pub queue: QueueName,
    /// [`Schedule::spec`]: the cadence, time zone and policy, opaque to the
    /// backend.
    pub spec: String,
    /// The payload of each item.
    pub payload: Bytes,
    /// Starts at 1 and rises by one on every change of queue, spec or
    /// payload; a put that changes nothing keeps it. A fire names the
    /// revision it was computed from, so a stale definition never fires.
    pub revision: u64,
    /// When the current revision was stored, on the backend's clock. Ticks
    /// at or before it are never fired by a [`Scheduler`].
    pub defined_at: Timestamp,
    /// The latest tick fired, if any (kept across revisions).
    pub last_tick: Option<Timestamp>,
}

/// One tick of one revision of a schedule: what
/// [`crate::ScheduleStore::fire_schedule`] fires.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScheduleTick {
    /// The schedule.
    pub name: ScheduleName,
    /// The revision the caller loaded ([`StoredSchedule::revision`]).
    pub revision: u64,
    /// The tick, on the backend's clock.
    pub at: Timestamp,
}

impl ScheduleTick {
    /// The contract's decision on firing this tick, in the order
    /// [`crate::ScheduleStore::fire_schedule`] states it, for a backend that
    /// has read the schedule's `stored` record (its revision and last tick;
    /// `None` when the schedule is gone) and its own `now` inside the fire's
    /// atomic step: `Some(answer)` to return with nothing written, `None` to
    /// enqueue the tick's item and record the tick. Every backend that
    /// decides in Rust calls this, so the rule lives in one place.
    pub fn refusal(
        &self,
        stored: Option<(u64, Option<Timestamp>)>,
        now: Timestamp,
    ) -> Option<Fired> {
        let Some((revision, last_tick)) = stored else {
            return Some(Fired::Stale);
        };
        if revision != self.revision {
            return Some(Fired::Stale);
        }
        if let Some(last_tick) = last_tick.filter(|last| *last >= self.at) {
            return Some(Fired::AlreadyFired { last_tick });
        }
        if self.at > now {
            return Some(Fired::NotDue { now });
        }
        None
    }
}

/// What [`crate::ScheduleStore::fire_schedule`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fired {
    /// The tick's item was enqueued (or, when its dedup key was held, the
    /// holder's id came back with `deduplicated: true`), and the tick is
    /// now the schedule's last.
    Enqueued(Enqueued),
    /// This tick or a later one was fired already; nothing was written.
    AlreadyFired {
        /// The schedule's last fired tick.
        last_tick: Timestamp,
    },
    /// The tick is after the backend's now; nothing was written.
    NotDue {
        /// The backend's now.
        now: Timestamp,
    },
    /// The schedule no longer exists or has another revision; nothing was
    /// written. Reload the definitions.
    Stale,
}

impl Fired {
    /// The item enqueued, if this call enqueued one.
    pub fn enqueued(self) -> Option<Enqueued> {
        match self {
            Fired::Enqueued(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
