//! Bounded GC (INV-7): what a reap costs grows with the expired leases it
//! recovers, not with the live ones it must leave alone.
//!
//! Measured rather than counted: no hook can count the rows a SQL
//! statement visits or the entries a script reads, and a reaper that scans
//! is slow whatever it reports. Two backends from the factory hold 10 and
//! 10,000 live leases (none expired); reaps on the two are interleaved, so
//! a load spike on a shared machine hits both, and their medians compared
//! with a generous factor. A ratio over the factor in every one of three
//! measurements is a scanning reaper; a correct one seeks an
//! expiry-ordered index and finds nothing, at any size.

use std::time::{Duration, Instant};

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::ensure;
use crate::{scale, BackendFactory, CheckResult, Outcome, Rule, Violation};

/// Live leases on the small backend.
const SMALL: usize = 10;
/// Live leases on the large backend.
const LARGE: usize = 10_000;
/// Timed reaps per backend in one measurement (odd: one median).
const ROUNDS: u32 = 151;
/// Untimed reaps per backend first (connections, caches, plans).
const WARMUP: u32 = 20;
/// Measurements; the check fails only if every one is over the factor.
const ATTEMPTS: usize = 3;
/// How much slower the large backend's median reap may be. A correct
/// reap measures about 1x on every backend here; a reaper that visits
/// 10,000 leases measures 20x or more even in memory.
const FACTOR: f64 = 5.0;

/// A reap with 10,000 live leases costs about what one with 10 costs:
/// neither has an expired lease, so a reaper that visits live leases is
/// the only way for the first to be slower (INV-7).
pub async fn reap_cost_ignores_live_leases(factory: &dyn BackendFactory) -> CheckResult {
    const CHECK: &str = "reap_cost_ignores_live_leases";
    run(factory, CHECK, Rule::Inv7, Needs::NONE, |large| async move {
        let small = run(factory, CHECK, Rule::Inv7, Needs::NONE, |small| async move {
            hold_live(&small, SMALL).await?;
            hold_live(&large, LARGE).await?;
            measure(&small, &large).await
        })
        .await?;
        match small {
            Outcome::Passed => Ok(()),
            other => Err(Violation::new(
                Rule::Inv7,
                format!("the factory's second backend (for the 10-lease side) did not run: {other:?}"),
            )),
        }
    })
    .await
}

/// Enqueues `n` items and claims them all under long leases.
async fn hold_live(cx: &Cx, n: usize) -> Result<(), Violation> {
    cx.push_n(n).await?;
    let mut held = 0;
    while held < n {
        let got = cx.claim((n - held).min(1_000) as u32, LONG).await?;
        ensure!(
            !got.is_empty(),
            cx.rule,
            "only {held} of {n} items were claimable"
        );
        held += got.len();
    }
    Ok(())
}

/// One timed reap, which must recover nothing: every lease is live.
async fn timed_reap(cx: &Cx, live: usize) -> Result<Duration, Violation> {
    let started = Instant::now();
    let r = cx.reap().await?;
    let took = started.elapsed();
    ensure!(
        r.recovered() == 0,
        cx.rule,
        "a reap with {live} live leases and none expired recovered {r:?}"
    );
    Ok(took)
}

/// The median of `times` (sorted in place).
fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// Interleaved reaps on both backends; fails when the large one's median is
/// over [`FACTOR`] times the small one's in every measurement.
async fn measure(small: &Cx, large: &Cx) -> Result<(), Violation> {
    for _ in 0..WARMUP {
        timed_reap(small, SMALL).await?;
        timed_reap(large, LARGE).await?;
    }
    let rounds = ROUNDS * scale();
    let mut seen = Vec::with_capacity(ATTEMPTS);
    for _ in 0..ATTEMPTS {
        let (mut s, mut l) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first, so neither always follows the other.
            if round % 2 == 0 {
                s.push(timed_reap(small, SMALL).await?);
                l.push(timed_reap(large, LARGE).await?);
            } else {
                l.push(timed_reap(large, LARGE).await?);
                s.push(timed_reap(small, SMALL).await?);
            }
        }
        let (s, l) = (median(&mut s), median(&mut l));
        let ratio = l.as_secs_f64() / s.as_secs_f64().max(1e-9);
        if ratio <= FACTOR {
            return Ok(());
        }
        seen.push(format!("{l:?} vs {s:?} ({ratio:.1}x)"));
    }
    Err(Violation::new(
        Rule::Inv7,
        format!(
            "reap visits live leases: with {LARGE} live leases and none expired a reap takes over {FACTOR}x what it takes with {SMALL} (medians of {rounds} interleaved reaps, {ATTEMPTS} measurements: {}); a reap must find expired leases through an index ordered by expiry, not by walking the leases",
            seen.join("; ")
        ),
    ))
}
