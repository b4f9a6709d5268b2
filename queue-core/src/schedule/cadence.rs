//! When a schedule's ticks fall: a cron expression in a time zone, or a
//! fixed interval on the multiples of its length since the Unix epoch.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::TimeZone;

use crate::{Error, Result, Timestamp};

/// The ticks of a schedule.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Cadence {
    /// A cron expression, read in the schedule's time zone.
    Cron(CronExpr),
    /// A fixed interval: ticks at every multiple of it since the Unix epoch.
    Every(Duration),
}

impl Cadence {
    /// A cron cadence: 5 fields, or 6 with seconds first.
    pub fn cron(expr: &str) -> Result<Self> {
        Ok(Cadence::Cron(CronExpr::parse(expr)?))
    }

    /// An interval cadence: at least 1 ms, in whole milliseconds.
    pub fn every(every: Duration) -> Result<Self> {
        if every < Duration::from_millis(1) || !every.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid(format!(
                "an interval must be at least 1 ms, in whole milliseconds, not {every:?}"
            )));
        }
        if every > crate::limits::MAX_DELAY {
            return Err(Error::invalid(format!(
                "an interval must be at most {:?}, not {every:?}",
                crate::limits::MAX_DELAY
            )));
        }
        Ok(Cadence::Every(every))
    }

    /// The latest tick at or before `t`.
    pub(crate) fn latest_at_or_before(&self, t: Timestamp, tz: chrono_tz::Tz) -> Option<Timestamp> {
        match self {
            Cadence::Every(d) => {
                let every = u64::try_from(d.as_millis()).ok()?.max(1);
                Some(Timestamp::from_millis(t.as_millis() / every * every))
            }
            Cadence::Cron(c) => {
                let at = to_zoned(t, tz)?;
                let prev = c.cron.find_previous_occurrence(&at, true).ok()?;
                from_zoned(&prev)
            }
        }
    }

    /// The first tick after `t`.
    pub(crate) fn first_after(&self, t: Timestamp, tz: chrono_tz::Tz) -> Option<Timestamp> {
        match self {
            Cadence::Every(d) => {
                let every = u64::try_from(d.as_millis()).ok()?.max(1);
                let next = (t.as_millis() / every).checked_add(1)?.checked_mul(every)?;
                Some(Timestamp::from_millis(next))
            }
            Cadence::Cron(c) => {
                let at = to_zoned(t, tz)?;
                let next = c.cron.find_next_occurrence(&at, false).ok()?;
                from_zoned(&next)
            }
        }
    }
}

impl fmt::Debug for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cadence::Cron(c) => write!(f, "cron {:?}", c.expr()),
            Cadence::Every(d) => write!(f, "every {d:?}"),
        }
    }
}

/// A parsed cron expression with the text it came from.
#[derive(Clone)]
pub struct CronExpr {
    expr: String,
    cron: Box<croner::Cron>,
}

impl CronExpr {
    /// Parses `expr`; [`Error::InvalidInput`] says what is wrong with it.
    pub fn parse(expr: &str) -> Result<Self> {
        let expr = expr.trim();
        if expr.len() > 1_024 {
            return Err(Error::invalid(
                "a cron expression must be at most 1024 bytes",
            ));
        }
        let cron = croner::Cron::from_str(expr)
            .map_err(|e| Error::invalid(format!("cron expression {expr:?}: {e}")))?;
        Ok(CronExpr {
            expr: expr.to_owned(),
            cron: Box::new(cron),
        })
    }

    /// The expression as written.
    pub fn expr(&self) -> &str {
        &self.expr
    }
}

impl PartialEq for CronExpr {
    fn eq(&self, other: &Self) -> bool {
        self.expr == other.expr
    }
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.expr, f)
    }
}

fn to_zoned(t: Timestamp, tz: chrono_tz::Tz) -> Option<chrono::DateTime<chrono_tz::Tz>> {
    let ms = i64::try_from(t.as_millis()).ok()?;
    tz.timestamp_millis_opt(ms).single()
}

fn from_zoned(t: &chrono::DateTime<chrono_tz::Tz>) -> Option<Timestamp> {
    u64::try_from(t.timestamp_millis())
        .ok()
        .map(Timestamp::from_millis)
}
