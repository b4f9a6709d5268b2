//! How kept items and dead-letter bounds meet the rest of the contract:
//! dedup keys and `unique_for` holds, and `redrive_item` of a dead letter
//! under a [`Retention::dead`] bound.
//!
//! For backends that offer [`leaseq_core::History`].

use std::time::Duration;

use leaseq_core::{BackendExt, Enqueued, ItemId, ItemState, Keep, NewItem, Retention};

use crate::cx::{run, Cx, Needs, LONG, SHORT};
use crate::groupwise::Groupwise as _;
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("History");

async fn set(cx: &Cx, retention: Retention) -> Result<(), Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    history
        .set_retention(&cx.q, retention)
        .await
        .or_fail(RULE, "set_retention")
}

/// Enqueues one item with dedup key `key` (held `hold` after its ack,
/// when `Some`); the backend's answer.
async fn enqueue_keyed(cx: &Cx, key: &str, hold: Option<Duration>) -> Result<Enqueued, Violation> {
    let mut item = NewItem::new(format!("payload of {key}")).dedup_key(key);
    if let Some(hold) = hold {
        item = item.unique_for(hold);
    }
    let out =
        cx.b.enqueue(&cx.q, vec![item])
            .await
            .or_fail(RULE, "enqueue")?;
    out.into_iter()
        .next()
        .ok_or_else(|| cx.fail("an enqueue of one item answered nothing"))
}

/// Enqueues, claims and acks one item with `key`; its id.
/// Takes item `id`, the queue's only Ready one, out: removed where the
/// backend has operator actions, else claimed and acked.
async fn take_out(cx: &Cx, id: ItemId) -> Result<(), Violation> {
    if cx.b.groups().admin.is_some() {
        cx.b.remove_item(&cx.q, id)
            .await
            .or_fail(RULE, "remove_item")?;
        return Ok(());
    }
    ack_the_only(cx, id).await
}

/// Claims item `id`, the queue's only Ready one, and acks it.
async fn ack_the_only(cx: &Cx, id: ItemId) -> Result<(), Violation> {
    let lease = cx.claim_one(LONG).await?;
    ensure!(
        lease.id() == id,
        RULE,
        "claimed item {} while only item {id} was in the queue",
        lease.id()
    );
    cx.b.ack(&lease.key).await.or_fail(RULE, "ack")
}

async fn complete_keyed(cx: &Cx, key: &str, hold: Option<Duration>) -> Result<ItemId, Violation> {
    let made = enqueue_keyed(cx, key, hold).await?;
    ensure!(
        !made.deduplicated,
        RULE,
        "the first enqueue of key {key:?} was deduplicated to {}",
        made.id
    );
    ack_the_only(cx, made.id).await?;
    Ok(made.id)
}

/// A kept item holds its dedup key exactly as long as it would without
/// history: no longer than its `unique_for` hold, and not at all without
/// one. With completed items kept and without, an acked item's key is
/// held (the enqueue answers the acked id) while its hold runs, free once
/// it ran out though the item is still kept, and free at once after an
/// ack without a hold.
pub async fn unique_for_holds_as_without_history(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "unique_for_holds_as_without_history",
        RULE,
        Needs::HISTORY.and(Needs::UNIQUE_FOR),
        |cx| async move {
            let history = cx.b.history().or_fail(RULE, "history")?;
            let hold = SHORT * 4;
            // [held key, plain key, ids] per policy: without history first.
            let mut runs = Vec::new();
            for (name, policy) in [
                ("keeping nothing", Retention::default()),
                (
                    "keeping completed items",
                    Retention::default().completed(Keep::FOREVER),
                ),
            ] {
                set(&cx, policy).await?;
                let (held, plain) = (format!("held {name}"), format!("plain {name}"));
                let held_id = complete_keyed(&cx, &held, Some(hold)).await?;
                let plain_id = complete_keyed(&cx, &plain, None).await?;
                let kept = policy.completed.keeps_any();
                for id in [held_id, plain_id] {
                    let found = history.finished_item(&cx.q, id).await.is_ok();
                    ensure!(
                        found == kept,
                        RULE,
                        "{name}: the acked item {id} is {}kept",
                        if found { "" } else { "not " }
                    );
                }
                let again = enqueue_keyed(&cx, &held, Some(hold)).await?;
                ensure!(
                    again.deduplicated && again.id == held_id,
                    RULE,
                    "{name}: an enqueue of key {held:?} within its {hold:?} hold after the ack answered {again:?}; \
                     expected item {held_id} deduplicated (a unique_for hold works as without history)"
                );
                let again = enqueue_keyed(&cx, &plain, None).await?;
                ensure!(
                    !again.deduplicated,
                    RULE,
                    "{name}: an enqueue of key {plain:?}, whose item {plain_id} was acked with no unique_for hold, \
                     answered {again:?}; expected a new item (an acked item holds no key, kept or not)"
                );
                take_out(&cx, again.id).await?;
                runs.push((name, held, held_id));
            }
            let acked = cx.now().await?;
            cx.wait_past(acked.saturating_add(hold)).await?;
            for (name, held, held_id) in runs {
                let again = enqueue_keyed(&cx, &held, Some(hold)).await?;
                ensure!(
                    !again.deduplicated,
                    RULE,
                    "{name}: an enqueue of key {held:?} after its {hold:?} hold ran out answered {again:?}; \
                     expected a new item (a kept item {held_id} holds its key no longer than unique_for says)"
                );
                take_out(&cx, again.id).await?;
            }
            Ok(())
        },
    )
    .await
}

/// A redriven dead letter is no dead letter: under a
/// [`Retention::dead`] bound, `collect` leaves it (and its dedup key)
/// alone, by count and by age, and counts it from its next death, not its
/// first. A letter `collect` removes frees its dedup key.
pub async fn redriven_letters_leave_the_dead_bound(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "redriven_letters_leave_the_dead_bound",
        RULE,
        Needs::HISTORY.and(Needs::ADMIN),
        |cx| async move {
            let history = cx.b.history().or_fail(RULE, "history")?;
            let dedup = cx.b.capabilities().dedup;
            let items = ["first", "second"]
                .into_iter()
                .map(|p| {
                    let item = NewItem::new(p);
                    if dedup {
                        item.dedup_key(format!("key {p}"))
                    } else {
                        item
                    }
                })
                .collect();
            cx.enqueue(items).await?;
            // `older` dies first, then `newer`.
            let mut died = Vec::new();
            for _ in 0..2 {
                let lease = cx.claim_one(LONG).await?;
                cx.b.fail(&lease.key, "given up").await.or_fail(RULE, "fail")?;
                died.push(lease);
            }
            let newer_died = cx.now().await?;
            let (older, newer) = (died[0].clone(), died[1].clone());
            let key_of = |l: &leaseq_core::Lease| format!("key {}", String::from_utf8_lossy(&l.payload));
            let moved = cx.b.redrive_item(&cx.q, older.id()).await.or_fail(RULE, "redrive_item")?;
            ensure!(moved, RULE, "redrive_item of the dead letter {} answered false", older.id());

            // By count: one dead letter, within a bound of one.
            set(&cx, Retention::default().dead(Keep::count(1))).await?;
            let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
            ensure!(
                removed == 0,
                RULE,
                "with one dead letter and at most 1 kept, collect removed {removed}; the redriven item {} is no dead letter",
                older.id()
            );
            expect_state(&cx, older.id(), Some(ItemState::Ready), "redriven, after a collect by count").await?;
            expect_state(&cx, newer.id(), Some(ItemState::Dead), "the one dead letter, within the count").await?;

            // By age: the dead letter goes, the redriven item stays.
            let age = SHORT * 4;
            set(&cx, Retention::default().dead(Keep::for_age(age))).await?;
            cx.wait_past(newer_died.saturating_add(age)).await?;
            let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
            ensure!(
                removed == 1,
                RULE,
                "collect with one dead letter past its age bound and one redriven item removed {removed}; expected 1"
            );
            expect_state(&cx, older.id(), Some(ItemState::Ready), "redriven, after a collect by age").await?;
            expect_state(&cx, newer.id(), None, "the dead letter past its age").await?;
            if dedup {
                let again = enqueue_keyed(&cx, &key_of(&newer), None).await?;
                ensure!(
                    !again.deduplicated,
                    RULE,
                    "the dedup key of the collected dead letter {} is still held: {again:?}",
                    newer.id()
                );
                cx.b.remove_item(&cx.q, again.id).await.or_fail(RULE, "remove_item")?;
                let held = enqueue_keyed(&cx, &key_of(&older), None).await?;
                ensure!(
                    held.deduplicated && held.id == older.id(),
                    RULE,
                    "an enqueue of the redriven item {}'s key answered {held:?}; expected it deduplicated to that item",
                    older.id()
                );
            }

            // Its next death counts from then.
            let lease = cx.claim_one(LONG).await?;
            ensure!(lease.id() == older.id(), RULE, "claimed {} while only item {} was claimable", lease.id(), older.id());
            let before = cx.now().await?;
            cx.b.fail(&lease.key, "given up again").await.or_fail(RULE, "fail")?;
            let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
            let after = cx.now().await?;
            let gone = cx.item(older.id()).await?.is_none();
            ensure!(
                (removed == 0 && !gone) || after >= before.saturating_add(age),
                RULE,
                "collect right after item {} died again removed {removed} (the item {}); its age counts from this death, \
                 not from the one before its redrive",
                older.id(),
                if gone { "gone" } else { "kept" }
            );
            Ok(())
        },
    )
    .await
}

/// Fails unless item `id` is in `state` (`None`: gone).
async fn expect_state(
    cx: &Cx,
    id: ItemId,
    state: Option<ItemState>,
    what: &str,
) -> Result<(), Violation> {
    let got = cx.item(id).await?.map(|i| i.state);
    ensure!(
        got == state,
        RULE,
        "item {id} ({what}) is {}; expected {}",
        got.map_or("gone".into(), |s| format!("{s:?}")),
        state.map_or("gone".into(), |s| format!("{s:?}"))
    );
    Ok(())
}
