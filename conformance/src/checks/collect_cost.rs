//! Bounded retention: what a `History::collect` costs grows with the kept
//! items it removes, not with the ones it must keep.
//!
//! Measured as [`super::reap_cost`] measures the reap (`checks/cost.rs`):
//! two backends from the factory keep 10 and 10,000 completed items, none
//! expired (kept an hour), and their collects are timed in interleaved
//! rounds. A ratio over the factor in every measurement is a collect that
//! walks the kept items; a correct one seeks the oldest end of an index
//! ordered by finish time and stops at the first item kept.

use std::time::{Duration, Instant};

use leaseq_core::limits::MAX_ACK_BATCH;
use leaseq_core::{BackendExt, Keep, Retention};

use super::cost::{self, Timed, ATTEMPTS, FACTOR};
use crate::cx::{Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("History");

/// Kept items on the small backend.
const SMALL: usize = 10;
/// Kept items on the large backend.
const LARGE: usize = 10_000;
/// How long the items are kept: far longer than the check runs.
const KEPT_FOR: Duration = Duration::from_secs(3600);

/// A collect with 10,000 kept items that have not expired costs about
/// what one with 10 costs: neither has anything to remove, so a collect
/// that visits the kept items is the only way for the first to be slower
/// (`History::collect`: "costs what it removes").
pub async fn collect_cost_ignores_kept_items(factory: &dyn BackendFactory) -> CheckResult {
    const CHECK: &str = "collect_cost_ignores_kept_items";
    cost::on_two_backends(factory, CHECK, RULE, Needs::HISTORY, "10-item", |small, large| async move {
        keep_completed(&small, SMALL).await?;
        keep_completed(&large, LARGE).await?;
        let Some((seen, rounds)) = cost::compare(&Collect, &small, &large, (SMALL, LARGE)).await? else {
            return Ok(());
        };
        Err(Violation::new(
            RULE,
            format!(
                "collect visits kept items: with {LARGE} kept items and none expired a collect takes over {FACTOR}x what it takes with {SMALL} (medians of {rounds} interleaved collects, {ATTEMPTS} measurements: {}); a collect must find expired items through an index ordered by finish time, from its oldest end, not by walking what is kept",
                seen.join("; ")
            ),
        ))
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

/// One collect, which must remove nothing: every item is kept.
struct Collect;

impl Timed for Collect {
    async fn time(&self, cx: &Cx, kept: usize) -> Result<Duration, Violation> {
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
}
