//! Finished items: what a queue keeps by its retention, with results, in
//! what order, for how long, and waiting for one to finish.
//!
//! For backends that offer [`leaseq_core::History`].

use std::time::Duration;

use leaseq_core::finished::MAX_RESULT_LEN;
use leaseq_core::{
    Awaited, BackendExt, Bytes, Cancelled, Ending, Error, Finished, ItemId, ItemState, Keep, Lease,
    NewItem, Retention,
};

use crate::cx::{run, Cx, Needs, LONG, SHORT};
use crate::groupwise::Groupwise as _;
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule};

const RULE: Rule = Rule::Contract("History");

async fn set(cx: &Cx, retention: Retention) -> Result<(), crate::Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    history
        .set_retention(&cx.q, retention)
        .await
        .or_fail(RULE, "set_retention")
}

async fn listed(cx: &Cx, ending: Option<Ending>) -> Result<Vec<Finished>, crate::Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    history
        .finished(&cx.q, ending, 100)
        .await
        .or_fail(RULE, "finished")
}

async fn kept(cx: &Cx, id: ItemId) -> Result<Option<Finished>, crate::Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    match history.finished_item(&cx.q, id).await {
        Ok(f) => Ok(Some(f)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(cx.fail(format!("finished_item({id}) failed: {e}"))),
    }
}

fn ids_of(list: &[Finished]) -> Vec<ItemId> {
    list.iter().map(|f| f.id).collect()
}

/// The default keeps nothing; a policy that keeps completed items records
/// an ack, an `ack_many` and a `complete` (with its result) in the call's
/// own step: gone from the queue, listed newest first, with payload,
/// attempts and times. A stale `complete` and a result over the bound
/// change nothing; a kept item's dedup key is free.
pub async fn kept_items_record_their_ending(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "kept_items_record_their_ending", RULE, Needs::HISTORY, |cx| async move {
        let history = cx.b.history().or_fail(RULE, "history")?;
        let got = history.retention(&cx.q).await.or_fail(RULE, "retention")?;
        ensure!(got == Retention::default(), RULE, "a queue with no policy set answered {got:?}; expected the default");
        let untouched = cx.push_n(1).await?[0];
        let lease = cx.claim_one(LONG).await?;
        cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
        ensure!(kept(&cx, untouched).await?.is_none(), RULE, "item {untouched} was kept under the default policy, which keeps nothing");

        let policy = Retention::default().completed(Keep::FOREVER);
        set(&cx, policy).await?;
        let got = history.retention(&cx.q).await.or_fail(RULE, "retention")?;
        ensure!(got == policy, RULE, "retention answered {got:?} after set_retention({policy:?})");
        let caps = cx.b.capabilities();
        let mut first = NewItem::new("first");
        if caps.dedup {
            first = first.dedup_key("kept-key");
        }
        let ids = cx.enqueue(vec![first, NewItem::new("second"), NewItem::new("third")]).await?;
        let mut leases = cx.claim(3, LONG).await?;
        leases.sort_by_key(Lease::id);
        ensure!(leases.len() == 3, RULE, "claimed {} of 3", leases.len());
        let big = Bytes::from(vec![b'x'; MAX_RESULT_LEN + 1]);
        match history.complete(&leases[0].key, big).await {
            Err(Error::InvalidInput { .. }) => {}
            other => return Err(cx.fail(format!("complete with a result over {MAX_RESULT_LEN} bytes answered {other:?}; expected InvalidInput"))),
        }
        let info = cx.must_item(leases[0].id()).await?;
        ensure!(info.state == leaseq_core::ItemState::Leased, RULE, "a refused complete moved item {} to {:?}", leases[0].id(), info.state);
        history.complete(&leases[0].key, Bytes::from_static(b"result one")).await.or_fail(RULE, "complete")?;
        let mut stale = leases[0].key.clone();
        stale.token = leaseq_core::LeaseToken::random();
        let again = history.complete(&stale, Bytes::from_static(b"other")).await;
        ensure!(matches!(again, Err(ref e) if e.is_lease_lost()), RULE, "complete with a stale token answered {again:?}; expected LeaseLost");
        cx.b.ack(&leases[1].key).await.or_fail(RULE, "ack")?;
        let many = cx.b.ack_many(std::slice::from_ref(&leases[2].key)).await.or_fail(RULE, "ack_many")?;
        ensure!(matches!(many.as_slice(), [Ok(())]), RULE, "ack_many answered {many:?}");

        for &id in &ids {
            ensure!(cx.item(id).await?.is_none(), RULE, "the kept item {id} is still in the queue");
        }
        cx.expect_stats([0, 0, 0, 0], "with only kept items").await?;
        let all = listed(&cx, None).await?;
        // Finished in id order, so newest first is highest id first.
        let want: Vec<ItemId> = leases.iter().rev().map(Lease::id).collect();
        ensure!(ids_of(&all) == want, RULE, "finished listed {:?}; expected {want:?} (newest first)", ids_of(&all));
        let completed = listed(&cx, Some(Ending::Completed)).await?;
        ensure!(ids_of(&completed) == want, RULE, "finished(Completed) listed {:?}", ids_of(&completed));
        ensure!(listed(&cx, Some(Ending::Cancelled)).await?.is_empty(), RULE, "finished(Cancelled) listed completed items");
        for (n, lease) in leases.iter().enumerate() {
            let payload = &lease.payload;
            let f = kept(&cx, lease.id()).await?.ok_or_else(|| cx.fail(format!("item {} is not kept", lease.id())))?;
            let result = (n == 0).then(|| Bytes::from_static(b"result one"));
            ensure!(
                f.ending == Ending::Completed && f.result == result && f.payload == *payload && f.attempts == 1
                    && f.enqueued_at == lease.enqueued_at && f.finished_at >= lease.enqueued_at,
                RULE,
                "item {} is kept as {f:?}; expected Completed with result {result:?}, payload {payload:?}, 1 attempt and its enqueue time {}",
                lease.id(),
                lease.enqueued_at
            );
        }
        if caps.dedup {
            let out = cx.b.enqueue(&cx.q, vec![NewItem::new("again").dedup_key("kept-key")]).await.or_fail(RULE, "enqueue")?;
            ensure!(!out[0].deduplicated, RULE, "the dedup key of the kept item {} is still held", ids[0]);
        }
        Ok(())
    })
    .await
}

/// A policy that keeps cancelled items records an item cancelled at once
/// and one whose cancel-requested lease then ends (by an ack, and by a
/// `complete` whose result is dropped) as Cancelled, never Completed; with
/// completed items not kept, an ack records nothing.
pub async fn cancelled_items_are_kept_as_cancelled(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "cancelled_items_are_kept_as_cancelled", RULE, Needs::HISTORY.and(Needs::CONTROL), |cx| async move {
        let history = cx.b.history().or_fail(RULE, "history")?;
        set(&cx, Retention::default().cancelled(Keep::count(10))).await?;
        let ids = cx.push_n(4).await?;
        let mut leases = cx.claim(3, LONG).await?;
        leases.sort_by_key(Lease::id);
        ensure!(leases.len() == 3, RULE, "claimed {} of 3", leases.len());
        let waiting = ids
            .iter()
            .copied()
            .find(|id| leases.iter().all(|l| l.id() != *id))
            .ok_or_else(|| cx.fail("every item was claimed"))?;
        cx.b.cancel(&cx.q, waiting).await.or_fail(RULE, "cancel")?;
        for lease in &leases[..2] {
            cx.b.cancel(&cx.q, lease.id()).await.or_fail(RULE, "cancel")?;
        }
        cx.b.ack(&leases[0].key).await.or_fail(RULE, "ack")?;
        history.complete(&leases[1].key, Bytes::from_static(b"dropped")).await.or_fail(RULE, "complete")?;
        cx.b.ack(&leases[2].key).await.or_fail(RULE, "ack")?;
        for (id, attempts) in [(waiting, 0), (leases[0].id(), 1), (leases[1].id(), 1)] {
            let f = kept(&cx, id).await?.ok_or_else(|| cx.fail(format!("the cancelled item {id} is not kept")))?;
            ensure!(
                f.ending == Ending::Cancelled && f.result.is_none() && f.attempts == attempts,
                RULE,
                "the cancelled item {id} is kept as {f:?}; expected Cancelled, no result, {attempts} attempts"
            );
        }
        ensure!(kept(&cx, leases[2].id()).await?.is_none(), RULE, "item {} was kept Completed though the policy keeps no completed items", leases[2].id());
        let cancelled = listed(&cx, Some(Ending::Cancelled)).await?;
        ensure!(cancelled.len() == 3, RULE, "finished(Cancelled) listed {:?}; expected 3 items", ids_of(&cancelled));
        Ok(())
    })
    .await
}

/// A count bound keeps the newest: after five endings under a bound of
/// two, the last two are kept; lowering the bound to one trims at once.
pub async fn retention_count_keeps_the_newest(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "retention_count_keeps_the_newest",
        RULE,
        Needs::HISTORY,
        |cx| async move {
            set(&cx, Retention::default().completed(Keep::count(2))).await?;
            let mut done = Vec::new();
            for _ in 0..5 {
                cx.push_n(1).await?;
                let lease = cx.claim_one(LONG).await?;
                cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
                done.push(lease.id());
            }
            let got = ids_of(&listed(&cx, None).await?);
            let want = vec![done[4], done[3]];
            ensure!(
                got == want,
                RULE,
                "under a count of 2 the kept items are {got:?}; expected the newest two, {want:?}"
            );
            set(&cx, Retention::default().completed(Keep::count(1))).await?;
            let got = ids_of(&listed(&cx, None).await?);
            ensure!(
                got == vec![done[4]],
                RULE,
                "after lowering the count to 1 the kept items are {got:?}; expected [{}]",
                done[4]
            );
            Ok(())
        },
    )
    .await
}

/// `collect` removes exactly the items older than the age bound, and a
/// second collect finds nothing; racing collects remove each item once.
/// (An item that finished after the others is kept unless the clock had
/// passed its own age bound by the time the collects ended.)
pub async fn collect_removes_what_expired(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "collect_removes_what_expired", RULE, Needs::HISTORY, |cx| async move {
        let history = cx.b.history().or_fail(RULE, "history")?;
        let age = SHORT * 4;
        set(&cx, Retention::default().completed(Keep::for_age(age))).await?;
        cx.push_n(6).await?;
        let old = cx.claim(6, LONG).await?;
        for lease in &old {
            cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
        }
        let first = cx.now().await?;
        cx.wait_past(first.saturating_add(age)).await?;
        let fresh = cx.push_n(1).await?[0];
        let lease = cx.claim_one(LONG).await?;
        cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
        let fresh_at = kept(&cx, fresh).await?.ok_or_else(|| cx.fail(format!("item {fresh} is not kept")))?.finished_at;
        let removed = cx
            .at_once(3, |cx, _| async move {
                let history = cx.b.history().or_fail(RULE, "history")?;
                history.collect(&cx.q).await.or_fail(RULE, "collect")
            })
            .await?;
        let after = cx.now().await?;
        let total: u64 = removed.into_iter().collect::<Result<Vec<u64>, _>>()?.into_iter().sum();
        let got = ids_of(&listed(&cx, None).await?);
        let fresh_expired = after >= fresh_at.saturating_add(age);
        let (want, want_total) = if fresh_expired && got.is_empty() {
            (vec![], old.len() as u64 + 1)
        } else {
            (vec![fresh], old.len() as u64)
        };
        ensure!(total == want_total, RULE, "three racing collects removed {total} items; expected the {want_total} expired ones, each once");
        ensure!(got == want, RULE, "after collect the kept items are {got:?}; expected {want:?}");
        let again = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
        ensure!(again == 0 || (fresh_expired || cx.now().await? >= fresh_at.saturating_add(age)), RULE, "a second collect removed {again} items; expected 0");
        Ok(())
    })
    .await
}

/// Purge takes the kept items and keeps the policy; `delete_queue` forgets
/// both; a queue that holds only kept items is not listed.
pub async fn purge_and_delete_take_the_history(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "purge_and_delete_take_the_history",
        RULE,
        Needs::HISTORY.and(Needs::ADMIN),
        |cx| async move {
            let history = cx.b.history().or_fail(RULE, "history")?;
            let policy = Retention::default().completed(Keep::count(100));
            set(&cx, policy).await?;
            cx.push_n(2).await?;
            for lease in cx.claim(2, LONG).await? {
                cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
            }
            let queues = cx.b.queues().await.or_fail(RULE, "queues")?;
            ensure!(
                !queues.contains(&cx.q),
                RULE,
                "a queue holding only kept items is listed"
            );
            cx.b.purge(&cx.q).await.or_fail(RULE, "purge")?;
            ensure!(
                listed(&cx, None).await?.is_empty(),
                RULE,
                "purge left kept items"
            );
            let got = history.retention(&cx.q).await.or_fail(RULE, "retention")?;
            ensure!(
                got == policy,
                RULE,
                "after a purge the policy is {got:?}; expected it kept"
            );
            cx.push_n(1).await?;
            let lease = cx.claim_one(LONG).await?;
            cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
            cx.b.delete_queue(&cx.q)
                .await
                .or_fail(RULE, "delete_queue")?;
            ensure!(
                listed(&cx, None).await?.is_empty(),
                RULE,
                "delete_queue left kept items"
            );
            let got = history.retention(&cx.q).await.or_fail(RULE, "retention")?;
            ensure!(
                got == Retention::default(),
                RULE,
                "after delete_queue the policy is {got:?}; expected the default"
            );
            Ok(())
        },
    )
    .await
}

/// How long a waiter waits on an item that dies: long next to
/// [`leaseq_core::groups::FINISHED_POLL`], the longest a death may take to
/// be seen, so that only a waiter blind to deaths reaches it (and answers
/// `Pending`).
const DEATH_WAIT: Duration = Duration::from_secs(15);

/// `wait_finished` answers the kept record (with the result) once the item
/// completes on another task, `Pending` at its timeout while the item
/// waits, `Dead` (with the reason) for an item whose last attempt failed
/// while it waited, well within its timeout, and `NotFound` for an item
/// neither in the queue nor kept.
pub async fn wait_finished_answers_the_result(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "wait_finished_answers_the_result", RULE, Needs::HISTORY, |cx| async move {
        set(&cx, Retention::default().completed(Keep::count(10))).await?;
        let id = cx.push_n(1).await?[0];
        let none = cx.b.wait_finished(&cx.q, id, Duration::from_millis(50)).await.or_fail(RULE, "wait_finished")?;
        ensure!(none.is_pending(), RULE, "wait_finished of a waiting item answered {none:?} at its timeout; expected Pending");
        let waiter = {
            let waiting = cx.clone();
            cx.spawn(async move { waiting.b.wait_finished(&waiting.q, id, LONG).await })
        };
        let lease = cx.claim_one(LONG).await?;
        let history = cx.b.history().or_fail(RULE, "history")?;
        history.complete(&lease.key, Bytes::from_static(b"42")).await.or_fail(RULE, "complete")?;
        let got = cx.join(vec![waiter]).await?.pop().ok_or_else(|| cx.fail("no waiter"))?;
        let got = got.or_fail(RULE, "wait_finished")?;
        ensure!(
            matches!(&got, Awaited::Finished(f) if f.id == id && f.result.as_deref() == Some(b"42".as_slice())),
            RULE,
            "wait_finished answered {got:?}; expected item {id} with result 42"
        );

        // A dead letter stays in the queue: the waiter is told it died.
        let doomed = cx.enqueue(vec![NewItem::new("doomed").max_attempts(1)]).await?[0];
        let waiter = {
            let waiting = cx.clone();
            cx.spawn(async move { waiting.b.wait_finished(&waiting.q, doomed, DEATH_WAIT).await })
        };
        let lease = cx.claim_one(LONG).await?;
        cx.b.fail(&lease.key, "out of ink").await.or_fail(RULE, "fail")?;
        let got = cx.join(vec![waiter]).await?.pop().ok_or_else(|| cx.fail("no waiter"))?;
        let got = got.or_fail(RULE, "wait_finished")?;
        ensure!(
            matches!(&got, Awaited::Dead(info) if info.id == doomed && info.state == ItemState::Dead
                && info.last_error.as_deref() == Some("out of ink")),
            RULE,
            "wait_finished of an item whose last attempt failed answered {got:?} after waiting up to {DEATH_WAIT:?}; \
             expected Dead (item {doomed}, last error \"out of ink\"): a dead letter stays in the queue, and a waiter \
             must see it within FINISHED_POLL instead of waiting out its timeout"
        );
        let again = cx.b.wait_finished(&cx.q, doomed, LONG).await.or_fail(RULE, "wait_finished")?;
        ensure!(
            matches!(&again, Awaited::Dead(info) if info.id == doomed),
            RULE,
            "wait_finished of a dead letter answered {again:?}; expected Dead"
        );

        set(&cx, Retention::default()).await?;
        let gone = cx.push_n(1).await?[0];
        let lease = cx.claim_one(LONG).await?;
        cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
        let res = cx.b.wait_finished(&cx.q, gone, LONG).await;
        ensure!(matches!(res, Err(Error::NotFound { .. })), RULE, "wait_finished of an item finished and not kept answered {res:?}; expected NotFound");
        Ok(())
    })
    .await
}

/// `stats` counts every completion (ack, `ack_many`, `complete`), kept or
/// not, and nothing else; a purge keeps the count, `delete_queue` sets it
/// back to 0.
pub async fn completions_are_counted(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "completions_are_counted",
        RULE,
        Needs::HISTORY,
        |cx| async move {
            let count = |cx: Cx| async move { cx.stats().await.map(|s| s.completed) };
            let got = count(cx.clone()).await?;
            ensure!(
                got == Some(0),
                RULE,
                "a new queue's completion count is {got:?}; expected Some(0)"
            );
            cx.push_n(6).await?;
            let mut leases = cx.claim(6, LONG).await?;
            ensure!(leases.len() == 6, RULE, "claimed {} of 6", leases.len());
            leases.sort_by_key(Lease::id);
            cx.b.ack(&leases[0].key).await.or_fail(RULE, "ack")?;
            let keys: Vec<_> = leases[1..3].iter().map(|l| l.key.clone()).collect();
            cx.b.ack_many(&keys).await.or_fail(RULE, "ack_many")?;
            cx.b.complete(&leases[3].key, Bytes::from_static(b"r"))
                .await
                .or_fail(RULE, "complete")?;
            // Not completions: a release, a fail, and a stale ack.
            cx.b.release(&leases[4].key, Duration::ZERO)
                .await
                .or_fail(RULE, "release")?;
            cx.b.fail(&leases[5].key, "no")
                .await
                .or_fail(RULE, "fail")?;
            let again = cx.b.ack(&leases[0].key).await;
            ensure!(
                matches!(again, Err(ref e) if e.is_lease_lost()),
                RULE,
                "a second ack answered {again:?}"
            );
            let got = count(cx.clone()).await?;
            ensure!(
                got == Some(4),
                RULE,
                "after 4 completions (nothing kept) the count is {got:?}; expected Some(4)"
            );
            set(&cx, Retention::default().completed(Keep::count(1))).await?;
            let lease = cx.claim_one(LONG).await?;
            cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
            let got = count(cx.clone()).await?;
            ensure!(
                got == Some(5),
                RULE,
                "after a kept completion the count is {got:?}; expected Some(5)"
            );
            if cx.b.groups().admin.is_some() {
                cx.b.purge(&cx.q).await.or_fail(RULE, "purge")?;
                let got = count(cx.clone()).await?;
                ensure!(
                    got == Some(5),
                    RULE,
                    "a purge changed the completion count to {got:?}; expected it kept (5)"
                );
                cx.b.delete_queue(&cx.q)
                    .await
                    .or_fail(RULE, "delete_queue")?;
                let got = count(cx.clone()).await?;
                ensure!(
                    got == Some(0),
                    RULE,
                    "after delete_queue the completion count is {got:?}; expected Some(0)"
                );
            }
            Ok(())
        },
    )
    .await
}

/// [`Retention::dead`] bounds the dead letters: `collect` removes the
/// oldest beyond the count and those dead longer than the age, and
/// nothing else; a removed letter's dedup key is free; the bound round
/// trips through `retention`.
pub async fn dead_letters_go_by_their_bound(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "dead_letters_go_by_their_bound",
        RULE,
        Needs::HISTORY,
        |cx| async move {
            let history = cx.b.history().or_fail(RULE, "history")?;
            let dedup = cx.b.capabilities().dedup;
            let items = (0..4)
                .map(|n| {
                    let item = NewItem::new(format!("dead-{n}"));
                    if dedup && n == 0 {
                        item.dedup_key("dead-key")
                    } else {
                        item
                    }
                })
                .collect();
            let ids = cx.enqueue(items).await?;
            // Die in id order, so the oldest deaths are the lowest ids.
            for _ in 0..ids.len() {
                let lease = cx.claim_one(LONG).await?;
                cx.b.fail(&lease.key, "given up")
                    .await
                    .or_fail(RULE, "fail")?;
            }
            let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
            ensure!(
                removed == 0,
                RULE,
                "collect under the default policy removed {removed} dead letters"
            );
            let policy = Retention::default().dead(Keep::count(2));
            set(&cx, policy).await?;
            let got = history.retention(&cx.q).await.or_fail(RULE, "retention")?;
            ensure!(
                got == policy,
                RULE,
                "retention answered {got:?} after set_retention({policy:?})"
            );
            let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
            if cx.b.capabilities().order != leaseq_core::Order::Global {
                // A queue spread over stores bounds each store's letters.
                ensure!(
                    removed <= 2,
                    RULE,
                    "collect with at most 2 dead letters kept removed {removed} of 4"
                );
                return dead_by_age(&cx.fresh("by-age")?).await;
            }
            ensure!(
                removed == 2,
                RULE,
                "collect with at most 2 dead letters kept removed {removed} of 4"
            );
            for (n, &id) in ids.iter().enumerate() {
                let present = cx.item(id).await?.is_some();
                ensure!(
                    present == (n >= 2),
                    RULE,
                    "after collect, dead letter {id} (death {n}) is {}",
                    if present { "still there" } else { "gone" }
                );
            }
            cx.expect_stats([0, 0, 0, 2], "with 2 dead letters kept")
                .await?;
            if dedup {
                let out =
                    cx.b.enqueue(&cx.q, vec![NewItem::new("again").dedup_key("dead-key")])
                        .await
                        .or_fail(RULE, "enqueue")?;
                ensure!(
                    !out[0].deduplicated,
                    RULE,
                    "the dedup key of the collected dead letter {} is still held",
                    ids[0]
                );
                cx.b.remove_item(&cx.q, out[0].id).await.ok();
            }
            dead_by_age(&cx).await
        },
    )
    .await
}

/// With 2 old dead letters in the queue: an age bound removes them at the
/// next collect, and keeps one that died after.
async fn dead_by_age(cx: &Cx) -> Result<(), crate::Violation> {
    let history = cx.b.history().or_fail(RULE, "history")?;
    let before = cx.stats().await?.dead;
    let age = SHORT * 4;
    set(cx, Retention::default().dead(Keep::for_age(age))).await?;
    let first = cx.now().await?;
    cx.wait_past(first.saturating_add(age)).await?;
    let fresh = cx.enqueue(vec![NewItem::new("fresh")]).await?[0];
    let lease = cx.claim_one(LONG).await?;
    cx.b.fail(&lease.key, "given up")
        .await
        .or_fail(RULE, "fail")?;
    let died = cx.now().await?;
    let removed = history.collect(&cx.q).await.or_fail(RULE, "collect")?;
    let after = cx.now().await?;
    let fresh_gone = cx.item(fresh).await?.is_none();
    // The fresh letter goes too only if its own age ran out meanwhile.
    ensure!(
            removed == before + u64::from(fresh_gone) && (!fresh_gone || after >= died.saturating_add(age)),
            RULE,
            "collect with an age bound removed {removed} dead letters (the fresh one {}); expected the {before} old ones",
            if fresh_gone { "gone" } else { "kept" }
        );
    Ok(())
}

/// The completion count counts completions only: leases of items an
/// operator asked to cancel, ended by an `ack`, an `ack_many` or a
/// `complete`, end those items Cancelled and add nothing to it, while a
/// plain ack beside them adds one.
pub async fn cancelled_endings_are_not_completions(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "cancelled_endings_are_not_completions",
        RULE,
        Needs::HISTORY.and(Needs::CONTROL),
        |cx| async move {
            cx.push_n(4).await?;
            let mut leases = cx.claim(4, LONG).await?;
            ensure!(leases.len() == 4, RULE, "claimed {} of 4", leases.len());
            leases.sort_by_key(Lease::id);
            for l in &leases[..3] {
                let c = cx.b.cancel(&cx.q, l.id()).await.or_fail(RULE, "cancel")?;
                ensure!(
                    c == Cancelled::Requested,
                    RULE,
                    "cancel of leased item {} answered {c:?}; expected Requested",
                    l.id()
                );
            }
            cx.b.ack(&leases[0].key).await.or_fail(RULE, "ack")?;
            cx.b.ack_many(&[leases[1].key.clone()])
                .await
                .or_fail(RULE, "ack_many")?;
            cx.b.complete(&leases[2].key, Bytes::from_static(b"r"))
                .await
                .or_fail(RULE, "complete")?;
            let got = cx.stats().await?.completed;
            ensure!(
                got == Some(0),
                RULE,
                "after an ack, an ack_many and a complete of cancel-requested leases (each item \
                 ended Cancelled) the completion count is {got:?}; expected Some(0)"
            );
            cx.b.ack(&leases[3].key).await.or_fail(RULE, "ack")?;
            let got = cx.stats().await?.completed;
            ensure!(
                got == Some(1),
                RULE,
                "after one plain ack the completion count is {got:?}; expected Some(1)"
            );
            Ok(())
        },
    )
    .await
}
