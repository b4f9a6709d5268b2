//! Finished items: how long a queue keeps them ([`Retention`]), and what a
//! kept one records ([`Finished`]). See [`crate::History`].

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::{Error, ItemId, Result, Timestamp};

/// How an item ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ending {
    /// Acked, or completed with a result ([`crate::History::complete`]).
    Completed,
    /// Cancelled ([`crate::Control::cancel`]), at once or when its lease
    /// ended.
    Cancelled,
}

impl Ending {
    /// Both endings, in this order.
    pub const ALL: [Ending; 2] = [Ending::Completed, Ending::Cancelled];

    /// The lowercase name, as used in storage and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Completed => "completed",
            Ending::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Ending {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ending::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown ending {s:?}; expected completed or cancelled"
                ))
            })
    }
}

/// How many items of one ending a queue keeps, and for how long. Both
/// bounds hold at once: an item goes when it is older than `max_age` or
/// when `max_count` newer ones are kept.
///
/// ```
/// use leaseq_core::Keep;
/// use std::time::Duration;
/// let day = Keep::for_age(Duration::from_secs(86_400)).at_most(10_000);
/// assert!(day.keeps_any() && !Keep::NOTHING.keeps_any());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Keep {
    /// Kept at most this long after it finished; `None`: no age bound.
    pub max_age: Option<Duration>,
    /// At most this many kept (the newest); `None`: no count bound.
    pub max_count: Option<u64>,
}

impl Keep {
    /// Keeps nothing: the item is gone when it finishes.
    pub const NOTHING: Keep = Keep {
        max_age: None,
        max_count: Some(0),
    };

    /// Keeps every item until it is removed by hand.
    pub const FOREVER: Keep = Keep {
        max_age: None,
        max_count: None,
    };

    /// Keeps items for `age` after they finish.
    pub fn for_age(age: Duration) -> Keep {
        Keep {
            max_age: Some(age),
            max_count: None,
        }
    }

    /// Keeps at most the newest `n` items.
    pub fn count(n: u64) -> Keep {
        Keep {
            max_age: None,
            max_count: Some(n),
        }
    }

    /// This policy, with at most the newest `n` items kept.
    #[must_use]
    pub fn at_most(mut self, n: u64) -> Keep {
        self.max_count = Some(n);
        self
    }

    /// False when the policy keeps nothing at all.
    pub fn keeps_any(&self) -> bool {
        self.max_count != Some(0) && self.max_age != Some(Duration::ZERO)
    }
}

/// A queue's retention policy ([`crate::History::set_retention`]).
///
/// The default keeps nothing that finished, as a backend without history
/// does: an acked or cancelled item is gone at once. Dead letters are not
/// finished: they stay in the queue until redriven or removed, and by
/// default for ever; [`Retention::dead`] bounds them.
///
/// ```
/// use leaseq_core::{Keep, Retention};
/// use std::time::Duration;
/// let policy = Retention::default()
///     .completed(Keep::for_age(Duration::from_secs(3600)).at_most(1_000))
///     .cancelled(Keep::count(100));
/// assert!(policy.keeps_any());
/// assert!(!Retention::default().keeps_any());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Completed items.
    pub completed: Keep,
    /// Cancelled items.
    pub cancelled: Keep,
    /// Dead letters, by the time they died: [`crate::History::collect`]
    /// removes those older than `max_age` and the oldest beyond
    /// `max_count`. [`Keep::FOREVER`] by default.
    pub dead: Keep,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            completed: Keep::NOTHING,
            cancelled: Keep::NOTHING,
            dead: Keep::FOREVER,
        }
    }
}

impl Retention {
    /// This policy, keeping completed items as `keep` says.
    #[must_use]
    pub fn completed(mut self, keep: Keep) -> Self {
        self.completed = keep;
        self
    }

    /// This policy, keeping cancelled items as `keep` says.
    #[must_use]
    pub fn cancelled(mut self, keep: Keep) -> Self {
        self.cancelled = keep;
        self
    }

    /// This policy, with dead letters kept as `keep` says.
    #[must_use]
    pub fn dead(mut self, keep: Keep) -> Self {
        self.dead = keep;
        self
    }

    /// True when dead letters have a bound (age or count).
    pub fn bounds_dead(&self) -> bool {
        self.dead != Keep::FOREVER
    }

    /// The policy for one ending.
    pub fn of(&self, ending: Ending) -> Keep {
        match ending {
            Ending::Completed => self.completed,
            Ending::Cancelled => self.cancelled,
        }
    }

    /// False when the policy keeps no finished item.
    pub fn keeps_any(&self) -> bool {
        self.completed.keeps_any() || self.cancelled.keeps_any()
    }

    /// Checks the bounds: ages within [`MAX_RETENTION_AGE`].
    pub fn check(&self) -> Result<()> {
        let kinds = [
            ("completed", self.completed),
            ("cancelled", self.cancelled),
            ("dead", self.dead),
        ];
        for (what, keep) in kinds {
            if let Some(age) = keep.max_age {
                if age > MAX_RETENTION_AGE {
                    return Err(Error::invalid(format!(
                        "{what} items kept for {age:?}; the most is {MAX_RETENTION_AGE:?}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The longest age a retention policy may keep items for: ten years.
pub const MAX_RETENTION_AGE: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// The largest result a handler may return, in bytes
/// ([`crate::History::complete`]).
pub const MAX_RESULT_LEN: usize = 512 * 1024;

/// Checks a result's size against [`MAX_RESULT_LEN`].
pub fn check_result(result: &[u8]) -> Result<()> {
    if result.len() > MAX_RESULT_LEN {
        return Err(Error::invalid(format!(
            "the result is {} bytes; the limit is {MAX_RESULT_LEN}",
            result.len()
        )));
    }
    Ok(())
}

/// One kept finished item ([`crate::History::finished`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The item's id.
    pub id: ItemId,
    /// How it ended.
    pub ending: Ending,
    /// When it ended, on the backend's clock.
    pub finished_at: Timestamp,
    /// When the enqueue that created it ran, on the backend's clock.
    pub enqueued_at: Timestamp,
    /// Claims made, the last one included (0 for an item cancelled before
    /// any claim).
    pub attempts: u32,
    /// Its payload.
    pub payload: Bytes,
    /// The reason given by its last `fail` (or the reaper), if any.
    pub last_error: Option<String>,
    /// What the handler returned ([`crate::History::complete`]); `None`
    /// for an item acked without one, and for a cancelled item.
    pub result: Option<Bytes>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_say_whether_they_keep_anything() {
        assert!(!Keep::NOTHING.keeps_any());
        assert!(!Keep::for_age(Duration::ZERO).keeps_any());
        assert!(Keep::FOREVER.keeps_any());
        assert!(Keep::count(1).keeps_any());
        let r = Retention::default().cancelled(Keep::count(3));
        assert!(r.keeps_any());
        assert_eq!(r.of(Ending::Cancelled), Keep::count(3));
        assert_eq!(r.of(Ending::Completed), Keep::NOTHING);
    }

    #[test]
    fn bounds_are_checked() {
        let long = Retention::default().completed(Keep::for_age(MAX_RETENTION_AGE * 2));
        assert!(matches!(long.check(), Err(Error::InvalidInput { .. })));
        let long = Retention::default().dead(Keep::for_age(MAX_RETENTION_AGE * 2));
        assert!(matches!(long.check(), Err(Error::InvalidInput { .. })));
        assert!(!Retention::default().bounds_dead());
        assert!(Retention::default().dead(Keep::count(5)).bounds_dead());
        assert!(Retention::default().check().is_ok());
        assert!(check_result(&vec![0; MAX_RESULT_LEN]).is_ok());
        assert!(check_result(&vec![0; MAX_RESULT_LEN + 1]).is_err());
    }

    #[test]
    fn endings_parse_their_names() {
        for e in Ending::ALL {
            assert_eq!(e.as_str().parse::<Ending>().ok(), Some(e));
        }
        assert!("done".parse::<Ending>().is_err());
    }
}
