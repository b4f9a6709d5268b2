//! The clock is read inside the atomic step it stamps: a claim that read
//! the time before its step (a round trip earlier) stamps its leases with a
//! time from before transitions that step already sees.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{ClaimSpec, Lease, NewItem, Timestamp};

use crate::cx::{run, Cx, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, TimeControl, Violation};

/// Claimers loop on an empty queue while time passes and one item is
/// enqueued: the lease a claim hands out is stamped (`expires_at` less the
/// ttl) no earlier than that item's `enqueued_at`, as the claim's step came
/// after the enqueue's. On a manual clock the time passes by a second, so a
/// claim that read the clock before its step is caught every round.
pub async fn claims_read_the_clock_in_their_step(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("now");
    run(
        factory,
        "claims_read_the_clock_in_their_step",
        rule,
        Needs::NONE,
        |cx| async move {
            for round in 0..10 * scale() {
                let stop = Arc::new(AtomicBool::new(false));
                let claimers: Vec<_> = (0..4)
                    .map(|_| {
                        let (cx, stop) = (cx.clone(), stop.clone());
                        cx.clone().spawn(async move {
                            let mut got = Vec::new();
                            while got.is_empty() && !stop.load(Ordering::SeqCst) {
                                got = cx.claim(1, LONG).await?;
                                tokio::task::yield_now().await;
                            }
                            Ok::<Vec<Lease>, Violation>(got)
                        })
                    })
                    .collect();
                // Let the claimers start, then let time pass under them.
                tokio::time::sleep(Duration::from_millis(3)).await;
                match &cx.tb.time {
                    TimeControl::Manual(clock) => clock.advance(Duration::from_secs(1)),
                    TimeControl::Real => tokio::time::sleep(Duration::from_millis(5)).await,
                }
                let id = cx.enqueue(vec![NewItem::new("late")]).await?[0];
                let mut leases = Vec::new();
                for _ in 0..10_000 {
                    if cx.stats().await?.leased == 1 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                stop.store(true, Ordering::SeqCst);
                for got in cx.join(claimers).await? {
                    leases.extend(got?);
                }
                ensure!(
                    leases.len() == 1 && leases[0].id() == id,
                    rule,
                    "round {round}: four claimers over one item {id} got {leases:?}"
                );
                let l = &leases[0];
                let ttl = u64::try_from(LONG.as_millis()).unwrap_or(u64::MAX);
                let stamped = l.expires_at.as_millis().saturating_sub(ttl);
                // 1 ms of slack for a store that rounds one stamp and truncates the other.
                ensure!(
                    stamped + 1 >= l.enqueued_at.as_millis(),
                    rule,
                    "a clock read outside the atomic step: round {round}: a claim leased item {id} with a lease stamped at {stamped} ms (expires_at {} less the ttl), before the item's enqueue at {}; the claim read the backend's clock before its step (a round trip earlier), not inside it",
                    l.expires_at,
                    l.enqueued_at
                );
                cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            }
            Ok(())
        },
    )
    .await
}

/// Brings the backend's clock to `t`: exactly there on a manual clock, to
/// `t` or just past it on a real one (whose now is whole milliseconds).
async fn clock_at(cx: &Cx, t: Timestamp) -> Result<(), Violation> {
    let now = cx.now().await?;
    match &cx.tb.time {
        TimeControl::Manual(clock) => {
            ensure!(now <= t, cx.rule, "the clock is at {now}, past {t}");
            clock.advance(t.saturating_since(now));
            Ok(())
        }
        TimeControl::Real => {
            cx.wait_past(Timestamp::from_millis(t.as_millis() - 1))
                .await
        }
    }
}

/// Stops a manual clock one millisecond before `t`; false on a real clock,
/// which cannot be stopped there.
async fn clock_just_before(cx: &Cx, t: Timestamp) -> Result<bool, Violation> {
    if !cx.tb.is_manual() {
        return Ok(false);
    }
    clock_at(cx, Timestamp::from_millis(t.as_millis() - 1)).await?;
    Ok(true)
}

/// Expiry and due times are instants, judged alike by every operation: a
/// lease is live while now < `expires_at` and expired from `expires_at` on
/// (at `expires_at` a reap recovers it, and `recover_claim` then leaves it out),
/// and a Scheduled item is claimable from its due time on. On a manual
/// clock the suite also stops one millisecond before each instant: the
/// lease is still live there (a reap leaves it, `recover_claim` returns
/// it) and the item is not yet claimable.
pub async fn expiry_and_due_times_are_exact(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("expires_at/due_at");
    run(
        factory,
        "expiry_and_due_times_are_exact",
        rule,
        Needs::NONE,
        |cx| async move {
            let ids = cx.push_n(1).await?;
            let spec = ClaimSpec::new(1, SHORT).or_fail(rule, "spec")?;
            let claimed =
                cx.b.claim(&cx.q, spec.duplicate())
                    .await
                    .or_fail(rule, "claim")?;
            let lease = claimed
                .leases
                .first()
                .ok_or_else(|| cx.fail("a claim of one Ready item returned nothing"))?
                .clone();
            ensure!(lease.id() == ids[0], rule, "claimed {}", lease.id());
            let at = lease.expires_at;
            let recovered = || async {
                let c = cx.b.recover_claim(&cx.q, &spec).await;
                c.map(|c| c.leases.len()).or_fail(rule, "recover_claim")
            };
            if clock_just_before(&cx, at).await? {
                let r = cx.reap().await?;
                ensure!(
                    r.recovered() == 0,
                    rule,
                    "a reap one ms before the lease's expires_at {at} recovered {r:?}"
                );
                let n = recovered().await?;
                ensure!(
                    n == 1,
                    rule,
                    "recover_claim one ms before expires_at {at} returned {n} leases, expected the live one"
                );
            }
            clock_at(&cx, at).await?;
            let r = cx.reap().await?;
            ensure!(
                r.requeued == 1,
                rule,
                "a reap at the lease's expires_at {at} (or just past it) reported {r:?}; expected \
                 the lease requeued"
            );
            let n = recovered().await?;
            ensure!(
                n == 0,
                rule,
                "recover_claim after a reap at the lease's expires_at {at} returned {n} leases; \
                 the reap took the lease"
            );
            let again = cx.claim_one(LONG).await?;
            cx.b.ack(&again.key).await.or_fail(rule, "ack")?;
            if cx.b.capabilities().delays {
                let later = cx.enqueue(vec![NewItem::new("later").delay(SHORT)]).await?[0];
                let due = cx.due_of(later).await?;
                if clock_just_before(&cx, due).await? {
                    ensure!(
                        cx.claim(1, LONG).await?.is_empty(),
                        rule,
                        "claimed an item one ms before its due time {due}"
                    );
                }
                clock_at(&cx, due).await?;
                let got = cx.claim(1, LONG).await?;
                ensure!(
                    got.len() == 1 && got[0].id() == later,
                    rule,
                    "a claim at the item's due time {due} (or just past it) returned {got:?}; \
                     expected the item, claimable from its due time on"
                );
                cx.b.ack(&got[0].key).await.or_fail(rule, "ack")?;
            }
            Ok(())
        },
    )
    .await
}
