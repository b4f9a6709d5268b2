//! Global per-queue limits: at most K items Leased at once (concurrency) and
//! at most N items claimed per window of the backend's clock (rate), stored
//! in the backend so every worker on every machine obeys the same numbers.
//!
//! ```
//! use std::time::Duration;
//! use leaseq_core::{QueueLimits, Rate};
//!
//! // At most 3 at once, and 5 claims per second.
//! let limits = QueueLimits::NONE.concurrency(3).rate(Rate::new(5, Duration::from_secs(1))?);
//! assert_eq!(limits.to_string(), "concurrency 3, rate 5/1s");
//! assert_eq!("100/500ms".parse::<Rate>()?, Rate::new(100, Duration::from_millis(500))?);
//! # Ok::<(), leaseq_core::Error>(())
//! ```
//!
//! # Where they are enforced
//! Inside the claim's one atomic step, by the backend: a Lua script reads
//! the limits next to the queue's indexes on Redis, a transaction holds the
//! queue's limits row on PostgreSQL and SQLite, the queue's lock in memory.
//! A limit kept in a client would be per process, not global.
//!
//! # Concurrency
//! Every item of the queue that is Leased counts, expired leases not yet
//! reaped included: a reap (any worker's background reaper) frees their
//! slots. Ack, release, give back and fail free a slot at once.
//!
//! # Rate: fixed windows
//! Window `i` covers `[i * per, (i + 1) * per)` milliseconds since the Unix
//! epoch on the backend's clock. The items leased by claims within one
//! window add up to at most N. Windows are fixed, not sliding: up to 2N
//! claims can fall within one `per` that straddles a window boundary, never
//! more than N within one window. A claim the rate cuts short says when the
//! window ends ([`crate::Claimed::retry_after`]).
//!
//! A claim whose reply was lost and is recovered
//! ([`crate::Backend::recover_claim`]) took its slots when it ran; the
//! recovery takes none.
//!
//! # Pure helpers for backends
//! [`Admission`] does the arithmetic a backend runs inside its atomic step,
//! so every backend cuts claims and computes `retry_after` the same way.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::{Error, Result};

/// The most a concurrency limit or a rate's claims may be (what a signed
/// 32-bit column holds).
pub const MAX_LIMIT: u32 = i32::MAX as u32;

/// The longest rate window.
pub const MAX_RATE_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// What a claim cut short by a concurrency limit suggests as
/// [`crate::Claimed::retry_after`]: slots free when another worker acks,
/// which no backend announces, so this is a short, bounded poll.
pub const CONCURRENCY_RETRY: Duration = Duration::from_millis(100);

/// How a backend enforces [`QueueLimits`]: its
/// [`crate::Throttles::scope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitScope {
    /// The limits hold over the whole queue, exactly as set.
    Global,
    /// The queue is split over this many shards and each shard enforces
    /// its share of every limit (see [`crate::layer::shard`]): the sum
    /// holds over the queue, a limit below the shard count is refused, and
    /// a shard whose share is spent waits while another has room.
    Split {
        /// The shards per queue.
        shards: u16,
    },
}

/// A rate: at most `claims` items claimed per window of `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    claims: u32,
    per: Duration,
}

impl Rate {
    /// `claims` (1 to [`MAX_LIMIT`]) per window of `per` (1 ms to
    /// [`MAX_RATE_WINDOW`], whole milliseconds).
    ///
    /// # Contract
    /// Any other value is [`Error::InvalidInput`].
    pub fn new(claims: u32, per: Duration) -> Result<Self> {
        if claims == 0 || claims > MAX_LIMIT {
            return Err(Error::invalid(format!(
                "a rate allows 1 to {MAX_LIMIT} claims per window, not {claims}"
            )));
        }
        if per < Duration::from_millis(1) || per > MAX_RATE_WINDOW {
            return Err(Error::invalid(format!(
                "a rate window is 1 ms to {MAX_RATE_WINDOW:?}, not {per:?}"
            )));
        }
        if !per.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid(format!(
                "a rate window is whole milliseconds, not {per:?}"
            )));
        }
        Ok(Rate { claims, per })
    }

    /// Claims allowed per window.
    pub fn claims(&self) -> u32 {
        self.claims
    }

    /// The window.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// The window in milliseconds (at least 1).
    pub fn per_millis(&self) -> u64 {
        u64::try_from(self.per.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

impl fmt::Display for Rate {
    /// `N/<window>`, e.g. `5/1s`, `100/250ms`, `10/1m`, `1/2h`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.per_millis();
        let (n, unit) = if ms.is_multiple_of(3_600_000) {
            (ms / 3_600_000, "h")
        } else if ms.is_multiple_of(60_000) {
            (ms / 60_000, "m")
        } else if ms.is_multiple_of(1_000) {
            (ms / 1_000, "s")
        } else {
            (ms, "ms")
        };
        write!(f, "{}/{n}{unit}", self.claims)
    }
}

impl FromStr for Rate {
    type Err = Error;

    /// Parses `N/<window>`: the window is a whole number (1 when left out)
    /// and a unit, `ms`, `s`, `m` or `h`: `5/1s`, `5/s`, `100/250ms`,
    /// `60/1m`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(format!(
                "rate {s:?} is not N/<window> (e.g. 5/1s, 100/250ms, 60/1m)"
            ))
        };
        let (n, window) = s.trim().split_once('/').ok_or_else(bad)?;
        let claims: u32 = n.trim().parse().map_err(|_| bad())?;
        let window = window.trim();
        let digits = window.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (count, unit) = window.split_at(digits);
        let count: u64 = if count.is_empty() {
            1
        } else {
            count.parse().map_err(|_| bad())?
        };
        let unit_ms: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(bad()),
        };
        let ms = count.checked_mul(unit_ms).ok_or_else(bad)?;
        Rate::new(claims, Duration::from_millis(ms))
    }
}

/// The global limits of one queue. [`QueueLimits::NONE`] (the default) is
/// no limit at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueueLimits {
    /// At most this many items Leased at once (1 to [`MAX_LIMIT`]).
    pub concurrency: Option<u32>,
    /// At most this many items claimed per window.
    pub rate: Option<Rate>,
}

impl QueueLimits {
    /// Limits as a store keeps them: a concurrency, a rate's count and its
    /// window in milliseconds, each `None` when unset (a rate needs both).
    /// A value no [`QueueLimits::check`] lets through (negative, or past
    /// [`MAX_LIMIT`]) is [`Error::Corrupt`]. What every backend that keeps
    /// limits as numbers decodes them with.
    pub fn from_stored(
        concurrency: Option<i64>,
        rate: Option<i64>,
        per_ms: Option<i64>,
    ) -> Result<QueueLimits> {
        let limit = |v: Option<i64>, what: &str| -> Result<Option<u32>> {
            v.map(|n| {
                u32::try_from(n).map_err(|_| Error::Corrupt {
                    what: format!("{what} limit {n} is out of range"),
                })
            })
            .transpose()
        };
        let rate = match (limit(rate, "rate")?, per_ms) {
            (Some(n), Some(per)) => {
                let per = u64::try_from(per).map_err(|_| Error::Corrupt {
                    what: format!("rate window {per} ms is negative"),
                })?;
                Some(Rate::new(n, Duration::from_millis(per))?)
            }
            _ => None,
        };
        Ok(QueueLimits {
            concurrency: limit(concurrency, "concurrency")?,
            rate,
        })
    }

    /// No limit.
    pub const NONE: QueueLimits = QueueLimits {
        concurrency: None,
        rate: None,
    };

    /// With a concurrency limit of `k`.
    #[must_use]
    pub const fn concurrency(mut self, k: u32) -> Self {
        self.concurrency = Some(k);
        self
    }

    /// With `rate`.
    #[must_use]
    pub const fn rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// True when neither limit is set.
    pub fn is_none(&self) -> bool {
        self.concurrency.is_none() && self.rate.is_none()
    }

    /// Checks the values (a [`Rate`] is checked where it is built).
    ///
    /// # Contract
    /// A concurrency of 0 or over [`MAX_LIMIT`] is
    /// [`Error::InvalidInput`]; use `None` for no limit.
    pub fn check(&self) -> Result<()> {
        if let Some(k) = self.concurrency {
            if k == 0 || k > MAX_LIMIT {
                return Err(Error::invalid(format!(
                    "a concurrency limit is 1 to {MAX_LIMIT}, not {k} (leave it unset for no limit)"
                )));
            }
        }
        if let Some(r) = self.rate {
            Rate::new(r.claims, r.per)?;
        }
        Ok(())
    }
}

impl fmt::Display for QueueLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.concurrency, self.rate) {
            (None, None) => f.write_str("no limits"),
            (Some(k), None) => write!(f, "concurrency {k}"),
            (None, Some(r)) => write!(f, "rate {r}"),
            (Some(k), Some(r)) => write!(f, "concurrency {k}, rate {r}"),
        }
    }
}

/// The claims counted in the current rate window, as a backend stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateWindow {
    /// The window's start, in ms since the epoch (a multiple of `per`).
    pub start_ms: u64,
    /// Items leased within it.
    pub used: u64,
}

/// What the limits allow one claim, worked out inside the claim's atomic
/// step from the stored limits, the queue's live lease count and the rate
/// window.
///
/// ```
/// use std::time::Duration;
/// use leaseq_core::queue_limits::{Admission, RateWindow};
/// use leaseq_core::{QueueLimits, Rate};
///
/// let limits = QueueLimits::NONE.rate(Rate::new(5, Duration::from_secs(1))?);
/// // 3 claimed in the window that started at 10 000 ms; now is 10 400 ms.
/// let a = Admission::new(&limits, 10_400, 0, Some(RateWindow { start_ms: 10_000, used: 3 }), 10);
/// assert_eq!(a.allow(), 2);
/// // The claim leased both: it was cut short, back when the window ends.
/// assert_eq!(a.retry_after(2), Some(Duration::from_millis(600)));
/// assert_eq!(a.window_after(2), Some(RateWindow { start_ms: 10_000, used: 5 }));
/// # Ok::<(), leaseq_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    max: u32,
    allow: u32,
    /// The rate window in force: (start, used before this claim, per ms).
    window: Option<(u64, u64, u64)>,
    now_ms: u64,
    concurrency_binds: bool,
    rate_binds: bool,
}

impl Admission {
    /// What `limits` allow a claim of up to `max` at `now_ms` (the backend's
    /// clock), with `leased` items of the queue Leased (expired ones not
    /// yet reaped included) and `stored` the window the backend keeps (a
    /// window other than the current one counts as empty).
    pub fn new(
        limits: &QueueLimits,
        now_ms: u64,
        leased: u64,
        stored: Option<RateWindow>,
        max: u32,
    ) -> Self {
        let mut allow = u64::from(max);
        let mut concurrency_left = u64::MAX;
        if let Some(k) = limits.concurrency {
            concurrency_left = u64::from(k).saturating_sub(leased);
            allow = allow.min(concurrency_left);
        }
        let mut window = None;
        let mut rate_left = u64::MAX;
        if let Some(rate) = limits.rate {
            let per = rate.per_millis();
            let start = now_ms - now_ms % per;
            let used = match stored {
                Some(w) if w.start_ms == start => w.used,
                _ => 0,
            };
            rate_left = u64::from(rate.claims).saturating_sub(used);
            allow = allow.min(rate_left);
            window = Some((start, used, per));
        }
        let allow = u32::try_from(allow).unwrap_or(max);
        Admission {
            max,
            allow,
            window,
            now_ms,
            concurrency_binds: concurrency_left == u64::from(allow) && allow < max,
            rate_binds: rate_left == u64::from(allow) && allow < max,
        }
    }

    /// How many items the claim may lease.
    pub fn allow(&self) -> u32 {
        self.allow
    }

    /// True when a limit cuts this claim below its `max`.
    pub fn is_cut(&self) -> bool {
        self.allow < self.max
    }

    /// What the claim reports as [`crate::Claimed::retry_after`] after
    /// leasing `got` items: `None` unless a limit cut it (it leased all
    /// it was allowed, fewer than asked). Then: for the rate, until the
    /// window ends; for concurrency, [`CONCURRENCY_RETRY`]; when both bind,
    /// the longer.
    pub fn retry_after(&self, got: u32) -> Option<Duration> {
        if !self.is_cut() || got < self.allow {
            return None;
        }
        let mut wait = None;
        if self.concurrency_binds {
            wait = Some(CONCURRENCY_RETRY);
        }
        if self.rate_binds {
            if let Some((start, _, per)) = self.window {
                let end = start.saturating_add(per);
                let left = Duration::from_millis(end.saturating_sub(self.now_ms).max(1));
                wait = Some(wait.map_or(left, |w: Duration| w.max(left)));
            }
        }
        wait
    }

    /// The rate window to store after the claim leased `got` items; `None`
    /// when no rate is set (nothing to store).
    pub fn window_after(&self, got: u32) -> Option<RateWindow> {
        self.window.map(|(start, used, _)| RateWindow {
            start_ms: start,
            used: used.saturating_add(u64::from(got)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_limits_decode_or_are_corrupt() {
        assert_eq!(
            QueueLimits::from_stored(None, None, None).expect("none"),
            QueueLimits::NONE
        );
        let both = QueueLimits::from_stored(Some(3), Some(10), Some(1_000)).expect("both");
        assert_eq!(both, QueueLimits::NONE.concurrency(3).rate(rate(10, 1_000)));
        // A rate needs its window.
        assert_eq!(
            QueueLimits::from_stored(None, Some(10), None).expect("no window"),
            QueueLimits::NONE
        );
        for (c, r, p) in [
            (Some(-1), None, None),
            (None, Some(-2), Some(5)),
            (None, Some(1), Some(-5)),
        ] {
            assert!(
                matches!(
                    QueueLimits::from_stored(c, r, p),
                    Err(Error::Corrupt { .. })
                ),
                "{c:?} {r:?} {p:?}"
            );
        }
    }

    fn rate(n: u32, ms: u64) -> Rate {
        Rate::new(n, Duration::from_millis(ms)).expect("rate")
    }

    #[test]
    fn rates_parse_and_print() {
        for (s, n, ms, shown) in [
            ("5/1s", 5, 1_000, "5/1s"),
            ("5/s", 5, 1_000, "5/1s"),
            ("100/250ms", 100, 250, "100/250ms"),
            (" 60 / 1m ", 60, 60_000, "60/1m"),
            ("1/2h", 1, 7_200_000, "1/2h"),
            ("7/1500ms", 7, 1_500, "7/1500ms"),
        ] {
            let r: Rate = s.parse().expect(s);
            assert_eq!(r, rate(n, ms), "{s}");
            assert_eq!(r.to_string(), shown);
        }
        for bad in [
            "", "5", "5/", "/1s", "0/1s", "5/0s", "5/1d", "x/1s", "5/1.5s", "5/25h", "-1/1s",
        ] {
            assert!(
                matches!(bad.parse::<Rate>(), Err(Error::InvalidInput { .. })),
                "{bad:?}"
            );
        }
        assert!(Rate::new(1, Duration::from_micros(1500)).is_err());
    }

    #[test]
    fn limits_check_their_values() {
        assert!(QueueLimits::NONE.check().is_ok());
        assert!(QueueLimits::NONE.concurrency(0).check().is_err());
        assert!(QueueLimits::NONE
            .concurrency(MAX_LIMIT + 1)
            .check()
            .is_err());
        assert!(QueueLimits::NONE.concurrency(1).check().is_ok());
        assert_eq!(QueueLimits::NONE.to_string(), "no limits");
    }

    #[test]
    fn concurrency_cuts_to_the_free_slots() {
        let l = QueueLimits::NONE.concurrency(3);
        let a = Admission::new(&l, 0, 1, None, 10);
        assert_eq!(a.allow(), 2);
        assert_eq!(a.retry_after(2), Some(CONCURRENCY_RETRY));
        // Fewer claimable than allowed: the limit did not stop it.
        assert_eq!(a.retry_after(1), None);
        assert_eq!(a.window_after(2), None);
        let full = Admission::new(&l, 0, 5, None, 10);
        assert_eq!(
            (full.allow(), full.retry_after(0)),
            (0, Some(CONCURRENCY_RETRY))
        );
        let roomy = Admission::new(&l, 0, 0, None, 2);
        assert_eq!((roomy.allow(), roomy.retry_after(2)), (2, None));
    }

    #[test]
    fn rate_counts_per_fixed_window() {
        let l = QueueLimits::NONE.rate(rate(5, 1_000));
        // A stale window counts as empty.
        let a = Admission::new(
            &l,
            12_250,
            0,
            Some(RateWindow {
                start_ms: 11_000,
                used: 5,
            }),
            8,
        );
        assert_eq!(a.allow(), 5);
        assert_eq!(a.retry_after(5), Some(Duration::from_millis(750)));
        assert_eq!(
            a.window_after(5),
            Some(RateWindow {
                start_ms: 12_000,
                used: 5
            })
        );
        let spent = Admission::new(&l, 12_999, 0, a.window_after(5), 1);
        assert_eq!(spent.allow(), 0);
        assert_eq!(spent.retry_after(0), Some(Duration::from_millis(1)));
        let next = Admission::new(&l, 13_000, 0, a.window_after(5), 1);
        assert_eq!((next.allow(), next.retry_after(1)), (1, None));
    }

    #[test]
    fn both_limits_wait_for_the_longer() {
        let l = QueueLimits::NONE.concurrency(2).rate(rate(2, 60_000));
        let a = Admission::new(&l, 1_000, 0, None, 5);
        assert_eq!(a.allow(), 2);
        assert_eq!(a.retry_after(2), Some(Duration::from_millis(59_000)));
    }
}
