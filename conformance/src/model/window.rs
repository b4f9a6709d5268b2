//! Time in the model: a plain number of milliseconds, known exactly on a
//! manual clock and to within a window on a server's clock.

use std::fmt;

/// A span of backend time, in ms since the epoch, that surely holds the
/// instant it stands for. On a manual clock `lo == hi`; on a server's clock
/// the driver reads the backend's `now` before and after an operation, so the
/// operation's own "now" lies between the two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// The earliest the instant can be.
    pub lo: u64,
    /// The latest the instant can be.
    pub hi: u64,
}

impl Window {
    /// An instant known exactly.
    pub const fn exact(t: u64) -> Self {
        Window { lo: t, hi: t }
    }

    /// Between `lo` and `hi` (swapped if given in the wrong order).
    pub fn between(lo: u64, hi: u64) -> Self {
        Window {
            lo: lo.min(hi),
            hi: lo.max(hi),
        }
    }

    /// Every instant up to `hi`: what is known of a deadline a test hook set
    /// to "the backend's now" at a time no later than `hi`.
    pub const fn up_to(hi: u64) -> Self {
        Window { lo: 0, hi }
    }

    /// The window shifted `ms` later.
    #[must_use]
    pub const fn plus(self, ms: u64) -> Self {
        Window {
            lo: self.lo.saturating_add(ms),
            hi: self.hi.saturating_add(ms),
        }
    }

    /// True when `t` lies in the window.
    pub const fn contains(self, t: u64) -> bool {
        self.lo <= t && t <= self.hi
    }

    /// Whether this deadline has passed at `now`: `Some(true)` when it is
    /// surely earlier, `Some(false)` when surely later, `None` when the two
    /// windows touch. The model never decides on a deadline equal to now, so
    /// it does not care whether a backend counts that instant as passed.
    pub const fn passed_at(self, now: Window) -> Option<bool> {
        if self.hi < now.lo {
            Some(true)
        } else if self.lo > now.hi {
            Some(false)
        } else {
            None
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}ms", self.lo)
        } else {
            write!(f, "[{}ms, {}ms]", self.lo, self.hi)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_decide_only_when_apart() {
        let now = Window::between(100, 110);
        assert_eq!(Window::exact(99).passed_at(now), Some(true));
        assert_eq!(Window::exact(111).passed_at(now), Some(false));
        assert_eq!(Window::exact(100).passed_at(now), None);
        assert_eq!(Window::up_to(50).passed_at(now), Some(true));
        assert!(now.plus(5).contains(112));
    }
}
