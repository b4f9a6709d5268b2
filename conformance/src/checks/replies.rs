//! Lost replies: every operation can be settled after a reply is lost, by
//! its own identity (a claim's token family, a lease's token, an enqueue's
//! request id), so nothing is delivered twice and every outcome reported
//! matches the store. A backend that does not implement `recover_claim`,
//! `lease_fate` or `enqueue_once` fails these checks: without them a lost
//! reply loses an attempt or duplicates a batch.

use std::sync::Arc;
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::layer::fault::{Fault, Faults, Op};
use leaseq_core::settle::{Held, Settle};
use leaseq_core::{
    Backend, ClaimSpec, Enqueued, Error, ItemId, ItemState, Lease, LeaseFate, LeaseKey, LeaseToken,
    LeaseTraces, NewItem, ReapReport, Released, Timestamp,
};

use crate::cx::{run, Cx, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

/// How often [`lease_fate_at_its_bounds`] asks at the bound.
const BOUND_ASKS: usize = 20;

fn unsupported(what: &str, e: &Error) -> Option<Violation> {
    matches!(e, Error::Unsupported { .. }).then(|| {
        Violation::new(
            Rule::Contract("lost replies"),
            format!("the backend does not implement {what} ({e}): a call whose reply is lost cannot be settled"),
        )
    })
}

fn held(l: &Lease) -> Held {
    Held {
        key: l.key.clone(),
        until: l.expires_at,
    }
}

/// `recover_claim` returns exactly the live leases a claim with that spec
/// made, with the spec's tokens in claim order and every field as the
/// claim returned it, and claims nothing; another
/// spec recovers nothing, nor does the same spec on another queue.
pub async fn claim_recovers_its_own_leases(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("recover_claim");
    run(factory, "claim_recovers_its_own_leases", rule, Needs::NONE, |cx| async move {
        // Items whose fields all differ from the defaults and from each
        // other (payload, priority, max attempts, and attempts after one
        // release), so a recovered lease with a field read wrong shows.
        let items = (0..5i32).map(|i| NewItem::new(format!("r{i}")).priority(i % 2).max_attempts(3)).collect();
        cx.enqueue(items).await?;
        for l in cx.claim(5, LONG).await? {
            cx.b.release(&l.key, Duration::ZERO).await.or_fail(rule, "release")?;
        }
        let spec = ClaimSpec::new(3, LONG).or_fail(rule, "spec")?;
        // The spec is kept to recover the claim with; a duplicate is sent.
        let claimed = cx.b.claim(&cx.q, spec.duplicate()).await.or_fail(rule, "claim")?;
        ensure!(claimed.leases.len() == 3, rule, "a claim of 3 over 5 items returned {}", claimed.leases.len());
        let mut tokens: Vec<u128> = claimed.leases.iter().map(|l| l.token().as_u128()).collect();
        for (i, l) in claimed.leases.iter().enumerate() {
            ensure!(spec.owns(l.token()), rule, "lease {i} has token {}, not of the spec's family {} (claim must use the spec's tokens, ClaimSpec::token(i))", l.token(), spec.request());
        }
        tokens.sort_unstable();
        tokens.dedup();
        ensure!(tokens.len() == claimed.leases.len(), rule, "the claim handed out one token twice: {:?}", claimed.leases);
        let again = match cx.b.recover_claim(&cx.q, &spec).await {
            Err(e) => return Err(unsupported("recover_claim", &e).unwrap_or_else(|| cx.fail(format!("recover_claim failed: {e}")))),
            Ok(c) => c,
        };
        let keys = |ls: &[Lease]| ls.iter().map(|l| (l.id(), l.token())).collect::<Vec<_>>();
        ensure!(keys(&again.leases) == keys(&claimed.leases), rule, "recover_claim returned {:?}; the claim made {:?}", keys(&again.leases), keys(&claimed.leases));
        ensure!(again.leases == claimed.leases, rule, "recover_claim returned {:?}; the claim returned {:?}: a recovered lease is the claim's lease, field for field (payload, attempts, max attempts, priority, enqueue time, expiry)", again.leases, claimed.leases);
        cx.expect_stats([2, 0, 3, 0], "after recover_claim (it must claim nothing)").await?;
        // Another spec: a random one, and the families just below and just
        // above this claim's, so a family bound left open is caught.
        let family = spec.request().as_u128() & ClaimSpec::FAMILY_MASK;
        let step = !ClaimSpec::FAMILY_MASK + 1;
        let mut others = vec![ClaimSpec::new(3, LONG).or_fail(rule, "spec")?];
        for near in [family.wrapping_sub(step), family.wrapping_add(step)] {
            others.push(ClaimSpec::with_request(3, LONG, LeaseToken::from_u128(near)).or_fail(rule, "spec")?);
        }
        for other in &others {
            let none = cx.b.recover_claim(&cx.q, other).await.or_fail(rule, "recover_claim of another spec")?;
            ensure!(none.leases.is_empty(), rule, "another spec (request {}) recovered {:?}", other.request(), keys(&none.leases));
        }
        // The same spec on another queue: the claim was made on this one.
        let elsewhere = cx.own("elsewhere")?;
        let none = cx.b.recover_claim(&elsewhere, &spec).await.or_fail(rule, "recover_claim on another queue")?;
        ensure!(none.leases.is_empty(), rule, "recover_claim of the spec on queue {elsewhere} recovered {:?}, leases the claim made on {}: a recovery must look only at the queue it names", keys(&none.leases), cx.q);
        cx.b.ack(&claimed.leases[0].key).await.or_fail(rule, "ack")?;
        let rest = cx.b.recover_claim(&cx.q, &spec).await.or_fail(rule, "recover_claim after an ack")?;
        ensure!(keys(&rest.leases) == keys(&claimed.leases[1..]), rule, "after acking the first lease recover_claim returned {:?}", keys(&rest.leases));
        Ok(())
    })
    .await
}

async fn fate(cx: &Cx, key: &LeaseKey, until: Timestamp) -> Result<LeaseFate, Violation> {
    cx.b.lease_fate(key, until).await.map_err(|e| {
        unsupported("lease_fate", &e).unwrap_or_else(|| cx.fail(format!("lease_fate failed: {e}")))
    })
}

/// `lease_fate` says Held while the token holds the item (expired or not,
/// until a reap or a claim takes it); Finished (with
/// the item's state) after the lease's own ack, release or fail, also
/// when asked past the lease's expiry (the lease traces); Lost for a
/// token that never held the item, once the lease has expired (takeover
/// traces: anything but Held). After a
/// release whose delay has fallen due the state is Ready, the effective
/// one.
pub async fn lease_fate_names_what_happened(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lease_fate");
    run(factory, "lease_fate_names_what_happened", rule, Needs::NONE, |cx| async move {
        cx.push_n(4).await?;
        let ls = cx.claim(4, LONG).await?;
        ensure!(ls.len() == 4, rule, "claimed {} of 4", ls.len());
        let until = ls[0].expires_at;
        let f = fate(&cx, &ls[0].key, until).await?;
        ensure!(f == LeaseFate::Held, rule, "a live lease's fate is {f:?}, expected Held");
        cx.b.ack(&ls[0].key).await.or_fail(rule, "ack")?;
        let f = fate(&cx, &ls[0].key, until).await?;
        ensure!(f == LeaseFate::Finished { state: None }, rule, "after its own ack the fate is {f:?}, expected Finished {{ state: None }}");
        cx.b.release(&ls[1].key, Duration::ZERO).await.or_fail(rule, "release")?;
        let f = fate(&cx, &ls[1].key, until).await?;
        ensure!(f == LeaseFate::Finished { state: Some(ItemState::Ready) }, rule, "after its own release the fate is {f:?}, expected Finished in Ready");
        cx.b.fail(&ls[2].key, "no").await.or_fail(rule, "fail")?;
        let f = fate(&cx, &ls[2].key, until).await?;
        ensure!(f == LeaseFate::Finished { state: Some(ItemState::Dead) }, rule, "after its own fail the fate is {f:?}, expected Finished in Dead");
        if cx.b.capabilities().delays {
            // The state named is the one every read shows: a released item
            // past its due time is Ready, moved or not.
            cx.b.release(&ls[3].key, SHORT).await.or_fail(rule, "release with a delay")?;
            let f = fate(&cx, &ls[3].key, until).await?;
            ensure!(f == LeaseFate::Finished { state: Some(ItemState::Scheduled) }, rule, "after its own delayed release the fate is {f:?}, expected Finished in Scheduled");
            // Due by the hook where time is real (no wait), else by waiting.
            match (cx.tb.is_manual(), cx.hooks()) {
                (false, Some(h)) => {
                    h.make_due(&cx.q).await.or_fail(rule, "make_due hook")?;
                }
                _ => {
                    let due = cx.due_of(ls[3].id()).await?;
                    cx.wait_past(due).await?;
                }
            }
            let f = fate(&cx, &ls[3].key, until).await?;
            ensure!(f == LeaseFate::Finished { state: Some(ItemState::Ready) }, rule, "after its own delayed release, past the due time, the fate is {f:?}, expected Finished in Ready (a due item is Ready to every read)");
        }
        let forged = LeaseKey { token: LeaseToken::random(), ..ls[3].key.clone() };
        let past = cx.now().await?;
        cx.wait_past(past).await?;
        let f = fate(&cx, &forged, past).await?;
        let traces = cx.b.capabilities().lease_traces;
        if traces == LeaseTraces::Takeovers {
            // No reap took it: takeover traces cannot tell it from a lease
            // its own call ended.
            ensure!(f != LeaseFate::Held, rule, "a token that does not hold the item has fate Held");
        } else {
            ensure!(f == LeaseFate::Lost, rule, "a token that does not hold the item, past its expiry, has fate {f:?}, expected Lost");
        }
        let f = fate(&cx, &ls[0].key, past).await?;
        if traces.any() {
            ensure!(f == LeaseFate::Finished { state: None }, rule, "a lease its own ack ended, asked about after its expiry, has fate {f:?}, expected Finished {{ state: None }} (the ack left a trace of its token)");
        } else {
            ensure!(f == LeaseFate::Lost, rule, "an acked lease asked about after its expiry, on a backend without finishing traces, has fate {f:?}, expected Lost");
        }
        // Expired, but neither reaped nor claimed again: the token still
        // holds the item, so the lease is Held and its ack succeeds.
        cx.enqueue(vec![NewItem::new("late")]).await?;
        let late = cx.claim_one(SHORT).await?;
        cx.expire(std::slice::from_ref(&late)).await?;
        let f = fate(&cx, &late.key, late.expires_at).await?;
        ensure!(f == LeaseFate::Held, rule, "an expired lease that no reap or claim has taken has fate {f:?}, expected Held (its token still holds the item)");
        cx.b.ack(&late.key).await.or_fail(rule, "ack of an expired, unreaped lease")?;
        Ok(())
    })
    .await
}

/// `recover_claim` returns a claim's leases in the claim's order also when
/// that order is not enqueue order: over a claim that spans priorities
/// (and, with delays, takes a due Scheduled item among Ready ones), the
/// leases recovered are the claim's, lease for lease, in the order the
/// claim returned them. A backend that numbers its tokens by id instead
/// of by claim order recovers them out of order.
pub async fn recovered_in_claim_order_across_priorities(
    factory: &dyn BackendFactory,
) -> CheckResult {
    let rule = Rule::Contract("recover_claim");
    run(
        factory,
        "recovered_in_claim_order_across_priorities",
        rule,
        Needs::PRIORITIES,
        |cx| async move {
            let mut items: Vec<NewItem> = [0, 5, 0, 9, 5]
                .iter()
                .enumerate()
                .map(|(i, p)| NewItem::new(format!("p{p}-{i}")).priority(*p))
                .collect();
            let delays = cx.b.capabilities().delays;
            if delays {
                items.push(NewItem::new("due-p7").priority(7).delay(SHORT));
            }
            let n = items.len();
            let ids = cx.enqueue(items).await?;
            if delays {
                let due = cx.must_item(ids[n - 1]).await?.due_at;
                let due = due.ok_or_else(|| cx.fail("a Scheduled item shows no due time"))?;
                cx.wait_past(due).await?;
            }
            let spec = ClaimSpec::new(n as u32, LONG).or_fail(rule, "spec")?;
            let claimed =
                cx.b.claim(&cx.q, spec.duplicate())
                    .await
                    .or_fail(rule, "claim")?;
            ensure!(
                claimed.leases.len() == n,
                rule,
                "a claim of {n} over {n} items returned {}",
                claimed.leases.len()
            );
            let again = match cx.b.recover_claim(&cx.q, &spec).await {
                Err(e) => {
                    return Err(unsupported("recover_claim", &e)
                        .unwrap_or_else(|| cx.fail(format!("recover_claim failed: {e}"))))
                }
                Ok(c) => c,
            };
            let keys = |ls: &[Lease]| {
                ls.iter()
                    .map(|l| (l.id(), l.priority, l.token()))
                    .collect::<Vec<_>>()
            };
            ensure!(
                keys(&again.leases) == keys(&claimed.leases),
                rule,
                "recover_claim returned (id, priority, token) {:?}; the claim made {:?}, in that \
                 order",
                keys(&again.leases),
                keys(&claimed.leases)
            );
            for l in &claimed.leases {
                cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            }
            Ok(())
        },
    )
    .await
}

/// `lease_fate` at its bound, for a lease no call of its own ended (so no
/// finishing trace speaks) and a reap took: Held while live; asked with a
/// `held_until` ahead, Finished (no reaper could have taken it, as far as
/// the caller knows); asked with a `held_until` the backend's clock has
/// reached, Lost, never Finished (`held_until` is exclusive). Core
/// operations only, on every backend, whatever its lease traces.
pub async fn lease_fate_at_its_bounds(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lease_fate");
    run(
        factory,
        "lease_fate_at_its_bounds",
        rule,
        Needs::NONE,
        |cx| async move {
            cx.push_n(1).await?;
            let l = cx.claim_one(SHORT).await?;
            let f = fate(&cx, &l.key, l.expires_at).await?;
            ensure!(
                f == LeaseFate::Held,
                rule,
                "a live lease's fate is {f:?}, expected Held"
            );
            cx.expire(std::slice::from_ref(&l)).await?;
            // The queue's only lease: by the clock or by the hook, the reap
            // takes exactly it.
            let reaped = cx.reap_all().await?;
            ensure!(
                reaped.requeued == 1,
                rule,
                "the reap requeued {} expired leases, expected 1 (the queue's only lease)",
                reaped.requeued
            );
            let ahead = cx.now().await?.saturating_add(LONG);
            let f = fate(&cx, &l.key, ahead).await?;
            ensure!(
                matches!(f, LeaseFate::Finished { .. }),
                rule,
                "a lease a reap took, asked about with a held_until ahead, has fate {f:?}; \
                 expected Finished (before held_until no reaper could have taken it, as far as \
                 the caller knows)"
            );
            expect_lost_at_the_bound(&cx, &l.key, "a reap took").await
        },
    )
    .await
}

/// Asks the fate of `subject` again and again with the time the clock read
/// just before: on a real clock the ask often falls in that same
/// millisecond, where only an exclusive bound says Lost.
async fn expect_lost_at_the_bound(
    cx: &Cx,
    subject: &LeaseKey,
    what: &str,
) -> Result<(), Violation> {
    for _ in 0..BOUND_ASKS {
        let reached = cx.now().await?;
        let f = fate(cx, subject, reached).await?;
        ensure!(
            f == LeaseFate::Lost,
            cx.rule,
            "a lease whose item {what}, asked about with held_until {reached}, a \
             time the backend's clock had reached, has fate {f:?}; expected Lost \
             (Finished only while now < held_until, or by a trace)"
        );
    }
    Ok(())
}

/// `lease_fate` of leases whose items the store lost by an operator's
/// action (the Admin group): for a lease whose item `remove_item` took,
/// `held_until` is exclusive (Lost once the clock has reached it; with
/// takeover traces either answer is allowed past it), and a lease whose
/// item is gone together with its whole queue is judged the same way:
/// after the removal of a queue's only item, and after a purge took the
/// queue's items, the fate is `Finished { state: None }` before
/// `held_until` and Lost from it on. A backend that keeps nothing of an
/// emptied queue must still compare the clock with `held_until`, not
/// answer one fate for every unknown queue.
pub async fn lease_fate_after_removals(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lease_fate");
    run(
        factory,
        "lease_fate_after_removals",
        rule,
        Needs::ADMIN,
        |cx| async move {
            // A queue that keeps an item: the bound is exclusive.
            cx.push_n(2).await?;
            let ls = cx.claim(2, LONG).await?;
            ensure!(ls.len() == 2, rule, "claimed {} of 2", ls.len());
            cx.b.remove_item(&cx.q, ls[0].id())
                .await
                .or_fail(rule, "remove_item")?;
            // Takeover traces answer a removed item's lease either way past
            // `held_until` (lease_fate_at_its_bounds judges their bound on
            // a lease a reap took).
            let takeovers = cx.b.capabilities().lease_traces == LeaseTraces::Takeovers;
            let f = fate(&cx, &ls[0].key, ls[0].expires_at).await?;
            ensure!(
                f == LeaseFate::Finished { state: None },
                rule,
                "a live lease whose item remove_item took has fate {f:?} before its expiry; \
                 expected Finished {{ state: None }} (the store lost it)"
            );
            if !takeovers {
                expect_lost_at_the_bound(&cx, &ls[0].key, "was removed").await?;
            }
            cx.b.remove_item(&cx.q, ls[1].id())
                .await
                .or_fail(rule, "remove_item")?;
            // The queue's last item removed: nothing of the queue is left.
            let f = fate(&cx, &ls[1].key, ls[1].expires_at).await?;
            ensure!(
                f == LeaseFate::Finished { state: None },
                rule,
                "after the removal of the queue's last item its lease's fate (before its expiry) \
                 is {f:?}; expected Finished {{ state: None }}"
            );
            let reached = cx.now().await?;
            let f = fate(&cx, &ls[1].key, reached).await?;
            ensure!(
                f == LeaseFate::Lost || takeovers,
                rule,
                "after the removal of the queue's last item, asked with held_until {reached} \
                 (reached), the fate is {f:?}; expected Lost"
            );
            // A purge takes the items, and with them the queue.
            cx.push_n(1).await?;
            let held = cx.claim_one(LONG).await?;
            cx.b.purge(&cx.q).await.or_fail(rule, "purge")?;
            let f = fate(&cx, &held.key, held.expires_at).await?;
            ensure!(
                f == LeaseFate::Finished { state: None },
                rule,
                "a live lease whose item a purge took has fate {f:?} before its expiry; expected \
                 Finished {{ state: None }} (the store lost it)"
            );
            let reached = cx.now().await?;
            let f = fate(&cx, &held.key, reached).await?;
            ensure!(
                f == LeaseFate::Lost || takeovers,
                rule,
                "a lease whose item a purge took, asked with held_until {reached} (reached), has \
                 fate {f:?}; expected Lost"
            );
            Ok(())
        },
    )
    .await
}

/// Settling after a requeue: `recover_claim` leaves out a lease its holder
/// released and leases a reap took, returns (renewed) leases that expired
/// but were not reaped, and recovers nothing of a later claim; `lease_fate` says Lost for a reaped lease asked about
/// past its expiry, and Finished in Ready after the lease's own
/// `give_back`. A backend that reads only the stored token, not whether
/// the lease is live, fails here.
pub async fn settling_sees_requeues(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("recover_claim");
    run(factory, "settling_sees_requeues", rule, Needs::NONE, |cx| async move {
        let keys = |ls: &[Lease]| ls.iter().map(|l| (l.id(), l.token())).collect::<Vec<_>>();
        cx.push_n(4).await?;
        let spec = ClaimSpec::new(4, SHORT).or_fail(rule, "spec")?;
        let claimed = cx.b.claim(&cx.q, spec.duplicate()).await.or_fail(rule, "claim")?;
        ensure!(claimed.leases.len() == 4, rule, "a claim of 4 over 4 items returned {}", claimed.leases.len());
        cx.b.release(&claimed.leases[0].key, Duration::ZERO).await.or_fail(rule, "release")?;
        let live = match cx.b.recover_claim(&cx.q, &spec).await {
            Err(e) => return Err(unsupported("recover_claim", &e).unwrap_or_else(|| cx.fail(format!("recover_claim failed: {e}")))),
            Ok(c) => c,
        };
        ensure!(
            keys(&live.leases) == keys(&claimed.leases[1..]),
            rule,
            "after the first lease was released recover_claim returned {:?}; expected the other three {:?}",
            keys(&live.leases),
            keys(&claimed.leases[1..])
        );
        cx.expire(&claimed.leases).await?;
        let expired = cx.b.recover_claim(&cx.q, &spec).await.or_fail(rule, "recover_claim after expiry")?;
        let renews = cx.b.capabilities().lease_traces.any();
        ensure!(
            !renews && expired.leases.is_empty() || renews && keys(&expired.leases) == keys(&claimed.leases[1..]),
            rule,
            "after the leases expired (none reaped) recover_claim returned {:?}; expected {} {:?}",
            keys(&expired.leases),
            if renews { "the three still held, renewed" } else { "none (the backend renews no expired lease)" },
            keys(&claimed.leases[1..])
        );
        let now = cx.now().await?;
        ensure!(
            expired.leases.iter().all(|l| l.expires_at > now),
            rule,
            "recover_claim returned expired leases {:?} without renewing them (now {now}): a reaper may take them while the caller works",
            expired.leases.iter().map(|l| (l.id(), l.expires_at)).collect::<Vec<_>>()
        );
        cx.expire(&expired.leases).await?;
        let reaped = cx.reap_all().await?;
        ensure!(reaped.requeued == 3, rule, "the reap requeued {} of 3 expired leases", reaped.requeued);
        let later = cx.claim(4, LONG).await?;
        ensure!(later.len() == 4, rule, "a claim after the reap got {} of 4", later.len());
        let after = cx.b.recover_claim(&cx.q, &spec).await.or_fail(rule, "recover_claim after a later claim")?;
        ensure!(
            after.leases.is_empty(),
            rule,
            "recover_claim of the first spec returned {:?} after the items were claimed again under another",
            keys(&after.leases)
        );
        let fate_rule = Rule::Contract("lease_fate");
        let reaped_lease = &claimed.leases[1];
        // Past the lease's own expiry (a hook may have expired it early).
        cx.wait_past(reaped_lease.expires_at).await?;
        let f = fate(&cx, &reaped_lease.key, reaped_lease.expires_at).await?;
        ensure!(
            f == LeaseFate::Lost,
            fate_rule,
            "a reaped lease asked about past its expiry has fate {f:?}, expected Lost"
        );
        cx.b.give_back(&later[0].key).await.or_fail(rule, "give_back")?;
        let f = fate(&cx, &later[0].key, later[0].expires_at).await?;
        ensure!(
            f == LeaseFate::Finished { state: Some(ItemState::Ready) },
            fate_rule,
            "after its own give_back (before its expiry) the fate is {f:?}, expected Finished in Ready"
        );
        Ok(())
    })
    .await
}

/// `enqueue_once` sent twice with one request writes the batch once and
/// returns the first results; a new request writes again.
pub async fn enqueue_once_writes_once(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("enqueue_once");
    run(
        factory,
        "enqueue_once_writes_once",
        rule,
        Needs::NONE,
        |cx| async move {
            let batch = || {
                (0..3)
                    .map(|i| NewItem::new(format!("once-{i}")))
                    .collect::<Vec<_>>()
            };
            let req = LeaseToken::random();
            let first = match cx.b.enqueue_once(&cx.q, req, batch()).await {
                Err(e) => {
                    return Err(unsupported("enqueue_once", &e)
                        .unwrap_or_else(|| cx.fail(format!("enqueue_once failed: {e}"))))
                }
                Ok(v) => v,
            };
            let again =
                cx.b.enqueue_once(&cx.q, req, batch())
                    .await
                    .or_fail(rule, "enqueue_once sent again")?;
            ensure!(
                first == again,
                rule,
                "the resend returned {again:?}; the first call returned {first:?}"
            );
            cx.expect_stats([3, 0, 0, 0], "after one batch sent twice under one request")
                .await?;
            let other =
                cx.b.enqueue_once(&cx.q, LeaseToken::random(), batch())
                    .await
                    .or_fail(rule, "enqueue_once under a new request")?;
            ensure!(
                other.iter().all(|e| !first.iter().any(|f| f.id == e.id)),
                rule,
                "a new request reused ids: {other:?} vs {first:?}"
            );
            cx.expect_stats([6, 0, 0, 0], "after a second request")
                .await?;
            if cx.b.capabilities().dedup {
                // A resend gives back which items were deduplicated too:
                // here the second, whose key the first took.
                let keyed = || {
                    (0..2)
                        .map(|i| NewItem::new(format!("keyed-{i}")).dedup_key("once-key"))
                        .collect::<Vec<_>>()
                };
                let req = LeaseToken::random();
                let first =
                    cx.b.enqueue_once(&cx.q, req, keyed())
                        .await
                        .or_fail(rule, "enqueue_once of a batch with one key twice")?;
                ensure!(
                    first.len() == 2
                        && !first[0].deduplicated
                        && first[1].deduplicated
                        && first[1].id == first[0].id,
                    rule,
                    "a batch with one dedup key twice returned {first:?}: expected one new item \
                     and the second entry deduplicated to it"
                );
                let again =
                    cx.b.enqueue_once(&cx.q, req, keyed())
                        .await
                        .or_fail(rule, "enqueue_once with a dedup key sent again")?;
                ensure!(
                    first == again,
                    rule,
                    "the resend of a batch with a deduplicated item returned {again:?}; the \
                     first call returned {first:?}"
                );
                cx.expect_stats([7, 0, 0, 0], "after a batch with one key twice, sent twice")
                    .await?;
            }
            // Bad input, and a resend of another size, write nothing.
            let ready = cx.stats().await?.ready;
            let invalid = |r: leaseq_core::Result<Vec<Enqueued>>| matches!(r, Err(Error::InvalidInput { .. }));
            let bad = vec![NewItem::new("good"), NewItem::new("bad").max_attempts(0)];
            let fresh = LeaseToken::random();
            ensure!(invalid(cx.b.enqueue_once(&cx.q, fresh, bad).await), rule, "enqueue_once of a batch with an item of max attempts 0 was not refused as InvalidInput (it is checked exactly like enqueue)");
            ensure!(
                invalid(cx.b.enqueue_once(&cx.q, req, batch()[..2].to_vec()).await),
                rule,
                "a resend of request {req} with 2 items where the first call sent 3 was not refused as InvalidInput"
            );
            ensure!(cx.stats().await?.ready == ready, rule, "a refused enqueue_once wrote items");
            let written = cx.b.enqueue_once(&cx.q, fresh, batch()).await.or_fail(rule, "enqueue_once of a good batch under the refused request")?;
            ensure!(
                written.len() == 3 && written.iter().all(|e| !e.deduplicated) && cx.stats().await?.ready == ready + 3,
                rule,
                "a good batch under the request id of a refused call returned {written:?}; expected 3 new items (a refused call is not remembered)"
            );
            Ok(())
        },
    )
    .await
}

/// Eight resends of one `enqueue_once` request in flight at once (a client
/// that retried before the first reply came back): the batch is written
/// once and every call gets the same results. A request id belongs to its
/// queue: the same id on another queue writes that queue's batch.
pub async fn concurrent_enqueue_once_writes_once(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("enqueue_once");
    run(
        factory,
        "concurrent_enqueue_once_writes_once",
        rule,
        Needs::NONE,
        |cx| async move {
            const SENDERS: usize = 8;
            let batch = || {
                (0..3)
                    .map(|i| NewItem::new(format!("race-{i}")))
                    .collect::<Vec<_>>()
            };
            for round in 0..3 {
                let cx = cx.round(round)?;
                let req = LeaseToken::random();
                let sends = cx.at_once(SENDERS, |cx, _| {
                    let items = batch();
                    async move { cx.b.enqueue_once(&cx.q, req, items).await }
                });
                let mut answers = Vec::new();
                for r in sends.await? {
                    match r {
                        Err(e) => {
                            return Err(unsupported("enqueue_once", &e).unwrap_or_else(|| {
                                cx.fail(format!("round {round}: a concurrent enqueue_once failed: {e}"))
                            }))
                        }
                        Ok(v) => answers.push(v),
                    }
                }
                ensure!(
                    answers.iter().all(|a| *a == answers[0]),
                    rule,
                    "round {round}: {SENDERS} concurrent sends of one request got different results: \
                     {answers:?}"
                );
                cx.expect_stats(
                    [3, 0, 0, 0],
                    &format!("round {round}: after {SENDERS} concurrent sends of one 3-item batch"),
                )
                .await?;
                let other = cx.own(&format!("once-{round}"))?;
                let theirs = cx.b.enqueue_once(&other, req, batch()).await;
                let theirs_stats = cx.b.stats(&other).await;
                let purged = cx.clean(&other).await;
                let theirs = theirs.or_fail(rule, "the same request id on another queue")?;
                let theirs_stats = theirs_stats.or_fail(rule, "stats of the other queue")?;
                purged.or_fail(rule, "purging the other queue")?;
                // Ids may be per queue, so only what was written tells.
                ensure!(
                    theirs_stats.ready == 3 && theirs.iter().all(|e| !e.deduplicated),
                    rule,
                    "round {round}: the request id already used on {} wrote {} of 3 items on \
                     another queue and returned {theirs:?}; a request id belongs to its queue",
                    cx.q,
                    theirs_stats.ready
                );
            }
            Ok(())
        },
    )
    .await
}

/// With the reply of each operation lost once (the call ran, the caller
/// saw an error), [`Settle`] still delivers each item once and reports
/// what the store holds: an enqueue is written once, a claim leases once
/// (under its spec's tokens), and ack, `ack_many`, release and fail report
/// that they landed. A later claim with a new spec gets tokens of its own.
pub async fn lost_replies_settle_truthfully(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lost replies");
    run(
        factory,
        "lost_replies_settle_truthfully",
        rule,
        Needs::NONE,
        |cx| async move {
            let faults = Arc::new(Faults::new(cx.b.clone()));
            let b: &dyn Backend = faults.as_ref();
            let settle = Settle::new().pauses(Duration::from_millis(1), Duration::from_millis(20));
            let q = &cx.q;
            let lost = |op| faults.inject(op, Fault::LoseReply, 1);

            lost(Op::EnqueueOnce);
            let items: Vec<NewItem> = (0..6)
                .map(|i| NewItem::new(format!("lr-{i}")).max_attempts(1))
                .collect();
            let done = settle
                .enqueue(b, q, LeaseToken::random(), items)
                .await
                .or_fail(rule, "settled enqueue")?;
            ensure!(
                done.len() == 6 && done.iter().all(|e| !e.deduplicated),
                rule,
                "a settled enqueue returned {done:?}"
            );
            cx.expect_stats([6, 0, 0, 0], "after an enqueue whose reply was lost")
                .await?;

            lost(Op::Claim);
            lost(Op::RecoverClaim);
            let spec = ClaimSpec::new(5, LONG).or_fail(rule, "spec")?;
            // Kept to see which claim the leases belong to.
            let first = spec.duplicate();
            let c = settle
                .claim(b, q, spec)
                .await
                .or_fail(rule, "settled claim")?;
            ensure!(
                c.leases.len() == 5,
                rule,
                "a settled claim of 5 after a lost reply returned {} leases",
                c.leases.len()
            );
            cx.expect_stats(
                [1, 0, 5, 0],
                "after a claim whose reply was lost (it must not lease more)",
            )
            .await?;
            ensure!(
                c.leases.iter().all(|l| first.owns(l.token())),
                rule,
                "the leases of a claim recovered after a lost reply are not all of its spec's \
                 family {}: {:?}",
                first.request(),
                c.leases
            );
            let ids: Vec<ItemId> = c.leases.iter().map(Lease::id).collect();

            lost(Op::AckMany);
            let r = settle
                .ack_many(b, &[held(&c.leases[0]), held(&c.leases[1])])
                .await
                .or_fail(rule, "settled ack_many")?;
            ensure!(
                r.iter().all(|x| x.is_ok()),
                rule,
                "ack_many whose reply was lost reported {r:?}; both acks landed"
            );
            lost(Op::Ack);
            settle
                .ack(b, &held(&c.leases[2]))
                .await
                .or_fail(rule, "settled ack (it landed)")?;
            lost(Op::Release);
            let rel = settle
                .release(b, &held(&c.leases[3]), Duration::ZERO)
                .await
                .or_fail(rule, "settled release (it landed)")?;
            ensure!(
                rel == Released::Dead,
                rule,
                "a release on the last attempt reported {rel:?}; the item went Dead"
            );
            lost(Op::Fail);
            settle
                .fail(b, &held(&c.leases[4]), "gave up")
                .await
                .or_fail(rule, "settled fail (it landed)")?;
            cx.expect_stats(
                [1, 0, 0, 2],
                "after ack_many, ack, release and fail whose replies were lost",
            )
            .await?;
            for (id, gone) in ids.iter().zip([true, true, true, false, false]) {
                let info = cx.item(*id).await?;
                ensure!(
                    info.is_none() == gone,
                    rule,
                    "item {id}: expected {}, found {info:?}",
                    if gone { "acked" } else { "Dead" }
                );
                if let Some(info) = info {
                    ensure!(
                        info.attempts == 1,
                        rule,
                        "item {id} spent {} attempts; it was claimed once",
                        info.attempts
                    );
                }
            }
            ensure!(
                faults.fired() == 7,
                rule,
                "the fault layer lost {} replies, expected 7",
                faults.fired()
            );

            faults.inject(Op::Claim, Fault::Refuse, 1);
            let spec = ClaimSpec::new(2, LONG).or_fail(rule, "spec")?;
            let second = spec.duplicate();
            let last = settle
                .claim(b, q, spec)
                .await
                .or_fail(rule, "claim after a refusal")?;
            ensure!(
                last.leases.len() == 1,
                rule,
                "a claim sent again after a refusal returned {} leases, expected the 1 left",
                last.leases.len()
            );
            // A new claim, with a spec of its own, hands out tokens of its
            // own: none of the first claim's family, whose holders could
            // otherwise act on this lease.
            let token = last.leases[0].token();
            ensure!(
                second.owns(token) && !first.owns(token),
                rule,
                "a claim with a new spec got token {token}; expected one of its own family {}, \
                 not of the earlier claim's {}",
                second.request(),
                first.request()
            );
            Ok(())
        },
    )
    .await
}

/// True, with the check marked skipped, on a backend that keeps no lease
/// traces: past a lease's expiry its fate is then unknown.
fn skipped_without_traces(cx: &Cx) -> bool {
    let none = !cx.b.capabilities().lease_traces.any();
    if none {
        cx.skip("the backend keeps no lease traces (Capabilities::lease_traces)");
    }
    none
}

/// The latest expiry among `leases` (the backend's clock must pass it).
fn latest(leases: &[Lease]) -> Timestamp {
    leases
        .iter()
        .map(|l| l.expires_at)
        .max()
        .unwrap_or(Timestamp::from_millis(0))
}

/// Lost replies and expired leases together: each finishing call (ack,
/// `ack_many`, release, fail) lands on a lease the backend's clock has
/// already passed, not yet reaped, and its reply is lost; [`Settle`]
/// reports each as landed (never `LeaseLost`), and the store agrees. The
/// traces name the token: after a reap, a new claim and that claim's ack,
/// the first lease's fate is Lost and the second's Finished.
pub async fn landed_finishes_past_expiry_are_reported(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lost replies");
    run(
        factory,
        "landed_finishes_past_expiry_are_reported",
        rule,
        Needs::NONE,
        |cx| async move {
            if skipped_without_traces(&cx) {
                return Ok(());
            }
            let faults = Arc::new(Faults::new(cx.b.clone()));
            let b: &dyn Backend = faults.as_ref();
            let settle = Settle::new().pauses(Duration::from_millis(1), Duration::from_millis(20));
            let lost = |op| faults.inject(op, Fault::LoseReply, 1);
            let items = (0..6).map(|i| NewItem::new(format!("px-{i}")).max_attempts(3)).collect();
            cx.enqueue(items).await?;
            let ls = cx.claim(6, SHORT).await?;
            ensure!(ls.len() == 6, rule, "claimed {} of 6", ls.len());
            // Past every lease's expiry on the backend's clock; none reaped.
            cx.wait_past(latest(&ls)).await?;

            lost(Op::Ack);
            let acked = settle.ack(b, &held(&ls[0])).await;
            ensure!(acked.is_ok(), rule, "an ack that landed past the lease's expiry, its reply lost, was reported {acked:?}; expected Ok (it landed)");
            lost(Op::AckMany);
            let many = settle.ack_many(b, &[held(&ls[1]), held(&ls[2])]).await.or_fail(rule, "settled ack_many")?;
            ensure!(many.iter().all(Result::is_ok), rule, "ack_many that landed past the leases' expiry, its reply lost, reported {many:?}; expected both Ok");
            lost(Op::Release);
            let rel = settle.release(b, &held(&ls[3]), Duration::ZERO).await;
            ensure!(matches!(rel, Ok(Released::Ready)), rule, "a release that landed past the lease's expiry, its reply lost, was reported {rel:?}; expected Ok(Ready)");
            lost(Op::Fail);
            let failed = settle.fail(b, &held(&ls[4]), "gave up").await;
            ensure!(failed.is_ok(), rule, "a fail that landed past the lease's expiry, its reply lost, was reported {failed:?}; expected Ok (it landed)");
            ensure!(faults.fired() == 4, rule, "the fault layer lost {} replies, expected 4", faults.fired());
            // Every report against the store.
            for (i, want) in [None, None, None, Some(ItemState::Ready), Some(ItemState::Dead)].into_iter().enumerate() {
                let found = cx.item(ls[i].id()).await?.map(|info| info.state);
                ensure!(found == want, rule, "item {} after its settled call: {found:?}, expected {want:?}", ls[i].id());
            }
            let f = fate(&cx, &ls[0].key, ls[0].expires_at).await?;
            ensure!(f == LeaseFate::Finished { state: None }, rule, "an acked lease asked about past its expiry has fate {f:?}; expected Finished {{ state: None }} (its ack's trace)");

            // The trace belongs to the token: a lease a reap took, whose item
            // a later claim took and acked, is Lost; the later one Finished.
            let reaped = cx.reap_all().await?;
            ensure!(reaped.requeued == 1, rule, "the reap requeued {} expired leases, expected 1", reaped.requeued);
            let again = cx.claim(2, LONG).await?;
            let Some(second) = again.iter().find(|l| l.id() == ls[5].id()) else {
                return Err(cx.fail(format!("a claim after the reap did not return the reaped item {}: {again:?}", ls[5].id())));
            };
            cx.b.ack(&second.key).await.or_fail(rule, "ack of the second lease")?;
            let f = fate(&cx, &ls[5].key, ls[5].expires_at).await?;
            ensure!(f == LeaseFate::Lost, rule, "a reaped lease whose item another lease then acked has fate {f:?}; expected Lost (the trace names the other token)");
            let f = fate(&cx, &second.key, second.expires_at).await?;
            ensure!(f == LeaseFate::Finished { state: None }, rule, "the lease that acked the item has fate {f:?}; expected Finished {{ state: None }}");
            let f = fate(&cx, &ls[3].key, ls[3].expires_at).await?;
            ensure!(matches!(f, LeaseFate::Finished { .. }), rule, "a lease its own release ended, asked about past its expiry after its item was claimed again, has fate {f:?}; expected Finished");
            Ok(())
        },
    )
    .await
}

/// A lost claim reply costs no attempt when no one else acted: the clock
/// passes the leases' expiry before `recover_claim` asks, and it still
/// returns them, renewed (a reap then takes nothing), on their first
/// attempt; they ack. Where a reaper acted first, `recover_claim` returns
/// nothing and the item's record says its attempt ended by lease expiry.
pub async fn lost_claim_past_expiry_costs_no_attempt(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("recover_claim");
    run(
        factory,
        "lost_claim_past_expiry_costs_no_attempt",
        rule,
        Needs::NONE,
        |cx| async move {
            if !cx.b.capabilities().lease_traces.any() {
                cx.skip("the backend renews no expired lease in recover_claim (Capabilities::lease_traces)");
                return Ok(());
            }
            let faults = Arc::new(Faults::new(cx.b.clone()));
            let b: &dyn Backend = faults.as_ref();
            let items = (0..3).map(|i| NewItem::new(format!("lc-{i}")).max_attempts(1)).collect();
            let ids = cx.enqueue(items).await?;

            faults.inject(Op::Claim, Fault::LoseReply, 1);
            let spec = ClaimSpec::new(2, SHORT).or_fail(rule, "spec")?;
            let sent = b.claim(&cx.q, spec.duplicate()).await;
            ensure!(sent.is_err() && faults.fired() == 1, rule, "a claim whose reply the fault layer loses returned {sent:?}");
            let after = cx.now().await?;
            cx.wait_past(after.saturating_add(SHORT)).await?;
            let got = b.recover_claim(&cx.q, &spec).await;
            let got = got.map_err(|e| unsupported("recover_claim", &e).unwrap_or_else(|| cx.fail(format!("recover_claim failed: {e}"))))?;
            let now = cx.now().await?;
            ensure!(got.leases.len() == 2, rule, "after a lost claim reply and the leases' expiry (no reap) recover_claim returned {} of the claim's 2 leases: the claim's attempt is lost", got.leases.len());
            for l in &got.leases {
                ensure!(spec.owns(l.token()), rule, "recover_claim returned token {}, not of the claim's family", l.token());
                ensure!(l.attempts == 1, rule, "a recovered lease is on attempt {}, expected 1 (the claim's)", l.attempts);
                ensure!(l.expires_at > now, rule, "a recovered lease expires at {} and the backend's now is {now}: an expired lease must be renewed", l.expires_at);
            }
            let reaped = cx.reap_all().await?;
            ensure!(reaped.requeued == 0 && reaped.dead == 0, rule, "a reap after recover_claim renewed the leases took {reaped:?}; expected nothing");
            for l in &got.leases {
                cx.b.ack(&l.key).await.or_fail(rule, "ack of a recovered lease")?;
            }
            let Some(&left) = ids.iter().find(|id| got.leases.iter().all(|l| l.id() != **id)) else {
                return Err(cx.fail(format!("recover_claim returned {:?}, leaving none of {ids:?}", got.leases)));
            };

            // A reaper first: the attempt ends by lease expiry.
            let (_, reaped) = lost_claim_reaped(&cx, &faults, rule).await?;
            ensure!(reaped.dead == 1, rule, "the reap of an expired lease on its final attempt sent {} items Dead, expected 1", reaped.dead);
            let info = cx.must_item(left).await?;
            let reason = info.last_error.clone().unwrap_or_default().to_lowercase();
            ensure!(
                info.state == ItemState::Dead && info.attempts == 1 && reason.contains("expired"),
                rule,
                "the item a reap took from a lost claim is {:?} on attempt {} with reason {:?}; expected Dead on attempt 1 with a reason that says the lease expired",
                info.state,
                info.attempts,
                info.last_error
            );
            Ok(())
        },
    )
    .await
}

/// A claim sent again after a lost reply reuses its tokens
/// ([`ClaimSpec::duplicate`]). When a reaper took the first claim's lease
/// and the second claim leases the same item under the same token, the
/// second lease's ack that landed is reported landed, also asked past its
/// expiry: whatever trace the reap left speaks of the first lease, not of
/// this one. (Found by the protocol model, `model-check`.)
pub async fn claim_sent_again_under_a_reaped_token(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lost replies");
    run(
        factory,
        "claim_sent_again_under_a_reaped_token",
        rule,
        Needs::NONE,
        |cx| async move {
            if skipped_without_traces(&cx) {
                return Ok(());
            }
            let faults = Arc::new(Faults::new(cx.b.clone()));
            let b: &dyn Backend = faults.as_ref();
            cx.enqueue(vec![NewItem::new("again").max_attempts(3)]).await?;
            let (spec, reaped) = lost_claim_reaped(&cx, &faults, rule).await?;
            ensure!(reaped.requeued == 1, rule, "the reap requeued {} expired leases, expected 1", reaped.requeued);
            // The worker sends the same claim again: the same token.
            let again = b.claim(&cx.q, spec.duplicate()).await.or_fail(rule, "the claim sent again")?;
            let Some(second) = again.leases.first() else {
                return Err(cx.fail("the claim sent again leased nothing".to_owned()));
            };
            // One item, one slot: the token the reap took from the first claim.
            ensure!(spec.owns(second.token()), rule, "the claim sent again leased token {}, not of its family", second.token());
            cx.b.ack(&second.key).await.or_fail(rule, "ack of the second lease")?;
            cx.wait_past(second.expires_at).await?;
            let f = fate(&cx, &second.key, second.expires_at).await?;
            ensure!(
                f == LeaseFate::Finished { state: None },
                rule,
                "a lease whose ack landed, leased by a claim sent again under the token a reap took \
                 from the first claim, has fate {f:?} past its expiry; expected Finished {{ state: None }}"
            );
            Ok(())
        },
    )
    .await
}

/// A claim of one item whose reply the fault layer loses, then its lease's
/// expiry and a reap that takes it: `recover_claim` then returns nothing.
/// Returns the claim's spec and the reap's report.
async fn lost_claim_reaped(
    cx: &Cx,
    faults: &Faults<Arc<dyn Backend>>,
    rule: Rule,
) -> Result<(ClaimSpec, ReapReport), Violation> {
    let before = faults.fired();
    faults.inject(Op::Claim, Fault::LoseReply, 1);
    let spec = ClaimSpec::new(1, SHORT).or_fail(rule, "spec")?;
    let sent = faults.claim(&cx.q, spec.duplicate()).await;
    ensure!(
        sent.is_err() && faults.fired() == before + 1,
        rule,
        "a claim whose reply the fault layer loses returned {sent:?}"
    );
    let after = cx.now().await?;
    cx.wait_past(after.saturating_add(SHORT)).await?;
    let reaped = cx.reap_all().await?;
    let none = faults
        .recover_claim(&cx.q, &spec)
        .await
        .or_fail(rule, "recover_claim after the reap")?;
    ensure!(
        none.leases.is_empty(),
        rule,
        "recover_claim returned {:?}, leases a reap had taken",
        none.leases
    );
    Ok((spec, reaped))
}

/// `lease_fate` asked past a lease's expiry judges that lease by its own
/// token, not by the item's history: after a reap took an item's first
/// lease, a second lease (another claim, another token) that ended by its
/// own ack, or by its own release, is Finished when asked after its
/// expiry, while the reaped first lease is Lost. A backend that reads a
/// takeover of the item, whichever lease it took, as the fate of every
/// lease of it answers Lost for leases whose own call ended them.
pub async fn fate_past_expiry_is_the_tokens_own(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("lease_fate");
    run(
        factory,
        "fate_past_expiry_is_the_tokens_own",
        rule,
        Needs::NONE,
        |cx| async move {
            if skipped_without_traces(&cx) {
                return Ok(());
            }
            let ids = cx
                .enqueue(
                    (0..2)
                        .map(|i| NewItem::new(format!("ft-{i}")).max_attempts(5))
                        .collect(),
                )
                .await?;
            let first = cx.claim(2, SHORT).await?;
            ensure!(first.len() == 2, rule, "claimed {} of 2", first.len());
            cx.expire(&first).await?;
            let reaped = cx.reap_all().await?;
            ensure!(
                reaped.requeued == 2,
                rule,
                "the reap of 2 expired leases reported {reaped:?}"
            );
            let mut second = cx.claim(2, SHORT).await?;
            second.sort_by_key(Lease::id);
            let got: Vec<ItemId> = second.iter().map(Lease::id).collect();
            // Sorted: a sharded backend's ids need not rise with enqueue
            // order.
            let mut want = ids.clone();
            want.sort();
            ensure!(
                got == want,
                rule,
                "the second claim leased {got:?}; expected {want:?}"
            );
            cx.b.ack(&second[0].key)
                .await
                .or_fail(rule, "ack of the second lease")?;
            let r =
                cx.b.release(&second[1].key, Duration::ZERO)
                    .await
                    .or_fail(rule, "release of the second lease")?;
            ensure!(
                r == Released::Ready,
                rule,
                "the release answered {r:?}; expected Ready"
            );
            cx.wait_past(latest(&second)).await?;
            let f = fate(&cx, &second[0].key, second[0].expires_at).await?;
            ensure!(
                f == LeaseFate::Finished { state: None },
                rule,
                "a lease its own ack ended, on an item whose earlier lease a reap took, has fate \
                 {f:?} asked past its expiry; expected Finished {{ state: None }}"
            );
            let f = fate(&cx, &second[1].key, second[1].expires_at).await?;
            ensure!(
                f == LeaseFate::Finished {
                    state: Some(ItemState::Ready)
                },
                rule,
                "a lease its own release ended, on an item whose earlier lease a reap took, has \
                 fate {f:?} asked past its expiry; expected Finished in Ready"
            );
            for l in &first {
                let f = fate(&cx, &l.key, l.expires_at).await?;
                ensure!(
                    f == LeaseFate::Lost,
                    rule,
                    "a lease a reap took has fate {f:?}; expected Lost"
                );
            }
            Ok(())
        },
    )
    .await
}

/// `recover_claim` looks only at its own claim's leases, also among
/// expired ones: of two claims whose leases have both expired unreaped,
/// the recovery of the first returns (and renews, with lease traces) the
/// first claim's lease only; the second claim's lease stays expired, and
/// a reap then requeues it.
pub async fn recover_claim_leaves_other_claims_expired(
    factory: &dyn BackendFactory,
) -> CheckResult {
    // How long the claims are for: the recovery renews a lease for that.
    const RENEWED: Duration = Duration::from_secs(5);
    let rule = Rule::Contract("recover_claim");
    run(
        factory,
        "recover_claim_leaves_other_claims_expired",
        rule,
        Needs::NONE,
        |cx| async move {
            cx.enqueue((0..2).map(|i| NewItem::new(format!("rc-{i}")).max_attempts(5)).collect())
                .await?;
            let mut leases = Vec::new();
            let mut specs = Vec::new();
            for _ in 0..2 {
                // The recovery renews a lease for the spec's ttl: long
                // enough that the reap below, on a loaded box, still finds
                // it held (the expiry itself comes from the test hook, or
                // from waiting it out).
                let spec = ClaimSpec::new(1, RENEWED).or_fail(rule, "spec")?;
                let got = cx.b.claim(&cx.q, spec.duplicate()).await.or_fail(rule, "claim")?;
                let Some(l) = got.leases.into_iter().next() else {
                    return Err(cx.fail("a claim returned nothing while an item was claimable"));
                };
                leases.push(l);
                specs.push(spec);
            }
            cx.expire(&leases).await?;
            let got = match cx.b.recover_claim(&cx.q, &specs[0]).await {
                Err(e) => return Err(unsupported("recover_claim", &e).unwrap_or_else(|| cx.fail(format!("recover_claim failed: {e}")))),
                Ok(c) => c,
            };
            let keys: Vec<_> = got.leases.iter().map(|l| (l.id(), l.token())).collect();
            let want = vec![(leases[0].id(), leases[0].token())];
            ensure!(
                keys.is_empty() || keys == want,
                rule,
                "with two claims' leases expired, recover_claim of the first returned {keys:?}; \
                 expected at most its own lease {want:?}"
            );
            if cx.b.capabilities().lease_traces.any() {
                ensure!(keys == want, rule, "recover_claim of an expired, unreaped lease returned {keys:?}; expected {want:?}, renewed");
            }
            let reaped = cx.reap_all().await?;
            let want_requeued = if keys.is_empty() { 2 } else { 1 };
            ensure!(
                reaped.requeued == want_requeued,
                rule,
                "after recover_claim returned {keys:?}, a reap requeued {} leases; expected {want_requeued} \
                 (the other claim's expired lease is not renewed by this recovery)",
                reaped.requeued
            );
            let other = cx.must_item(leases[1].id()).await?;
            ensure!(
                other.state == ItemState::Ready,
                rule,
                "the other claim's expired lease on item {} is {} after the reap; expected Ready",
                leases[1].id(),
                other.state
            );
            for l in &got.leases {
                cx.b.ack(&l.key).await.or_fail(rule, "ack of the recovered lease")?;
            }
            Ok(())
        },
    )
    .await
}
