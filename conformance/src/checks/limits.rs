//! Global queue limits (`Throttles::set_queue_limits`): a concurrency limit
//! holds under racing claimers, a rate limit holds per window of the
//! backend's clock, reaping frees the slots of expired leases, limits are
//! per queue, and clearing them restores plain claims.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::queue_limits::CONCURRENCY_RETRY;
use leaseq_core::{ClaimSpec, Claimed, Error, ItemState, Lease, QueueLimits, QueueName, Rate};
use tokio::sync::Barrier;

use crate::cx::{run, Cx, Needs, Rng, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, TimeControl, Violation};

const RULE: Rule = Rule::Contract("set_queue_limits");

/// What every check here needs: limits enforced over the whole queue.
const LIMITS: Needs = Needs {
    limits: true,
    ..Needs::NONE
};

/// Runs `body` like [`run`], then clears the queue's limits (also after a
/// violation), so no limit outlives the check.
async fn run_limited<Fut>(
    factory: &dyn BackendFactory,
    check: &str,
    body: impl FnOnce(Cx) -> Fut,
) -> CheckResult
where
    Fut: Future<Output = Result<(), Violation>>,
{
    run(factory, check, RULE, LIMITS, |cx| async move {
        let result = body(cx.clone()).await;
        let cleared = cx.b.set_queue_limits(&cx.q, QueueLimits::NONE).await;
        result?;
        cleared.or_fail(RULE, "clearing the limits after the check")
    })
    .await
}

/// Sets `limits` on `queue` and reads them back.
async fn set(cx: &Cx, queue: &QueueName, limits: QueueLimits) -> Result<(), Violation> {
    cx.b.set_queue_limits(queue, limits)
        .await
        .or_fail(RULE, "set_queue_limits")?;
    let back =
        cx.b.queue_limits(queue)
            .await
            .or_fail(RULE, "queue_limits")?;
    ensure!(
        back == limits,
        RULE,
        "set_queue_limits stored {limits:?} but queue_limits reads {back:?}"
    );
    Ok(())
}

/// One claim on `queue`, returned whole (leases, repairs, retry_after).
async fn claim_on(
    cx: &Cx,
    queue: &QueueName,
    max: u32,
    ttl: Duration,
) -> Result<Claimed, Violation> {
    let spec = ClaimSpec::new(max, ttl).or_fail(RULE, "building a claim")?;
    let claimed = cx.b.claim(queue, spec).await.or_fail(RULE, "claim")?;
    cx.no_unplanted_repairs(&claimed.repairs, "a claim")?;
    ensure!(
        claimed.leases.len() <= max as usize,
        RULE,
        "a claim of at most {max} returned {} leases",
        claimed.leases.len()
    );
    Ok(claimed)
}

/// Acks every lease.
async fn ack_all(cx: &Cx, leases: &[Lease]) -> Result<(), Violation> {
    for l in leases {
        cx.b.ack(&l.key).await.or_fail(RULE, "ack")?;
    }
    Ok(())
}

/// Sixteen claimers race under a concurrency limit of 3 with many items
/// Ready, over several rounds (some leases acked between rounds): the
/// leases held never exceed 3, neither by what the claims returned nor by
/// `stats` read while they race; a claim the limit cut short says when to
/// come back; and the free slots are always filled.
pub async fn concurrency_limit_holds_under_race(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "concurrency_limit_holds_under_race", |cx| async move {
        const K: u64 = 3;
        const CLAIMERS: usize = 16;
        let rounds = 8 * scale();
        cx.push_n(CLAIMERS * 4 * rounds as usize).await?;
        set(&cx, &cx.q, QueueLimits::NONE.concurrency(K as u32)).await?;
        let mut rng = Rng::seeded();
        let mut held: Vec<Lease> = Vec::new();
        for round in 0..rounds {
            let gate = Arc::new(Barrier::new(CLAIMERS + 1));
            let done = Arc::new(AtomicBool::new(false));
            let peak = Arc::new(AtomicU64::new(0));
            // An observer reads the Leased count while the claimers race.
            let observer = {
                let (cx, gate, done, peak) = (cx.clone(), gate.clone(), done.clone(), peak.clone());
                cx.clone().spawn(async move {
                    gate.wait().await;
                    while !done.load(Ordering::SeqCst) {
                        let s = cx.stats().await?;
                        peak.fetch_max(s.leased, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                    Ok::<(), Violation>(())
                })
            };
            let tasks = (0..CLAIMERS)
                .map(|_| {
                    let (cx, gate) = (cx.clone(), gate.clone());
                    let max = 1 + rng.below(4) as u32;
                    cx.clone().spawn(async move {
                        gate.wait().await;
                        claim_on(&cx, &cx.q, max, LONG).await.map(|c| (max, c))
                    })
                })
                .collect();
            let results = cx.join(tasks).await?;
            done.store(true, Ordering::SeqCst);
            cx.join(vec![observer]).await?.into_iter().collect::<Result<(), _>>()?;
            let before = held.len();
            let mut cut = 0;
            for r in results {
                let (max, claimed) = r?;
                if claimed.leases.len() < max as usize {
                    cut += 1;
                    ensure!(
                        claimed.retry_after.is_some(),
                        RULE,
                        "round {round}: a claim of {max} got {} with many items Ready (the concurrency limit held it back), but its retry_after is None",
                        claimed.leases.len()
                    );
                }
                held.extend(claimed.leases);
            }
            ensure!(
                held.len() as u64 <= K,
                RULE,
                "round {round}: {CLAIMERS} racing claims left {} leases held (from {before} before the round) under a concurrency limit of {K}",
                held.len()
            );
            ensure!(
                held.len() as u64 == K,
                RULE,
                "round {round}: with many items Ready and {before} of {K} slots taken, the racing claims left only {} leases held: free slots stayed empty",
                held.len()
            );
            ensure!(cut > 0, RULE, "round {round}: no claim was cut short though {CLAIMERS} claimers raced for {K} slots");
            let peak = peak.load(Ordering::SeqCst);
            ensure!(
                peak <= K,
                RULE,
                "round {round}: stats showed {peak} items Leased while the claimers raced, over the concurrency limit of {K}"
            );
            let s = cx.stats().await?;
            ensure!(
                s.leased == held.len() as u64,
                RULE,
                "round {round}: stats show {} Leased, the claims returned {} held leases",
                s.leased,
                held.len()
            );
            // Free 1 to 3 slots for the next round.
            let free = 1 + rng.below(K) as usize;
            let gone: Vec<Lease> = held.drain(..free).collect();
            ack_all(&cx, &gone).await?;
        }
        Ok(())
    })
    .await
}

/// A claim that finds fewer items Ready than the rate allows uses up only
/// the items it leased: later in the same window, items enqueued after it
/// are claimable up to the rate (a window charged with what the claim was
/// allowed instead would refuse them). Each try starts at a window's start;
/// one whose two claims fell into two windows of the backend's clock does
/// not count, and another is made.
pub async fn rate_counts_only_leased_items(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "rate_counts_only_leased_items", |cx| async move {
        const N: u32 = 5;
        const TRIES: u32 = 5;
        let per = match cx.tb.time {
            TimeControl::Manual(_) => Duration::from_secs(1),
            TimeControl::Real => Duration::from_millis(200),
        };
        let per_ms = per.as_millis() as u64;
        let rate = Rate::new(N, per).or_fail(RULE, "building the rate")?;
        for t in 0..TRIES {
            // Each try on a queue of its own, empty, with the rate set.
            let cx = cx.round(t)?;
            set(&cx, &cx.q, QueueLimits::NONE.rate(rate)).await?;
            let now = cx.now().await?.as_millis();
            let next = (now / per_ms + 1) * per_ms;
            match &cx.tb.time {
                TimeControl::Manual(clock) => clock.advance(Duration::from_millis(next - now)),
                TimeControl::Real => {
                    cx.wait_past(leaseq_core::Timestamp::from_millis(next))
                        .await?
                }
            }
            let start = cx.now().await?.as_millis();
            cx.push_n(2).await?;
            let first = claim_on(&cx, &cx.q, N, LONG).await?;
            cx.push_n(N as usize).await?;
            let second = claim_on(&cx, &cx.q, N, LONG).await?;
            let end = cx.now().await?.as_millis();
            ack_all(&cx, &first.leases).await?;
            ack_all(&cx, &second.leases).await?;
            if start / per_ms != end / per_ms {
                continue;
            }
            ensure!(
                first.leases.len() == 2 && second.leases.len() == N as usize - 2,
                RULE,
                "under a rate of {rate}, within one window: a claim of {N} with 2 items Ready \
                 leased {}, then a claim of {N} with {N} more Ready leased {} (expected 2, then \
                 {}: the window holds {N})",
                first.leases.len(),
                second.leases.len(),
                N - 2
            );
            return Ok(());
        }
        Err(Violation::new(
            RULE,
            format!("none of {TRIES} tries ran its two claims within one window of {per:?}"),
        ))
    })
    .await
}

/// An hour-long rate window: a check's claims all fall in one, but for a
/// try made again when they straddle two.
const HOUR: Duration = Duration::from_secs(3600);

/// The hour-long window of the backend's clock that `t` falls in.
fn window_of(t: leaseq_core::Timestamp) -> u64 {
    t.as_millis() / HOUR.as_millis() as u64
}

/// Runs `attempt` until one run falls within one hour-long window of the
/// backend's clock (three tries), each on a queue of its own (`cx`'s for
/// the first, then fresh ones, so it needs no purge), clearing its limits
/// after it; returns that run's result and the clock read after it.
async fn within_one_hour<T, F, Fut>(
    cx: &Cx,
    mut attempt: F,
) -> Result<(T, leaseq_core::Timestamp), Violation>
where
    F: FnMut(Cx) -> Fut,
    Fut: Future<Output = Result<T, Violation>>,
{
    for t in 0..3 {
        let cx = cx.round(t)?;
        let start = cx.now().await?;
        let got = attempt(cx.clone()).await?;
        let end = cx.now().await?;
        set(&cx, &cx.q, QueueLimits::NONE).await?;
        if window_of(start) == window_of(end) {
            return Ok((got, end));
        }
    }
    Err(cx.fail("three tries straddled a window of one hour"))
}

/// The rate window's count outlives a change of the rate and not a clear:
/// under 3 per hour a claim of 5 leases 3; raised to 5 per hour, a claim
/// of 5 in the same window leases 2 (the 3 still count); cleared and set
/// to 3 per hour again, a claim leases 3 (the count was forgotten). A try
/// whose claims straddle two windows of the backend's clock is made again.
pub async fn rate_window_outlives_a_change_not_a_clear(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run_limited(
        factory,
        "rate_window_outlives_a_change_not_a_clear",
        |cx| async move {
            let three = Rate::new(3, HOUR).or_fail(RULE, "rate")?;
            let five = Rate::new(5, HOUR).or_fail(RULE, "rate")?;
            let (got, _) = within_one_hour(&cx, |cx| async move {
                let cx = &cx;
                cx.push_n(12).await?;
                set(cx, &cx.q, QueueLimits::NONE.rate(three)).await?;
                let first = claim_on(cx, &cx.q, 5, LONG).await?;
                set(cx, &cx.q, QueueLimits::NONE.rate(five)).await?;
                let raised = claim_on(cx, &cx.q, 5, LONG).await?;
                set(cx, &cx.q, QueueLimits::NONE).await?;
                set(cx, &cx.q, QueueLimits::NONE.rate(three)).await?;
                let fresh = claim_on(cx, &cx.q, 5, LONG).await?;
                Ok([first.leases.len(), raised.leases.len(), fresh.leases.len()])
            })
            .await?;
            ensure!(
            got == [3, 2, 3],
            RULE,
            "claims of 5 over 12 Ready items, within one window, leased {got:?}: under {three}, \
             then raised to {five}, then cleared and set to {three} again; expected [3, 2, 3] \
             (the window's count is kept while the rate changes, forgotten when the limits are \
             cleared)"
        );
            Ok(())
        },
    )
    .await
}

/// `retry_after` names the limit that held the claim back: `None` when a
/// limit allowed more than was Ready (nothing held it back); when both a
/// concurrency and a rate limit cut a claim, the longer wait (the rate's,
/// until its hour-long window ends, rather than the concurrency hint).
pub async fn retry_after_names_the_binding_limit(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(
        factory,
        "retry_after_names_the_binding_limit",
        |cx| async move {
            set(&cx, &cx.q, QueueLimits::NONE.concurrency(3)).await?;
            cx.push_n(1).await?;
            let short = claim_on(&cx, &cx.q, 5, LONG).await?;
            ensure!(
            short.leases.len() == 1 && short.retry_after.is_none(),
            RULE,
            "under a concurrency of 3 with 1 item Ready a claim of 5 got {} leases, retry_after \
             {:?}; expected 1 and None (the limit allowed more than was Ready)",
            short.leases.len(),
            short.retry_after
        );
            ack_all(&cx, &short.leases).await?;
            let rate = Rate::new(1, HOUR).or_fail(RULE, "rate")?;
            let (cut, end) = within_one_hour(&cx, |cx| async move {
                let cx = &cx;
                cx.push_n(4).await?;
                set(cx, &cx.q, QueueLimits::NONE.concurrency(1).rate(rate)).await?;
                claim_on(cx, &cx.q, 4, LONG).await
            })
            .await?;
            let window_end = (window_of(end) + 1) * HOUR.as_millis() as u64;
            // At least until the window ends, seen from after the claim.
            let at_least =
                Duration::from_millis(window_end - end.as_millis()).max(CONCURRENCY_RETRY);
            ensure!(
            cut.leases.len() == 1 && cut.retry_after.is_some_and(|w| w >= at_least && w <= HOUR),
            RULE,
            "under a concurrency of 1 and {rate}, a claim of 4 got {} leases, retry_after {:?}; \
             expected 1 and the longer wait: until the rate window ends, at least {at_least:?}",
            cut.leases.len(),
            cut.retry_after
        );
            Ok(())
        },
    )
    .await
}

/// A rate of N claims per window, over several windows of the backend's
/// clock: racing claimers lease at most N items per window (each lease is
/// placed in its window by its claim's time on the backend's clock,
/// `expires_at - ttl`), and a claim cut short says when to come back (on a
/// manual clock: exactly when the window ends, and every window fills).
pub async fn rate_limit_holds_per_window(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "rate_limit_holds_per_window", |cx| async move {
        const N: u32 = 5;
        const CLAIMERS: usize = 16;
        let windows = 4 * scale() as usize;
        let per = match cx.tb.time {
            TimeControl::Manual(_) => Duration::from_secs(1),
            TimeControl::Real => Duration::from_millis(200),
        };
        let per_ms = per.as_millis() as u64;
        let rate = Rate::new(N, per).or_fail(RULE, "building the rate")?;
        cx.push_n(N as usize * windows * 3).await?;
        set(&cx, &cx.q, QueueLimits::NONE.rate(rate)).await?;
        let ttl_ms = LONG.as_millis() as u64;
        let mut per_window: BTreeMap<u64, u32> = BTreeMap::new();
        let mut tally = |leases: &[Lease]| {
            for l in leases {
                let at = l.expires_at.as_millis().saturating_sub(ttl_ms);
                *per_window.entry(at / per_ms).or_default() += 1;
            }
        };
        match cx.tb.time.clone() {
            TimeControl::Manual(clock) => {
                // Start at a window's start.
                let now = cx.now().await?.as_millis();
                clock.advance(Duration::from_millis(per_ms - now % per_ms));
                for w in 0..windows {
                    let start = cx.now().await?.as_millis();
                    let gate = Arc::new(Barrier::new(CLAIMERS));
                    let tasks = (0..CLAIMERS)
                        .map(|_| {
                            let (cx, gate) = (cx.clone(), gate.clone());
                            cx.clone().spawn(async move {
                                gate.wait().await;
                                let mut got = Vec::new();
                                loop {
                                    let c = claim_on(&cx, &cx.q, 2, LONG).await?;
                                    if c.leases.is_empty() {
                                        return Ok::<_, Violation>((got, c.retry_after));
                                    }
                                    got.extend(c.leases);
                                }
                            })
                        })
                        .collect();
                    let mut in_window = Vec::new();
                    let mut retries = Vec::new();
                    for r in cx.join(tasks).await? {
                        let (got, retry) = r?;
                        in_window.extend(got);
                        retries.push(retry);
                    }
                    ensure!(
                        in_window.len() as u32 == N,
                        RULE,
                        "window {w}: {CLAIMERS} claimers leased {} items in one window under a rate of {rate} with many items Ready (expected exactly {N})",
                        in_window.len()
                    );
                    for retry in retries {
                        ensure!(
                            retry == Some(Duration::from_millis(per_ms)),
                            RULE,
                            "window {w}: a claim the rate cut to nothing at the window's start said retry_after {retry:?}; the window ends in {per_ms} ms"
                        );
                    }
                    tally(&in_window);
                    ack_all(&cx, &in_window).await?;
                    // Half way through, the window is still spent.
                    clock.advance(Duration::from_millis(per_ms / 2));
                    let c = claim_on(&cx, &cx.q, 3, LONG).await?;
                    ensure!(
                        c.leases.is_empty() && c.retry_after == Some(Duration::from_millis(per_ms - per_ms / 2)),
                        RULE,
                        "window {w}: half way through a spent window a claim got {} leases and retry_after {:?} (expected none, and {} ms)",
                        c.leases.len(),
                        c.retry_after,
                        per_ms - per_ms / 2
                    );
                    let now = cx.now().await?.as_millis();
                    clock.advance(Duration::from_millis(start + per_ms - now));
                }
            }
            TimeControl::Real => {
                let target = N as usize * windows;
                let total = Arc::new(AtomicU64::new(0));
                let gate = Arc::new(Barrier::new(CLAIMERS));
                let tasks = (0..CLAIMERS)
                    .map(|_| {
                        let (cx, gate, total) = (cx.clone(), gate.clone(), total.clone());
                        cx.clone().spawn(async move {
                            gate.wait().await;
                            let mut got = Vec::new();
                            while (total.load(Ordering::SeqCst) as usize) < target {
                                let before = cx.now().await?.as_millis();
                                let c = claim_on(&cx, &cx.q, 2, LONG).await?;
                                let after = cx.now().await?.as_millis();
                                if c.leases.is_empty() {
                                    let wait = c.retry_after.ok_or_else(|| {
                                        Violation::new(RULE, "a claim the rate cut to nothing (many items Ready) said no retry_after")
                                    })?;
                                    ensure!(
                                        wait <= per,
                                        RULE,
                                        "a claim cut by a rate of {rate} said retry_after {wait:?}, longer than a window"
                                    );
                                    // Windows are fixed: when the claim ran
                                    // within one, it waits for that one's end
                                    // only (1 ms of slack for clocks read at
                                    // another precision).
                                    let end = (before / per_ms + 1) * per_ms;
                                    ensure!(
                                        after >= end || wait.as_millis() as u64 <= end - before + 1,
                                        RULE,
                                        "a claim cut by a rate of {rate} between {before} and {after} ms said retry_after {wait:?}; its window ends at {end} ms, {} ms after the claim began",
                                        end - before
                                    );
                                    tokio::time::sleep(wait).await;
                                    continue;
                                }
                                total.fetch_add(c.leases.len() as u64, Ordering::SeqCst);
                                got.extend(c.leases);
                            }
                            Ok::<_, Violation>(got)
                        })
                    })
                    .collect();
                for r in cx.join(tasks).await? {
                    let got = r?;
                    tally(&got);
                    ack_all(&cx, &got).await?;
                }
            }
        }
        ensure!(
            per_window.len() >= windows.min(2),
            RULE,
            "the claims fell into {} windows of the backend's clock, expected several",
            per_window.len()
        );
        for (w, n) in &per_window {
            ensure!(
                *n <= N,
                RULE,
                "{n} items were leased within one window (window {w} of {per:?} on the backend's clock) under a rate of {rate}; per window: {per_window:?}"
            );
        }
        Ok(())
    })
    .await
}

/// Under a concurrency limit, an expired lease holds its slot until it is
/// reaped; the reap frees it and the next claim fills it.
pub async fn reap_frees_limited_slots(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "reap_frees_limited_slots", |cx| async move {
        cx.push_n(5).await?;
        set(&cx, &cx.q, QueueLimits::NONE.concurrency(2)).await?;
        let first = claim_on(&cx, &cx.q, 5, SHORT).await?;
        ensure!(
            first.leases.len() == 2 && first.retry_after.is_some(),
            RULE,
            "a claim of 5 under a concurrency limit of 2 got {} leases, retry_after {:?} (expected 2 and a retry_after)",
            first.leases.len(),
            first.retry_after
        );
        let full = claim_on(&cx, &cx.q, 5, SHORT).await?;
        ensure!(
            full.leases.is_empty() && full.retry_after.is_some(),
            RULE,
            "with both slots taken a claim got {} leases, retry_after {:?} (expected none, and a retry_after)",
            full.leases.len(),
            full.retry_after
        );
        cx.expire(&first.leases).await?;
        let expired = claim_on(&cx, &cx.q, 5, LONG).await?;
        ensure!(
            expired.leases.is_empty(),
            RULE,
            "expired leases not yet reaped must hold their slots, but a claim got {} leases",
            expired.leases.len()
        );
        let r = cx.reap_all().await?;
        ensure!(r.recovered() == 2, RULE, "the reap recovered {} of 2 expired leases", r.recovered());
        let after = claim_on(&cx, &cx.q, 5, LONG).await?;
        ensure!(
            after.leases.len() == 2,
            RULE,
            "after the reap freed both slots a claim of 5 got {} leases (expected 2)",
            after.leases.len()
        );
        ack_all(&cx, &after.leases).await?;
        Ok(())
    })
    .await
}

/// Every way a lease ends frees its concurrency slot: ack, `ack_many`,
/// release (at once or with a delay), fail, `give_back`, purge and (where
/// the backend has it) `remove_item`. Under a
/// limit of 1, after each the next claim gets a lease again; a slot kept by
/// one of them would stall the queue for good.
pub async fn every_exit_frees_a_slot(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "every_exit_frees_a_slot", |cx| async move {
        set(&cx, &cx.q, QueueLimits::NONE.concurrency(1)).await?;
        let mut exits = vec![
            "ack",
            "ack_many",
            "release",
            "release with a delay",
            "fail",
            "give_back",
        ];
        if cx.b.groups().admin.is_some() {
            exits.extend(["purge", "remove_item"]);
        }
        for (n, exit) in (0u32..).zip(exits) {
            // Each exit on a queue of its own, empty, under the limit.
            let cx = cx.round(n)?;
            set(&cx, &cx.q, QueueLimits::NONE.concurrency(1)).await?;
            let removing = exit == "remove_item";
            cx.push_n(if removing { 3 } else { 2 }).await?;
            let held = claim_on(&cx, &cx.q, 2, LONG).await?;
            ensure!(
                held.leases.len() == 1,
                RULE,
                "before {exit}: a claim of 2 under a concurrency limit of 1 got {} leases",
                held.leases.len()
            );
            let key = &held.leases[0].key;
            if removing {
                // Removing an item that holds no slot frees none.
                let ready =
                    cx.b.peek(&cx.q, ItemState::Ready, 1)
                        .await
                        .or_fail(RULE, "peek")?;
                let id = ready
                    .first()
                    .map(|i| i.id)
                    .ok_or_else(|| cx.fail("no Ready item to remove"))?;
                cx.b.remove_item(&cx.q, id)
                    .await
                    .or_fail(RULE, "remove_item of a Ready item")?;
                let over = claim_on(&cx, &cx.q, 2, LONG).await?;
                ensure!(
                    over.leases.is_empty(),
                    RULE,
                    "with the only slot held, removing a Ready item let a claim lease {} more",
                    over.leases.len()
                );
            }
            let ended = match exit {
                "ack" => cx.b.ack(key).await,
                "ack_many" => match cx.b.ack_many(std::slice::from_ref(key)).await {
                    Ok(mut r) if r.len() == 1 => r.remove(0),
                    Ok(r) => {
                        return Err(cx.fail(format!("ack_many of 1 lease gave {} results", r.len())))
                    }
                    Err(e) => Err(e),
                },
                "release" => cx.b.release(key, Duration::ZERO).await.map(|_| ()),
                "release with a delay" => cx.b.release(key, LONG).await.map(|_| ()),
                "fail" => cx.b.fail(key, "failed on purpose").await,
                "give_back" => cx.b.give_back(key).await,
                "remove_item" => cx.b.remove_item(&cx.q, key.id).await.map(|_| ()),
                _ => cx.b.purge(&cx.q).await.map(|_| ()),
            };
            ended.or_fail(RULE, exit)?;
            if exit == "purge" {
                cx.push_n(1).await?;
            }
            let next = claim_on(&cx, &cx.q, 2, LONG).await?;
            ensure!(
                next.leases.len() == 1,
                RULE,
                "after {exit} ended the only lease, a claim under a concurrency limit of 1 got {} \
                 leases (retry_after {:?}): the slot was not freed",
                next.leases.len(),
                next.retry_after
            );
            ack_all(&cx, &next.leases).await?;
        }
        Ok(())
    })
    .await
}

/// Limits belong to one queue: another queue claims freely and keeps its
/// own limits; a spent limit on one queue never cuts the other's claims,
/// and leases held on the other queue take none of this queue's slots.
pub async fn limits_are_per_queue(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "limits_are_per_queue", |cx| async move {
        let other = QueueName::new(format!("{}-x", cx.q)).or_fail(RULE, "naming a queue")?;
        let result = async {
            cx.push_n(4).await?;
            cx.b.enqueue(
                &other,
                (0..4)
                    .map(|i| leaseq_core::NewItem::new(format!("o{i}")))
                    .collect(),
            )
            .await
            .or_fail(RULE, "enqueue on the other queue")?;
            let rate = Rate::new(1, Duration::from_secs(3600)).or_fail(RULE, "rate")?;
            set(&cx, &cx.q, QueueLimits::NONE.concurrency(1).rate(rate)).await?;
            let theirs =
                cx.b.queue_limits(&other)
                    .await
                    .or_fail(RULE, "queue_limits")?;
            ensure!(
                theirs == QueueLimits::NONE,
                RULE,
                "another queue reads limits {theirs:?} set on this one"
            );
            let ours = claim_on(&cx, &cx.q, 4, LONG).await?;
            ensure!(
                ours.leases.len() == 1,
                RULE,
                "a claim of 4 under a concurrency of 1 got {}",
                ours.leases.len()
            );
            let free = claim_on(&cx, &other, 4, LONG).await?;
            ensure!(
                free.leases.len() == 4 && free.retry_after.is_none(),
                RULE,
                "the other, unlimited queue's claim of 4 got {} leases, retry_after {:?}",
                free.leases.len(),
                free.retry_after
            );
            ack_all(&cx, &free.leases).await?;
            set(&cx, &other, QueueLimits::NONE.concurrency(3)).await?;
            let still =
                cx.b.queue_limits(&cx.q)
                    .await
                    .or_fail(RULE, "queue_limits")?;
            ensure!(
                still == QueueLimits::NONE.concurrency(1).rate(rate),
                RULE,
                "setting another queue's limits changed this one's to {still:?}"
            );
            ack_all(&cx, &ours.leases).await?;
            // Leases held on the other queue take none of this queue's
            // slots: with two of them held, this queue's claim under a
            // concurrency of 1 (and no rate now) still gets its one.
            set(&cx, &cx.q, QueueLimits::NONE.concurrency(1)).await?;
            cx.b.enqueue(
                &other,
                (0..2)
                    .map(|i| leaseq_core::NewItem::new(format!("p{i}")))
                    .collect(),
            )
            .await
            .or_fail(RULE, "enqueue on the other queue")?;
            let held = claim_on(&cx, &other, 2, LONG).await?;
            ensure!(
                held.leases.len() == 2,
                RULE,
                "the other queue's claim of 2 under its concurrency of 3 got {}",
                held.leases.len()
            );
            let ours = claim_on(&cx, &cx.q, 4, LONG).await?;
            ensure!(
                ours.leases.len() == 1,
                RULE,
                "with 2 leases held on another queue and none on this one, a claim of 4 under this \
                 queue's concurrency of 1 got {}: another queue's leases were counted",
                ours.leases.len()
            );
            ack_all(&cx, &held.leases).await?;
            ack_all(&cx, &ours.leases).await?;
            Ok(())
        }
        .await;
        let _ = cx.b.set_queue_limits(&other, QueueLimits::NONE).await;
        let _ = cx.b.purge(&other).await;
        result
    })
    .await
}

/// Bad limits are refused and change nothing; limits survive a purge;
/// clearing them restores plain claims (no retry_after, every item).
pub async fn clearing_limits_restores_claims(factory: &dyn BackendFactory) -> CheckResult {
    run_limited(factory, "clearing_limits_restores_claims", |cx| async move {
        ensure!(
            cx.b.queue_limits(&cx.q).await.or_fail(RULE, "queue_limits")? == QueueLimits::NONE,
            RULE,
            "a fresh queue has limits"
        );
        let empty = claim_on(&cx, &cx.q, 3, LONG).await?;
        ensure!(empty.retry_after.is_none(), RULE, "a claim on an empty, unlimited queue said retry_after {:?}", empty.retry_after);
        let rate = Rate::new(2, Duration::from_secs(3600)).or_fail(RULE, "rate")?;
        let limits = QueueLimits::NONE.concurrency(1).rate(rate);
        set(&cx, &cx.q, limits).await?;
        match cx.b.set_queue_limits(&cx.q, QueueLimits::NONE.concurrency(0)).await {
            Err(Error::InvalidInput { .. }) => {}
            other => return Err(cx.fail(format!("a concurrency limit of 0 returned {other:?}; expected InvalidInput"))),
        }
        let kept = cx.b.queue_limits(&cx.q).await.or_fail(RULE, "queue_limits")?;
        ensure!(kept == limits, RULE, "a refused set_queue_limits changed the limits to {kept:?}");
        if cx.b.groups().admin.is_some() {
            cx.b.purge(&cx.q).await.or_fail(RULE, "purge")?;
            let kept = cx.b.queue_limits(&cx.q).await.or_fail(RULE, "queue_limits")?;
            ensure!(kept == limits, RULE, "purge changed the queue's limits to {kept:?}");
        }
        cx.push_n(6).await?;
        let one = claim_on(&cx, &cx.q, 6, LONG).await?;
        ensure!(
            one.leases.len() == 1 && one.retry_after.is_some(),
            RULE,
            "a claim of 6 under a concurrency of 1 got {} leases, retry_after {:?}",
            one.leases.len(),
            one.retry_after
        );
        let retry = claim_on(&cx, &cx.q, 6, LONG).await?;
        ensure!(
            retry.leases.is_empty() && retry.retry_after == Some(CONCURRENCY_RETRY),
            RULE,
            "with the one slot taken a claim got {} leases, retry_after {:?}",
            retry.leases.len(),
            retry.retry_after
        );
        set(&cx, &cx.q, QueueLimits::NONE).await?;
        let rest = claim_on(&cx, &cx.q, 6, LONG).await?;
        ensure!(
            rest.leases.len() == 5 && rest.retry_after.is_none(),
            RULE,
            "after the limits were cleared a claim of 6 got {} of the 5 Ready items, retry_after {:?}",
            rest.leases.len(),
            rest.retry_after
        );
        ack_all(&cx, &one.leases).await?;
        ack_all(&cx, &rest.leases).await?;
        Ok(())
    })
    .await
}
