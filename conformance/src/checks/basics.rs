//! Plain behaviour: the round trip, inspection, stats, peek and extend.

use leaseq_core::{Error, ItemId, ItemState, LeaseTtl, NewItem, QueueName};

use crate::cx::{run, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule};

/// Enqueue, claim and ack one item: the lease carries the payload, attempt 1
/// and `expires_at = now + ttl`; after the ack the item is gone.
pub async fn round_trip(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("enqueue/claim/ack");
    run(factory, "round_trip", rule, Needs::NONE, |cx| async move {
        let id = cx.enqueue(vec![NewItem::new("hello")]).await?[0];
        let info = cx.must_item(id).await?;
        ensure!(
            info.state == ItemState::Ready
                && info.payload.as_ref() == b"hello"
                && info.attempts == 0,
            rule,
            "a new item should be Ready with its payload and 0 attempts: {info:?}"
        );
        ensure!(
            info.max_attempts == NewItem::DEFAULT_MAX_ATTEMPTS,
            rule,
            "default max_attempts should be {}, is {}",
            NewItem::DEFAULT_MAX_ATTEMPTS,
            info.max_attempts
        );
        let before = cx.now().await?;
        let lease = cx.claim_one(LONG).await?;
        let after = cx.now().await?;
        ensure!(
            lease.id() == id,
            rule,
            "claimed {} instead of {id}",
            lease.id()
        );
        ensure!(
            lease.payload.as_ref() == b"hello",
            rule,
            "lease payload {:?}",
            lease.payload
        );
        ensure!(
            lease.attempts == 1,
            rule,
            "first claim reports attempts {}",
            lease.attempts
        );
        let (lo, hi) = (before.saturating_add(LONG), after.saturating_add(LONG));
        ensure!(
            lo <= lease.expires_at && lease.expires_at <= hi,
            rule,
            "expires_at {} is not now + ttl (between {lo} and {hi})",
            lease.expires_at
        );
        let info = cx.must_item(id).await?;
        ensure!(
            info.state == ItemState::Leased && info.due_at == Some(lease.expires_at),
            rule,
            "a claimed item should be Leased until its expiry: {info:?}"
        );
        cx.b.ack(&lease.key).await.or_fail(rule, "ack")?;
        ensure!(
            cx.item(id).await?.is_none(),
            rule,
            "item {id} still exists after its ack"
        );
        cx.expect_stats([0, 0, 0, 0], "after the ack").await?;
        ensure!(
            cx.claim(10, LONG).await?.is_empty(),
            rule,
            "a claim after the ack found an item"
        );
        Ok(())
    })
    .await
}

/// `item()` shows what was enqueued, and an unknown id is `NotFound`.
pub async fn item_and_not_found(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("item");
    run(
        factory,
        "item_and_not_found",
        rule,
        Needs::NONE,
        |cx| async move {
            let id = cx
                .enqueue(vec![NewItem::new("x").priority(7).max_attempts(3)])
                .await?[0];
            let info = cx.must_item(id).await?;
            let priority_ok = !cx.b.capabilities().priorities || info.priority == 7;
            ensure!(
                info.id == id && priority_ok && info.max_attempts == 3 && info.last_error.is_none(),
                rule,
                "item() does not show what was enqueued: {info:?}"
            );
            let unknown = ItemId::new(u64::MAX - 1);
            match cx.b.item(&cx.q, unknown).await {
                Err(Error::NotFound { id }) if id == unknown => {}
                other => {
                    return Err(cx.fail(format!(
                        "item() of an unknown id gave {other:?}, expected NotFound"
                    )))
                }
            }
            let other = QueueName::new(format!("{}-other", cx.q)).or_fail(rule, "queue name")?;
            let seen = cx.b.item(&other, id).await;
            ensure!(
                matches!(seen, Err(Error::NotFound { .. })),
                rule,
                "item() found {id} in another queue: {seen:?}"
            );
            Ok(())
        },
    )
    .await
}

/// `stats` counts each state; a `peek` per state lists the right items in
/// index order and honours its limit.
pub async fn stats_and_peek(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("stats/peek");
    run(
        factory,
        "stats_and_peek",
        rule,
        Needs::GLOBAL_ORDER,
        |cx| async move {
            let delays = cx.b.capabilities().delays;
            let ids = cx.push_n(5).await?;
            let sched = if delays {
                Some(cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?[0])
            } else {
                None
            };
            let leases = cx.claim(2, LONG).await?;
            ensure!(
                leases.len() == 2,
                rule,
                "claim of 2 returned {}",
                leases.len()
            );
            cx.b.fail(&leases[1].key, "no")
                .await
                .or_fail(rule, "fail")?;
            let s = u64::from(delays);
            cx.expect_stats([3, s, 1, 1], "3 ready, the scheduled, 1 leased, 1 dead")
                .await?;

            let peek = |state, limit| {
                let cx = cx.clone();
                async move {
                    let v = cx.b.peek(&cx.q, state, limit).await.or_fail(rule, "peek")?;
                    Ok::<_, crate::Violation>(
                        v.into_iter()
                            .map(|i| (i.id, i.state, i.due_at, i.last_error))
                            .collect::<Vec<_>>(),
                    )
                }
            };
            let ready: Vec<ItemId> = peek(ItemState::Ready, 10)
                .await?
                .iter()
                .map(|p| p.0)
                .collect();
            ensure!(
                ready == ids[2..].to_vec(),
                rule,
                "peek(Ready) gave {ready:?}, expected {:?}",
                &ids[2..]
            );
            let one = peek(ItemState::Ready, 1).await?;
            ensure!(
                one.len() == 1 && one[0].0 == ids[2],
                rule,
                "peek(Ready, 1) gave {one:?}"
            );
            ensure!(
                peek(ItemState::Ready, 0).await?.is_empty(),
                rule,
                "peek with limit 0 returned items"
            );
            let leased = peek(ItemState::Leased, 10).await?;
            ensure!(
                leased.len() == 1
                    && leased[0].0 == leases[0].id()
                    && leased[0].2 == Some(leases[0].expires_at),
                rule,
                "peek(Leased) gave {leased:?}, expected {} due at {}",
                leases[0].id(),
                leases[0].expires_at
            );
            let dead = peek(ItemState::Dead, 10).await?;
            ensure!(
                dead.len() == 1
                    && dead[0].0 == leases[1].id()
                    && dead[0].3.as_deref() == Some("no"),
                rule,
                "peek(Dead) gave {dead:?}, expected {} with reason \"no\"",
                leases[1].id()
            );
            if let Some(sched) = sched {
                let got = peek(ItemState::Scheduled, 10).await?;
                ensure!(
                    got.len() == 1 && got[0].0 == sched && got[0].2.is_some(),
                    rule,
                    "peek(Scheduled) gave {got:?}, expected {sched} with its due time"
                );
            }
            for id in &ready {
                let info = cx.must_item(*id).await?;
                ensure!(
                    info.state == ItemState::Ready,
                    rule,
                    "item {id} shows {} but peek listed it ready",
                    info.state
                );
            }
            Ok(())
        },
    )
    .await
}

/// `peek` lists each state in that state's own index order where it is
/// not enqueue order, on items made so that no order by id (up or down)
/// fits: Leased by expiry (three leases of different ttls), Ready by
/// priority then enqueue order, Scheduled by due time; and each entry shows
/// its lease's expiry or its due time.
pub async fn peek_follows_each_index_order(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("peek");
    run(
        factory,
        "peek_follows_each_index_order",
        rule,
        Needs::GLOBAL_ORDER,
        |cx| async move {
            let caps = cx.b.capabilities();
            let listed = |state| {
                let cx = cx.clone();
                async move {
                    let v = cx.b.peek(&cx.q, state, 10).await.or_fail(rule, "peek")?;
                    Ok::<_, crate::Violation>(
                        v.into_iter().map(|i| (i.id, i.due_at)).collect::<Vec<_>>(),
                    )
                }
            };
            // Leased: claimed in enqueue order with ttls 3L, L, 2L, so the
            // expiry order is the second, the third, the first.
            let ids = cx.push_n(3).await?;
            let mut leases = Vec::new();
            for k in [3, 1, 2] {
                leases.push(cx.claim_one(LONG * k).await?);
            }
            let want: Vec<_> = [1, 2, 0]
                .iter()
                .map(|&i| (leases[i].id(), Some(leases[i].expires_at)))
                .collect();
            let got = listed(ItemState::Leased).await?;
            ensure!(
                got == want,
                rule,
                "peek(Leased) of items {ids:?} leased for 3x, 1x and 2x {LONG:?} gave \
                 {got:?}; expected expiry order {want:?}"
            );
            if caps.priorities {
                let ready = cx
                    .enqueue(vec![
                        NewItem::new("low-first"),
                        NewItem::new("high").priority(5),
                        NewItem::new("low-second"),
                    ])
                    .await?;
                let want = vec![ready[1], ready[0], ready[2]];
                let got: Vec<ItemId> = listed(ItemState::Ready)
                    .await?
                    .into_iter()
                    .map(|e| e.0)
                    .collect();
                ensure!(
                    got == want,
                    rule,
                    "peek(Ready) of priorities 0, 5, 0 gave {got:?}; expected claim order {want:?}"
                );
            }
            if caps.delays {
                let sched = cx
                    .enqueue(vec![
                        NewItem::new("in-3L").delay(LONG * 3),
                        NewItem::new("in-1L").delay(LONG),
                        NewItem::new("in-2L").delay(LONG * 2),
                    ])
                    .await?;
                let got = listed(ItemState::Scheduled).await?;
                let order: Vec<ItemId> = got.iter().map(|e| e.0).collect();
                let want = vec![sched[1], sched[2], sched[0]];
                let rising = got.windows(2).all(|w| w[0].1 < w[1].1);
                ensure!(
                    order == want && rising && got.iter().all(|e| e.1.is_some()),
                    rule,
                    "peek(Scheduled) of items due in 3x, 1x and 2x {LONG:?} gave {got:?}; \
                     expected due-time order {want:?}, each with its due time"
                );
            }
            for l in &leases {
                cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            }
            Ok(())
        },
    )
    .await
}

/// `extend` moves the expiry to `now + ttl`: the lease outlives its first
/// ttl, a reap leaves it alone, and the holder can still ack.
pub async fn extend_moves_expiry(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("extend");
    run(
        factory,
        "extend_moves_expiry",
        rule,
        Needs::NONE,
        |cx| async move {
            cx.push_n(1).await?;
            let lease = cx.claim_one(SHORT).await?;
            let before = cx.now().await?;
            let ttl = LeaseTtl::new(LONG).or_fail(rule, "ttl")?;
            let extended = cx.b.extend(&lease.key, ttl).await.or_fail(rule, "extend")?;
            let until = extended.expires_at;
            ensure!(
                !extended.cancel_requested,
                rule,
                "extend of a lease nobody cancelled answered cancel_requested"
            );
            let after = cx.now().await?;
            ensure!(
                before.saturating_add(LONG) <= until && until <= after.saturating_add(LONG),
                rule,
                "extend returned {until}, expected now + {LONG:?} (now was {before} .. {after})"
            );
            let info = cx.must_item(lease.id()).await?;
            ensure!(
                info.due_at == Some(until),
                rule,
                "item shows expiry {:?} after extend to {until}",
                info.due_at
            );
            cx.wait_past(lease.expires_at).await?;
            let r = cx.reap().await?;
            ensure!(
                r.recovered() == 0,
                rule,
                "reap recovered {} leases after the lease was extended",
                r.recovered()
            );
            let info = cx.must_item(lease.id()).await?;
            ensure!(
                info.state == ItemState::Leased,
                rule,
                "extended item is {} after a reap",
                info.state
            );
            cx.b.ack(&lease.key)
                .await
                .or_fail(rule, "ack of the extended lease")?;
            Ok(())
        },
    )
    .await
}

/// A batch enqueue returns one distinct id per item, in order; an empty
/// batch writes nothing.
pub async fn batch_results_in_order(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("enqueue");
    run(
        factory,
        "batch_results_in_order",
        rule,
        Needs::NONE,
        |cx| async move {
            let empty =
                cx.b.enqueue(&cx.q, Vec::new())
                    .await
                    .or_fail(rule, "empty enqueue")?;
            ensure!(empty.is_empty(), rule, "an empty batch returned {empty:?}");
            cx.expect_stats([0, 0, 0, 0], "after an empty batch")
                .await?;
            let items = (0..20).map(|i| NewItem::new(format!("p{i}"))).collect();
            let ids = cx.enqueue(items).await?;
            let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
            ensure!(
                distinct.len() == 20,
                rule,
                "20 items got {} distinct ids: {ids:?}",
                distinct.len()
            );
            for (i, id) in ids.iter().enumerate() {
                let info = cx.must_item(*id).await?;
                ensure!(
                    info.payload.as_ref() == format!("p{i}").as_bytes(),
                    rule,
                    "result {i} names item {id} whose payload is {:?}",
                    info.payload
                );
            }
            cx.expect_stats([20, 0, 0, 0], "after a batch of 20")
                .await?;
            Ok(())
        },
    )
    .await
}
