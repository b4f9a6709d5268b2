//! Plain behaviour of the transitions: release, fail, redrive, purge,
//! delays and reaping one lease.

use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::{ItemState, LeaseKey, LeaseTtl, NewItem, Released};

use crate::cx::{expect_lost, run, Cx, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

/// `release` without delay puts the item back to Ready; the next claim gets
/// it with attempt 2 and a fresh token.
pub async fn release_to_ready(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("release");
    run(
        factory,
        "release_to_ready",
        rule,
        Needs::NONE,
        |cx| async move {
            let id = cx.push_n(1).await?[0];
            let first = cx.claim_one(LONG).await?;
            let r =
                cx.b.release(&first.key, Duration::ZERO)
                    .await
                    .or_fail(rule, "release")?;
            ensure!(
                r == Released::Ready,
                rule,
                "release without delay returned {r:?}"
            );
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Ready && info.attempts == 1,
                rule,
                "after release: {info:?}"
            );
            let second = cx.claim_one(LONG).await?;
            ensure!(
                second.id() == id && second.attempts == 2 && second.token() != first.token(),
                rule,
                "re-claim after release: id {} attempts {} (same token: {})",
                second.id(),
                second.attempts,
                second.token() == first.token()
            );
            cx.b.ack(&second.key).await.or_fail(rule, "ack")?;
            Ok(())
        },
    )
    .await
}

/// `release` with a delay schedules the item; it is claimable once due. A
/// delay of 1 ms schedules it too.
pub async fn release_with_delay(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("release");
    run(
        factory,
        "release_with_delay",
        rule,
        Needs::DELAYS,
        |cx| async move {
            let id = cx.push_n(1).await?[0];
            let lease = cx.claim_one(LONG).await?;
            let r =
                cx.b.release(&lease.key, SHORT)
                    .await
                    .or_fail(rule, "release with delay")?;
            ensure!(
                r == Released::Scheduled,
                rule,
                "release with a delay returned {r:?}"
            );
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Scheduled,
                rule,
                "after a delayed release: {info:?}"
            );
            let due = info
                .due_at
                .ok_or_else(|| cx.fail("a Scheduled item shows no due time"))?;
            ensure!(
                cx.claim(1, LONG).await?.is_empty(),
                rule,
                "claimed an item before its delay ran out"
            );
            cx.wait_past(due).await?;
            let again = cx.claim_one(LONG).await?;
            ensure!(
                again.id() == id && again.attempts == 2,
                rule,
                "after the delay: {again:?}"
            );
            // The shortest delay schedules too: it is a delay, not Ready.
            let r =
                cx.b.release(&again.key, Duration::from_millis(1))
                    .await
                    .or_fail(rule, "release with a 1 ms delay")?;
            ensure!(
                r == Released::Scheduled,
                rule,
                "release with a delay of 1 ms returned {r:?}; expected Scheduled (claimable \
                 only once the millisecond has passed)"
            );
            Ok(())
        },
    )
    .await
}

/// `release` when attempts are exhausted sends the item Dead with the reason
/// "attempts exhausted".
pub async fn release_exhausted_goes_dead(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("release");
    run(
        factory,
        "release_exhausted_goes_dead",
        rule,
        Needs::NONE,
        |cx| async move {
            let id = cx.enqueue(vec![NewItem::new("x").max_attempts(2)]).await?[0];
            let first = cx.claim_one(LONG).await?;
            let r =
                cx.b.release(&first.key, Duration::ZERO)
                    .await
                    .or_fail(rule, "release")?;
            ensure!(
                r == Released::Ready,
                rule,
                "release on attempt 1 of 2 returned {r:?}"
            );
            let second = cx.claim_one(LONG).await?;
            ensure!(
                second.is_last_attempt(),
                rule,
                "attempt 2 of 2 is not the last: {second:?}"
            );
            let r =
                cx.b.release(&second.key, Duration::ZERO)
                    .await
                    .or_fail(rule, "release")?;
            ensure!(
                r == Released::Dead,
                rule,
                "release on the last attempt returned {r:?}, expected Dead"
            );
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Dead
                    && info
                        .last_error
                        .as_deref()
                        .is_some_and(|e| e.contains("attempts exhausted")),
                rule,
                "after exhausting attempts: {info:?}"
            );
            ensure!(
                cx.claim(1, LONG).await?.is_empty(),
                rule,
                "a Dead item was claimed"
            );
            // A delay does not save the last attempt: Dead, not Scheduled.
            if cx.b.capabilities().delays {
                let last = cx.enqueue(vec![NewItem::new("y").max_attempts(1)]).await?[0];
                let only = cx.claim_one(LONG).await?;
                let r =
                    cx.b.release(&only.key, LONG)
                        .await
                        .or_fail(rule, "release with a delay")?;
                let info = cx.must_item(last).await?;
                ensure!(
                    r == Released::Dead && info.state == ItemState::Dead,
                    rule,
                    "a release with a delay on the last attempt returned {r:?} and left the item \
                     {:?}, expected Dead",
                    info.state
                );
                cx.expect_stats([0, 0, 0, 2], "after both items exhausted their attempts")
                    .await?;
            }
            Ok(())
        },
    )
    .await
}

/// `fail` sends the item Dead with the reason, cut to the reason limit.
pub async fn fail_goes_dead_with_reason(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("fail");
    run(
        factory,
        "fail_goes_dead_with_reason",
        rule,
        Needs::NONE,
        |cx| async move {
            let ids = cx.push_n(2).await?;
            let leases = cx.claim(2, LONG).await?;
            ensure!(
                leases.len() == 2,
                rule,
                "claim of 2 returned {}",
                leases.len()
            );
            cx.b.fail(&leases[0].key, "boom: disk full")
                .await
                .or_fail(rule, "fail")?;
            let long = "é".repeat(leaseq_core::limits::MAX_REASON_LEN);
            cx.b.fail(&leases[1].key, &long)
                .await
                .or_fail(rule, "fail with a long reason")?;
            let a = cx.must_item(leases[0].id()).await?;
            ensure!(
                a.state == ItemState::Dead && a.last_error.as_deref() == Some("boom: disk full"),
                rule,
                "after fail: {a:?}"
            );
            let b = cx.must_item(leases[1].id()).await?;
            let len = b.last_error.as_ref().map_or(0, String::len);
            ensure!(
                b.state == ItemState::Dead && len > 0 && len <= leaseq_core::limits::MAX_REASON_LEN,
                rule,
                "a long reason should be kept but cut to {} bytes; got {len} bytes",
                leaseq_core::limits::MAX_REASON_LEN
            );
            cx.expect_stats([0, 0, 0, 2], "after two fails").await?;
            ensure!(ids.len() == 2, rule, "pushed {} items", ids.len());
            Ok(())
        },
    )
    .await
}

/// `redrive` moves Dead items, oldest death first, back to Ready with their
/// attempts reset to 0, up to its limit.
pub async fn redrive_dead_items(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("redrive");
    run(factory, "redrive_dead_items", rule, Needs::ADMIN, |cx| async move {
        cx.push_n(3).await?;
        let mut died = Vec::new();
        for _ in 0..3 {
            let l = cx.claim_one(LONG).await?;
            cx.b.fail(&l.key, "x").await.or_fail(rule, "fail")?;
            died.push(l.id());
        }
        ensure!(cx.b.redrive(&cx.q, 0).await.or_fail(rule, "redrive 0")? == 0, rule, "redrive(0) moved items");
        let moved = cx.b.redrive(&cx.q, 2).await.or_fail(rule, "redrive")?;
        ensure!(moved == 2, rule, "redrive(2) of 3 Dead items moved {moved}");
        for (i, id) in died.iter().enumerate() {
            let info = cx.must_item(*id).await?;
            let want = if i < 2 { ItemState::Ready } else { ItemState::Dead };
            ensure!(
                info.state == want && (want == ItemState::Dead || info.attempts == 0),
                rule,
                "death #{i} (item {id}) after redrive(2): {info:?}; expected {want} (oldest deaths first, attempts 0)"
            );
        }
        ensure!(cx.b.redrive(&cx.q, 10).await.or_fail(rule, "redrive")? == 1, rule, "second redrive did not move the last");
        ensure!(cx.b.redrive(&cx.q, 10).await.or_fail(rule, "redrive")? == 0, rule, "redrive moved items from an empty Dead set");
        let again = cx.claim_one(LONG).await?;
        ensure!(again.attempts == 1, rule, "a redriven item's next claim is attempt {}", again.attempts);
        Ok(())
    })
    .await
}

/// Dead is kept in death order, whichever transition sent an item there
/// (a release on the last attempt, a reap of the final attempt, a fail),
/// and that is neither enqueue order nor its reverse: `peek(Dead)` lists
/// the deaths in order and (with the Admin group) `redrive` moves the
/// oldest deaths first.
pub async fn dead_order_is_death_order(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("redrive");
    run(
        factory,
        "dead_order_is_death_order",
        rule,
        Needs::GLOBAL_ORDER,
        |cx| async move {
            let ids = cx
                .enqueue(
                    (0..4)
                        .map(|i| NewItem::new(format!("e{i}")).max_attempts(1))
                        .collect(),
                )
                .await?;
            let first = cx.claim_one(SHORT).await?;
            let rest = cx.claim(3, LONG).await?;
            let got: Vec<_> = std::iter::once(&first)
                .chain(&rest)
                .map(|l| l.id())
                .collect();
            ensure!(
                got == ids,
                rule,
                "claims in FIFO order gave {got:?}, expected {ids:?}"
            );
            // Each death at a later reading of the backend's clock.
            let tick = || async { cx.wait_past(cx.now().await?).await };
            let release_dies = |key: LeaseKey| {
                let cx = cx.clone();
                async move {
                    let r =
                        cx.b.release(&key, Duration::ZERO)
                            .await
                            .or_fail(rule, "release on the last attempt")?;
                    ensure!(
                        r == Released::Dead,
                        rule,
                        "a release on the last attempt returned {r:?}"
                    );
                    Ok::<(), crate::Violation>(())
                }
            };
            release_dies(rest[1].key.clone()).await?;
            cx.wait_past(first.expires_at).await?;
            let reaped = cx.reap_all().await?;
            ensure!(
                reaped.dead == 1 && reaped.requeued == 0,
                rule,
                "a reap of one expired final attempt reported {reaped:?}"
            );
            tick().await?;
            cx.b.fail(&rest[2].key, "x").await.or_fail(rule, "fail")?;
            tick().await?;
            release_dies(rest[0].key.clone()).await?;
            let deaths = vec![ids[2], ids[0], ids[3], ids[1]];
            let dead: Vec<_> =
                cx.b.peek(&cx.q, ItemState::Dead, 10)
                    .await
                    .or_fail(rule, "peek")?
                    .into_iter()
                    .map(|i| i.id)
                    .collect();
            ensure!(
                dead == deaths,
                rule,
                "peek(Dead) gave {dead:?}; the items died in the order {deaths:?} (by release, \
                 reap, fail, release)"
            );
            if cx.b.groups().admin.is_none() {
                return Ok(());
            }
            for (limit, moved_now) in [(1, 1), (2, 3)] {
                let moved = cx.b.redrive(&cx.q, limit).await.or_fail(rule, "redrive")?;
                ensure!(
                    moved == limit as u64,
                    rule,
                    "redrive({limit}) moved {moved}"
                );
                for (k, id) in deaths.iter().enumerate() {
                    let state = cx.must_item(*id).await?.state;
                    let want = if k < moved_now {
                        ItemState::Ready
                    } else {
                        ItemState::Dead
                    };
                    ensure!(
                        state == want,
                        rule,
                        "after redrives of {moved_now} in all, death #{k} (item {id}) is {state}, \
                         expected {want}: redrive moves the oldest deaths first (deaths in order \
                         {deaths:?})"
                    );
                }
            }
            Ok(())
        },
    )
    .await
}

/// `purge` deletes every item in every state and returns how many; leases
/// on purged items are lost.
pub async fn purge_removes_everything(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("purge");
    run(
        factory,
        "purge_removes_everything",
        rule,
        Needs::ADMIN,
        |cx| async move {
            let delays = cx.b.capabilities().delays;
            let ids = cx.push_n(4).await?;
            if delays {
                cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?;
            }
            let leases = cx.claim(2, LONG).await?;
            ensure!(
                leases.len() == 2,
                rule,
                "claim of 2 returned {}",
                leases.len()
            );
            cx.b.fail(&leases[1].key, "x").await.or_fail(rule, "fail")?;
            let want = 4 + u64::from(delays);
            let n = cx.b.purge(&cx.q).await.or_fail(rule, "purge")?;
            ensure!(n == want, rule, "purge of {want} items returned {n}");
            cx.expect_stats([0, 0, 0, 0], "after purge").await?;
            for id in &ids {
                ensure!(
                    cx.item(*id).await?.is_none(),
                    rule,
                    "item {id} survived purge"
                );
            }
            expect_lost(cx.b.ack(&leases[0].key).await, "ack of a purged item")?;
            ensure!(
                cx.claim(10, LONG).await?.is_empty(),
                rule,
                "claimed after purge"
            );
            ensure!(
                cx.b.purge(&cx.q).await.or_fail(rule, "purge")? == 0,
                rule,
                "second purge deleted items"
            );
            cx.check_indexes("after purge").await?;
            // More items than one step may delete: 1,001 leaves exactly one
            // after the last whole batch for every batch size dividing 1,000,
            // and that one goes too.
            const MANY: usize = 1_001;
            cx.push_n(MANY).await?;
            let n = cx.b.purge(&cx.q).await.or_fail(rule, "purge")?;
            ensure!(
                n == MANY as u64,
                rule,
                "purge of {MANY} Ready items returned {n}"
            );
            cx.expect_stats([0, 0, 0, 0], "after a purge of 1001 items")
                .await?;
            Ok(())
        },
    )
    .await
}

/// An item enqueued with a delay is Scheduled and not claimable until due;
/// then it is (and counts as ready).
pub async fn delayed_item_waits(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("enqueue with delay");
    run(
        factory,
        "delayed_item_waits",
        rule,
        Needs::DELAYS,
        |cx| async move {
            let before = cx.now().await?;
            let id = cx.enqueue(vec![NewItem::new("later").delay(SHORT)]).await?[0];
            let info = cx.must_item(id).await?;
            let due = info
                .due_at
                .ok_or_else(|| cx.fail("a Scheduled item shows no due time"))?;
            ensure!(
                info.state == ItemState::Scheduled && due >= before.saturating_add(SHORT),
                rule,
                "a delayed item should be Scheduled until now + delay (>= {}): {info:?}",
                before.saturating_add(SHORT)
            );
            // Not claimable until the delay has passed since the enqueue
            // ran: its enqueued_at, a time of the same clock.
            ensure!(
                due >= info.enqueued_at.saturating_add(SHORT),
                rule,
                "a delayed item enqueued at {} with a delay of {SHORT:?} is due at {due}, \
                 before its enqueue time + the delay ({})",
                info.enqueued_at,
                info.enqueued_at.saturating_add(SHORT)
            );
            cx.expect_stats([0, 1, 0, 0], "before it is due").await?;
            ensure!(
                cx.claim(1, LONG).await?.is_empty(),
                rule,
                "claimed a Scheduled item before it was due"
            );
            cx.wait_past(due).await?;
            cx.expect_stats([1, 0, 0, 0], "once due (a due item counts as ready)")
                .await?;
            let lease = cx.claim_one(LONG).await?;
            ensure!(
                lease.id() == id && lease.attempts == 1,
                rule,
                "once due: {lease:?}"
            );
            if let Some(hooks) = cx.hooks() {
                let later = cx
                    .enqueue(vec![NewItem::new("much later").delay(LONG)])
                    .await?[0];
                let n = hooks.make_due(&cx.q).await.or_fail(rule, "make_due hook")?;
                ensure!(n == 1, rule, "make_due touched {n} items, expected 1");
                let l = cx.claim_one(LONG).await?;
                ensure!(
                    l.id() == later,
                    rule,
                    "after make_due claimed {} not {later}",
                    l.id()
                );
            }
            // A part millisecond of delay is rounded up, never down: the
            // item is never due before the whole delay has passed.
            let odd = LONG + Duration::from_micros(500);
            let id = cx
                .enqueue(vec![NewItem::new("odd delay").delay(odd)])
                .await?[0];
            let info = cx.must_item(id).await?;
            let least = info
                .enqueued_at
                .saturating_add(LONG + Duration::from_millis(1));
            ensure!(
                info.due_at.is_some_and(|due| due >= least),
                rule,
                "an item enqueued at {} with a delay of {odd:?} is due at {:?}, before {least} \
                 (the delay rounded down to whole milliseconds)",
                info.enqueued_at,
                info.due_at
            );
            // A reap recovers expired leases only: it must not promote an
            // item that is not due.
            let far = cx.enqueue(vec![NewItem::new("far").delay(LONG)]).await?[0];
            let reaped = cx.reap_all().await?;
            let info = cx.must_item(far).await?;
            ensure!(
                reaped.recovered() == 0 && info.state == ItemState::Scheduled,
                rule,
                "a reap with no expired lease recovered {reaped:?} and left an item due in \
                 {LONG:?} {:?}, expected Scheduled",
                info.state
            );
            ensure!(
                cx.claim(10, LONG).await?.iter().all(|l| l.id() != far),
                rule,
                "claimed a Scheduled item before it was due (after a reap)"
            );
            Ok(())
        },
    )
    .await
}

/// `reap` sends an expired lease back to Ready (attempts kept), and the next
/// claim gets it with a fresh token.
pub async fn reap_requeues_expired(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("reap");
    run(
        factory,
        "reap_requeues_expired",
        rule,
        Needs::NONE,
        |cx| async move {
            let id = cx.push_n(1).await?[0];
            ensure!(
                cx.reap().await?.recovered() == 0,
                rule,
                "reap of a queue with no leases recovered something"
            );
            let first = cx.claim_one(SHORT).await?;
            cx.expire(std::slice::from_ref(&first)).await?;
            let r = cx.reap_all().await?;
            ensure!(
                r.requeued == 1 && r.dead == 0,
                rule,
                "reap of one expired lease reported {r:?}"
            );
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Ready && info.attempts == 1,
                rule,
                "after reap: {info:?}"
            );
            let second = cx.claim_one(LONG).await?;
            ensure!(
                second.id() == id && second.attempts == 2 && second.token() != first.token(),
                rule,
                "re-claim after reap: {second:?}"
            );
            Ok(())
        },
    )
    .await
}

/// `reap` of an expired lease on its final attempt sends the item Dead with
/// a reason.
pub async fn reap_final_attempt_goes_dead(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("reap");
    run(
        factory,
        "reap_final_attempt_goes_dead",
        rule,
        Needs::NONE,
        |cx| async move {
            let id = cx
                .enqueue(vec![NewItem::new("once").max_attempts(1)])
                .await?[0];
            let lease = cx.claim_one(SHORT).await?;
            cx.expire(std::slice::from_ref(&lease)).await?;
            let r = cx.reap_all().await?;
            ensure!(
                r.dead == 1 && r.requeued == 0,
                rule,
                "reap of an exhausted lease reported {r:?}"
            );
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Dead && info.last_error.is_some(),
                rule,
                "an exhausted lease should go Dead with a reason: {info:?}"
            );
            cx.expect_stats([0, 0, 0, 1], "after reaping the final attempt")
                .await?;
            ensure!(
                cx.claim(1, LONG).await?.is_empty(),
                rule,
                "a Dead item was claimed"
            );
            Ok(())
        },
    )
    .await
}

/// A lease that expired but was not reaped or re-claimed still works: ack,
/// extend, release and fail succeed.
pub async fn expired_unreaped_lease_still_works(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("ack/extend/release/fail after expiry, before reap");
    run(
        factory,
        "expired_unreaped_lease_still_works",
        rule,
        Needs::NONE,
        |cx| async move {
            cx.push_n(4).await?;
            let l = cx.claim(4, SHORT).await?;
            ensure!(l.len() == 4, rule, "claim of 4 returned {}", l.len());
            cx.expire(&l).await?;
            cx.b.ack(&l[0].key)
                .await
                .or_fail(rule, "ack of an expired, unreaped lease")?;
            let ttl = LeaseTtl::new(LONG).or_fail(rule, "ttl")?;
            cx.b.extend(&l[1].key, ttl)
                .await
                .or_fail(rule, "extend of an expired, unreaped lease")?;
            cx.b.release(&l[2].key, Duration::ZERO)
                .await
                .or_fail(rule, "release of an expired, unreaped lease")?;
            cx.b.fail(&l[3].key, "x")
                .await
                .or_fail(rule, "fail of an expired, unreaped lease")?;
            let r = cx.reap_all().await?;
            ensure!(
                r.recovered() == 0,
                rule,
                "reap recovered {r:?} though every lease was settled or extended"
            );
            cx.expect_stats([1, 0, 1, 1], "after ack, extend, release and fail")
                .await?;
            Ok(())
        },
    )
    .await
}

/// A Scheduled item past its due time is Ready to every read before any
/// call has moved it: `item` shows it Ready with no due time, `peek` lists
/// it under Ready and not under Scheduled, `stats` counts it as Ready, and
/// a claim takes it (the contract of every method: "Ready to every caller,
/// whether or not the store has moved it yet"). Reads come first, `item`
/// before `peek`, so neither finds it already moved by the other.
pub async fn due_item_is_ready_to_every_read(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("a due Scheduled item is Ready");
    run(
        factory,
        "due_item_is_ready_to_every_read",
        rule,
        Needs::DELAYS,
        |cx| async move {
            let id = cx.enqueue(vec![NewItem::new("due").delay(SHORT)]).await?[0];
            fall_due(&cx, id).await?;
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Ready && info.due_at.is_none(),
                rule,
                "item() of an item past its due time shows {:?} due at {:?}, expected Ready \
                 with no due time",
                info.state,
                info.due_at
            );
            for (state, want) in [(ItemState::Ready, true), (ItemState::Scheduled, false)] {
                let items = cx.b.peek(&cx.q, state, 10).await.or_fail(rule, "peek")?;
                let listed = items.iter().any(|i| i.id == id);
                ensure!(
                    listed == want,
                    rule,
                    "peek({state:?}) {} item {id}, past its due time (expected it listed under \
                     Ready only)",
                    if listed { "lists" } else { "does not list" }
                );
            }
            cx.expect_stats([1, 0, 0, 0], "an item past its due time")
                .await?;
            let l = cx.claim_one(LONG).await?;
            ensure!(
                l.id() == id,
                rule,
                "claimed {} instead of the due item {id}",
                l.id()
            );
            cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            // Due items are claimed in Ready's order, priority first, not
            // by due time: among them one released with a delay.
            cx.enqueue(vec![NewItem::new("released")]).await?;
            let r = cx.claim_one(LONG).await?;
            cx.b.release(&r.key, SHORT)
                .await
                .or_fail(rule, "release with a delay")?;
            let caps = cx.b.capabilities();
            let ranked = caps.priorities && caps.order == leaseq_core::Order::Global;
            let mut last = r.id();
            if ranked {
                let low = NewItem::new("low").delay(SHORT);
                let high = NewItem::new("high").priority(5).delay(SHORT);
                last = cx.enqueue(vec![low, high]).await?[1];
            }
            fall_due(&cx, last).await?;
            if ranked {
                let first = cx.claim_one(LONG).await?;
                ensure!(
                    first.id() == last,
                    rule,
                    "of three items past their due time (priorities 0, 0, 5) a claim of one took \
                     {} (priority {}), expected {last} (priority 5)",
                    first.id(),
                    first.priority
                );
                cx.b.ack(&first.key).await.or_fail(rule, "ack")?;
            }
            for l in cx.drain(LONG, 3).await? {
                cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            }
            // More at once than one step may move (a backend that moves due
            // items in bounded batches): each still counts once, as Ready.
            const MANY: usize = 1_200;
            let mut last = id;
            for half in 0..2 {
                let items = (0..MANY / 2)
                    .map(|i| NewItem::new(format!("due-{half}-{i}")).delay(SHORT))
                    .collect();
                last = *cx.enqueue(items).await?.last().unwrap_or(&last);
            }
            fall_due(&cx, last).await?;
            cx.expect_stats([MANY as u64, 0, 0, 0], "1200 items past their due time")
                .await?;
            let got = cx.drain(LONG, MANY).await?;
            ensure!(
                got.len() == MANY,
                rule,
                "claims took {} of {MANY} items past their due time",
                got.len()
            );
            Ok(())
        },
    )
    .await
}

/// Makes the Scheduled items up to `last` (the latest due) due: by the
/// `make_due` hook on a real clock when it exists, else by the clock.
async fn fall_due(cx: &crate::cx::Cx, last: leaseq_core::ItemId) -> Result<(), crate::Violation> {
    match (cx.tb.is_manual(), cx.hooks()) {
        (false, Some(h)) => {
            h.make_due(&cx.q).await.or_fail(cx.rule, "make_due hook")?;
        }
        _ => {
            let due = cx.due_of(last).await?;
            cx.wait_past(due).await?;
        }
    }
    Ok(())
}

/// `give_back` returns the item to Ready without spending an attempt: on
/// its last attempt it does not go Dead, its place in the queue is kept,
/// and a stale token changes nothing.
pub async fn give_back_spends_no_attempt(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("give_back");
    run(factory, "give_back_spends_no_attempt", rule, Needs::NONE, |cx| async move {
        let ids = cx.enqueue(vec![NewItem::new("last").max_attempts(1)]).await?;
        let l = cx.claim_one(LONG).await?;
        ensure!(l.id() == ids[0] && l.attempts == 1, rule, "claimed {:?}", l);
        cx.enqueue(vec![NewItem::new("next")]).await?;
        match cx.b.give_back(&l.key).await {
            Ok(()) => {}
            Err(leaseq_core::Error::Unsupported { .. }) => {
                return Err(cx.fail("the backend does not implement give_back: a graceful shutdown would spend (and on the last attempt dead-letter) every running job's attempt"))
            }
            Err(e) => return Err(cx.fail(format!("give_back failed: {e}"))),
        }
        let info = cx.must_item(ids[0]).await?;
        ensure!(info.state == ItemState::Ready && info.attempts == 0, rule, "after give_back on its only attempt the item is {:?} with {} attempts; expected Ready with 0", info.state, info.attempts);
        crate::cx::expect_lost(cx.b.give_back(&l.key).await, "a second give_back with the spent token")?;
        let again = cx.claim(2, LONG).await?;
        let back = again.iter().find(|l| l.id() == ids[0]);
        ensure!(back.is_some_and(|l| l.attempts == 1), rule, "after give_back a claim of 2 returned {again:?}; expected the item given back among them, on attempt 1");
        if cx.b.capabilities().order == leaseq_core::Order::Global {
            ensure!(again[0].id() == ids[0], rule, "the item given back lost its place: the claim returned {again:?}");
        }
        for l in &again {
            cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
        }
        Ok(())
    })
    .await
}

/// `enqueued_at` is the backend's now at the enqueue that created the item
/// (between `now()` read before and after it, for a delayed item too), and
/// every read shows that same time: the claim's lease, `item`, `peek` of
/// each state, and again after a release and a re-claim, after a fail and a
/// redrive (where the backend offers the Admin group), after a reap and
/// after a `give_back`. Time is let pass before each claim, so a backend
/// that reports the claim's time instead is caught. Without the Admin
/// group, the reap and `give_back` steps follow a second item of their
/// own, on a fresh queue.
pub async fn enqueue_time_is_kept(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("enqueued_at");
    run(
        factory,
        "enqueue_time_is_kept",
        rule,
        Needs::NONE,
        |cx| async move {
            let before = cx.now().await?;
            let mut batch = vec![NewItem::new("now")];
            let delays = cx.b.capabilities().delays;
            if delays {
                batch.push(NewItem::new("later").delay(LONG));
            }
            let ids = cx.enqueue(batch).await?;
            let after = cx.now().await?;
            let id = ids[0];
            let at = cx.must_item(id).await?.enqueued_at;
            ensure!(
                before <= at && at <= after,
                rule,
                "item {id} was enqueued between {before} and {after} but shows enqueued_at {at}"
            );
            if let Some(&later) = ids.get(1) {
                let info = cx.must_item(later).await?;
                ensure!(
                    before <= info.enqueued_at && info.enqueued_at <= after,
                    rule,
                    "a delayed item enqueued between {before} and {after} shows enqueued_at {} (its due time is {:?})",
                    info.enqueued_at,
                    info.due_at
                );
                let peeked = peeked_at(&cx, ItemState::Scheduled, later).await?;
                ensure!(
                    peeked == Some(info.enqueued_at),
                    rule,
                    "peek of Scheduled shows the delayed item's enqueued_at as {peeked:?}, item() as {}",
                    info.enqueued_at
                );
            }
            let same_as = |at: leaseq_core::Timestamp, when: &str, got: Option<leaseq_core::Timestamp>| {
                ensure!(
                    got == Some(at),
                    rule,
                    "{when}: enqueued_at is {got:?}, expected {at} (the enqueue's time)"
                );
                Ok(())
            };
            let same = |when: &str, got| same_as(at, when, got);
            same("peek of Ready", peeked_at(&cx, ItemState::Ready, id).await?)?;

            cx.wait_past(after).await?;
            let first = cx.claim_one(LONG).await?;
            ensure!(first.id() == id, rule, "claimed {} instead of {id}", first.id());
            same("the first claim's lease", Some(first.enqueued_at))?;
            same("item() while Leased", Some(cx.must_item(id).await?.enqueued_at))?;
            same("peek of Leased", peeked_at(&cx, ItemState::Leased, id).await?)?;

            cx.b.release(&first.key, Duration::ZERO)
                .await
                .or_fail(rule, "release")?;
            same("item() after a release", Some(cx.must_item(id).await?.enqueued_at))?;
            cx.wait_past(cx.now().await?).await?;
            let second = cx.claim_one(LONG).await?;
            ensure!(second.id() == id, rule, "re-claimed {} instead of {id}", second.id());
            same("the lease of a re-claim after a release", Some(second.enqueued_at))?;

            cx.b.fail(&second.key, "x").await.or_fail(rule, "fail")?;
            same("item() while Dead", Some(cx.must_item(id).await?.enqueued_at))?;
            same("peek of Dead", peeked_at(&cx, ItemState::Dead, id).await?)?;
            // The item goes on after a redrive; without the Admin group a
            // second item, on a queue of its own, takes the steps left.
            let (cx, id, at, how) = if cx.b.groups().admin.is_some() {
                let moved = cx.b.redrive(&cx.q, 10).await.or_fail(rule, "redrive")?;
                ensure!(moved == 1, rule, "redrive of one Dead item moved {moved}");
                same("item() after a redrive", Some(cx.must_item(id).await?.enqueued_at))?;
                (cx, id, at, "after a redrive")
            } else {
                let cx = cx.fresh("second")?;
                let before = cx.now().await?;
                let id = cx.enqueue(vec![NewItem::new("second")]).await?[0];
                let after = cx.now().await?;
                let at = cx.must_item(id).await?.enqueued_at;
                ensure!(
                    before <= at && at <= after,
                    rule,
                    "item {id} was enqueued between {before} and {after} but shows enqueued_at {at}"
                );
                (cx, id, at, "of a second item")
            };
            let same = |when: &str, got| same_as(at, when, got);
            cx.wait_past(cx.now().await?).await?;
            let third = cx.claim_one(SHORT).await?;
            ensure!(third.id() == id, rule, "claimed {} {how} instead of {id}", third.id());
            same(&format!("the lease of a claim {how}"), Some(third.enqueued_at))?;

            // A reap and a give-back requeue the item: neither is an enqueue.
            cx.expire(std::slice::from_ref(&third)).await?;
            let reaped = cx.reap_all().await?;
            ensure!(reaped.requeued == 1, rule, "the reap requeued {} of 1 expired lease", reaped.requeued);
            same("item() after a reap", Some(cx.must_item(id).await?.enqueued_at))?;
            cx.wait_past(cx.now().await?).await?;
            let fourth = cx.claim_one(LONG).await?;
            ensure!(fourth.id() == id, rule, "claimed {} after the reap instead of {id}", fourth.id());
            same("the lease of a claim after a reap", Some(fourth.enqueued_at))?;
            cx.b.give_back(&fourth.key).await.or_fail(rule, "give_back")?;
            same("item() after a give_back", Some(cx.must_item(id).await?.enqueued_at))?;
            cx.wait_past(cx.now().await?).await?;
            let last = cx.claim_one(LONG).await?;
            ensure!(last.id() == id, rule, "claimed {} after the give_back instead of {id}", last.id());
            same("the lease of a claim after a give_back", Some(last.enqueued_at))?;
            cx.b.ack(&last.key).await.or_fail(rule, "ack")?;
            Ok(())
        },
    )
    .await
}

/// The `enqueued_at` that `peek` of `state` shows for `id`, `None` when
/// the listing leaves it out.
async fn peeked_at(
    cx: &crate::cx::Cx,
    state: ItemState,
    id: leaseq_core::ItemId,
) -> Result<Option<leaseq_core::Timestamp>, crate::Violation> {
    let listed =
        cx.b.peek(&cx.q, state, 100)
            .await
            .or_fail(cx.rule, "peek")?;
    Ok(listed.iter().find(|i| i.id == id).map(|i| i.enqueued_at))
}

/// A reap while Scheduled items are due (more of them than expired
/// leases): it succeeds, counts only the expired lease as recovered (a
/// promotion is not a recovery), reports no repair, and afterwards all
/// three items are Ready and claimable: the promoted ones on their first
/// attempt, the recovered one on its second.
pub async fn reap_with_due_scheduled_items(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("reap");
    run(
        factory,
        "reap_with_due_scheduled_items",
        rule,
        Needs::DELAYS,
        |cx| async move {
            let leased = cx.enqueue(vec![NewItem::new("leased")]).await?[0];
            let lease = cx.claim_one(SHORT).await?;
            let delayed = cx
                .enqueue(vec![
                    NewItem::new("d1").delay(SHORT),
                    NewItem::new("d2").delay(SHORT),
                ])
                .await?;
            let mut due = lease.expires_at;
            for id in &delayed {
                due = due.max(cx.due_of(*id).await?);
            }
            cx.expire(std::slice::from_ref(&lease)).await?;
            cx.wait_past(due).await?;
            let report = cx.reap_all().await?;
            ensure!(
                report.requeued == 1 && report.dead == 0,
                rule,
                "a reap with one expired lease and two due Scheduled items recovered {} (dead {}); \
                 it recovers the one lease, and promoting is not recovering",
                report.requeued,
                report.dead
            );
            cx.expect_stats([3, 0, 0, 0], "after the reap").await?;
            let got = cx.claim(3, LONG).await?;
            let mut attempts: Vec<(u64, u32)> =
                got.iter().map(|l| (l.id().get(), l.attempts)).collect();
            attempts.sort_unstable();
            let mut want = vec![
                (leased.get(), 2),
                (delayed[0].get(), 1),
                (delayed[1].get(), 1),
            ];
            want.sort_unstable();
            ensure!(
                attempts == want,
                rule,
                "after the reap the claim got (id, attempts) {attempts:?}; expected {want:?}"
            );
            Ok(())
        },
    )
    .await
}

/// `wait_for_work` returns by its timeout (give or take scheduling: it is
/// timed against a plain sleep of the same length started with it, never
/// against the wall clock), and the counts after it are what the queue
/// held, whatever that was: nothing (a queue never used, which it does not
/// list afterwards), a Scheduled item not yet due, a Scheduled item overdue
/// that nothing has promoted yet, a Ready item, only a Leased item, only a
/// Dead item. Each state after the first is set up on a fresh queue, so
/// the check needs no `purge` (no Admin group).
pub async fn wait_for_work_returns_in_every_state(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("wait_for_work");
    run(
        factory,
        "wait_for_work_returns_in_every_state",
        rule,
        Needs::DELAYS,
        |cx| async move {
            // Counts are read after the wait only: a read before it may
            // promote an overdue item, and the wait would not meet one.
            let waits = |cx: Cx, what: &'static str, timeout: Duration, want: [u64; 4]| async move {
                wait_returns(&cx, what, timeout).await?;
                cx.expect_stats(want, &format!("after wait_for_work on {what}"))
                    .await
            };
            // The one wait long enough to time: a backend that waits twice
            // its timeout (or sleeps its timeout after some other wait) is
            // caught here.
            waits(cx.clone(), "a queue never used", TIMED_WAIT, [0, 0, 0, 0]).await?;
            let listed = cx.b.queues().await.or_fail(rule, "queues")?;
            ensure!(
                !listed.contains(&cx.q),
                rule,
                "after wait_for_work on a queue never used, queues() lists it"
            );
            cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?;
            waits(
                cx.clone(),
                "a Scheduled item not yet due",
                WAIT,
                [0, 1, 0, 0],
            )
            .await?;
            let cx = cx.fresh("soon")?;
            let id = cx.enqueue(vec![NewItem::new("soon").delay(SHORT)]).await?[0];
            let due = cx.due_of(id).await?;
            cx.wait_past(due).await?;
            waits(cx.clone(), "an overdue Scheduled item", WAIT, [1, 0, 0, 0]).await?;
            waits(cx.clone(), "a Ready item", WAIT, [1, 0, 0, 0]).await?;
            let lease = cx.claim_one(LONG).await?;
            waits(cx.clone(), "only a Leased item", WAIT, [0, 0, 1, 0]).await?;
            cx.b.fail(&lease.key, "dead").await.or_fail(rule, "fail")?;
            waits(cx.clone(), "only a Dead item", WAIT, [0, 0, 0, 1]).await?;
            Ok(())
        },
    )
    .await
}

/// Fails unless `wait_for_work(timeout)` on the check's queue returns by
/// its timeout: within [`wait_grace`] after a plain sleep of `timeout`,
/// started together with it, has ended. Timed against that sleep, not the
/// wall clock, a loaded machine delays both alike.
async fn wait_returns(cx: &Cx, what: &str, timeout: Duration) -> Result<(), Violation> {
    let (b, q) = (cx.b.clone(), cx.q.clone());
    let mut task = cx.spawn(async move { b.wait_for_work(&q, timeout).await });
    let grace = wait_grace(timeout);
    let returned = tokio::select! {
        biased;
        r = &mut task => Some(r),
        () = tokio::time::sleep(timeout) => None,
    };
    let returned = match returned {
        Some(r) => r,
        // The task is polled before the grace's timer: a wait that has
        // returned by now counts, however late this task runs.
        None => match tokio::time::timeout(grace, &mut task).await {
            Ok(r) => r,
            Err(_) => {
                task.abort();
                return Err(cx.fail(format!(
                    "wait_for_work({timeout:?}) on {what} had not returned {grace:?} after a \
                     sleep of {timeout:?} started with it had ended: it waits past its timeout"
                )));
            }
        },
    };
    returned.map_err(|e| cx.died(e, &format!("the wait_for_work on {what}")))
}

/// The timeout of most waits in `wait_for_work_returns_in_every_state`.
const WAIT: Duration = Duration::from_millis(100);
/// The timeout of the one wait it times closely: long enough that a wait
/// of twice the timeout overshoots [`wait_grace`] by far.
const TIMED_WAIT: Duration = Duration::from_secs(2);

/// How long past its timeout a wait may take to return: scheduling on a
/// loaded machine and a server's round trip, never a doubled timeout.
/// 1.5 s for [`TIMED_WAIT`] (a wait of twice it is 2 s late), 5 s for the
/// short waits (which only must return at all).
fn wait_grace(timeout: Duration) -> Duration {
    if timeout >= TIMED_WAIT {
        timeout * 3 / 4
    } else {
        Duration::from_secs(5)
    }
}
