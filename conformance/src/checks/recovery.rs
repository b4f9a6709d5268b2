//! Recovery under races: concurrent reapers (INV-4), reapers racing claims
//! and concurrent claimers (INV-2), bounded GC (INV-7), no redelivery after
//! ack (INV-10).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::groupwise::Groupwise as _;
use leaseq_core::{ItemId, ItemState, Lease, NewItem, ReapReport};

use crate::cx::{run, Cx, Needs, Rng, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

/// Claims until `n` leases are held (a claim may return fewer than asked).
async fn claim_exactly(
    cx: &Cx,
    n: usize,
    ttl: std::time::Duration,
) -> Result<Vec<Lease>, Violation> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = (n - out.len()).min(1_000) as u32;
        let got = cx.claim(want, ttl).await?;
        ensure!(
            !got.is_empty(),
            cx.rule,
            "only {} of {n} items were claimable",
            out.len()
        );
        out.extend(got);
    }
    Ok(out)
}

/// Fails (as INV-2) when one id was handed out twice.
fn distinct_ids(cx: &Cx, leases: &[Lease], when: &str) -> Result<BTreeSet<ItemId>, Violation> {
    let mut seen = BTreeSet::new();
    for l in leases {
        ensure!(
            seen.insert(l.id()),
            Rule::Inv2,
            "{when}: item {} was handed out twice while its lease was live (attempts {})",
            l.id(),
            l.attempts
        );
    }
    let _ = cx;
    Ok(seen)
}

/// Runs `k` reapers at once (released together by a barrier), each reaping
/// until it finds nothing; returns what each recovered.
async fn reapers(cx: &Cx, k: usize) -> Result<Vec<u64>, Violation> {
    Ok(reaper_reports(cx, k)
        .await?
        .iter()
        .map(ReapReport::recovered)
        .collect())
}

/// [`reapers`], with each reaper's whole report.
async fn reaper_reports(cx: &Cx, k: usize) -> Result<Vec<ReapReport>, Violation> {
    cx.at_once(k, |cx, _| async move { cx.reap_all().await })
        .await?
        .into_iter()
        .collect()
}

/// Two reapers on one expired lease: it is requeued exactly once, and the
/// Ready index holds it once (INV-4, INV-1).
pub async fn two_reapers_one_lease(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "two_reapers_one_lease",
        Rule::Inv4,
        Needs::NONE,
        |cx| async move {
            for round in 0..20 * scale() {
                let id = cx.push_n(1).await?[0];
                let lease = cx.claim_one(SHORT).await?;
                cx.expire(std::slice::from_ref(&lease)).await?;
                let got = reapers(&cx, 2).await?;
                ensure!(
                got.iter().sum::<u64>() == 1,
                Rule::Inv4,
                "round {round}: two reapers recovered {got:?} from one expired lease (item {id})"
            );
                cx.check_indexes(&format!("round {round}: after two reapers"))
                    .await?;
                let again = cx.with_rule(Rule::Inv1).drain(LONG, 1).await?;
                ensure!(
                    again.len() == 1,
                    Rule::Inv4,
                    "round {round}: the recovered item was not claimable"
                );
                cx.b.ack(&again[0].key).await.or_fail(cx.rule, "ack")?;
                cx.expect_stats([0, 0, 0, 0], &format!("round {round}: after the ack"))
                    .await?;
            }
            Ok(())
        },
    )
    .await
}

/// Eight reapers over 1,000 expired leases: the recoveries add up to exactly
/// 1,000 and every item is claimable exactly once afterwards (INV-4).
pub async fn many_reapers_many_leases(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "many_reapers_many_leases", Rule::Inv4, Needs::NONE, |cx| async move {
        const N: usize = 1_000;
        for round in 0..2 * scale() {
            let cx = cx.round(round)?;
            let ids: BTreeSet<ItemId> = cx.push_n(N).await?.into_iter().collect();
            let leases = claim_exactly(&cx, N, SHORT).await?;
            cx.expire(&leases).await?;
            let got = reapers(&cx, 8).await?;
            let total: u64 = got.iter().sum();
            ensure!(
                total == N as u64,
                Rule::Inv4,
                "round {round}: 8 reapers recovered {total} of {N} expired leases (per reaper: {got:?})"
            );
            cx.check_indexes(&format!("round {round}: after 8 reapers")).await?;
            cx.expect_stats([N as u64, 0, 0, 0], &format!("round {round}: after 8 reapers")).await?;
            let again = cx.with_rule(Rule::Inv1).drain(LONG, N).await?;
            let seen = distinct_ids(&cx, &again, &format!("round {round}: claims after the reap"))?;
            ensure!(seen == ids, Rule::Inv4, "round {round}: after the reap {} of {N} items were claimable", seen.len());
        }
        Ok(())
    })
    .await
}

/// Eight reapers over leases on their last attempt: each item goes Dead
/// exactly once and never back to Ready, the Dead index holds each once,
/// and (with the Admin group) a redrive finds each once (INV-4, INV-1).
pub async fn reapers_dead_letter_once(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "reapers_dead_letter_once",
        Rule::Inv4,
        Needs::NONE,
        |cx| async move {
            const N: usize = 200;
            for round in 0..2 * scale() {
                let cx = cx.round(round)?;
                let items = (0..N)
                    .map(|i| NewItem::new(format!("last-{i}")).max_attempts(1))
                    .collect();
                let ids: BTreeSet<ItemId> = cx.enqueue(items).await?.into_iter().collect();
                let leases = claim_exactly(&cx, N, SHORT).await?;
                cx.expire(&leases).await?;
                let reports = reaper_reports(&cx, 8).await?;
                let dead: u64 = reports.iter().map(|r| r.dead).sum();
                let requeued: u64 = reports.iter().map(|r| r.requeued).sum();
                ensure!(
                dead == N as u64 && requeued == 0,
                Rule::Inv4,
                "round {round}: 8 reapers over {N} expired leases on their last attempt reported \
                 {dead} dead and {requeued} requeued (per reaper: {reports:?})"
            );
                cx.check_indexes(&format!("round {round}: after 8 reapers"))
                    .await?;
                cx.expect_stats(
                    [0, 0, 0, N as u64],
                    &format!("round {round}: after 8 reapers"),
                )
                .await?;
                let shown =
                    cx.b.peek(&cx.q, ItemState::Dead, N + 10)
                        .await
                        .or_fail(cx.rule, "peek Dead")?;
                let shown_ids: BTreeSet<ItemId> = shown.iter().map(|i| i.id).collect();
                ensure!(
                shown.len() == N && shown_ids == ids,
                Rule::Inv1,
                "round {round}: peek(Dead) listed {} entries for {} distinct ids, expected the {N} \
                 items once each",
                shown.len(),
                shown_ids.len()
            );
                if cx.b.groups().admin.is_none() {
                    continue;
                }
                let moved =
                    cx.b.redrive(&cx.q, N + 10)
                        .await
                        .or_fail(cx.rule, "redrive")?;
                ensure!(
                    moved == N as u64,
                    Rule::Inv4,
                    "round {round}: redrive moved {moved} of {N} Dead items"
                );
                let again = cx.with_rule(Rule::Inv1).drain(LONG, N).await?;
                let seen = distinct_ids(
                    &cx,
                    &again,
                    &format!("round {round}: claims after the redrive"),
                )?;
                ensure!(
                    seen == ids,
                    Rule::Inv4,
                    "round {round}: after the redrive {} of {N} items were claimable",
                    seen.len()
                );
            }
            Ok(())
        },
    )
    .await
}

/// Reapers running while claims take leases never recover a freshly taken
/// lease, and no item is handed out twice (INV-2).
pub async fn reaper_inside_claim(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "reaper_inside_claim", Rule::Inv2, Needs::NONE, |cx| async move {
        const N: usize = 200;
        for round in 0..3 * scale() {
            let cx = cx.round(round)?;
            cx.push_n(N).await?;
            let done = Arc::new(AtomicBool::new(false));
            let mut reaps = Vec::new();
            for _ in 0..2 {
                let (cx, done) = (cx.clone(), done.clone());
                reaps.push(tokio::spawn(async move {
                    let mut recovered = 0;
                    while !done.load(Ordering::SeqCst) {
                        recovered += cx.reap().await?.recovered();
                        tokio::task::yield_now().await;
                    }
                    Ok::<u64, Violation>(recovered)
                }));
            }
            let claimers = (0..4)
                .map(|_| {
                    let cx = cx.clone();
                    tokio::spawn(async move {
                        let mut rng = Rng::seeded();
                        let mut mine = Vec::new();
                        for _ in 0..N {
                            let got = cx.claim(1 + rng.below(3) as u32, LONG).await?;
                            if got.is_empty() {
                                break;
                            }
                            mine.extend(got);
                        }
                        Ok::<Vec<Lease>, Violation>(mine)
                    })
                })
                .collect();
            let mut all = Vec::new();
            let claimed = cx.join(claimers).await;
            done.store(true, Ordering::SeqCst);
            let recovered: Vec<Result<u64, Violation>> = cx.join(reaps).await?;
            for c in claimed? {
                all.extend(c?);
            }
            let recovered: u64 = recovered.into_iter().sum::<Result<u64, Violation>>()?;
            ensure!(
                recovered == 0,
                Rule::Inv2,
                "round {round}: reapers recovered {recovered} leases though every lease was live (a reaper got inside a claim)"
            );
            let seen = distinct_ids(&cx, &all, &format!("round {round}: concurrent claims with reapers"))?;
            ensure!(seen.len() == N, Rule::Inv2, "round {round}: claims got {} of {N} items", seen.len());
            cx.expect_stats([0, 0, N as u64, 0], &format!("round {round}: after the claims")).await?;
            cx.check_indexes(&format!("round {round}: after claims and reapers")).await?;
        }
        Ok(())
    })
    .await
}

/// A claim never returns an item whose lease is live: not to the next
/// claim, not after a reap, not to eight claimers racing for one item
/// (INV-2).
pub async fn claim_skips_live_lease(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "claim_skips_live_lease",
        Rule::Inv2,
        Needs::NONE,
        |cx| async move {
            cx.push_n(1).await?;
            let held = cx.claim_one(LONG).await?;
            let again = cx.claim(10, LONG).await?;
            ensure!(
                again.is_empty(),
                cx.rule,
                "a second claim returned {:?} while {} was leased",
                ids(&again),
                held.id()
            );
            let r = cx.reap().await?;
            ensure!(
                r.recovered() == 0,
                cx.rule,
                "reap recovered a live lease: {r:?}"
            );
            let again = cx.claim(10, LONG).await?;
            ensure!(
                again.is_empty(),
                cx.rule,
                "a claim after a reap returned live-leased {:?}",
                ids(&again)
            );
            cx.b.ack(&held.key).await.or_fail(cx.rule, "ack")?;
            for round in 0..10 * scale() {
                let id = cx.push_n(1).await?[0];
                let mut won = Vec::new();
                for r in cx
                    .at_once(8, |cx, _| async move { cx.claim(1, LONG).await })
                    .await?
                {
                    won.extend(r?);
                }
                ensure!(
                    won.len() == 1,
                    cx.rule,
                    "round {round}: 8 racing claims of one item {id} got {} leases",
                    won.len()
                );
                cx.b.ack(&won[0].key).await.or_fail(cx.rule, "ack")?;
            }
            Ok(())
        },
    )
    .await
}

/// Six claimers draining 300 items concurrently get each item exactly once
/// (INV-2).
pub async fn concurrent_claims_each_once(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "concurrent_claims_each_once",
        Rule::Inv2,
        Needs::NONE,
        |cx| async move {
            const N: usize = 300;
            for round in 0..2 * scale() {
                let cx = cx.round(round)?;
                let ids: BTreeSet<ItemId> = cx.push_n(N).await?.into_iter().collect();
                let tasks = (0..6)
                    .map(|_| {
                        let cx = cx.clone();
                        tokio::spawn(async move {
                            let mut rng = Rng::seeded();
                            let mut mine = Vec::new();
                            // Bounded: a correct backend runs dry after N items.
                            while mine.len() <= 2 * N {
                                let got = cx.claim(1 + rng.below(7) as u32, LONG).await?;
                                if got.is_empty() {
                                    break;
                                }
                                mine.extend(got);
                            }
                            Ok::<Vec<Lease>, Violation>(mine)
                        })
                    })
                    .collect();
                let mut all = Vec::new();
                for r in cx.join(tasks).await? {
                    all.extend(r?);
                }
                let seen = distinct_ids(
                    &cx,
                    &all,
                    &format!("round {round}: six concurrent claimers"),
                )?;
                ensure!(
                    seen == ids,
                    cx.rule,
                    "round {round}: claimers got {} of {N} items",
                    seen.len()
                );
            }
            Ok(())
        },
    )
    .await
}

/// Items in a sweep: more than any backend's batch (the memory backend
/// reaps 1,024 leases per lock hold, the server backends 500 per statement
/// or script), and no multiple of either.
const SWEEP: usize = 2_100;

/// One `reap` recovers every lease expired at its call, and one `redrive`
/// moves every Dead item up to its limit, however many batches the backend
/// splits the work into: over 2,100 items, a reap that requeues them all,
/// a second that sends them all Dead on their final attempt, and a redrive
/// that brings them all back, each a single call. A loop that stops after
/// its first batch, or one batch early, leaves items behind that only a
/// later call finds. (The redrive runs where the backend offers the Admin
/// group; the reaps run on every backend.)
pub async fn one_call_finishes_every_batch(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("reap/redrive");
    run(
        factory,
        "one_call_finishes_every_batch",
        rule,
        Needs::NONE,
        |cx| async move {
            let n = SWEEP;
            let mut i = 0;
            while i < n {
                let end = (i + 500).min(n);
                let batch = (i..end)
                    .map(|k| NewItem::new(format!("sweep-{k}")).max_attempts(2))
                    .collect();
                cx.enqueue(batch).await?;
                i = end;
            }
            for (attempt, want) in [(1, (n as u64, 0)), (2, (0, n as u64))] {
                let leases = claim_exactly(&cx, n, SHORT).await?;
                cx.expire(&leases).await?;
                let r = cx.reap().await?;
                ensure!(
                    (r.requeued, r.dead) == want,
                    rule,
                    "one reap of {n} leases expired on attempt {attempt} of 2 reported \
                     {} requeued and {} dead, expected {want:?}: a reap stopped before its \
                     last batch",
                    r.requeued,
                    r.dead
                );
            }
            cx.expect_stats([0, 0, 0, n as u64], "after the second reap")
                .await?;
            if cx.b.groups().admin.is_none() {
                return Ok(());
            }
            let moved = cx.b.redrive(&cx.q, n + 1).await.or_fail(rule, "redrive")?;
            ensure!(
                moved == n as u64,
                rule,
                "one redrive (limit {}) of {n} Dead items moved {moved}",
                n + 1
            );
            cx.expect_stats([n as u64, 0, 0, 0], "after the redrive")
                .await?;
            Ok(())
        },
    )
    .await
}

/// With 10,000 live leases and 10 expired, a reap recovers exactly the 10
/// and leaves every live lease untouched; with none expired it recovers
/// nothing (INV-7 by behaviour; `reap_cost` measures what the reap costs).
pub async fn reap_touches_only_expired(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "reap_touches_only_expired",
        Rule::Inv7,
        Needs::NONE,
        |cx| async move {
            const LIVE: usize = 10_000;
            const EXPIRED: usize = 10;
            cx.push_n(LIVE + EXPIRED).await?;
            let short = claim_exactly(&cx, EXPIRED, SHORT).await?;
            let live = claim_exactly(&cx, LIVE, LONG).await?;
            if cx.tb.is_manual() {
                let r = cx.reap().await?;
                ensure!(
                    r.recovered() == 0,
                    cx.rule,
                    "reap before any expiry recovered {r:?}"
                );
            }
            let latest = short.iter().map(|l| l.expires_at).max().unwrap_or_default();
            cx.wait_past(latest).await?;
            let r = cx.reap_all().await?;
            let short_ids: BTreeSet<ItemId> = short.iter().map(|l| l.id()).collect();
            ensure!(
                r.requeued == EXPIRED as u64 && r.dead == 0,
                cx.rule,
                "reap with {LIVE} live and {EXPIRED} expired leases reported {r:?}"
            );
            cx.expect_stats([EXPIRED as u64, 0, LIVE as u64, 0], "after the reap")
                .await?;
            let ready =
                cx.b.peek(&cx.q, ItemState::Ready, 100)
                    .await
                    .or_fail(cx.rule, "peek")?;
            let ready: BTreeSet<ItemId> = ready.into_iter().map(|i| i.id).collect();
            ensure!(
                ready == short_ids,
                cx.rule,
                "reap requeued {ready:?}, expected the expired {short_ids:?}"
            );
            for l in live.iter().step_by(997) {
                let info = cx.must_item(l.id()).await?;
                ensure!(
                    info.state == ItemState::Leased && info.due_at == Some(l.expires_at),
                    cx.rule,
                    "reap touched live lease {}: {info:?}",
                    l.id()
                );
                cx.b.ack(&l.key)
                    .await
                    .or_fail(cx.rule, "ack of a live lease after the reap")?;
            }
            let r = cx.reap().await?;
            ensure!(
                r.recovered() == 0,
                cx.rule,
                "a second reap with only live leases recovered {r:?}"
            );
            Ok(())
        },
    )
    .await
}

/// Once an ack succeeded, no claim returns that item again, even after
/// leases expire and reapers run (INV-10).
pub async fn no_redelivery_after_ack(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "no_redelivery_after_ack",
        Rule::Inv10,
        Needs::NONE,
        |cx| async move {
            cx.push_n(20).await?;
            let leases = claim_exactly(&cx, 20, SHORT).await?;
            let mut acked = BTreeSet::new();
            for l in leases.iter().step_by(2) {
                cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
                acked.insert(l.id());
            }
            cx.expire(&leases).await?;
            let r = cx.reap_all().await?;
            ensure!(
                r.requeued == 10,
                Rule::Inv4,
                "reap of 10 unacked expired leases reported {r:?}"
            );
            let again = cx.drain(SHORT, 20).await?;
            for l in &again {
                ensure!(
                    !acked.contains(&l.id()),
                    cx.rule,
                    "acked item {} was claimed again",
                    l.id()
                );
            }
            ensure!(
                again.len() == 10,
                cx.rule,
                "{} of the 10 unacked items came back",
                again.len()
            );
            cx.expire(&again).await?;
            cx.reap_all().await?;
            let third = cx.drain(LONG, 20).await?;
            for l in &third {
                ensure!(
                    !acked.contains(&l.id()),
                    cx.rule,
                    "acked item {} was claimed again",
                    l.id()
                );
            }
            Ok(())
        },
    )
    .await
}

fn ids(leases: &[Lease]) -> Vec<ItemId> {
    leases.iter().map(|l| l.id()).collect()
}
