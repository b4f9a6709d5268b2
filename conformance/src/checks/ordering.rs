//! INV-8 order: higher priority first, FIFO by enqueue order within a
//! priority, absent retries.

use crate::groupwise::Groupwise as _;
use leaseq_core::{ItemId, ItemState, NewItem, Released};

use crate::cx::{run, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule};

/// Within one priority, claims follow enqueue order, across batches and
/// claim sizes; `peek(Ready)` shows the same order (INV-8).
pub async fn fifo_within_priority(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "fifo_within_priority",
        Rule::Inv8,
        Needs::GLOBAL_ORDER,
        |cx| async move {
            let mut ids = Vec::new();
            for batch in [1usize, 7, 1, 30, 11] {
                let items = (0..batch)
                    .map(|i| NewItem::new(format!("b{batch}-{i}")))
                    .collect();
                ids.extend(cx.enqueue(items).await?);
            }
            let peeked: Vec<ItemId> =
                cx.b.peek(&cx.q, ItemState::Ready, ids.len())
                    .await
                    .or_fail(cx.rule, "peek")?
                    .into_iter()
                    .map(|i| i.id)
                    .collect();
            ensure!(
                peeked == ids,
                cx.rule,
                "peek(Ready) order {peeked:?} is not enqueue order {ids:?}"
            );
            let mut got = Vec::new();
            for size in [1u32, 3, 1, 10, 5, 50] {
                got.extend(cx.claim(size, LONG).await?.into_iter().map(|l| l.id()));
            }
            ensure!(
                got == ids,
                cx.rule,
                "claim order {got:?} is not enqueue order {ids:?}"
            );
            Ok(())
        },
    )
    .await
}

/// Higher priority is claimed first, FIFO within each priority, whatever
/// the enqueue order (INV-8).
pub async fn priority_then_fifo(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "priority_then_fifo",
        Rule::Inv8,
        Needs::PRIORITIES.and(Needs::GLOBAL_ORDER),
        |cx| async move {
            let prios = [0, 5, -3, 5, 0, 10, -3, 10, 0, i32::MAX, i32::MIN, 5];
            let mut enq = Vec::new();
            for (i, p) in prios.iter().enumerate() {
                let id = cx
                    .enqueue(vec![NewItem::new(format!("p{p}-{i}")).priority(*p)])
                    .await?[0];
                enq.push((*p, i, id));
            }
            let mut want = enq.clone();
            want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let want: Vec<ItemId> = want.into_iter().map(|w| w.2).collect();
            let mut got = Vec::new();
            for size in [2u32, 1, 4, 10] {
                got.extend(cx.claim(size, LONG).await?.into_iter().map(|l| l.id()));
            }
            ensure!(
                got == want,
                cx.rule,
                "claim order {got:?}, expected by priority then FIFO {want:?}"
            );
            let late_low = cx.enqueue(vec![NewItem::new("low").priority(-1)]).await?[0];
            let late_high = cx.enqueue(vec![NewItem::new("high").priority(1)]).await?[0];
            let got: Vec<ItemId> = cx
                .claim(2, LONG)
                .await?
                .into_iter()
                .map(|l| l.id())
                .collect();
            ensure!(
                got == vec![late_high, late_low],
                cx.rule,
                "a later, higher priority item was not first: {got:?}"
            );
            Ok(())
        },
    )
    .await
}

/// An item back in Ready keeps its place: after a release, a reap, a
/// redrive, and a delay falling due, claims still follow priority, then
/// enqueue order (INV-8), and a due Scheduled item competes with Ready ones
/// by that same order.
pub async fn order_holds_after_every_return_to_ready(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "order_holds_after_every_return_to_ready",
        Rule::Inv8,
        Needs::GLOBAL_ORDER.and(Needs::DELAYS),
        |cx| async move {
            let order = |ls: &[leaseq_core::Lease]| ls.iter().map(|l| l.id()).collect::<Vec<_>>();
            // Release: the two first items go back and come out first again.
            let ids = cx.push_n(4).await?;
            let held = cx.claim(2, LONG).await?;
            for l in held.iter().rev() {
                cx.b.release(&l.key, std::time::Duration::ZERO)
                    .await
                    .or_fail(cx.rule, "release")?;
            }
            let got = cx.claim(4, SHORT).await?;
            ensure!(
                order(&got) == ids,
                cx.rule,
                "after releases, claim order {:?} is not enqueue order {ids:?}",
                order(&got)
            );
            // Reap: the same four, expired and recovered in one reap.
            cx.expire(&got).await?;
            cx.reap_all().await?;
            let got = cx.claim(4, LONG).await?;
            ensure!(
                order(&got) == ids,
                cx.rule,
                "after a reap, claim order {:?} is not enqueue order {ids:?}",
                order(&got)
            );
            // Redrive: the first two fail, the last two are acked; a new
            // item comes after the redriven ones.
            // (Without operator actions: the new item alone.)
            let admin = cx.b.groups().admin;
            let redriven = if admin.is_some() { 2 } else { 0 };
            for l in &got[..redriven] {
                cx.b.fail(&l.key, "x").await.or_fail(cx.rule, "fail")?;
            }
            for l in &got[redriven..] {
                cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
            }
            let later = cx.enqueue(vec![NewItem::new("later")]).await?[0];
            if let Some(admin) = admin {
                admin.redrive(&cx.q, 10).await.or_fail(cx.rule, "redrive")?;
            }
            let got = cx.claim(3, LONG).await?;
            let mut want = ids[..redriven].to_vec();
            want.push(later);
            ensure!(
                order(&got) == want,
                cx.rule,
                "after a redrive, claim order {:?}, expected {want:?}",
                order(&got)
            );
            for l in &got {
                cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
            }
            // A delay falling due: enqueued first, it is claimed first.
            let delayed = cx
                .enqueue(vec![
                    NewItem::new("delayed").delay(std::time::Duration::from_millis(300))
                ])
                .await?[0];
            let ready = cx.push_n(2).await?;
            match (cx.tb.is_manual(), cx.hooks()) {
                (false, Some(h)) => {
                    h.make_due(&cx.q).await.or_fail(cx.rule, "make_due hook")?;
                }
                _ => {
                    let until = cx.now().await?.as_millis() + 300;
                    cx.wait_past(leaseq_core::Timestamp::from_millis(until))
                        .await?;
                }
            }
            let got = cx.claim(3, LONG).await?;
            let want = vec![delayed, ready[0], ready[1]];
            ensure!(
                order(&got) == want,
                cx.rule,
                "a due Scheduled item among Ready ones: claim order {:?}, expected {want:?}",
                order(&got)
            );
            Ok(())
        },
    )
    .await
}

/// An item back in Ready keeps its priority: after a give_back, a release,
/// a reap, a delayed release falling due, a redrive and a redrive_item, an
/// item of priority 7 is claimed before one of priority 0 enqueued before it
/// and Ready all along (INV-8: it takes its place by priority, as if it had
/// never left; a return that ranks it as priority 0 puts it behind).
pub async fn priority_holds_after_every_return_to_ready(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run(
        factory,
        "priority_holds_after_every_return_to_ready",
        Rule::Inv8,
        Needs::PRIORITIES.and(Needs::GLOBAL_ORDER),
        |cx| async move {
            let low = cx.enqueue(vec![NewItem::new("low")]).await?[0];
            let mut ways = vec!["give_back", "release", "reap"];
            if cx.b.groups().admin.is_some() {
                ways.extend(["redrive", "redrive_item"]);
            }
            if cx.b.capabilities().delays {
                ways.push("delayed release");
            }
            for way in ways {
                let high = cx
                    .enqueue(vec![NewItem::new(format!("high {way}")).priority(7)])
                    .await?[0];
                let ttl = if way == "reap" { SHORT } else { LONG };
                let l = cx.claim_one(ttl).await?;
                ensure!(
                    l.id() == high,
                    cx.rule,
                    "before a {way}: claimed {} first, expected the priority 7 item {high}",
                    l.id()
                );
                match way {
                    "give_back" => match cx.b.give_back(&l.key).await {
                        Ok(()) => {}
                        // give_back_spends_no_attempt reports the gap.
                        Err(leaseq_core::Error::Unsupported { .. }) => {
                            cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
                            continue;
                        }
                        Err(e) => return Err(cx.fail(format!("give_back failed: {e}"))),
                    },
                    "release" => {
                        let r =
                            cx.b.release(&l.key, std::time::Duration::ZERO)
                                .await
                                .or_fail(cx.rule, "release")?;
                        ensure!(r == Released::Ready, cx.rule, "release said {r:?}");
                    }
                    "reap" => {
                        cx.expire(std::slice::from_ref(&l)).await?;
                        let r = cx.reap_all().await?;
                        ensure!(r.requeued == 1, cx.rule, "the reap reported {r:?}");
                    }
                    "redrive" | "redrive_item" => {
                        cx.b.fail(&l.key, "x").await.or_fail(cx.rule, "fail")?;
                        let moved = if way == "redrive" {
                            cx.b.redrive(&cx.q, 10).await.or_fail(cx.rule, "redrive")? == 1
                        } else {
                            cx.b.redrive_item(&cx.q, high)
                                .await
                                .or_fail(cx.rule, "redrive_item")?
                        };
                        ensure!(
                            moved,
                            cx.rule,
                            "the {way} did not move the Dead item {high}"
                        );
                    }
                    _ => {
                        let r =
                            cx.b.release(&l.key, SHORT)
                                .await
                                .or_fail(cx.rule, "release")?;
                        ensure!(r == Released::Scheduled, cx.rule, "release said {r:?}");
                        match (cx.tb.is_manual(), cx.hooks()) {
                            (false, Some(h)) => {
                                h.make_due(&cx.q).await.or_fail(cx.rule, "make_due hook")?;
                            }
                            _ => {
                                let due =
                                    cx.must_item(high).await?.due_at.ok_or_else(|| {
                                        cx.fail("a Scheduled item shows no due time")
                                    })?;
                                cx.wait_past(due).await?;
                            }
                        }
                    }
                }
                let got = cx.claim_one(LONG).await?;
                ensure!(
                    got.id() == high,
                    cx.rule,
                    "after a {way}, claimed {} (priority {}) before the priority 7 item {high}: \
                     the {way} did not put it back at its priority's place",
                    got.id(),
                    got.priority
                );
                cx.b.ack(&got.key).await.or_fail(cx.rule, "ack")?;
            }
            let last = cx.claim_one(LONG).await?;
            ensure!(
                last.id() == low,
                cx.rule,
                "claimed {} last, expected {low}",
                last.id()
            );
            cx.b.ack(&last.key).await.or_fail(cx.rule, "ack")?;
            Ok(())
        },
    )
    .await
}

/// An item back in Ready takes its place by enqueue order also when Ready
/// items enqueued before it have waited all along: a delayed item falling
/// due, and (with operator control) a Scheduled item run now, each
/// enqueued between two Ready items of the same priority, is claimed
/// between them, not ahead of the one enqueued before it (INV-8; the
/// contract's "as if it had never left"). `peek(Ready)` shows the same
/// order.
pub async fn returns_wait_behind_earlier_items(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "returns_wait_behind_earlier_items",
        Rule::Inv8,
        Needs::GLOBAL_ORDER.and(Needs::DELAYS),
        |cx| async move {
            let mut ways = vec!["delay falling due"];
            if cx.b.groups().control.is_some() {
                ways.push("run_now");
            }
            for way in ways {
                let delay = if way == "run_now" {
                    LONG
                } else {
                    std::time::Duration::from_millis(300)
                };
                let ids = cx
                    .enqueue(vec![
                        NewItem::new(format!("before {way}")),
                        NewItem::new(format!("returned by {way}")).delay(delay),
                        NewItem::new(format!("after {way}")),
                    ])
                    .await?;
                if way == "run_now" {
                    let moved =
                        cx.b.run_now(&cx.q, ids[1])
                            .await
                            .or_fail(cx.rule, "run_now")?;
                    ensure!(moved, cx.rule, "run_now of a Scheduled item answered false");
                } else {
                    match (cx.tb.is_manual(), cx.hooks()) {
                        (false, Some(h)) => {
                            h.make_due(&cx.q).await.or_fail(cx.rule, "make_due hook")?;
                        }
                        _ => {
                            let due = cx.due_of(ids[1]).await?;
                            cx.wait_past(due).await?;
                        }
                    }
                }
                let peeked: Vec<ItemId> =
                    cx.b.peek(&cx.q, ItemState::Ready, 10)
                        .await
                        .or_fail(cx.rule, "peek")?
                        .into_iter()
                        .map(|i| i.id)
                        .collect();
                ensure!(
                    peeked == ids,
                    cx.rule,
                    "after a {way}, peek(Ready) order {peeked:?} is not enqueue order {ids:?}"
                );
                let leases = cx.claim(3, LONG).await?;
                let got: Vec<ItemId> = leases.iter().map(|l| l.id()).collect();
                ensure!(
                    got == ids,
                    cx.rule,
                    "after a {way}, claim order {got:?} is not enqueue order {ids:?}: the item \
                     back in Ready went ahead of one enqueued before it"
                );
                for l in &leases {
                    cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
                }
            }
            Ok(())
        },
    )
    .await
}
