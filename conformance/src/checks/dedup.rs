//! INV-9 dedup: while an unacked item holds a dedup key, enqueues with that
//! key return its id and write nothing, even when they race.

use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::{Error, ItemId, LeaseToken, NewItem, Timestamp};

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, TimeControl, Violation};

/// A second enqueue with a held key returns the holder's id with
/// `deduplicated: true` and writes nothing, in every state the holder is in
/// (Ready, Leased, Dead); after the ack (and after `ack_many`) the key is
/// free again (INV-9). The Dead holder is a second key's, on a queue of its
/// own; with the Admin group, that holder is redriven and its ack frees the
/// key too.
pub async fn dedup_returns_holder(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "dedup_returns_holder",
        Rule::Inv9,
        Needs::DEDUP,
        |cx| async move {
            let enq = |cx: &Cx, key: &'static str, payload: &'static str| {
                let cx = cx.clone();
                async move {
                    let out =
                        cx.b.enqueue(&cx.q, vec![NewItem::new(payload).dedup_key(key)])
                            .await
                            .or_fail(cx.rule, "enqueue")?;
                    out.first()
                        .copied()
                        .ok_or_else(|| cx.fail("enqueue returned no result"))
                }
            };
            let first = enq(&cx, "k1", "a").await?;
            ensure!(
                !first.deduplicated,
                cx.rule,
                "the first item with a key was deduplicated"
            );
            let e = enq(&cx, "k1", "b").await?;
            ensure!(
                e.deduplicated && e.id == first.id,
                cx.rule,
                "while the holder is Ready: {e:?}"
            );
            let lease = cx.claim_one(LONG).await?;
            let e = enq(&cx, "k1", "c").await?;
            ensure!(
                e.deduplicated && e.id == first.id,
                cx.rule,
                "while the holder is Leased: {e:?}"
            );
            cx.b.release(&lease.key, Duration::ZERO)
                .await
                .or_fail(cx.rule, "release")?;
            let lease = cx.claim_one(LONG).await?;
            cx.b.ack(&lease.key).await.or_fail(cx.rule, "ack")?;
            let e = enq(&cx, "k1", "e").await?;
            ensure!(
                !e.deduplicated && e.id != first.id,
                cx.rule,
                "after the holder's ack the key is still held: {e:?}"
            );
            // The batch ack frees the key too.
            let lease = cx.claim_one(LONG).await?;
            let acked =
                cx.b.ack_many(std::slice::from_ref(&lease.key))
                    .await
                    .or_fail(cx.rule, "ack_many")?;
            ensure!(
                acked.len() == 1 && acked[0].is_ok(),
                cx.rule,
                "ack_many of the new holder's lease: {acked:?}"
            );
            let f = enq(&cx, "k1", "f").await?;
            ensure!(
                !f.deduplicated && f.id != e.id,
                cx.rule,
                "after the holder's ack_many the key is still held: {f:?}"
            );

            // A Dead holder keeps its key.
            let cx = cx.fresh("dead")?;
            let holder = enq(&cx, "k2", "a").await?;
            ensure!(
                !holder.deduplicated,
                cx.rule,
                "the first item with a key was deduplicated"
            );
            let lease = cx.claim_one(LONG).await?;
            cx.b.fail(&lease.key, "x").await.or_fail(cx.rule, "fail")?;
            let e = enq(&cx, "k2", "d").await?;
            ensure!(
                e.deduplicated && e.id == holder.id,
                cx.rule,
                "while the holder is Dead: {e:?}"
            );
            cx.expect_stats([0, 0, 0, 1], "after duplicates of a Dead holder")
                .await?;
            let info = cx.must_item(holder.id).await?;
            ensure!(
                info.payload.as_ref() == b"a",
                cx.rule,
                "a duplicate overwrote the payload: {info:?}"
            );
            if cx.b.groups().admin.is_none() {
                return Ok(());
            }
            cx.b.redrive(&cx.q, 1).await.or_fail(cx.rule, "redrive")?;
            let lease = cx.claim_one(LONG).await?;
            cx.b.ack(&lease.key).await.or_fail(cx.rule, "ack")?;
            let e = enq(&cx, "k2", "e").await?;
            ensure!(
                !e.deduplicated && e.id != holder.id,
                cx.rule,
                "after the ack of the redriven holder the key is still held: {e:?}"
            );
            Ok(())
        },
    )
    .await
}

/// Within one batch the first item with a key wins; the others carry its id
/// (INV-9).
pub async fn dedup_within_batch(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "dedup_within_batch",
        Rule::Inv9,
        Needs::DEDUP,
        |cx| async move {
            let items = vec![
                NewItem::new("a").dedup_key("k"),
                NewItem::new("plain"),
                NewItem::new("b").dedup_key("k"),
                NewItem::new("c").dedup_key("other"),
            ];
            let out =
                cx.b.enqueue(&cx.q, items)
                    .await
                    .or_fail(cx.rule, "enqueue")?;
            ensure!(
                out.len() == 4,
                cx.rule,
                "4 items gave {} results",
                out.len()
            );
            ensure!(
                !out[0].deduplicated && !out[1].deduplicated && !out[3].deduplicated,
                cx.rule,
                "distinct items were deduplicated: {out:?}"
            );
            ensure!(
                out[2].deduplicated && out[2].id == out[0].id,
                cx.rule,
                "the batch's second key holder: {out:?}"
            );
            cx.expect_stats([3, 0, 0, 0], "after a batch with one duplicate")
                .await?;
            Ok(())
        },
    )
    .await
}

/// Sixteen enqueues racing with one key create one item; all get its id and
/// exactly one reports it new (INV-9).
pub async fn concurrent_dedup_creates_one(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "concurrent_dedup_creates_one", Rule::Inv9, Needs::DEDUP, |cx| async move {
        const TASKS: usize = 16;
        for round in 0..10 * scale() {
            let cx = cx.round(round)?;
            let key = format!("race-{round}");
            let enqueues = cx.at_once(TASKS, |cx, t| {
                let item = NewItem::new(format!("t{t}")).dedup_key(key.clone());
                async move { cx.b.enqueue(&cx.q, vec![item]).await }
            });
            let mut ids: Vec<ItemId> = Vec::new();
            let mut fresh = 0;
            for r in enqueues.await? {
                let e = r.or_fail(cx.rule, "concurrent enqueue")?;
                let e = e.first().copied().ok_or_else(|| cx.fail("enqueue returned no result"))?;
                fresh += usize::from(!e.deduplicated);
                ids.push(e.id);
            }
            ids.dedup();
            ensure!(
                ids.len() == 1 && fresh == 1,
                cx.rule,
                "round {round}: {TASKS} racing enqueues with one key gave ids {ids:?}, {fresh} reported new"
            );
            let s = cx.stats().await?;
            ensure!(s.total() == 1, cx.rule, "round {round}: one key made {} items", s.total());
        }
        Ok(())
    })
    .await
}

/// `purge` frees the dedup keys of the items it deletes (INV-9).
pub async fn purge_frees_dedup_keys(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "purge_frees_dedup_keys",
        Rule::Inv9,
        Needs::DEDUP.and(Needs::ADMIN),
        |cx| async move {
            let a =
                cx.b.enqueue(&cx.q, vec![NewItem::new("a").dedup_key("k")])
                    .await
                    .or_fail(cx.rule, "enqueue")?;
            cx.b.purge(&cx.q).await.or_fail(cx.rule, "purge")?;
            let b =
                cx.b.enqueue(&cx.q, vec![NewItem::new("b").dedup_key("k")])
                    .await
                    .or_fail(cx.rule, "enqueue")?;
            ensure!(
                b.len() == 1 && !b[0].deduplicated,
                cx.rule,
                "after purge the key still pointed at the purged item: before {a:?}, after {b:?}"
            );
            cx.expect_stats([1, 0, 0, 0], "after purge and a new item with the key")
                .await?;
            Ok(())
        },
    )
    .await
}

/// Lets the backend's clock run to `t` less one millisecond: exactly there
/// on a manual clock; on a real one only a few milliseconds on, which is
/// within any hold this check uses.
async fn clock_within(cx: &Cx, t: Timestamp) -> Result<(), Violation> {
    let now = cx.now().await?;
    match &cx.tb.time {
        TimeControl::Manual(clock) => {
            let to = Timestamp::from_millis(t.as_millis() - 1);
            clock.advance(to.saturating_since(now));
            Ok(())
        }
        TimeControl::Real => {
            cx.wait_past(now).await?;
            cx.wait_past(cx.now().await?).await
        }
    }
}

/// What is remembered for a time is remembered for all of it, not just at
/// the instant it was written: a unique-for key stays held until its hold
/// has run out after the ack (on a manual clock: still held one
/// millisecond before, free at the instant), and an `enqueue_once` request
/// sent again later within [`leaseq_core::limits::REQUEST_MEMORY`] (one
/// millisecond before its end on a manual clock) still writes nothing and
/// returns the first results, also once its items were acked and the queue
/// holds nothing. Asked only at once, a hold or a memory kept for a
/// millisecond passed the suite, and so did a memory dropped with the
/// queue's last item.
pub async fn holds_last_their_whole_time(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("unique_for/enqueue_once");
    run(
        factory,
        "holds_last_their_whole_time",
        rule,
        Needs::NONE,
        |cx| async move {
            let caps = cx.b.capabilities();
            if caps.dedup && caps.unique_for {
                let hold = LONG;
                let item = || vec![NewItem::new("held").dedup_key("held").unique_for(hold)];
                let first = cx.enqueue(item()).await?[0];
                let lease = cx.claim_one(LONG).await?;
                let acked_from = cx.now().await?;
                cx.b.ack(&lease.key).await.or_fail(rule, "ack")?;
                let acked_by = cx.now().await?;
                clock_within(&cx, acked_from.saturating_add(hold)).await?;
                let e = cx.b.enqueue(&cx.q, item()).await.or_fail(rule, "enqueue")?;
                ensure!(
                    e.len() == 1 && e[0].deduplicated && e[0].id == first,
                    rule,
                    "an enqueue {} after the ack of an item held for {hold:?} answered {e:?}; \
                     expected the acked id {first} deduplicated (the hold had not run out)",
                    cx.now()
                        .await?
                        .saturating_since(acked_by)
                        .as_millis()
                        .to_string()
                        + " ms"
                );
                if let TimeControl::Manual(clock) = &cx.tb.time {
                    let now = cx.now().await?;
                    clock.advance(acked_by.saturating_add(hold).saturating_since(now));
                    let e = cx.b.enqueue(&cx.q, item()).await.or_fail(rule, "enqueue")?;
                    ensure!(
                        e.len() == 1 && !e[0].deduplicated,
                        rule,
                        "an enqueue at the instant a hold of {hold:?} ran out answered {e:?}; \
                         expected a new item (a key is held while acked less than its hold ago)"
                    );
                }
            }
            // The requests on a queue of their own: the items above stay.
            let cx = cx.fresh("once")?;
            let batch = || vec![NewItem::new("once-a"), NewItem::new("once-b")];
            let request = LeaseToken::random();
            let sent_from = cx.now().await?;
            let first = match cx.b.enqueue_once(&cx.q, request, batch()).await {
                Err(Error::Unsupported { .. }) => return Ok(()),
                other => other.or_fail(rule, "enqueue_once")?,
            };
            // Its items done and acked: the queue is empty, the request is
            // still remembered.
            for l in cx.claim(2, LONG).await? {
                cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            }
            let memory = leaseq_core::limits::REQUEST_MEMORY;
            clock_within(&cx, sent_from.saturating_add(memory)).await?;
            let again =
                cx.b.enqueue_once(&cx.q, request, batch())
                    .await
                    .or_fail(rule, "enqueue_once sent again")?;
            let ids = |v: &[leaseq_core::Enqueued]| v.iter().map(|e| e.id).collect::<Vec<ItemId>>();
            ensure!(
                ids(&again) == ids(&first),
                rule,
                "enqueue_once sent again within {memory:?} of the first call returned {:?}; the \
                 first returned {:?}",
                ids(&again),
                ids(&first)
            );
            cx.expect_stats(
                [0, 0, 0, 0],
                "after enqueue_once sent again within its memory, its items acked",
            )
            .await?;
            if let TimeControl::Real = cx.tb.time {
                // A second on: a memory of REQUEST_MEMORY's seconds kept as
                // milliseconds (600 ms) has run out by then.
                cx.wait_past(sent_from.saturating_add(Duration::from_secs(1)))
                    .await?;
                let late =
                    cx.b.enqueue_once(&cx.q, request, batch())
                        .await
                        .or_fail(rule, "enqueue_once sent again a second later")?;
                ensure!(
                    ids(&late) == ids(&first),
                    rule,
                    "enqueue_once sent again a second after the first call returned {:?}; the \
                     first returned {:?} (the request is remembered for {memory:?})",
                    ids(&late),
                    ids(&first)
                );
                cx.expect_stats([0, 0, 0, 0], "after enqueue_once sent again a second later")
                    .await?;
            }
            Ok(())
        },
    )
    .await
}
