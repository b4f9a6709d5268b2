//! INV-5 no loss, under a storm of producers, consumers that sometimes
//! crash, and concurrent reapers; the history of what every task saw is
//! checked afterwards, not only the final counts.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Error, ItemId, ItemState, NewItem, Released, Timestamp};

use crate::cx::{run, Cx, Needs, Rng};
use crate::history::{Claim, End, History};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

const PRODUCERS: usize = 4;
const CONSUMERS: usize = 6;
const REAPERS: usize = 3;
const PER_PRODUCER: usize = 250;
const MAX_ATTEMPTS: u32 = 4;

struct Storm {
    cx: Cx,
    history: History,
    resolved: AtomicU64,
    total: u64,
    stop: AtomicBool,
    ttl: Duration,
}

/// Producers, consumers that crash 10% of the time (dropping the lease),
/// fail 2% and release 5%, and three reapers, all at once: at the end every
/// enqueued id was acked exactly once or is Dead exactly once, nothing is
/// left in any index, and the history shows no overlapping leases, no stale
/// success and no redelivery after ack (INV-5).
pub async fn storm_no_loss(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "storm_no_loss",
        Rule::Inv5,
        Needs::NONE,
        |cx| async move {
            let manual = cx.tb.is_manual();
            let per = PER_PRODUCER * scale() as usize;
            let storm = Arc::new(Storm {
                history: History::default(),
                resolved: AtomicU64::new(0),
                total: (per * PRODUCERS) as u64,
                stop: AtomicBool::new(false),
                ttl: if manual {
                    Duration::from_secs(1)
                } else {
                    Duration::from_millis(300)
                },
                cx,
            });
            let cx = storm.cx.clone();
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| tokio::spawn(produce(storm.clone(), p, per)))
                .collect();
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| tokio::spawn(consume(storm.clone())))
                .collect();
            let reapers: Vec<_> = (0..REAPERS)
                .map(|_| tokio::spawn(reap(storm.clone())))
                .collect();
            let driver = tokio::spawn(drive_time(storm.clone()));

            let mut enqueued = BTreeSet::new();
            for ids in cx.join(producers).await? {
                enqueued.extend(ids?);
            }
            let deadline =
                tokio::time::Instant::now() + Duration::from_secs(if manual { 60 } else { 180 });
            // A worker ends before the stop only with a violation: report it
            // at once rather than wait out the deadline.
            let failed = || consumers.iter().chain(&reapers).any(|t| t.is_finished());
            while storm.resolved.load(Ordering::SeqCst) < storm.total
                && tokio::time::Instant::now() < deadline
                && !failed()
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let finished = storm.resolved.load(Ordering::SeqCst) >= storm.total;
            storm.stop.store(true, Ordering::SeqCst);
            for r in cx.join(consumers).await? {
                r?;
            }
            for r in cx.join(reapers).await? {
                r?;
            }
            cx.join(vec![driver]).await?;

            ensure!(
                enqueued.len() as u64 == storm.total,
                cx.rule,
                "producers got {} distinct ids for {} items",
                enqueued.len(),
                storm.total
            );
            let dead: Vec<ItemId> =
                cx.b.peek(&cx.q, ItemState::Dead, enqueued.len() + 100)
                    .await
                    .or_fail(cx.rule, "peek(Dead)")?
                    .into_iter()
                    .map(|i| i.id)
                    .collect();
            storm.history.verify(&enqueued, &dead)?;
            let claims = storm.history.claims();
            let crashed = claims
                .iter()
                .filter(|c| matches!(c.end, Some((End::Crashed, ..))))
                .count();
            let retried = claims.iter().filter(|c| c.attempts > 1).count();
            ensure!(
            crashed > 0 && retried > 0,
            cx.rule,
            "the storm proved nothing: {crashed} crashes and {retried} redeliveries in {} claims",
            claims.len()
        );
            ensure!(
                finished,
                cx.rule,
                "the storm did not settle: {} of {} items resolved before the deadline",
                storm.resolved.load(Ordering::SeqCst),
                storm.total
            );
            cx.expect_stats([0, 0, 0, dead.len() as u64], "after the storm")
                .await?;
            if cx.check_indexes("after the storm").await? {
                let snap = cx
                    .hooks()
                    .ok_or_else(|| cx.fail("hooks vanished"))?
                    .snapshot(&cx.q)
                    .await
                    .or_fail(cx.rule, "snapshot")?;
                for state in [ItemState::Ready, ItemState::Scheduled, ItemState::Leased] {
                    let left = snap.indexes.get(&state).map_or(0, Vec::len);
                    ensure!(
                        left == 0,
                        Rule::Inv1,
                        "the {state} index still holds {left} entries after the storm"
                    );
                }
            }
            Ok(())
        },
    )
    .await
}

async fn produce(s: Arc<Storm>, p: usize, n: usize) -> Result<Vec<ItemId>, Violation> {
    let mut rng = Rng::seeded();
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let k = (1 + rng.below(8) as usize).min(n - ids.len());
        let batch = (0..k)
            .map(|i| NewItem::new(format!("p{p}-{}", ids.len() + i)).max_attempts(MAX_ATTEMPTS))
            .collect();
        ids.extend(s.cx.enqueue(batch).await?);
        tokio::task::yield_now().await;
    }
    Ok(ids)
}

async fn consume(s: Arc<Storm>) -> Result<(), Violation> {
    let mut rng = Rng::seeded();
    let h = &s.history;
    while !s.stop.load(Ordering::SeqCst) {
        let asked = h.tick();
        let leases = s.cx.claim(1 + rng.below(4) as u32, s.ttl).await?;
        let got = h.tick();
        if leases.is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let seen = s.cx.now().await?;
        let ttl_ms = u64::try_from(s.ttl.as_millis()).unwrap_or(u64::MAX);
        let mut held = Vec::new();
        for l in leases {
            let granted = Timestamp::from_millis(l.expires_at.as_millis().saturating_sub(ttl_ms));
            let i = h.claimed(Claim {
                id: l.id(),
                token: l.token(),
                attempts: l.attempts,
                granted,
                expires_at: l.expires_at,
                seen,
                asked,
                got,
                end: None,
            });
            held.push((i, l));
        }
        tokio::task::yield_now().await;
        for (i, l) in held {
            let roll = rng.below(100);
            let before = h.tick();
            let (end, resolved) = if roll < 10 {
                (End::Crashed, false)
            } else if roll < 12 {
                settle(
                    s.cx.b
                        .fail(&l.key, "storm failure")
                        .await
                        .map(|()| (End::Failed, true)),
                )?
            } else if roll < 17 {
                let r = s.cx.b.release(&l.key, Duration::ZERO).await;
                settle(r.map(|r| {
                    (
                        End::Released {
                            dead: r == Released::Dead,
                        },
                        r == Released::Dead,
                    )
                }))?
            } else {
                settle(s.cx.b.ack(&l.key).await.map(|()| (End::Acked, true)))?
            };
            h.ended(i, end, before, h.tick());
            if resolved {
                s.resolved.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    Ok(())
}

fn settle(r: Result<(End, bool), Error>) -> Result<(End, bool), Violation> {
    match r {
        Ok(v) => Ok(v),
        Err(Error::LeaseLost { .. }) => Ok((End::Lost, false)),
        Err(e) => Err(Violation::new(
            Rule::Inv5,
            format!("a worker's call failed unexpectedly: {e}"),
        )),
    }
}

async fn reap(s: Arc<Storm>) -> Result<(), Violation> {
    while !s.stop.load(Ordering::SeqCst) {
        let r = s.cx.reap().await?;
        s.history.reaped_dead(r.dead);
        s.resolved.fetch_add(r.dead, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(if s.cx.tb.is_manual() {
            1
        } else {
            20
        }))
        .await;
    }
    Ok(())
}

/// On a manual clock, time moves a tenth of a lease every millisecond, so
/// crashed leases run out while the storm goes on.
async fn drive_time(s: Arc<Storm>) {
    while !s.stop.load(Ordering::SeqCst) {
        if s.cx.tb.is_manual() {
            s.cx.tb.pass_time(s.ttl / 10).await;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
