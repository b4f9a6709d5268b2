//! `delete_queue`: the queue is gone (items in every state, dedup keys and
//! holds, limits), its leases are lost, other queues keep everything, its
//! ids never come back, and enqueues racing the delete leave whole items.
//!
//! For backends whose `Capabilities::delete_queue` is true.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::{
    Error, ItemId, ItemState, LeaseToken, LimitScope, NewItem, QueueLimits, QueueName, QueueStats,
};

use crate::cx::{expect_lost, run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("delete_queue");

/// Rounds of enqueue and delete in [`ids_never_return_after_delete`].
const ROUNDS: usize = 5;
/// Enqueuers racing the deletes in [`racing_enqueues_leave_whole_items`],
/// and the calls each makes.
const ENQUEUERS: usize = 4;
const CALLS: usize = 20;

/// Deletes `queue`, failing on an error.
async fn delete(cx: &Cx, queue: &QueueName) -> Result<u64, Violation> {
    cx.b.delete_queue(queue)
        .await
        .or_fail(RULE, &format!("delete_queue({queue})"))
}

/// Whether `queue` is listed by `queues()`.
async fn is_listed(cx: &Cx, queue: &QueueName) -> Result<bool, Violation> {
    let all = cx.b.queues().await.or_fail(RULE, "queues")?;
    Ok(all.contains(queue))
}

/// One new item in `cx.q`; its id.
async fn one(cx: &Cx, item: NewItem) -> Result<ItemId, Violation> {
    Ok(cx.enqueue(vec![item]).await?[0])
}

/// After a delete, the queue holds nothing: every item in every state is
/// deleted and counted, stats are zero, it is not listed, its limits are
/// none, a dedup key it held (also one held after an ack) is free, its
/// leases are lost and its old ids are `NotFound`; another queue with the
/// same dedup key and limits keeps its item and limits; new items get ids
/// above every id the queue had.
pub async fn delete_queue_forgets_the_queue(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "delete_queue_forgets_the_queue",
        RULE,
        Needs::DELETE_QUEUE,
        |cx| async move {
            let caps = cx.b.capabilities();
            let limits = cx
                .b
                .groups()
                .throttles
                .is_some_and(|t| t.scope() == LimitScope::Global);
            let other = cx.own("other")?;
            let mut ids = Vec::new();
            if caps.unique_for {
                // A key held after its item's ack.
                let id = one(&cx, NewItem::new("held").dedup_key("kept").unique_for(LONG)).await?;
                let lease = cx.claim_one(LONG).await?;
                ensure!(lease.id() == id, RULE, "the only item is {id}, the claim returned {}", lease.id());
                cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
                ids.push(id);
            }
            let leased = one(&cx, NewItem::new("leased")).await?;
            let lease = cx.claim_one(LONG).await?;
            ensure!(lease.id() == leased, RULE, "the only item is {leased}, the claim returned {}", lease.id());
            let dead = one(&cx, NewItem::new("dead").max_attempts(1)).await?;
            let doomed = cx.claim_one(LONG).await?;
            cx.b.fail(&doomed.key, "dead on purpose").await.or_fail(RULE, "fail")?;
            ids.extend([leased, dead, one(&cx, NewItem::new("ready")).await?]);
            let mut held = 3;
            if caps.dedup {
                ids.push(one(&cx, NewItem::new("keyed").dedup_key("k")).await?);
                held += 1;
            }
            if caps.delays {
                ids.push(one(&cx, NewItem::new("later").delay(Duration::from_secs(3600))).await?);
                held += 1;
            }
            // A request sent before the delete, to be sent again after it.
            let request = LeaseToken::random();
            let before = match cx.b.enqueue_once(&cx.q, request, vec![NewItem::new("once")]).await {
                Err(Error::Unsupported { .. }) => None,
                other => Some(other.or_fail(RULE, "enqueue_once")?),
            };
            if let Some(first) = &before {
                ids.extend(first.iter().map(|e| e.id));
                held += 1;
            }
            let set = QueueLimits::NONE.concurrency(7);
            let neighbour = cx
                .b
                .enqueue(&other, vec![NewItem::new("neighbour").dedup_key("k")])
                .await
                .or_fail(RULE, "enqueue into the other queue")?;
            if limits {
                for queue in [&cx.q, &other] {
                    cx.b.set_queue_limits(queue, set).await.or_fail(RULE, "set_queue_limits")?;
                }
            }

            let deleted = delete(&cx, &cx.q).await?;
            ensure!(
                deleted == held,
                RULE,
                "delete_queue deleted {deleted} items; the queue held {held} (Ready, Scheduled, Leased and Dead all count)"
            );
            let stats = cx.stats().await?;
            ensure!(
                stats
                    == QueueStats {
                        // A backend that counts completions starts again at 0.
                        completed: stats.completed.map(|_| 0),
                        ..QueueStats::default()
                    },
                RULE,
                "stats after delete_queue are {:?}; expected all zero",
                cx.stats().await?
            );
            ensure!(!is_listed(&cx, &cx.q).await?, RULE, "queues() still lists a deleted queue");
            if limits {
                let now = cx.b.queue_limits(&cx.q).await.or_fail(RULE, "queue_limits")?;
                ensure!(now == QueueLimits::NONE, RULE, "a deleted queue still has limits {now:?}");
                let kept = cx.b.queue_limits(&other).await.or_fail(RULE, "queue_limits")?;
                ensure!(kept == set, RULE, "deleting one queue changed another's limits to {kept:?}");
            }
            expect_lost(cx.b.ack(&lease.key).await, "ack of a lease on a deleted queue")?;
            for id in &ids {
                match cx.b.item(&cx.q, *id).await {
                    Err(Error::NotFound { .. }) => {}
                    other => return Err(cx.fail(format!(
                        "item {id} of the deleted queue answered {other:?}; expected NotFound"
                    ))),
                }
            }
            let survivor = cx
                .b
                .item(&other, neighbour[0].id)
                .await
                .or_fail(RULE, "item of the other queue")?;
            ensure!(
                survivor.payload.as_ref() == b"neighbour",
                RULE,
                "deleting one queue changed another's item: {survivor:?}"
            );

            // Keys are free again, and new ids are new.
            let mut fresh = vec![NewItem::new("again")];
            if caps.dedup {
                fresh.push(NewItem::new("keyed again").dedup_key("k"));
            }
            if caps.unique_for {
                fresh.push(NewItem::new("held again").dedup_key("kept"));
            }
            let again = cx.b.enqueue(&cx.q, fresh).await.or_fail(RULE, "enqueue after delete_queue")?;
            let top = ids.iter().max().copied().unwrap_or(ItemId::new(0));
            for e in &again {
                ensure!(!e.deduplicated, RULE, "an item enqueued after delete_queue was deduplicated against a key of the deleted queue: {again:?}");
                ensure!(
                    e.id > top,
                    RULE,
                    "an item enqueued after delete_queue got id {} though the queue had handed out ids up to {top}: ids must never be reused",
                    e.id
                );
            }
            ensure!(is_listed(&cx, &cx.q).await?, RULE, "a queue filled again after delete_queue is not listed");
            if before.is_some() {
                let resent = cx
                    .b
                    .enqueue_once(&cx.q, request, vec![NewItem::new("once")])
                    .await
                    .or_fail(RULE, "enqueue_once resent after delete_queue")?;
                ensure!(
                    resent.len() == 1 && !resent[0].deduplicated && resent[0].id > top,
                    RULE,
                    "an enqueue_once request sent before delete_queue and again after it answered \
                     {resent:?}; expected its batch written again, as a new request, with a new id \
                     above {top}"
                );
                ensure!(
                    cx.b.item(&cx.q, resent[0].id).await.is_ok(),
                    RULE,
                    "the resent request's item {} is not in the queue",
                    resent[0].id
                );
            }
            delete(&cx, &other).await?;
            Ok(())
        },
    )
    .await
}

/// Round after round of enqueue and delete, every new id is above every
/// id handed out before: a deleted queue's counter does not start over.
pub async fn ids_never_return_after_delete(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "ids_never_return_after_delete",
        RULE,
        Needs::DELETE_QUEUE,
        |cx| async move {
            let mut top: Option<ItemId> = None;
            for round in 0..ROUNDS {
                let ids = cx.push_n(3).await?;
                for id in &ids {
                    ensure!(
                        top.is_none_or(|t| *id > t),
                        RULE,
                        "round {round}: new id {id} is not above {top:?}, the highest id the queue handed out before its delete: ids must never be reused"
                    );
                }
                top = ids.iter().max().copied().or(top);
                let n = delete(&cx, &cx.q).await?;
                ensure!(n == 3, RULE, "round {round}: delete_queue deleted {n} items of 3");
            }
            Ok(())
        },
    )
    .await
}

/// Enqueuers race repeated deletes: no id names two items, every item left
/// is whole (its payload is the one enqueued under its id), counted and
/// listed; an enqueue after the last delete is kept.
pub async fn racing_enqueues_leave_whole_items(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "racing_enqueues_leave_whole_items",
        RULE,
        Needs::DELETE_QUEUE,
        |cx| async move {
            let calls = CALLS * scale() as usize;
            let mut tasks = Vec::new();
            for w in 0..ENQUEUERS {
                let (b, q) = (cx.b.clone(), cx.q.clone());
                tasks.push(cx.spawn(async move {
                    let mut sent: Vec<(ItemId, String)> = Vec::new();
                    for c in 0..calls {
                        let payloads = [format!("w{w}-c{c}-a"), format!("w{w}-c{c}-b")];
                        let items = payloads.iter().map(|p| NewItem::new(p.clone())).collect();
                        let done = b.enqueue(&q, items).await?;
                        sent.extend(done.iter().map(|e| e.id).zip(payloads));
                        tokio::task::yield_now().await;
                    }
                    Ok::<_, Error>(sent)
                }));
            }
            for _ in 0..ROUNDS {
                delete(&cx, &cx.q).await?;
                tokio::task::yield_now().await;
            }
            let mut by_id: BTreeMap<ItemId, String> = BTreeMap::new();
            for sent in cx.join(tasks).await? {
                for (id, payload) in sent.or_fail(RULE, "enqueue racing delete_queue")? {
                    if let Some(before) = by_id.insert(id, payload.clone()) {
                        return Err(cx.fail(format!(
                            "id {id} was handed out twice, to {before:?} and to {payload:?}, while deletes ran"
                        )));
                    }
                }
            }
            let left = cx
                .b
                .peek(&cx.q, ItemState::Ready, by_id.len() + 1)
                .await
                .or_fail(RULE, "peek")?;
            let mut seen = BTreeSet::new();
            for item in &left {
                let want = by_id.get(&item.id).map(String::as_bytes);
                ensure!(
                    want == Some(item.payload.as_ref()),
                    RULE,
                    "item {} left after racing deletes holds {:?}, but its enqueue wrote {:?} under that id",
                    item.id,
                    String::from_utf8_lossy(&item.payload),
                    want.map(String::from_utf8_lossy)
                );
                seen.insert(item.id);
            }
            let total = cx.stats().await?.total();
            ensure!(
                total == seen.len() as u64,
                RULE,
                "stats count {total} items after racing deletes, peek finds {}",
                seen.len()
            );
            ensure!(
                is_listed(&cx, &cx.q).await? == (total > 0),
                RULE,
                "after racing deletes the queue holds {total} items, and queues() {} it",
                if total > 0 { "leaves out" } else { "lists" }
            );
            delete(&cx, &cx.q).await?;
            let last = one(&cx, NewItem::new("after")).await?;
            ensure!(
                cx.item(last).await?.is_some() && is_listed(&cx, &cx.q).await?,
                RULE,
                "an item enqueued after the last delete_queue returned is not kept and listed"
            );
            Ok(())
        },
    )
    .await
}
