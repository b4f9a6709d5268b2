//! Bounded GC (INV-7): what a reap costs grows with the expired leases it
//! recovers, not with the live ones it must leave alone.
//!
//! Measured rather than counted, as every cost check is (`checks/cost.rs`):
//! two backends from the factory hold 10 and 10,000 live leases (none
//! expired), and their reaps are timed in interleaved rounds. A ratio over
//! the factor in every measurement is a scanning reaper; a correct one
//! seeks an expiry-ordered index and finds nothing, at any size.

use std::time::{Duration, Instant};

use super::cost::{self, Timed, ATTEMPTS, FACTOR};
use crate::cx::{Cx, Needs, LONG};
use crate::outcome::ensure;
use crate::{BackendFactory, CheckResult, Rule, Violation};

/// Live leases on the small backend.
const SMALL: usize = 10;
/// Live leases on the large backend.
const LARGE: usize = 10_000;

/// A reap with 10,000 live leases costs about what one with 10 costs:
/// neither has an expired lease, so a reaper that visits live leases is
/// the only way for the first to be slower (INV-7).
pub async fn reap_cost_ignores_live_leases(factory: &dyn BackendFactory) -> CheckResult {
    const CHECK: &str = "reap_cost_ignores_live_leases";
    cost::on_two_backends(factory, CHECK, Rule::Inv7, Needs::NONE, "10-lease", |small, large| async move {
        hold_live(&small, SMALL).await?;
        hold_live(&large, LARGE).await?;
        let Some((seen, rounds)) = cost::compare(&Reap, &small, &large, (SMALL, LARGE)).await? else {
            return Ok(());
        };
        Err(Violation::new(
            Rule::Inv7,
            format!(
                "reap visits live leases: with {LARGE} live leases and none expired a reap takes over {FACTOR}x what it takes with {SMALL} (medians of {rounds} interleaved reaps, {ATTEMPTS} measurements: {}); a reap must find expired leases through an index ordered by expiry, not by walking the leases",
                seen.join("; ")
            ),
        ))
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

/// One reap, which must recover nothing: every lease is live.
struct Reap;

impl Timed for Reap {
    async fn time(&self, cx: &Cx, live: usize) -> Result<Duration, Violation> {
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
}
