//! `remove_item`: one item leaves its queue from any state and never comes
//! back, its lease is lost and its dedup key free, every other item keeps
//! its state and place, and racing removes, claims and acks settle each item
//! exactly once.
//!
//! For backends whose `Capabilities::remove_item` is true.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::{
    Cancelled, Error, ItemId, ItemState, Keep, LeaseFate, LeaseTtl, NewItem, Order, QueueName,
    Retention,
};

use crate::cx::{expect_lost, run, Cx, Needs, Rng, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("remove_item");

/// Items and removers in [`racing_removes_settle_each_item_once`].
const RACED: usize = 120;
const REMOVERS: usize = 2;
const CLAIMERS: usize = 2;

/// Removes `id` from `queue`: the state it was in, or `None` for
/// `NotFound`; any other error fails the check.
async fn remove(cx: &Cx, queue: &QueueName, id: ItemId) -> Result<Option<ItemState>, Violation> {
    match cx.b.remove_item(queue, id).await {
        Ok(state) => Ok(Some(state)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(cx.fail(format!("remove_item({queue}, {id}) failed: {e}"))),
    }
}

/// Removes `id` and expects it to have been in `want`.
async fn remove_from(cx: &Cx, id: ItemId, want: ItemState) -> Result<(), Violation> {
    let got = remove(cx, &cx.q, id).await?;
    ensure!(
        got == Some(want),
        RULE,
        "remove_item of the {want:?} item {id} answered {got:?}; expected Ok({want:?})"
    );
    ensure!(
        cx.item(id).await?.is_none(),
        RULE,
        "item {id} is still there after remove_item returned Ok"
    );
    let again = remove(cx, &cx.q, id).await?;
    ensure!(
        again.is_none(),
        RULE,
        "a second remove_item of item {id} answered Ok({again:?}); expected NotFound"
    );
    Ok(())
}

/// One item of each state is removed and reported in that state (a
/// Scheduled item past its due time as Ready); it is gone from `item`,
/// stats and peek, and a second remove is `NotFound`. Its neighbours keep
/// their states, and the Ready ones are claimed in their order afterwards.
/// An id of another queue, and an id never handed out, are `NotFound` and
/// change nothing.
pub async fn remove_item_takes_out_that_item(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "remove_item_takes_out_that_item",
        RULE,
        Needs::REMOVE_ITEM,
        |cx| async move {
            let caps = cx.b.capabilities();
            // Dead: the first item, failed on its only attempt.
            let dead = cx.enqueue(vec![NewItem::new("dead").max_attempts(1)]).await?[0];
            let doomed = cx.claim_one(LONG).await?;
            ensure!(doomed.id() == dead, RULE, "the only item is {dead}, the claim returned {}", doomed.id());
            cx.b.fail(&doomed.key, "dead on purpose").await.or_fail(RULE, "fail")?;
            let kept_dead = cx.enqueue(vec![NewItem::new("kept dead").max_attempts(1)]).await?[0];
            let lease = cx.claim_one(LONG).await?;
            cx.b.fail(&lease.key, "kept dead").await.or_fail(RULE, "fail")?;
            // Leased: the next, and a neighbour leased beside it.
            let leased = cx.enqueue(vec![NewItem::new("leased"), NewItem::new("kept leased")]).await?;
            let leases = cx.claim(2, LONG).await?;
            ensure!(leases.len() == 2, RULE, "a claim of 2 returned {} leases", leases.len());
            // Ready: five in a row, the middle one removed.
            let ready = cx.push_n(5).await?;
            let mut want = [4, 0, 1, 1];
            let mut scheduled = None;
            if caps.delays {
                let ids = cx
                    .enqueue(vec![
                        NewItem::new("later").delay(Duration::from_secs(3600)),
                        NewItem::new("kept later").delay(Duration::from_secs(3600)),
                    ])
                    .await?;
                scheduled = Some(ids[0]);
                want[1] = 1;
            }
            // Another queue, whose ids may repeat this queue's (ids are
            // per queue on some backends).
            let other = cx.own("other")?;
            let theirs = cx
                .b
                .enqueue(&other, (0..30).map(|i| NewItem::new(format!("foreign-{i}"))).collect())
                .await
                .or_fail(RULE, "enqueue into the other queue")?;
            let mut ours = vec![dead, kept_dead];
            ours.extend(leased.iter().chain(&ready));
            ours.extend(scheduled);
            remove_from(&cx, dead, ItemState::Dead).await?;
            remove_from(&cx, leased[0], ItemState::Leased).await?;
            remove_from(&cx, ready[2], ItemState::Ready).await?;
            if let Some(id) = scheduled {
                remove_from(&cx, id, ItemState::Scheduled).await?;
            }
            // An id only another queue holds, and an id never handed out,
            // are not this queue's.
            let foreign = theirs
                .iter()
                .map(|e| e.id)
                .filter(|id| !ours.contains(id))
                .max()
                .ok_or_else(|| cx.fail("30 items of another queue all took ids of this one"))?;
            ensure!(
                remove(&cx, &cx.q, foreign).await?.is_none(),
                RULE,
                "remove_item of id {foreign}, which only another queue holds, answered Ok"
            );
            let unknown = ItemId::new(foreign.get().saturating_add(1_000_000));
            ensure!(
                remove(&cx, &cx.q, unknown).await?.is_none(),
                RULE,
                "remove_item of id {unknown}, never handed out, answered Ok"
            );
            let left = cx.b.stats(&other).await.or_fail(RULE, "stats of the other queue")?;
            ensure!(
                left.ready == 30 && left.leased + left.scheduled + left.dead == 0,
                RULE,
                "removing items of one queue changed another's: its stats are {left:?}, expected 30 Ready"
            );
            cx.expect_stats(want, "after removing one item of each state").await?;
            for state in ItemState::ALL {
                let listed = cx.b.peek(&cx.q, state, 100).await.or_fail(RULE, "peek")?;
                let gone: Vec<ItemId> = listed
                    .iter()
                    .map(|i| i.id)
                    .filter(|id| [dead, leased[0], ready[2]].contains(id) || Some(*id) == scheduled)
                    .collect();
                ensure!(gone.is_empty(), RULE, "peek of {state:?} still lists removed items {gone:?}");
            }
            cx.check_indexes("after removing one item of each state").await?;
            let kept = cx.must_item(kept_dead).await?;
            ensure!(kept.state == ItemState::Dead, RULE, "the other dead item is now {:?}", kept.state);
            let kept = cx.must_item(leased[1]).await?;
            ensure!(kept.state == ItemState::Leased, RULE, "the other leased item is now {:?}", kept.state);
            let neighbour = leases
                .iter()
                .find(|l| l.id() == leased[1])
                .ok_or_else(|| cx.fail(format!("the claim of 2 did not lease item {}", leased[1])))?;
            cx.b.ack(&neighbour.key).await.or_fail(RULE, "ack of the neighbour's lease")?;

            // The Ready neighbours come out in their order, the removed one
            // nowhere.
            let mut drained: Vec<ItemId> = cx.drain(LONG, 4).await?.iter().map(|l| l.id()).collect();
            let mut expected = vec![ready[0], ready[1], ready[3], ready[4]];
            if caps.order != Order::Global {
                // Order holds per shard only: compare the sets.
                drained.sort();
                expected.sort();
            }
            ensure!(
                drained == expected,
                RULE,
                "after removing Ready item {} the claims returned {drained:?}; expected {expected:?}",
                ready[2]
            );

            // A Scheduled item past its due time is Ready to every caller.
            if caps.delays {
                let due = cx.enqueue(vec![NewItem::new("due soon").delay(SHORT)]).await?[0];
                let info = cx.must_item(due).await?;
                let at = info.due_at.ok_or_else(|| cx.fail("a delayed item shows no due time"))?;
                cx.wait_past(at).await?;
                remove_from(&cx, due, ItemState::Ready).await?;
                // Gone from the Scheduled index it was filed in, not only
                // from the Ready state it is read as: a claim finds nothing
                // to lease and no stray entry to repair.
                let stray = cx.claim(10, LONG).await?;
                ensure!(
                    stray.is_empty(),
                    RULE,
                    "after removing item {due} past its due time a claim leased {:?}",
                    stray.iter().map(|l| l.id()).collect::<Vec<_>>()
                );
                for state in [ItemState::Ready, ItemState::Scheduled] {
                    let listed = cx.b.peek(&cx.q, state, 100).await.or_fail(RULE, "peek")?;
                    ensure!(
                        listed.iter().all(|i| i.id != due),
                        RULE,
                        "peek of {state:?} still lists item {due}, removed past its due time"
                    );
                }
                let when = "after removing a Scheduled item past its due time";
                cx.expect_stats([0, 1, 4, 1], when).await?;
                cx.check_indexes(when).await?;
            }
            cx.b.delete_queue(&other).await.or_fail(RULE, "delete_queue of the other queue")?;
            Ok(())
        },
    )
    .await
}

/// A removed item's lease is lost: ack, `ack_many`, extend, release and
/// fail on it fail with `LeaseLost` and change nothing, and once the lease
/// has expired a reap recovers nothing: the item never comes back.
pub async fn remove_item_loses_its_lease(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "remove_item_loses_its_lease",
        RULE,
        Needs::REMOVE_ITEM,
        |cx| async move {
            // Removed under a live lease: no reaper can have taken it, so
            // to its holder the lease's fate is Finished with the item gone.
            cx.push_n(1).await?;
            let live = cx.claim_one(LONG).await?;
            remove_from(&cx, live.id(), ItemState::Leased).await?;
            match cx.b.lease_fate(&live.key, live.expires_at).await {
                Ok(LeaseFate::Finished { state: None }) | Err(Error::Unsupported { .. }) => {}
                other => {
                    return Err(cx.fail(format!(
                        "lease_fate of a live lease whose item was removed answered {other:?}; \
                         expected Finished {{ state: None }}"
                    )))
                }
            }
            cx.push_n(5).await?;
            let leases = cx.claim(5, SHORT).await?;
            ensure!(
                leases.len() == 5,
                RULE,
                "a claim of 5 returned {} leases",
                leases.len()
            );
            for lease in &leases {
                remove_from(&cx, lease.id(), ItemState::Leased).await?;
            }
            let ttl = LeaseTtl::new(LONG).or_fail(RULE, "ttl")?;
            let when = "on a removed item";
            expect_lost(cx.b.ack(&leases[0].key).await, &format!("ack {when}"))?;
            expect_lost(
                cx.b.extend(&leases[1].key, ttl).await,
                &format!("extend {when}"),
            )?;
            expect_lost(
                cx.b.release(&leases[2].key, Duration::ZERO).await,
                &format!("release {when}"),
            )?;
            expect_lost(
                cx.b.fail(&leases[3].key, "gone").await,
                &format!("fail {when}"),
            )?;
            let many =
                cx.b.ack_many(std::slice::from_ref(&leases[4].key))
                    .await
                    .or_fail(RULE, "ack_many")?;
            ensure!(
                matches!(many.as_slice(), [Err(Error::LeaseLost { .. })]),
                RULE,
                "ack_many of a lease on a removed item answered {many:?}; expected [LeaseLost]"
            );
            cx.expect_stats([0, 0, 0, 0], "after removing every leased item")
                .await?;
            // No fenced call wrote a record back for the removed id.
            for lease in &leases {
                ensure!(
                    cx.item(lease.id()).await?.is_none(),
                    RULE,
                    "item {} is back after calls on its lost lease",
                    lease.id()
                );
            }
            cx.expire(&leases).await?;
            let reaped = cx.reap_all().await?;
            ensure!(
                reaped.recovered() == 0,
                RULE,
                "a reap after the removed items' leases expired recovered {} of them",
                reaped.recovered()
            );
            ensure!(
                cx.claim(10, LONG).await?.is_empty(),
                RULE,
                "a claim after removing every item leased something"
            );
            cx.check_indexes("after removing leased items and reaping")
                .await?;
            // Emptied by removals, the queue leaves the listing as it does
            // when emptied by acks.
            let listed = cx.b.queues().await.or_fail(RULE, "queues")?;
            ensure!(
                !listed.contains(&cx.q),
                RULE,
                "queues() still lists {} after removing every item it held",
                cx.q
            );
            Ok(())
        },
    )
    .await
}

/// `remove_item` takes a Leased item whose cancel was requested like any
/// Leased item: it answers `Ok(Leased)`, the item is gone (`item`, stats),
/// the lease is lost, and the removal is no ending: with a policy that
/// keeps every finished item, nothing is kept for it, neither Completed nor
/// Cancelled. A removal that ends the lease by the path a cancelled lease
/// ends by would record (and delete) the item as Cancelled, and then find
/// nothing to remove.
pub async fn remove_item_takes_a_cancel_requested_lease(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run(
        factory,
        "remove_item_takes_a_cancel_requested_lease",
        RULE,
        Needs::REMOVE_ITEM.and(Needs::CONTROL),
        |cx| async move {
            let history = cx.b.groups().history;
            if let Some(history) = history {
                let everything = Retention::default()
                    .completed(Keep::FOREVER)
                    .cancelled(Keep::FOREVER);
                history
                    .set_retention(&cx.q, everything)
                    .await
                    .or_fail(RULE, "set_retention")?;
            }
            let id = cx.push_n(1).await?[0];
            let lease = cx.claim_one(LONG).await?;
            ensure!(
                lease.id() == id,
                RULE,
                "claimed {} instead of {id}",
                lease.id()
            );
            let asked = cx.b.cancel(&cx.q, id).await.or_fail(RULE, "cancel")?;
            ensure!(
                asked == Cancelled::Requested,
                RULE,
                "cancel of the Leased item {id} answered {asked:?}; expected Requested"
            );
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Leased && info.cancel_requested,
                RULE,
                "after a cancel of its lease item {id} is {info:?}; expected Leased with its \
                 cancel requested"
            );
            let got = remove(&cx, &cx.q, id).await?;
            ensure!(
                got == Some(ItemState::Leased),
                RULE,
                "remove_item of the Leased item {id}, its cancel requested, answered {}; \
                 expected Ok(Leased)",
                got.map_or_else(|| "NotFound".to_owned(), |s| format!("Ok({s:?})"))
            );
            let left = cx.item(id).await?;
            ensure!(
                left.is_none(),
                RULE,
                "item {id} is still there after remove_item returned Ok: {left:?}"
            );
            cx.expect_stats([0, 0, 0, 0], "after removing the cancel-requested item")
                .await?;
            expect_lost(
                cx.b.ack(&lease.key).await,
                "ack of a cancel-requested lease whose item was removed",
            )?;
            if let Some(history) = history {
                let kept = history
                    .finished(&cx.q, None, 10)
                    .await
                    .or_fail(RULE, "finished")?;
                ensure!(
                    kept.is_empty(),
                    RULE,
                    "the removal of item {id}, cancel requested, was kept as a finished item \
                     under a policy that keeps every ending: {kept:?}; a removed item did not \
                     finish"
                );
                match history.finished_item(&cx.q, id).await {
                    Err(Error::NotFound { .. }) => {}
                    other => {
                        return Err(cx.fail(format!(
                            "finished_item({id}) of the removed item answered {other:?}; \
                             expected NotFound"
                        )))
                    }
                }
            }
            cx.check_indexes("after removing a cancel-requested item")
                .await?;
            Ok(())
        },
    )
    .await
}

/// A removed item frees its dedup key at once, whether it was Dead,
/// Scheduled, Ready or Leased, and also when it was enqueued with a hold
/// after the ack (it was never acked): the next item with the key is a new
/// item with a new id.
pub async fn remove_item_frees_its_dedup_key(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "remove_item_frees_its_dedup_key",
        RULE,
        Needs::REMOVE_ITEM.and(Needs::DEDUP),
        |cx| async move {
            let unique_for = cx.b.capabilities().unique_for;
            let keyed = |payload: &str, key: &str| {
                let item = NewItem::new(payload.to_owned()).dedup_key(key);
                if unique_for {
                    item.unique_for(LONG)
                } else {
                    item
                }
            };
            // Dead (failed on its only attempt) and, with delays, Scheduled.
            let dead = cx.enqueue(vec![keyed("dead", "c").max_attempts(1)]).await?[0];
            let doomed = cx.claim_one(LONG).await?;
            cx.b.fail(&doomed.key, "dead on purpose")
                .await
                .or_fail(RULE, "fail")?;
            remove_from(&cx, dead, ItemState::Dead).await?;
            let mut old = vec![dead];
            let mut again = vec![keyed("dead again", "c")];
            if cx.b.capabilities().delays {
                let later = keyed("later", "d").delay(Duration::from_secs(3600));
                let later = cx.enqueue(vec![later]).await?[0];
                remove_from(&cx, later, ItemState::Scheduled).await?;
                old.push(later);
                again.push(keyed("later again", "d"));
            }
            let ready = cx.enqueue(vec![keyed("ready", "a")]).await?[0];
            let leased = cx.enqueue(vec![keyed("leased", "b")]).await?[0];
            // Whichever the claim takes is removed while Leased, the other
            // while Ready.
            let lease = cx.claim_one(LONG).await?;
            let other = if lease.id() == ready { leased } else { ready };
            remove_from(&cx, lease.id(), ItemState::Leased).await?;
            remove_from(&cx, other, ItemState::Ready).await?;
            old.extend([ready, leased]);
            again.extend([keyed("ready again", "a"), keyed("leased again", "b")]);
            let n = again.len() as u64;
            let again =
                cx.b.enqueue(&cx.q, again)
                    .await
                    .or_fail(RULE, "enqueue with the removed items' keys")?;
            for (e, was) in again.iter().zip(&old) {
                ensure!(
                    !e.deduplicated && !old.contains(&e.id),
                    RULE,
                    "an item enqueued with the key of removed item {was} answered {e:?}; \
                     expected a new item with a new id (the key is free)"
                );
            }
            cx.expect_stats([n, 0, 0, 0], "after re-enqueuing every key")
                .await?;
            Ok(())
        },
    )
    .await
}

/// Removers race claimers that ack what they get: every item is settled
/// exactly once, by one remove or by one ack, never both. A remove that
/// found an item Ready means no claim ever leased it; one that found it
/// Leased means its lease was lost (its ack failed); two removers never
/// both remove one item. The queue ends empty.
pub async fn racing_removes_settle_each_item_once(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "racing_removes_settle_each_item_once",
        RULE,
        Needs::REMOVE_ITEM,
        |cx| async move {
            for round in 0..3 * scale() {
                let ids = cx.push_n(RACED).await?;
                let removers = (0..REMOVERS).map(|_| {
                    let (cx, mut order, mut rng) = (cx.clone(), ids.clone(), Rng::seeded());
                    // Each remover walks the ids in its own random order.
                    for i in (1..order.len()).rev() {
                        order.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    cx.clone().spawn(async move {
                        let mut out = Vec::new();
                        for id in order {
                            match cx.b.remove_item(&cx.q, id).await {
                                Ok(state) => out.push((id, state)),
                                Err(Error::NotFound { .. }) => {}
                                Err(e) => return Err(format!("remove_item({id}): {e}")),
                            }
                            tokio::task::yield_now().await;
                        }
                        Ok(out)
                    })
                });
                let claimers = (0..CLAIMERS).map(|_| {
                    let cx = cx.clone();
                    cx.clone().spawn(async move {
                        let (mut claimed, mut acked) = (Vec::new(), Vec::new());
                        loop {
                            let spec = leaseq_core::ClaimSpec::new(3, LONG).map_err(|e| e.to_string())?;
                            let got = cx.b.claim(&cx.q, spec).await.map_err(|e| format!("claim: {e}"))?;
                            if got.leases.is_empty() {
                                return Ok::<_, String>((claimed, acked));
                            }
                            for lease in got.leases {
                                claimed.push(lease.id());
                                match cx.b.ack(&lease.key).await {
                                    Ok(()) => acked.push(lease.id()),
                                    Err(Error::LeaseLost { .. }) => {}
                                    Err(e) => return Err(format!("ack({}): {e}", lease.id())),
                                }
                            }
                        }
                    })
                });
                let removers: Vec<_> = removers.collect();
                let claimers: Vec<_> = claimers.collect();
                let mut removed: BTreeMap<ItemId, ItemState> = BTreeMap::new();
                for r in cx.join(removers).await? {
                    for (id, state) in r.map_err(|e| cx.fail(format!("round {round}: {e}")))? {
                        if let Some(first) = removed.insert(id, state) {
                            return Err(cx.fail(format!(
                                "round {round}: two removers both removed item {id} (as {first:?} and {state:?})"
                            )));
                        }
                    }
                }
                let (mut claimed, mut acked) = (BTreeSet::new(), BTreeSet::new());
                for r in cx.join(claimers).await? {
                    let (c, a) = r.map_err(|e| cx.fail(format!("round {round}: {e}")))?;
                    for id in c {
                        ensure!(claimed.insert(id), RULE, "round {round}: item {id} was claimed twice");
                    }
                    acked.extend(a);
                }
                for id in &ids {
                    let by_remove = removed.get(id);
                    let by_ack = acked.contains(id);
                    if by_remove.is_some() == by_ack {
                        let what = if by_ack {
                            format!("acked and also removed (as {by_remove:?})")
                        } else {
                            "neither acked nor removed".to_owned()
                        };
                        return Err(cx.fail(format!("round {round}: item {id} was {what}")));
                    }
                    match by_remove {
                        Some(ItemState::Ready) => ensure!(
                            !claimed.contains(id),
                            RULE,
                            "round {round}: item {id} was removed as Ready, yet a claim leased it"
                        ),
                        Some(ItemState::Leased) => ensure!(
                            claimed.contains(id),
                            RULE,
                            "round {round}: item {id} was removed as Leased, yet no claim leased it"
                        ),
                        Some(other) => {
                            return Err(cx.fail(format!(
                                "round {round}: item {id} was removed as {other:?}; it could only be Ready or Leased"
                            )))
                        }
                        None => {}
                    }
                }
                cx.expect_stats([0, 0, 0, 0], &format!("round {round}: after the race")).await?;
                cx.check_indexes(&format!("round {round}: after the race")).await?;
            }
            Ok(())
        },
    )
    .await
}
