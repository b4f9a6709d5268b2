//! When a schedule's ticks fall: a cron expression in a time zone, or a
//! fixed interval on the multiples of its length since the Unix epoch.
//!
//! Cron expressions and time zones other than UTC need the `cron` feature
//! (it brings the cron parser and the time-zone database). Without it,
//! intervals work as ever, and a cron expression or a zone is
//! [`Error::Unsupported`], also when a stored schedule names one.

use std::fmt;
use std::time::Duration;

use crate::{Error, Result, Timestamp};

/// What a build without the `cron` feature answers for a cron expression
/// or a time zone other than UTC.
#[cfg(not(feature = "cron"))]
fn needs_cron(what: String) -> Error {
    Error::unsupported(format!(
        "{what} needs the `cron` feature of leaseq-core (or of leaseq)"
    ))
}

/// The time zone cron fields are read in: any IANA zone with the `cron`
/// feature, UTC alone without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Zone(#[cfg(feature = "cron")] chrono_tz::Tz);

impl Zone {
    /// Coordinated Universal Time, the default.
    #[cfg(feature = "cron")]
    pub(crate) const UTC: Zone = Zone(chrono_tz::Tz::UTC);
    /// Coordinated Universal Time, the default.
    #[cfg(not(feature = "cron"))]
    pub(crate) const UTC: Zone = Zone();

    /// The zone of IANA name `name`.
    pub(crate) fn parse(name: &str) -> Result<Zone> {
        #[cfg(feature = "cron")]
        {
            name.parse::<chrono_tz::Tz>()
                .map(Zone)
                .map_err(|_| Error::invalid(format!("unknown time zone {name:?}")))
        }
        #[cfg(not(feature = "cron"))]
        {
            if name == Zone::UTC.name() {
                Ok(Zone::UTC)
            } else {
                Err(needs_cron(format!("time zone {name:?}")))
            }
        }
    }

    /// The zone's IANA name.
    pub(crate) fn name(self) -> &'static str {
        #[cfg(feature = "cron")]
        {
            self.0.name()
        }
        #[cfg(not(feature = "cron"))]
        {
            "UTC"
        }
    }
}

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
    pub(crate) fn latest_at_or_before(&self, t: Timestamp, tz: Zone) -> Option<Timestamp> {
        match self {
            Cadence::Every(d) => {
                let every = u64::try_from(d.as_millis()).ok()?.max(1);
                Some(Timestamp::from_millis(t.as_millis() / every * every))
            }
            Cadence::Cron(c) => c.latest_at_or_before(t, tz),
        }
    }

    /// The first tick after `t`.
    pub(crate) fn first_after(&self, t: Timestamp, tz: Zone) -> Option<Timestamp> {
        match self {
            Cadence::Every(d) => {
                let every = u64::try_from(d.as_millis()).ok()?.max(1);
                let next = (t.as_millis() / every).checked_add(1)?.checked_mul(every)?;
                Some(Timestamp::from_millis(next))
            }
            Cadence::Cron(c) => c.first_after(t, tz),
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

/// A parsed cron expression with the text it came from. Only a build with
/// the `cron` feature parses one.
#[derive(Clone)]
pub struct CronExpr {
    expr: String,
    #[cfg(feature = "cron")]
    cron: Box<croner::Cron>,
}

impl CronExpr {
    /// Parses `expr`; [`Error::InvalidInput`] says what is wrong with it,
    /// and a build without the `cron` feature answers
    /// [`Error::Unsupported`].
    pub fn parse(expr: &str) -> Result<Self> {
        let expr = expr.trim();
        if expr.len() > 1_024 {
            return Err(Error::invalid(
                "a cron expression must be at most 1024 bytes",
            ));
        }
        #[cfg(feature = "cron")]
        {
            use std::str::FromStr;
            let cron = croner::Cron::from_str(expr)
                .map_err(|e| Error::invalid(format!("cron expression {expr:?}: {e}")))?;
            Ok(CronExpr {
                expr: expr.to_owned(),
                cron: Box::new(cron),
            })
        }
        #[cfg(not(feature = "cron"))]
        {
            Err(needs_cron(format!("cron expression {expr:?}")))
        }
    }

    /// The expression as written.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    #[cfg(feature = "cron")]
    fn latest_at_or_before(&self, t: Timestamp, tz: Zone) -> Option<Timestamp> {
        let prev = self
            .cron
            .find_previous_occurrence(&zoned::to(t, tz)?, true)
            .ok()?;
        zoned::from(&prev)
    }

    #[cfg(feature = "cron")]
    fn first_after(&self, t: Timestamp, tz: Zone) -> Option<Timestamp> {
        let next = self
            .cron
            .find_next_occurrence(&zoned::to(t, tz)?, false)
            .ok()?;
        zoned::from(&next)
    }

    // No `CronExpr` exists without the feature: `parse` is its only maker.
    #[cfg(not(feature = "cron"))]
    fn latest_at_or_before(&self, _: Timestamp, _: Zone) -> Option<Timestamp> {
        None
    }

    #[cfg(not(feature = "cron"))]
    fn first_after(&self, _: Timestamp, _: Zone) -> Option<Timestamp> {
        None
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

/// Instants as wall-clock times of a zone, for the cron parser.
#[cfg(feature = "cron")]
mod zoned {
    use chrono::TimeZone;

    use super::Zone;
    use crate::Timestamp;

    pub(super) fn to(t: Timestamp, tz: Zone) -> Option<chrono::DateTime<chrono_tz::Tz>> {
        let ms = i64::try_from(t.as_millis()).ok()?;
        tz.0.timestamp_millis_opt(ms).single()
    }

    pub(super) fn from(t: &chrono::DateTime<chrono_tz::Tz>) -> Option<Timestamp> {
        u64::try_from(t.timestamp_millis())
            .ok()
            .map(Timestamp::from_millis)
    }
}
