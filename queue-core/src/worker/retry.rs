//! How long a failed job waits before its next attempt.

use std::time::Duration;

use crate::limits::MAX_DELAY;

/// Exponential backoff with jitter, and an optional cap on attempts.
///
/// The n-th failure (n = the attempts the item has had, from 1) waits
/// `base * factor^(n-1)`, capped at `max_delay`, then shortened by a random
/// share of up to `jitter` of itself, so retries of many items spread out
/// instead of arriving together.
///
/// ```
/// use leaseq_core::RetryPolicy;
/// use std::time::Duration;
/// let policy = RetryPolicy::exponential(Duration::from_secs(1)).jitter(0.0);
/// assert_eq!(policy.delay_for(1), Duration::from_secs(1));
/// assert_eq!(policy.delay_for(3), Duration::from_secs(4));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    base: Duration,
    factor: f64,
    max_delay: Duration,
    jitter: f64,
    max_attempts: Option<u32>,
}

impl RetryPolicy {
    /// Doubling delays from `base`, at most 10 minutes, 20% jitter, attempts
    /// capped only by each item's own `max_attempts`.
    pub fn exponential(base: Duration) -> Self {
        RetryPolicy {
            base,
            factor: 2.0,
            max_delay: Duration::from_secs(600),
            jitter: 0.2,
            max_attempts: None,
        }
    }

    /// Retries at once, with no delay.
    pub fn immediate() -> Self {
        Self::exponential(Duration::ZERO).jitter(0.0)
    }

    /// The growth factor between attempts (values below 1 count as 1).
    #[must_use]
    pub fn factor(mut self, factor: f64) -> Self {
        self.factor = if factor.is_finite() && factor >= 1.0 {
            factor
        } else {
            1.0
        };
        self
    }

    /// The longest delay.
    #[must_use]
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay.min(MAX_DELAY);
        self
    }

    /// The largest share (0 to 1) of a delay that jitter may take off.
    #[must_use]
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// Gives up after this many attempts even when the item allows more
    /// (the smaller of the two wins).
    #[must_use]
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts.max(1));
        self
    }

    /// The attempt cap set with [`RetryPolicy::max_attempts`], if any.
    pub fn attempt_cap(&self) -> Option<u32> {
        self.max_attempts
    }

    /// The delay before the next attempt, without jitter, after `attempts`
    /// attempts failed.
    pub fn base_delay(&self, attempts: u32) -> Duration {
        crate::backoff::grown(
            self.base,
            self.factor,
            attempts.saturating_sub(1),
            self.max_delay,
        )
    }

    /// The delay before the next attempt, with jitter, after `attempts`
    /// attempts failed. Always within `[base_delay * (1 - jitter), base_delay]`.
    pub fn delay_for(&self, attempts: u32) -> Duration {
        let base = self.base_delay(attempts);
        if self.jitter == 0.0 || base.is_zero() {
            return base;
        }
        base.mul_f64(1.0 - self.jitter * unit_random())
    }

    /// True when a job that failed on attempt `attempts` of `item_max` gets
    /// no further attempt.
    pub fn is_exhausted(&self, attempts: u32, item_max: u32) -> bool {
        let max = self.max_attempts.map_or(item_max, |m| m.min(item_max));
        attempts >= max
    }
}

impl Default for RetryPolicy {
    /// Exponential from 1 second.
    fn default() -> Self {
        Self::exponential(Duration::from_secs(1))
    }
}

/// A random number in `[0, 1)`.
fn unit_random() -> f64 {
    rand::random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_then_cap() {
        let p = RetryPolicy::exponential(Duration::from_millis(100))
            .jitter(0.0)
            .max_delay(Duration::from_millis(500));
        let got: Vec<_> = (1..=5).map(|n| p.delay_for(n).as_millis()).collect();
        assert_eq!(got, vec![100, 200, 400, 500, 500]);
        assert_eq!(p.delay_for(10_000), Duration::from_millis(500));
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let p = RetryPolicy::exponential(Duration::from_secs(8)).jitter(0.5);
        for _ in 0..200 {
            let d = p.delay_for(1);
            assert!(d <= Duration::from_secs(8) && d >= Duration::from_secs(4));
        }
    }

    #[test]
    fn the_smaller_attempt_cap_wins() {
        let p = RetryPolicy::default();
        assert!(!p.is_exhausted(2, 3));
        assert!(p.is_exhausted(3, 3));
        let p = p.max_attempts(2);
        assert!(p.is_exhausted(2, 25));
        assert!(RetryPolicy::default().factor(f64::NAN).delay_for(9) <= Duration::from_secs(1));
    }
}
