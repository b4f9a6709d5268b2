//! Growing waits between tries: one rule for a worker's retries of a
//! failed job, its failed claims, settling a lost reply, and a listener's
//! reconnects.
//!
//! ```
//! use leaseq_core::backoff::{grown, Backoff};
//! use std::time::Duration;
//!
//! let ms = Duration::from_millis;
//! assert_eq!(grown(ms(100), 2.0, 3, ms(500)), ms(500));
//! let mut b = Backoff::new(ms(50), ms(150));
//! assert_eq!([b.next_wait(), b.next_wait(), b.next_wait()], [ms(50), ms(100), ms(150)]);
//! b.reset();
//! assert_eq!(b.next_wait(), ms(50));
//! ```

use std::time::Duration;

/// `first × factor^n`, at most `max`: the `n`-th wait (from 0) of a
/// backoff. A result that is not finite (a huge `n`) is `max`.
pub fn grown(first: Duration, factor: f64, n: u32, max: Duration) -> Duration {
    let exp = i32::try_from(n.min(1_024)).unwrap_or(1_024);
    let secs = first.as_secs_f64() * factor.powi(exp);
    if !secs.is_finite() || secs >= max.as_secs_f64() {
        max
    } else {
        Duration::from_secs_f64(secs.max(0.0))
    }
}

/// Doubling waits from `first` up to `max`, started again by
/// [`Backoff::reset`] after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    tries: u32,
}

impl Backoff {
    /// Waits of `first`, then twice as long each time, at most `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            tries: 0,
        }
    }

    /// The wait before the next try.
    pub fn next_wait(&mut self) -> Duration {
        let d = grown(self.first, 2.0, self.tries, self.max);
        self.tries = self.tries.saturating_add(1);
        d
    }

    /// Starts again from `first`.
    pub fn reset(&mut self) {
        self.tries = 0;
    }
}
