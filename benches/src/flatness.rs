//! Whether a series of sizes stayed flat: the verdict of the steady
//! retention run ([`crate::retention_run`]).
//!
//! A store under a retention policy fills for one retention period, then
//! should hold still: items expire as fast as they arrive. The verdict
//! looks only at the samples after that fill (see [`window_start`]) and
//! fits a least-squares line through them; the series is flat when the
//! line moves by at most [`FLAT_DRIFT`] of the series' mean across the
//! window. A store that leaks grows steadily, so its line climbs with it,
//! while the saw-tooth of periodic collection (and the steps of a table
//! that doubles once) barely tilt it.

use serde::Serialize;

/// The most a flat series' fitted line may move across the window, as a
/// fraction of its mean.
pub const FLAT_DRIFT: f64 = 0.10;

/// How one series moved over the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trend {
    /// Samples in the window.
    pub samples: usize,
    /// The smallest value in the window.
    pub min: u64,
    /// The largest value in the window.
    pub max: u64,
    /// `max / min` (`min` taken as at least 1).
    pub ratio: f64,
    /// How far the least-squares line moved from the window's first sample
    /// to its last, as a fraction of the window's mean (0.1: it grew by
    /// 10% of the mean; 0 when the mean is 0).
    pub drift: f64,
}

impl Trend {
    /// The trend of `points` (seconds, value); `None` for fewer than two
    /// points or points that span no time.
    pub fn of(points: &[(f64, u64)]) -> Option<Trend> {
        let n = points.len();
        if n < 2 {
            return None;
        }
        let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n as f64;
        let mean_v = points.iter().map(|p| p.1 as f64).sum::<f64>() / n as f64;
        let (mut cov, mut var) = (0.0, 0.0);
        for &(t, v) in points {
            cov += (t - mean_t) * (v as f64 - mean_v);
            var += (t - mean_t) * (t - mean_t);
        }
        if var <= 0.0 {
            return None;
        }
        let span = points[n - 1].0 - points[0].0;
        let moved = cov / var * span;
        let min = points.iter().map(|p| p.1).min().unwrap_or(0);
        let max = points.iter().map(|p| p.1).max().unwrap_or(0);
        Some(Trend {
            samples: n,
            min,
            max,
            ratio: max as f64 / min.max(1) as f64,
            drift: if mean_v > 0.0 { moved / mean_v } else { 0.0 },
        })
    }

    /// Whether the series held flat: its line moved by at most
    /// [`FLAT_DRIFT`] of its mean, up or down.
    pub fn is_flat(&self) -> bool {
        self.drift.abs() <= FLAT_DRIFT
    }
}

/// Where the window of a run of `run_s` seconds starts: once the store has
/// filled for one retention period of `keep_age_s` and two collections
/// `collect_every_s` apart have run past it, and not before a third of the
/// run, so the verdict sees at least the last two thirds of it.
pub fn window_start(run_s: f64, keep_age_s: f64, collect_every_s: f64) -> f64 {
    (keep_age_s + 2.0 * collect_every_s).max(run_s / 3.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(f: impl Fn(f64) -> u64) -> Vec<(f64, u64)> {
        (0..60)
            .map(|k| f64::from(k) * 10.0)
            .map(|t| (t, f(t)))
            .collect()
    }

    #[test]
    fn a_steady_series_is_flat() {
        let t = Trend::of(&series(|_| 12_000)).expect("a trend");
        assert_eq!((t.min, t.max, t.samples), (12_000, 12_000, 60));
        assert!(t.drift.abs() < 1e-12 && t.is_flat());
    }

    #[test]
    fn the_saw_tooth_of_collection_is_flat() {
        // Climbs by 200 a sample and drops back every fifth sample.
        let t = Trend::of(&series(|t| 12_000 + ((t / 10.0) as u64 % 5) * 200)).expect("a trend");
        assert!(t.is_flat(), "{t:?}");
        assert!(t.ratio > 1.0);
    }

    #[test]
    fn a_leak_is_not_flat() {
        // 20 a second on top of 12,000: 12,000 to about 23,800 in the window.
        let t = Trend::of(&series(|t| 12_000 + (t * 20.0) as u64)).expect("a trend");
        assert!(!t.is_flat(), "{t:?}");
        assert!(t.drift > 0.5, "{t:?}");
        // A slow leak of 2% of the mean over the window stays within.
        let slow = Trend::of(&series(|t| 100_000 + (t * 3.0) as u64)).expect("a trend");
        assert!(slow.is_flat() && slow.drift > 0.0, "{slow:?}");
    }

    #[test]
    fn a_step_up_in_the_window_is_not_flat() {
        let late = Trend::of(&series(|t| if t < 400.0 { 1_000 } else { 2_000 })).expect("a trend");
        assert!(!late.is_flat(), "{late:?}");
        assert_eq!(late.ratio, 2.0);
    }

    #[test]
    fn too_few_points_or_no_time_give_no_trend() {
        assert_eq!(Trend::of(&[]), None);
        assert_eq!(Trend::of(&[(1.0, 5)]), None);
        assert_eq!(Trend::of(&[(1.0, 5), (1.0, 7)]), None);
        let zero = Trend::of(&[(0.0, 0), (1.0, 0)]).expect("a trend");
        assert!(zero.is_flat() && zero.ratio == 0.0);
    }

    #[test]
    fn the_window_starts_after_one_retention_period_and_a_third_of_the_run() {
        assert_eq!(window_start(600.0, 60.0, 5.0), 200.0);
        assert_eq!(window_start(600.0, 300.0, 5.0), 310.0);
    }
}
