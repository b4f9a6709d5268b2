//! `queues`: a queue is listed exactly while it holds an item, in any
//! state, from whichever call gave it one; the listing is sorted and shows
//! each queue once; racing enqueues, acks and purges leave neither a
//! phantom nor a hidden queue. `queues` is a core method: every check
//! runs without the Admin group, and its purges run where the backend
//! offers them.
//!
//! Checks may share one backend (a server factory hands every check the
//! same store), so a check only asserts about its own queues: its queue
//! `q` and queues named `q-…`, names no other check uses. Of those it
//! asserts the exact set listed; of the whole listing, that it is sorted
//! with no name twice.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::schedule::{Schedule, ScheduleName, ScheduleTick};
use leaseq_core::{Error, LeaseToken, NewItem, QueueLimits, QueueName, Timestamp};

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

const QUEUES: Rule = Rule::Contract("queues");

/// Queues raced over in [`racing_calls_leave_no_phantom_and_hide_nothing`].
const RACED: usize = 6;
/// Rounds of that race.
const ROUNDS: u32 = 12;

/// The check's own queues among those listed, after checking that the
/// whole listing is sorted with each name once.
async fn listed(cx: &Cx) -> Result<BTreeSet<QueueName>, Violation> {
    let all = cx.b.queues().await.or_fail(QUEUES, "queues")?;
    ensure!(
        all.windows(2).all(|w| w[0] < w[1]),
        QUEUES,
        "queues() is not sorted by name with each queue once: {all:?}"
    );
    let mine = format!("{}-", cx.q);
    Ok(all
        .into_iter()
        .filter(|q| *q == cx.q || q.as_str().starts_with(&mine))
        .collect())
}

/// Fails unless exactly `want` of the check's queues are listed.
async fn expect_listed(cx: &Cx, want: &[&QueueName], when: &str) -> Result<(), Violation> {
    let got = listed(cx).await?;
    let want: BTreeSet<QueueName> = want.iter().map(|q| (*q).clone()).collect();
    ensure!(
        got == want,
        QUEUES,
        "{when}: the check's queues listed are {got:?}, expected {want:?} (a queue is listed exactly while it holds an item)"
    );
    Ok(())
}

/// Listed from the first enqueue until the queue holds nothing: while its
/// only item is Ready, Leased, Dead or Scheduled; not once that item is
/// acked, nor (with the Admin group) after a purge; again from the next
/// enqueue. Without the Admin group the acks are watched on a fresh queue.
pub async fn listed_while_holding_items(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "listed_while_holding_items",
        QUEUES,
        Needs::NONE,
        |cx| async move {
            let q = &cx.q;
            expect_listed(&cx, &[], "before any enqueue").await?;
            cx.push_n(1).await?;
            expect_listed(&cx, &[q], "after the first enqueue (one Ready item)").await?;
            let lease = cx.claim_one(LONG).await?;
            cx.expect_stats([0, 0, 1, 0], "after the claim").await?;
            expect_listed(&cx, &[q], "while the only item is Leased").await?;
            cx.b.fail(&lease.key, "listed while dead")
                .await
                .or_fail(QUEUES, "fail")?;
            cx.expect_stats([0, 0, 0, 1], "after the fail").await?;
            expect_listed(&cx, &[q], "while the only item is Dead").await?;
            // The Dead item stays where a purge cannot take it: the rest
            // runs on a fresh queue, whose own listing is watched.
            let cx = if cx.b.groups().admin.is_some() {
                cx.b.purge(q).await.or_fail(QUEUES, "purge")?;
                expect_listed(&cx, &[], "after a purge").await?;
                cx
            } else {
                cx.fresh("again")?
            };
            let q = &cx.q;
            cx.push_n(2).await?;
            expect_listed(&cx, &[q], "after an enqueue into the emptied queue").await?;
            let leases = cx.claim(2, LONG).await?;
            ensure!(leases.len() == 2, QUEUES, "claimed {} of 2", leases.len());
            cx.b.ack(&leases[0].key).await.or_fail(QUEUES, "ack")?;
            expect_listed(&cx, &[q], "with one of two items acked").await?;
            cx.b.ack(&leases[1].key).await.or_fail(QUEUES, "ack")?;
            expect_listed(&cx, &[], "once the last item was acked").await?;
            cx.push_n(1).await?;
            let lease = cx.claim_one(LONG).await?;
            let acked =
                cx.b.ack_many(std::slice::from_ref(&lease.key))
                    .await
                    .or_fail(QUEUES, "ack_many")?;
            ensure!(
                acked[0].is_ok(),
                QUEUES,
                "ack_many of a held lease: {acked:?}"
            );
            expect_listed(&cx, &[], "once the last item was acked by ack_many").await?;
            if cx.b.capabilities().delays {
                cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?;
                cx.expect_stats([0, 1, 0, 0], "after a delayed enqueue")
                    .await?;
                expect_listed(&cx, &[q], "while the only item is Scheduled").await?;
            }
            Ok(())
        },
    )
    .await
}

/// A queue with limits set, or named by a schedule, and no item is not
/// listed; `enqueue_once` and a schedule's fire list the queue they give
/// an item, as `enqueue` does, and (with the Admin group) a purge unlists
/// it. (Each part runs where the backend offers the operation.)
pub async fn every_item_path_lists_the_queue(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "every_item_path_lists_the_queue",
        QUEUES,
        Needs::NONE,
        |cx| async move {
            let limited = cx.own("limits")?;
            let once = cx.own("once")?;
            let result = async {
                if cx.b.groups().throttles.is_some() {
                    cx.b.set_queue_limits(&limited, QueueLimits::NONE.concurrency(4))
                        .await
                        .or_fail(QUEUES, "set_queue_limits")?;
                    expect_listed(&cx, &[], "with limits set on an empty queue").await?;
                }
                // The fire first: it expects nothing else of the check's
                // listed.
                let fired = cx.b.groups().schedules.is_some();
                if fired {
                    fire_lists_the_queue(&cx).await?;
                }
                let before: Vec<&QueueName> = if fired { vec![&cx.q] } else { vec![] };
                match cx
                    .b
                    .enqueue_once(&once, LeaseToken::random(), vec![NewItem::new("once")])
                    .await
                {
                    Ok(_) => {
                        let mut now = before.clone();
                        now.push(&once);
                        expect_listed(&cx, &now, "after enqueue_once").await?;
                        if cx.b.groups().admin.is_some() {
                            cx.b.purge(&once).await.or_fail(QUEUES, "purge")?;
                            expect_listed(&cx, &before, "after purging it").await?;
                        }
                    }
                    Err(Error::Unsupported { .. }) => {}
                    Err(e) => {
                        return Err(Violation::new(
                            QUEUES,
                            format!("enqueue_once failed unexpectedly: {e}"),
                        ))
                    }
                }
                Ok(())
            }
            .await;
            if cx.b.groups().throttles.is_some() {
                let _ = cx.b.set_queue_limits(&limited, QueueLimits::NONE).await;
            }
            // The check's end deletes its queues.
            result
        },
    )
    .await
}

/// A schedule naming the check's queue lists nothing; its fire does.
async fn fire_lists_the_queue(cx: &Cx) -> Result<(), Violation> {
    let name = ScheduleName::new(cx.q.as_str()).or_fail(QUEUES, "naming the schedule")?;
    let schedule = Schedule::every(name.as_str(), cx.q.clone(), Duration::from_secs(1), "tick")
        .or_fail(QUEUES, "building the schedule")?;
    let put =
        cx.b.put_schedule(&schedule)
            .await
            .or_fail(QUEUES, "put_schedule")?;
    let result = async {
        expect_listed(cx, &[], "with a schedule naming the queue and no item").await?;
        let now = cx.now().await?;
        let tick = ScheduleTick {
            name: name.clone(),
            revision: put.revision,
            at: Timestamp::from_millis(now.as_millis().saturating_sub(1_000)),
        };
        let fired =
            cx.b.fire_schedule(&tick, NewItem::new("tick"))
                .await
                .or_fail(QUEUES, "fire_schedule")?;
        ensure!(
            fired.enqueued().is_some(),
            QUEUES,
            "a fire of a due tick answered {fired:?}"
        );
        expect_listed(cx, &[&cx.q], "after the schedule's fire").await
    }
    .await;
    let removed = cx.b.remove_schedule(&name).await;
    result?;
    removed.or_fail(QUEUES, "remove_schedule")?;
    Ok(())
}

/// The listing shows exactly the check's queues that hold items: four
/// filled, one never used, then (with the Admin group) one of them purged;
/// each once, in name order.
pub async fn listing_shows_exactly_the_filled_queues(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "listing_shows_exactly_the_filled_queues",
        QUEUES,
        Needs::NONE,
        |cx| async move {
            // Created out of name order.
            let names = ["c", "a", "b", "d"];
            let queues: Vec<QueueName> =
                names.iter().map(|n| cx.own(n)).collect::<Result<_, _>>()?;
            let result = async {
                for (i, q) in queues.iter().take(3).enumerate() {
                    let items = (0..=i).map(|k| NewItem::new(format!("{k}"))).collect();
                    cx.b.enqueue(q, items).await.or_fail(QUEUES, "enqueue")?;
                }
                cx.push_n(1).await?;
                // `d` is looked at but never given an item.
                cx.b.stats(&queues[3]).await.or_fail(QUEUES, "stats")?;
                expect_listed(
                    &cx,
                    &[&cx.q, &queues[0], &queues[1], &queues[2]],
                    "after filling four queues",
                )
                .await?;
                if cx.b.groups().admin.is_none() {
                    return Ok(());
                }
                cx.b.purge(&queues[2]).await.or_fail(QUEUES, "purge")?;
                expect_listed(
                    &cx,
                    &[&cx.q, &queues[0], &queues[1]],
                    "after purging one of them",
                )
                .await
            }
            .await;
            // The check's end deletes its queues.
            result
        },
    )
    .await
}

/// Enqueues, purges (where the backend offers the Admin group), and claims
/// with acks race over six queues for twelve rounds; after each round, with
/// every call returned, a queue is listed if and only if `stats` shows it
/// holds an item: no phantom, nothing hidden.
pub async fn racing_calls_leave_no_phantom_and_hide_nothing(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run(
        factory,
        "racing_calls_leave_no_phantom_and_hide_nothing",
        QUEUES,
        Needs::NONE,
        |cx| async move {
            let queues: Vec<QueueName> = (0..RACED)
                .map(|i| cx.own(&format!("r{i}")))
                .collect::<Result<_, _>>()?;
            // The check's end deletes its queues.
            race(&cx, &queues).await
        },
    )
    .await
}

async fn race(cx: &Cx, queues: &[QueueName]) -> Result<(), Violation> {
    let rounds = ROUNDS * scale();
    let purges = cx.b.groups().admin.is_some();
    for round in 0..rounds {
        let mut tasks = Vec::new();
        for (i, q) in queues.iter().enumerate() {
            // Which calls meet on this queue varies by round and queue.
            let turn = (round as usize + i) % 3;
            let b = cx.b.clone();
            let q2 = q.clone();
            tasks.push(cx.spawn(async move {
                b.enqueue(&q2, vec![NewItem::new("x"); 1 + turn])
                    .await
                    .map(|_| ())
            }));
            if purges {
                let (b, q2) = (cx.b.clone(), q.clone());
                tasks.push(cx.spawn(async move { b.purge(&q2).await.map(|_| ()) }));
            }
            if turn != 0 {
                let (b, q2) = (cx.b.clone(), q.clone());
                tasks.push(cx.spawn(async move {
                    // Up to 3: without purges, claims empty the queues.
                    let spec = leaseq_core::ClaimSpec::new(3, LONG)?;
                    for lease in b.claim(&q2, spec).await?.leases {
                        match b.ack(&lease.key).await {
                            // A purge took the item meanwhile.
                            Ok(()) | Err(Error::LeaseLost { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(())
                }));
            }
        }
        for r in cx.join(tasks).await? {
            r.or_fail(QUEUES, "a racing call")?;
        }
        let shown = listed(cx).await?;
        for q in queues {
            let total = cx.b.stats(q).await.or_fail(QUEUES, "stats")?.total();
            let is_listed = shown.contains(q);
            ensure!(
                is_listed == (total > 0),
                QUEUES,
                "round {round}: with every call returned, {q} holds {total} items but is {} (a phantom or a hidden queue)",
                if is_listed { "listed" } else { "not listed" }
            );
        }
    }
    Ok(())
}
