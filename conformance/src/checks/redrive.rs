//! `redrive_item`: the Dead item named by its id back to Ready, in one
//! atomic step, and nothing else: no other Dead item, no item in another
//! state, no id the queue does not hold.

use std::collections::BTreeSet;

use crate::groupwise::Groupwise as _;
use leaseq_core::{ClaimSpec, Error, ItemId, ItemInfo, ItemState, NewItem, Order, QueueName};

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("redrive_item");
/// What the redriven item's second death must record.
const FAIL: Rule = Rule::Contract("fail");

/// Enqueues `item`, claims it and fails it: one more death, after every
/// death before it. Returns its id.
async fn kill(cx: &Cx, item: NewItem) -> Result<ItemId, Violation> {
    let id = cx.enqueue(vec![item]).await?[0];
    let lease = cx.claim_one(LONG).await?;
    ensure!(
        lease.id() == id,
        RULE,
        "the only claimable item is {id}, but the claim returned {}",
        lease.id()
    );
    cx.b.fail(&lease.key, "dead on purpose")
        .await
        .or_fail(RULE, "fail")?;
    Ok(id)
}

/// The ids in Dead, as `peek` lists them.
async fn dead_ids(cx: &Cx) -> Result<Vec<ItemId>, Violation> {
    Ok(cx
        .b
        .peek(&cx.q, ItemState::Dead, 100)
        .await
        .or_fail(RULE, "peek(Dead)")?
        .iter()
        .map(|i| i.id)
        .collect())
}

/// Fails unless `redrive_item(id)` answered `Ok(false)`.
async fn expect_not_moved(cx: &Cx, id: ItemId, what: &str) -> Result<(), Violation> {
    match cx.b.redrive_item(&cx.q, id).await {
        Ok(false) => Ok(()),
        other => Err(cx.fail(format!(
            "redrive_item of {what} {id} answered {other:?}; expected Ok(false)"
        ))),
    }
}

/// Fails unless `redrive_item(id)` answered `NotFound`.
async fn expect_not_found(cx: &Cx, id: ItemId, what: &str) -> Result<(), Violation> {
    match cx.b.redrive_item(&cx.q, id).await {
        Err(Error::NotFound { .. }) => Ok(()),
        other => Err(cx.fail(format!(
            "redrive_item of {what} ({id}) answered {other:?}; expected NotFound"
        ))),
    }
}

/// `redrive_item` moves exactly the item it names: that item is Ready with
/// attempts 0 and keeps its payload, priority, max attempts and dedup key;
/// every other Dead item stays Dead, in death order; the item is claimed
/// next, and `redrive` afterwards still takes the oldest death first.
pub async fn redrive_item_moves_that_item(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "redrive_item_moves_that_item",
        RULE,
        Needs::ADMIN,
        |cx| async move {
            let caps = cx.b.capabilities();
            // The named item dies third of four: neither the oldest nor
            // the newest death, so moving "the oldest" or "the newest"
            // instead is caught.
            let d0 = kill(&cx, NewItem::new("d0").max_attempts(5)).await?;
            let d1 = kill(&cx, NewItem::new("d1").max_attempts(5)).await?;
            let mut target = NewItem::new("target").max_attempts(4);
            if caps.priorities {
                target = target.priority(7);
            }
            if caps.dedup {
                target = target.dedup_key("redrive-target");
            }
            let t = kill(&cx, target).await?;
            let d2 = kill(&cx, NewItem::new("d2").max_attempts(5)).await?;
            let before = cx.must_item(t).await?;
            ensure!(
                before.state == ItemState::Dead && before.attempts == 1,
                RULE,
                "the item to redrive is not Dead after one claim and a fail: {before:?}"
            );

            let moved =
                cx.b.redrive_item(&cx.q, t)
                    .await
                    .or_fail(RULE, "redrive_item")?;
            ensure!(
                moved,
                RULE,
                "redrive_item of the Dead item {t} answered false"
            );
            let after = cx.must_item(t).await?;
            let want = ItemInfo {
                state: ItemState::Ready,
                attempts: 0,
                due_at: None,
                last_error: after.last_error.clone(),
                ..before.clone()
            };
            ensure!(
                after == want,
                RULE,
                "after redrive_item: {after:?}; expected Ready with attempts 0 and the rest \
                 kept: {want:?}"
            );
            let dead = dead_ids(&cx).await?;
            if caps.order == Order::Global {
                ensure!(
                    dead == [d0, d1, d2],
                    RULE,
                    "after redrive_item({t}) Dead holds {dead:?}; expected {:?} in death order",
                    [d0, d1, d2]
                );
            } else {
                let dead: BTreeSet<ItemId> = dead.into_iter().collect();
                ensure!(
                    dead == BTreeSet::from([d0, d1, d2]),
                    RULE,
                    "after redrive_item({t}) Dead holds {dead:?}; expected {:?}",
                    [d0, d1, d2]
                );
            }
            cx.expect_stats([1, 0, 0, 3], "after redrive_item").await?;
            if caps.dedup {
                let again =
                    cx.b.enqueue(
                        &cx.q,
                        vec![NewItem::new("copy").dedup_key("redrive-target")],
                    )
                    .await
                    .or_fail(RULE, "enqueue with the redriven item's key")?;
                ensure!(
                    again.len() == 1 && again[0].id == t && again[0].deduplicated,
                    RULE,
                    "the redriven item {t} no longer holds its dedup key: enqueue answered \
                     {again:?}"
                );
            }
            // A second call finds it Ready: nothing moves.
            expect_not_moved(&cx, t, "the item just redriven").await?;

            let lease = cx.claim_one(LONG).await?;
            ensure!(
                lease.id() == t && lease.attempts == 1 && lease.payload == before.payload,
                RULE,
                "the next claim returned {} (attempt {}); expected the redriven item {t} at \
                 attempt 1",
                lease.id(),
                lease.attempts
            );
            cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
            ensure!(
                cx.claim(10, LONG).await?.is_empty(),
                RULE,
                "items other than the one redriven became claimable"
            );
            if caps.order == Order::Global {
                let n = cx.b.redrive(&cx.q, 1).await.or_fail(RULE, "redrive")?;
                let first = cx.must_item(d0).await?;
                ensure!(
                    n == 1 && first.state == ItemState::Ready,
                    RULE,
                    "redrive(1) after redrive_item moved {n} and left the oldest death {d0} {}",
                    first.state
                );
            }
            cx.check_indexes("after redrive_item").await?;
            Ok(())
        },
    )
    .await
}

/// `redrive_item` of an item in any other state answers `false` and
/// changes nothing (a Leased item's lease still acks); an id the queue
/// does not hold (acked, of another queue, never handed out) is
/// `NotFound`, and a Dead item of another queue stays Dead.
pub async fn redrive_item_leaves_other_states(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "redrive_item_leaves_other_states",
        RULE,
        Needs::ADMIN,
        |cx| async move {
            let caps = cx.b.capabilities();
            let leased_id = cx.push_n(1).await?[0];
            let lease = cx.claim_one(LONG).await?;
            ensure!(
                lease.id() == leased_id,
                RULE,
                "claimed {} instead of {leased_id}",
                lease.id()
            );
            let ready = cx.push_n(1).await?[0];
            let scheduled = if caps.delays {
                Some(cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?[0])
            } else {
                None
            };
            let before_leased = cx.must_item(leased_id).await?;
            let before_ready = cx.must_item(ready).await?;

            expect_not_moved(&cx, ready, "the Ready item").await?;
            expect_not_moved(&cx, leased_id, "the Leased item").await?;
            if let Some(s) = scheduled {
                expect_not_moved(&cx, s, "the Scheduled item").await?;
                let info = cx.must_item(s).await?;
                ensure!(
                    info.state == ItemState::Scheduled,
                    RULE,
                    "after a refused redrive_item the Scheduled item is {info:?}"
                );
            }
            let after_leased = cx.must_item(leased_id).await?;
            let after_ready = cx.must_item(ready).await?;
            ensure!(
                after_leased == before_leased && after_ready == before_ready,
                RULE,
                "a refused redrive_item changed items: Leased {before_leased:?} -> \
                 {after_leased:?}, Ready {before_ready:?} -> {after_ready:?}"
            );
            let scheduled_n = u64::from(scheduled.is_some());
            cx.expect_stats([1, scheduled_n, 1, 0], "after refused redrive_item calls")
                .await?;
            // The lease is untouched: its holder still finishes it.
            cx.b.ack(&lease.key)
                .await
                .or_fail(RULE, "ack of the lease redrive_item refused to touch")?;

            // Ids this queue does not hold.
            expect_not_found(&cx, leased_id, "an acked item").await?;
            expect_not_found(&cx, ItemId::new(u64::MAX), "an id over i64::MAX").await?;
            expect_not_found(&cx, ItemId::new(0), "id 0").await?;
            let top = [Some(leased_id), Some(ready), scheduled]
                .into_iter()
                .flatten()
                .map(ItemId::get)
                .max()
                .unwrap_or(0);
            let never = ItemId::new(top.saturating_add(1_000_000_007));
            expect_not_found(&cx, never, "an id not handed out").await?;
            let other = QueueName::new(format!("{}-other", cx.q)).or_fail(RULE, "naming")?;
            let found = async {
                let id =
                    cx.b.enqueue(&other, vec![NewItem::new("elsewhere")])
                        .await
                        .or_fail(RULE, "enqueue on another queue")?[0]
                        .id;
                let spec = ClaimSpec::new(1, LONG).or_fail(RULE, "spec")?;
                let claimed = cx.b.claim(&other, spec).await.or_fail(RULE, "claim")?;
                let l = claimed
                    .leases
                    .first()
                    .ok_or_else(|| cx.fail("the other queue's claim returned nothing"))?;
                cx.b.fail(&l.key, "x").await.or_fail(RULE, "fail")?;
                if cx.item(id).await?.is_none() {
                    // Ids are per queue: this queue holds no item `id`.
                    expect_not_found(&cx, id, "a Dead item of another queue").await?;
                }
                let info = cx.b.item(&other, id).await.or_fail(RULE, "item")?;
                ensure!(
                    info.state == ItemState::Dead,
                    RULE,
                    "redrive_item on {} moved item {id} of queue {other}: {info:?}",
                    cx.q
                );
                Ok::<(), Violation>(())
            }
            .await;
            let purged = cx.b.purge(&other).await;
            found?;
            purged.or_fail(RULE, "purging the other queue")?;
            cx.expect_stats([1, scheduled_n, 0, 0], "at the end")
                .await?;
            cx.check_indexes("after refused redrive_item calls").await?;
            Ok(())
        },
    )
    .await
}

/// Concurrent `redrive_item` calls for one Dead item (in some rounds, on a
/// backend of one claim order, with a `redrive` racing them for the same,
/// only, Dead item): exactly one moves it, the others answer `false`, and
/// the item is Ready exactly once: claims return it and nothing else.
pub async fn concurrent_redrive_item_moves_once(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "concurrent_redrive_item_moves_once",
        RULE,
        Needs::ADMIN,
        |cx| async move {
            const CALLERS: usize = 8;
            let global = cx.b.capabilities().order == Order::Global;
            for round in 0..6 * scale() {
                // Odd rounds race a redrive(1) too: the named item is then
                // the only Dead one, so the redrive can take only it.
                let with_redrive = global && round % 2 == 1;
                let mut ids = vec![kill(&cx, NewItem::new("a")).await?];
                if !with_redrive {
                    ids.push(kill(&cx, NewItem::new("b")).await?);
                    ids.push(kill(&cx, NewItem::new("c")).await?);
                }
                // Of three deaths, neither the oldest nor the newest.
                let target = ids[ids.len() / 2];
                let mut tasks = Vec::new();
                for i in 0..CALLERS {
                    let cx = cx.clone();
                    tasks.push(tokio::spawn(async move {
                        if with_redrive && i == CALLERS / 2 {
                            return cx.b.redrive(&cx.q, 1).await.map(|n| ("redrive", n));
                        }
                        cx.b.redrive_item(&cx.q, target)
                            .await
                            .map(|moved| ("redrive_item", u64::from(moved)))
                    }));
                }
                let mut moves = 0u64;
                for r in cx.join(tasks).await? {
                    let (what, n) = r.map_err(|e| {
                        cx.fail(format!("round {round}: a concurrent call failed: {e}"))
                    })?;
                    ensure!(n <= 1, RULE, "round {round}: {what} moved {n} items");
                    moves += n;
                }
                ensure!(
                    moves == 1,
                    RULE,
                    "round {round}: {CALLERS} concurrent calls for Dead item {target} moved it \
                     {moves} times; exactly one must"
                );
                let got = cx.claim(10, LONG).await?;
                let got_ids: Vec<ItemId> = got.iter().map(|l| l.id()).collect();
                ensure!(
                    got_ids == [target],
                    RULE,
                    "round {round}: after the race claims returned {got_ids:?}; expected only \
                     {target}, once"
                );
                let dead = ids.len() as u64 - 1;
                cx.expect_stats([0, 0, 1, dead], &format!("round {round}, after the claim"))
                    .await?;
                cx.b.purge(&cx.q)
                    .await
                    .or_fail(RULE, "purge between rounds")?;
            }
            Ok(())
        },
    )
    .await
}

/// Four `redrive` calls at once over the same Dead items: the moves add up
/// to the Dead count, and each item is Ready once (claims return each id
/// once, INV-1). A redrive that reads the Dead index and then moves what it
/// read without checking would move an item twice.
pub async fn concurrent_redrives_move_each_once(factory: &dyn BackendFactory) -> CheckResult {
    const REDRIVE: Rule = Rule::Contract("redrive");
    run(
        factory,
        "concurrent_redrives_move_each_once",
        REDRIVE,
        Needs::ADMIN,
        |cx| async move {
            const DEAD: usize = 20;
            const CALLERS: usize = 4;
            for round in 0..2 * scale() {
                let mut ids = BTreeSet::new();
                for i in 0..DEAD {
                    ids.insert(kill(&cx, NewItem::new(format!("dead-{i}"))).await?);
                }
                let redrives =
                    cx.at_once(
                        CALLERS,
                        |cx, _| async move { cx.b.redrive(&cx.q, DEAD).await },
                    );
                let mut moved = Vec::new();
                for r in redrives.await? {
                    moved.push(r.or_fail(REDRIVE, "a concurrent redrive")?);
                }
                ensure!(
                    moved.iter().sum::<u64>() == DEAD as u64,
                    REDRIVE,
                    "round {round}: {CALLERS} concurrent redrives of {DEAD} Dead items moved \
                     {moved:?}; together they must move each once"
                );
                cx.check_indexes(&format!("round {round}: after concurrent redrives"))
                    .await?;
                cx.expect_stats(
                    [DEAD as u64, 0, 0, 0],
                    &format!("round {round}: after the redrives"),
                )
                .await?;
                let got = cx.with_rule(Rule::Inv1).drain(LONG, DEAD).await?;
                let got_ids: Vec<ItemId> = got.iter().map(|l| l.id()).collect();
                let distinct: BTreeSet<ItemId> = got_ids.iter().copied().collect();
                ensure!(
                    got_ids.len() == DEAD && distinct == ids,
                    Rule::Inv1,
                    "round {round}: after the redrives claims returned {} leases for {} distinct \
                     ids; expected the {DEAD} items once each",
                    got_ids.len(),
                    distinct.len()
                );
                cx.b.purge(&cx.q)
                    .await
                    .or_fail(REDRIVE, "purge between rounds")?;
            }
            Ok(())
        },
    )
    .await
}

/// A redriven item that dies again records the reason of its new death:
/// a `fail("second")` after a first `fail` and a `redrive_item` leaves
/// `last_error` at `"second"`, not the first death's reason. The item's next lease runs again from the
/// start, so a reason kept from the death before would tell an operator
/// why the item failed the time before, not this time.
pub async fn fail_after_redrive_records_the_new_reason(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run(
        factory,
        "fail_after_redrive_records_the_new_reason",
        FAIL,
        Needs::ADMIN,
        |cx| async move {
            let id = kill(&cx, NewItem::new("twice").max_attempts(3)).await?;
            let first = cx.must_item(id).await?;
            ensure!(
                first.state == ItemState::Dead && first.last_error.is_some(),
                RULE,
                "after the first fail item {id} is {first:?}; expected Dead with its reason"
            );
            let moved =
                cx.b.redrive_item(&cx.q, id)
                    .await
                    .or_fail(RULE, "redrive_item")?;
            ensure!(
                moved,
                RULE,
                "redrive_item of the Dead item {id} answered false"
            );
            let lease = cx.claim_one(LONG).await?;
            ensure!(
                lease.id() == id,
                RULE,
                "the only claimable item is the redriven {id}, but the claim returned {}",
                lease.id()
            );
            cx.b.fail(&lease.key, "second")
                .await
                .or_fail(RULE, "fail after the redrive")?;
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Dead && info.last_error.as_deref() == Some("second"),
                FAIL,
                "item {id}, failed with \"dead on purpose\", redriven and failed again with \
                 \"second\", is {} with last_error {:?}; expected Dead with \"second\", the \
                 reason of its latest death",
                info.state,
                info.last_error
            );
            Ok(())
        },
    )
    .await
}

/// `redrive_item` racing the death itself: while the item's final attempt
/// ends (by `fail` in even rounds, by a reap of its expired lease in odd
/// ones, with the reaps after it if that one passed over the item), several
/// `redrive_item` calls for it each answer `Ok`, at most one moves it, the
/// death is carried out once, and the item ends where the answers say: Ready with attempts 0 when one call moved it, Dead when
/// none did (a call that came first found it Leased).
pub async fn redrive_item_races_the_death(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "redrive_item_races_the_death",
        RULE,
        Needs::ADMIN,
        |cx| async move {
            const REDRIVERS: usize = 4;
            for round in 0..10 * scale() {
                let by_reap = round % 2 == 1;
                let id = cx
                    .enqueue(vec![NewItem::new("last").max_attempts(1)])
                    .await?[0];
                let ttl = if by_reap { crate::cx::SHORT } else { LONG };
                let lease = cx.claim_one(ttl).await?;
                if by_reap {
                    cx.expire(std::slice::from_ref(&lease)).await?;
                }
                let key = lease.key.clone();
                let answers = cx
                    .at_once(REDRIVERS + 1, move |cx, i| {
                        let key = key.clone();
                        async move {
                            match (i, by_reap) {
                                (0, true) => cx.b.reap(&cx.q).await.map(|r| ("reap", r.dead)),
                                (0, false) => cx.b.fail(&key, "last").await.map(|()| ("fail", 1)),
                                _ => {
                                    cx.b.redrive_item(&cx.q, id)
                                        .await
                                        .map(|m| ("redrive_item", u64::from(m)))
                                }
                            }
                        }
                    })
                    .await?;
                let (mut moved, mut killed) = (0, 0);
                for (i, a) in answers.into_iter().enumerate() {
                    let (_, n) = a.map_err(|e| {
                        cx.fail(format!(
                            "round {round}: a call racing the item's final attempt failed: {e}"
                        ))
                    })?;
                    if i == 0 {
                        killed = n;
                    } else {
                        moved += n;
                    }
                }
                // A reap may pass over a row another call holds locked
                // (`SKIP LOCKED`); the next reap recovers it.
                if by_reap {
                    killed += cx.reap_all().await?.dead;
                }
                ensure!(
                    killed == 1,
                    RULE,
                    "round {round}: the item's final attempt ended {killed} times, not once"
                );
                ensure!(
                    moved <= 1,
                    RULE,
                    "round {round}: {moved} redrive_item calls moved one item"
                );
                let info = cx.must_item(id).await?;
                let want = if moved == 1 {
                    ItemState::Ready
                } else {
                    ItemState::Dead
                };
                ensure!(
                    info.state == want && (moved == 0 || info.attempts == 0),
                    RULE,
                    "round {round}: {moved} redrive_item calls answered that they moved item {id}, \
                     but it is {} with attempts {}",
                    info.state,
                    info.attempts
                );
                cx.check_indexes(&format!("round {round}: after the race"))
                    .await?;
                cx.b.purge(&cx.q)
                    .await
                    .or_fail(RULE, "purge between rounds")?;
            }
            Ok(())
        },
    )
    .await
}
