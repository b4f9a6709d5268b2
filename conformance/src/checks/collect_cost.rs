//! Bounded retention: what a `History::collect` costs grows with the kept
//! items it removes, not with the ones it must keep.
//!
//! Measured as [`super::reap_cost`] measures the reap: no hook can count
//! the rows a statement visits or the entries a script reads. Two backends
//! from the factory keep 10 and 10,000 completed items, none expired
//! (kept an hour); collects on the two are interleaved, so a load spike on
//! a shared machine hits both, and their medians compared with a generous
//! factor. A ratio over the factor in every one of three measurements is
//! a collect that walks the kept items; a correct one seeks the oldest end
//! of an index ordered by finish time and stops at the first item kept.

use std::time::{Duration, Instant};

use leaseq_core::limits::MAX_ACK_BATCH;
use leaseq_core::{BackendExt, Keep, Retention};

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Outcome, Rule, Violation};

const RULE: Rule = Rule::Contract("History");

/// Kept items on the small backend.
const SMALL: usize = 10;
/// Kept items on the large backend.
const LARGE: usize = 10_000;
/// How long the items are kept: far longer than the check runs.
const KEPT_FOR: Duration = Duration::from_secs(3600);
/// Timed collects per backend in one measurement (odd: one median).
const ROUNDS: u32 = 151;
/// Untimed collects per backend first (connections, caches, plans).
const WARMUP: u32 = 20;
/// Measurements; the check fails only if every one is over the factor.
const ATTEMPTS: usize = 3;
/// How much slower the large backend's median collect may be. A correct
/// collect measures about 1x; one that reads 10,000 kept items measures
/// 20x or more even in memory.
const FACTOR: f64 = 5.0;

/// A collect with 10,000 kept items that have not expired costs about
/// what one with 10 costs: neither has anything to remove, so a collect
/// that visits the kept items is the only way for the first to be slower
/// (`History::collect`: "costs what it removes").
pub async fn collect_cost_ignores_kept_items(factory: &dyn BackendFactory) -> CheckResult {
    const CHECK: &str = "collect_cost_ignores_kept_items";
    run(factory, CHECK, RULE, Needs::HISTORY, |large| async move {
        let small = run(factory, CHECK, RULE, Needs::HISTORY, |small| async move {
            keep_completed(&small, SMALL).await?;
            keep_completed(&large, LARGE).await?;
            measure(&small, &large).await
        })
        .await?;
        match small {
            Outcome::Passed => Ok(()),
            other => Err(Violation::new(
                RULE,
                format!(
                    "the factory's second backend (for the 10-item side) did not run: {other:?}"
                ),
            )),
        }
    })
    .await
}

/// Keeps completed items for [`KEPT_FOR`] and completes `n` items, in
/// batches (enqueue, claim, `ack_many`); checks they are counted and kept.
async fn keep_completed(cx: &Cx, n: usize) -> Result<(), Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    let policy = Retention::default().completed(Keep::for_age(KEPT_FOR));
    history
        .set_retention(&cx.q, policy)
        .await
        .or_fail(RULE, "set_retention")?;
    let ids = cx.push_n(n).await?;
    let mut done = 0;
    while done < n {
        let got = cx.claim((n - done).min(MAX_ACK_BATCH) as u32, LONG).await?;
        ensure!(
            !got.is_empty(),
            RULE,
            "only {done} of {n} items were claimable"
        );
        let keys: Vec<_> = got.iter().map(|l| l.key.clone()).collect();
        let acked = cx.b.ack_many(&keys).await.or_fail(RULE, "ack_many")?;
        ensure!(
            acked.iter().all(Result::is_ok),
            RULE,
            "ack_many of {} fresh leases answered {:?}",
            keys.len(),
            acked.iter().find(|r| r.is_err())
        );
        done += got.len();
    }
    let completed = cx.stats().await?.completed;
    ensure!(
        completed == Some(n as u64),
        RULE,
        "after {n} completions the completion count is {completed:?}"
    );
    if let Some(&last) = ids.last() {
        history
            .finished_item(&cx.q, last)
            .await
            .or_fail(RULE, "finished_item of the last completed item")?;
    }
    Ok(())
}

/// One timed collect, which must remove nothing: every item is kept.
async fn timed_collect(cx: &Cx, kept: usize) -> Result<Duration, Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    let started = Instant::now();
    let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
    let took = started.elapsed();
    ensure!(
        removed == 0,
        RULE,
        "a collect with {kept} items kept for {KEPT_FOR:?} and none expired removed {removed}"
    );
    Ok(took)
}

/// The median of `times` (sorted in place).
fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// Interleaved collects on both backends; fails when the large one's
/// median is over [`FACTOR`] times the small one's in every measurement.
async fn measure(small: &Cx, large: &Cx) -> Result<(), Violation> {
    for _ in 0..WARMUP {
        timed_collect(small, SMALL).await?;
        timed_collect(large, LARGE).await?;
    }
    let rounds = ROUNDS * scale();
    let mut seen = Vec::with_capacity(ATTEMPTS);
    for _ in 0..ATTEMPTS {
        let (mut s, mut l) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first, so neither always follows the other.
            if round % 2 == 0 {
                s.push(timed_collect(small, SMALL).await?);
                l.push(timed_collect(large, LARGE).await?);
            } else {
                l.push(timed_collect(large, LARGE).await?);
                s.push(timed_collect(small, SMALL).await?);
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
        RULE,
        format!(
            "collect visits kept items: with {LARGE} kept items and none expired a collect takes over {FACTOR}x what it takes with {SMALL} (medians of {rounds} interleaved collects, {ATTEMPTS} measurements: {}); a collect must find expired items through an index ordered by finish time, from its oldest end, not by walking what is kept",
            seen.join("; ")
        ),
    ))
}
