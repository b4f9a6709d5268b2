//! Periodic schedules: exactly one item per tick however many schedulers
//! race for it, also after the previous tick's item was acked, across
//! restarts, and when a scheduler's clock runs ahead (the backend's clock
//! decides); changes and removals take effect at once. And unique-for dedup
//! keys: held after the ack for their duration, free after it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::schedule::{
    Fired, Schedule, ScheduleName, ScheduleTick, Scheduler, StoredSchedule,
};
use leaseq_core::{Backend, ItemId, NewItem, Timestamp};
use tokio::sync::Barrier;

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, TimeControl, Violation};

/// How many schedulers race.
const SCHEDULERS: usize = 8;
/// How many ticks they race over.
const TICKS: u64 = 20;

const FIRE: Rule = Rule::Contract("fire_schedule");

/// The schedule's name for this check's queue (names are global to a
/// backend, queues are unique per check).
fn name_for(cx: &Cx) -> Result<ScheduleName, Violation> {
    ScheduleName::new(cx.q.as_str()).or_fail(cx.rule, "naming the schedule")
}

/// The stored schedule of this name, from [`ScheduleStore::schedules`].
async fn stored(cx: &Cx, name: &ScheduleName) -> Result<Option<StoredSchedule>, Violation> {
    let all = cx.b.schedules().await.or_fail(cx.rule, "schedules")?;
    let mut sorted = all.iter().map(|s| s.name.as_str());
    let first = sorted.next();
    ensure!(
        sorted
            .try_fold(first, |prev, n| (prev <= Some(n)).then_some(Some(n)))
            .is_some(),
        Rule::Contract("schedules"),
        "schedules() is not sorted by name"
    );
    Ok(all.into_iter().find(|s| &s.name == name))
}

/// Removes the check's schedule (the queue itself is purged by `run`).
async fn remove(cx: &Cx, name: &ScheduleName) -> Result<(), Violation> {
    cx.b.remove_schedule(name)
        .await
        .or_fail(cx.rule, "remove_schedule")?;
    Ok(())
}

/// Fires `tick` from `n` tasks released at once; the answers.
async fn race(
    cx: &Cx,
    tick: &ScheduleTick,
    n: usize,
    payload: &'static str,
) -> Result<Vec<Fired>, Violation> {
    let barrier = Arc::new(Barrier::new(n));
    let tasks = (0..n)
        .map(|_| {
            let b: Arc<dyn Backend> = cx.b.clone();
            let barrier = barrier.clone();
            let tick = tick.clone();
            cx.spawn(async move {
                barrier.wait().await;
                b.fire_schedule(&tick, NewItem::new(payload)).await
            })
        })
        .collect();
    cx.join(tasks)
        .await?
        .into_iter()
        .map(|r| r.or_fail(cx.rule, "fire_schedule"))
        .collect()
}

/// Eight schedulers race to fire each of twenty ticks; the previous tick's
/// item is acked before the next race, so nothing but the schedule's last
/// tick can keep a tick from firing again. Exactly one fire per tick
/// enqueues; the others say `AlreadyFired` with that tick. Firing every
/// done tick again (a scheduler that restarted and saw none of it)
/// enqueues nothing.
pub async fn schedulers_race_one_item_per_tick(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "schedulers_race_one_item_per_tick",
        FIRE,
        Needs::SCHEDULES,
        |cx| async move {
            let name = name_for(&cx)?;
            let schedule = Schedule::every(name.as_str(), cx.q.clone(), Duration::from_secs(1), "tick")
                .or_fail(cx.rule, "building the schedule")?;
            let put = cx
                .b
                .put_schedule(&schedule)
                .await
                .or_fail(cx.rule, "put_schedule")?;
            let result = async {
                let ticks = TICKS * u64::from(scale());
                // Ticks in the past on the backend's clock, one second apart.
                let now = cx.now().await?;
                let first = now.as_millis().saturating_sub((ticks + 1) * 1_000);
                let mut acked = 0u64;
                let mut last = Timestamp::ZERO;
                for i in 1..=ticks {
                    let tick = ScheduleTick {
                        name: name.clone(),
                        revision: put.revision,
                        at: Timestamp::from_millis(first + i * 1_000),
                    };
                    let answers = race(&cx, &tick, SCHEDULERS, "tick").await?;
                    let enqueued = answers.iter().filter_map(|f| f.enqueued()).count();
                    ensure!(
                        enqueued == 1,
                        cx.rule,
                        "tick {i} of {ticks}: {enqueued} of {SCHEDULERS} racing fires enqueued an item (expected exactly 1): {answers:?}"
                    );
                    for f in &answers {
                        ensure!(
                            matches!(f, Fired::Enqueued(_))
                                || *f == Fired::AlreadyFired { last_tick: tick.at },
                            cx.rule,
                            "tick {i}: a losing fire answered {f:?}, expected AlreadyFired at {}",
                            tick.at
                        );
                    }
                    cx.expect_stats([1, 0, 0, 0], &format!("after the race for tick {i}"))
                        .await?;
                    let lease = cx.claim_one(LONG).await?;
                    cx.b.ack(&lease.key).await.or_fail(cx.rule, "ack")?;
                    acked += 1;
                    last = tick.at;
                }
                ensure!(acked == ticks, cx.rule, "acked {acked} items for {ticks} ticks");
                // A scheduler that restarts knowing nothing fires every tick again.
                for i in 1..=ticks {
                    let tick = ScheduleTick {
                        name: name.clone(),
                        revision: put.revision,
                        at: Timestamp::from_millis(first + i * 1_000),
                    };
                    let f = cx
                        .b
                        .fire_schedule(&tick, NewItem::new("again"))
                        .await
                        .or_fail(cx.rule, "fire_schedule")?;
                    ensure!(
                        f == Fired::AlreadyFired { last_tick: last },
                        cx.rule,
                        "tick {i} fired again after every tick was done: {f:?}"
                    );
                }
                cx.expect_stats([0, 0, 0, 0], "after firing done ticks again")
                    .await?;
                let s = stored(&cx, &name).await?;
                ensure!(
                    s.as_ref().and_then(|s| s.last_tick) == Some(last),
                    cx.rule,
                    "schedules() shows last tick {:?}, expected {last}",
                    s.and_then(|s| s.last_tick)
                );
                Ok(())
            }
            .await;
            remove(&cx, &name).await?;
            result
        },
    )
    .await
}

/// Eight [`Scheduler`] runtimes run passes at once, tick after tick, with
/// each tick's item acked before the next: every tick any of them fired
/// has exactly one item. Then they stop, and a new scheduler starts: it
/// never fires a tick that was done before it started.
pub async fn scheduler_runtimes_race_and_restart(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "scheduler_runtimes_race_and_restart",
        FIRE,
        Needs::SCHEDULES,
        |cx| async move {
            let name = name_for(&cx)?;
            // A short interval on a real clock, so twenty ticks pass quickly.
            let every = match cx.tb.time {
                TimeControl::Manual(_) => Duration::from_secs(1),
                TimeControl::Real => Duration::from_millis(250),
            };
            let schedule = Schedule::every(name.as_str(), cx.q.clone(), every, "tick")
                .or_fail(cx.rule, "building the schedule")?;
            cx.b.put_schedule(&schedule)
                .await
                .or_fail(cx.rule, "put_schedule")?;
            let result = async {
                let mut schedulers: Vec<Scheduler> = (0..SCHEDULERS)
                    .map(|_| Scheduler::new(cx.b.clone()))
                    .collect();
                let mut items: BTreeMap<Timestamp, ItemId> = BTreeMap::new();
                let rounds = TICKS * u64::from(scale());
                for round in 0..rounds {
                    // Let the next tick pass on the backend's clock.
                    let now = cx.now().await?;
                    let next = schedule
                        .next_tick(now)
                        .ok_or_else(|| cx.fail("the schedule has no next tick"))?;
                    cx.wait_past(next).await?;
                    let barrier = Arc::new(Barrier::new(SCHEDULERS));
                    let tasks = schedulers
                        .drain(..)
                        .map(|mut s| {
                            let barrier = barrier.clone();
                            cx.spawn(async move {
                                barrier.wait().await;
                                let pass = s.run_once().await;
                                (s, pass)
                            })
                        })
                        .collect();
                    let mut fired_now = 0;
                    for (s, pass) in cx.join(tasks).await? {
                        let pass = pass.or_fail(cx.rule, "a scheduler pass")?;
                        ensure!(pass.errors == 0, cx.rule, "a scheduler pass had errors: {pass:?}");
                        for (_, tick, e) in pass.fired {
                            ensure!(
                                items.insert(tick, e.id).is_none(),
                                cx.rule,
                                "round {round}: tick {tick} was fired twice"
                            );
                            fired_now += 1;
                        }
                        schedulers.push(s);
                    }
                    ensure!(
                        fired_now >= 1,
                        cx.rule,
                        "round {round}: no scheduler fired the tick at {next} though the backend's clock passed it"
                    );
                    let leases = cx.drain(LONG, fired_now).await?;
                    ensure!(
                        leases.len() == fired_now,
                        cx.rule,
                        "round {round}: {fired_now} ticks fired but {} items were claimable",
                        leases.len()
                    );
                    for l in leases {
                        cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
                    }
                }
                let last = items.keys().next_back().copied().unwrap_or(Timestamp::ZERO);
                drop(schedulers);
                // A new scheduler, after every old one stopped.
                let mut fresh = Scheduler::new(cx.b.clone());
                let pass = fresh.run_once().await.or_fail(cx.rule, "a pass after a restart")?;
                for (_, tick, _) in &pass.fired {
                    ensure!(
                        *tick > last,
                        cx.rule,
                        "a restarted scheduler fired tick {tick}, done before it started (last {last})"
                    );
                }
                if cx.tb.is_manual() {
                    ensure!(
                        pass.fired.is_empty(),
                        cx.rule,
                        "a restarted scheduler fired {:?} though no tick passed",
                        pass.fired
                    );
                }
                Ok(())
            }
            .await;
            remove(&cx, &name).await?;
            result
        },
    )
    .await
}

/// Two schedulers whose clocks differ: the one whose clock runs several
/// seconds ahead fires a tick that is in the backend's future, and nothing
/// is enqueued (`NotDue`); the one on time fires the current tick. Once
/// the backend's clock passes the early tick it fires once.
pub async fn clock_skew_cannot_fire_early(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "clock_skew_cannot_fire_early",
        FIRE,
        Needs::SCHEDULES,
        |cx| async move {
            let name = name_for(&cx)?;
            let schedule = Schedule::every(name.as_str(), cx.q.clone(), Duration::from_secs(1), "tick")
                .or_fail(cx.rule, "building the schedule")?;
            let put = cx
                .b
                .put_schedule(&schedule)
                .await
                .or_fail(cx.rule, "put_schedule")?;
            let result = async {
                let now = cx.now().await?;
                let tick = |at: Timestamp| ScheduleTick {
                    name: name.clone(),
                    revision: put.revision,
                    at,
                };
                let current = schedule
                    .latest_tick(now)
                    .ok_or_else(|| cx.fail("the schedule has no tick"))?;
                // The fast scheduler thinks it is three seconds later.
                let early = schedule
                    .latest_tick(now.saturating_add(Duration::from_secs(3)))
                    .ok_or_else(|| cx.fail("the schedule has no tick"))?;
                let f = cx
                    .b
                    .fire_schedule(&tick(early), NewItem::new("early"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(
                    matches!(f, Fired::NotDue { now: n } if n < early),
                    cx.rule,
                    "a tick at {early}, in the future of the backend's clock (about {now}), answered {f:?}, expected NotDue"
                );
                cx.expect_stats([0, 0, 0, 0], "after a fire ahead of the backend's clock")
                    .await?;
                ensure!(
                    stored(&cx, &name).await?.and_then(|s| s.last_tick).is_none(),
                    cx.rule,
                    "a fire that was not due recorded a last tick"
                );
                // The scheduler on time fires the current tick.
                let f = cx
                    .b
                    .fire_schedule(&tick(current), NewItem::new("on time"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(
                    matches!(f, Fired::Enqueued(_)),
                    cx.rule,
                    "the current tick {current} answered {f:?}, expected Enqueued"
                );
                cx.expect_stats([1, 0, 0, 0], "after the tick on time").await?;
                // Both at the early tick once the backend's clock passed it.
                cx.wait_past(early).await?;
                let answers = race(&cx, &tick(early), 2, "early").await?;
                let enqueued = answers.iter().filter_map(|f| f.enqueued()).count();
                ensure!(
                    enqueued == 1,
                    cx.rule,
                    "two schedulers fired the early tick once it was due: {answers:?}"
                );
                cx.expect_stats([2, 0, 0, 0], "after the early tick came due")
                    .await?;
                // An old tick after a newer one fired: never.
                let f = cx
                    .b
                    .fire_schedule(&tick(current), NewItem::new("late"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(
                    f == Fired::AlreadyFired { last_tick: early },
                    cx.rule,
                    "a tick older than the last one answered {f:?}"
                );
                cx.expect_stats([2, 0, 0, 0], "after a late fire").await?;
                Ok(())
            }
            .await;
            remove(&cx, &name).await?;
            result
        },
    )
    .await
}

/// Each kind of change is a new revision stamped with the backend's now: a
/// new cadence (same payload) and a new queue (same cadence and payload)
/// each raise the revision by one and set `defined_at` to the backend's
/// now, with the spec stored as given; after the move a tick fills the new
/// queue only. Bad input (a schedule whose item is not valid, a fire with
/// an item that is not) is `InvalidInput` and writes nothing.
pub async fn every_change_of_a_schedule_is_a_revision(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "every_change_of_a_schedule_is_a_revision",
        Rule::Contract("put_schedule"),
        Needs::SCHEDULES,
        |cx| async move {
            let name = name_for(&cx)?;
            let other = cx.own("moved")?;
            let result = async {
                let every = |secs: u64| {
                    Schedule::every(name.as_str(), cx.q.clone(), Duration::from_secs(secs), "same")
                        .or_fail(cx.rule, "building the schedule")
                };
                // Bad input first: nothing may be stored.
                let bad = every(1)?.max_attempts(0);
                ensure!(
                    matches!(cx.b.put_schedule(&bad).await, Err(leaseq_core::Error::InvalidInput { .. })),
                    cx.rule,
                    "a schedule whose items would have max attempts 0 was not refused as InvalidInput"
                );
                ensure!(stored(&cx, &name).await?.is_none(), cx.rule, "a refused put_schedule stored the schedule");
                let mut revision = 0;
                let mut last: Option<StoredSchedule> = None;
                for (what, schedule) in [
                    ("created", every(1)?),
                    ("given a new cadence", every(2)?),
                    ("moved to another queue", every(2)?.with_queue(other.clone())),
                ] {
                    if let Some(prev) = &last {
                        cx.wait_past(prev.defined_at).await?;
                    }
                    let before = cx.now().await?;
                    let got = cx.b.put_schedule(&schedule).await.or_fail(cx.rule, "put_schedule")?;
                    let after = cx.now().await?;
                    revision += 1;
                    // The stored queue is the one put, or where a layer
                    // routes it (a shard's queue): compared as "moved or not".
                    let moved = last.as_ref().is_some_and(|prev| prev.queue != got.queue);
                    ensure!(
                        got.revision == revision
                            && got.spec == schedule.spec()
                            && moved == (revision == 3)
                            && before <= got.defined_at
                            && got.defined_at <= after,
                        cx.rule,
                        "a schedule {what} was stored as {got:?}; expected revision {revision}, spec \
                         {:?}, the queue {}, defined_at within [{before}, {after}] (the backend's now)",
                        schedule.spec(),
                        if revision == 3 { "changed" } else { "kept" }
                    );
                    ensure!(
                        stored(&cx, &name).await?.as_ref() == Some(&got),
                        cx.rule,
                        "schedules() does not show the schedule {what} as put_schedule returned it ({got:?})"
                    );
                    last = Some(got);
                }
                let at = cx.now().await?;
                let tick = ScheduleTick { name: name.clone(), revision, at };
                match cx.b.fire_schedule(&tick, NewItem::new("same").max_attempts(0)).await {
                    Err(leaseq_core::Error::InvalidInput { .. }) => {}
                    other => return Err(cx.fail(format!("a fire with an item of max attempts 0 answered {other:?}; expected InvalidInput"))),
                }
                ensure!(
                    stored(&cx, &name).await?.and_then(|s| s.last_tick).is_none(),
                    cx.rule,
                    "a refused fire recorded its tick"
                );
                let f = cx.b.fire_schedule(&tick, NewItem::new("same")).await.or_fail(cx.rule, "fire_schedule")?;
                ensure!(matches!(f, Fired::Enqueued(_)), cx.rule, "a fire of the current revision answered {f:?}");
                let here = cx.stats().await?.total();
                let there = cx.b.stats(&other).await.or_fail(cx.rule, "stats")?.total();
                ensure!(
                    (here, there) == (0, 1),
                    cx.rule,
                    "after the schedule moved to {other}, its tick left {here} items in {} and {there} in {other}; expected 0 and 1",
                    cx.q
                );
                cx.clean(&other).await.or_fail(cx.rule, "purge")?;
                Ok(())
            }
            .await;
            remove(&cx, &name).await?;
            result
        },
    )
    .await
}

/// A put that changes nothing keeps the revision; a change raises it and
/// keeps the last tick; a fire of the old revision is `Stale` and writes
/// nothing; a removal makes every fire `Stale` and leaves the list.
pub async fn schedule_changes_take_effect(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "schedule_changes_take_effect",
        Rule::Contract("put_schedule"),
        Needs::SCHEDULES,
        |cx| async move {
            let name = name_for(&cx)?;
            let v1 = Schedule::every(name.as_str(), cx.q.clone(), Duration::from_secs(1), "v1")
                .or_fail(cx.rule, "building the schedule")?;
            let first = cx.b.put_schedule(&v1).await.or_fail(cx.rule, "put_schedule")?;
            let result = async {
                ensure!(
                    first.revision == 1
                        && first.last_tick.is_none()
                        && first.payload.as_ref() == b"v1",
                    cx.rule,
                    "a new schedule was stored as {first:?}"
                );
                let again = cx.b.put_schedule(&v1).await.or_fail(cx.rule, "put_schedule")?;
                ensure!(
                    again == first,
                    cx.rule,
                    "an unchanged put changed the schedule: {first:?} became {again:?}"
                );
                let now = cx.now().await?;
                let at = |back: u64| Timestamp::from_millis(now.as_millis().saturating_sub(back));
                let tick = |revision: u64, at: Timestamp| ScheduleTick {
                    name: name.clone(),
                    revision,
                    at,
                };
                let f = cx
                    .b
                    .fire_schedule(&tick(1, at(3_000)), NewItem::new("v1"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(matches!(f, Fired::Enqueued(_)), cx.rule, "the first fire answered {f:?}");
                let v2 = Schedule::every(name.as_str(), cx.q.clone(), Duration::from_secs(1), "v2")
                    .or_fail(cx.rule, "building the schedule")?;
                let second = cx.b.put_schedule(&v2).await.or_fail(cx.rule, "put_schedule")?;
                ensure!(
                    second.revision == 2
                        && second.last_tick == Some(at(3_000))
                        && second.payload.as_ref() == b"v2",
                    cx.rule,
                    "a changed schedule was stored as {second:?} (expected revision 2, the last tick kept)"
                );
                let f = cx
                    .b
                    .fire_schedule(&tick(1, at(2_000)), NewItem::new("v1"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(f == Fired::Stale, cx.rule, "a fire of the old revision answered {f:?}");
                let f = cx
                    .b
                    .fire_schedule(&tick(2, at(3_000)), NewItem::new("v2"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(
                    f == Fired::AlreadyFired { last_tick: at(3_000) },
                    cx.rule,
                    "a tick fired under revision 1 fired again under revision 2: {f:?}"
                );
                let f = cx
                    .b
                    .fire_schedule(&tick(2, at(2_000)), NewItem::new("v2"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(matches!(f, Fired::Enqueued(_)), cx.rule, "a fire of revision 2 answered {f:?}");
                let payloads: Vec<Vec<u8>> = cx
                    .drain(LONG, 2)
                    .await?
                    .into_iter()
                    .map(|l| l.payload.to_vec())
                    .collect();
                ensure!(
                    payloads == [b"v1".to_vec(), b"v2".to_vec()],
                    cx.rule,
                    "the queue holds {payloads:?}, expected one item per revision"
                );
                let listed = stored(&cx, &name).await?;
                ensure!(
                    listed.as_ref().map(|s| (s.revision, s.last_tick)) == Some((2, Some(at(2_000)))),
                    cx.rule,
                    "schedules() shows {listed:?}"
                );
                let removed = cx
                    .b
                    .remove_schedule(&name)
                    .await
                    .or_fail(cx.rule, "remove_schedule")?;
                ensure!(removed, cx.rule, "remove_schedule of a stored schedule said it was not there");
                let f = cx
                    .b
                    .fire_schedule(&tick(2, at(1_000)), NewItem::new("gone"))
                    .await
                    .or_fail(cx.rule, "fire_schedule")?;
                ensure!(f == Fired::Stale, cx.rule, "a fire of a removed schedule answered {f:?}");
                cx.expect_stats([0, 0, 2, 0], "after fires of a removed schedule")
                    .await?;
                ensure!(
                    stored(&cx, &name).await?.is_none(),
                    cx.rule,
                    "a removed schedule is still listed"
                );
                let removed = cx
                    .b
                    .remove_schedule(&name)
                    .await
                    .or_fail(cx.rule, "remove_schedule")?;
                ensure!(!removed, cx.rule, "a second remove_schedule said it removed something");
                Ok(())
            }
            .await;
            remove(&cx, &name).await?;
            result
        },
    )
    .await
}

/// An item with `unique_for` keeps its dedup key held after the ack: an
/// enqueue with the key returns the acked id and writes nothing, until the
/// hold has passed on the backend's clock; then the key is free. An ack
/// keeps the holds of other keys, and the ack of a key's next holder holds
/// it again under the new id, also when many holds have run out. A purge
/// frees held keys too.
pub async fn unique_for_holds_after_ack(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "unique_for_holds_after_ack",
        Rule::Contract("unique_for"),
        Needs::UNIQUE_FOR,
        |cx| async move {
            let enq = |key: &'static str, hold: Duration| {
                let cx = cx.clone();
                async move {
                    let out = cx
                        .b
                        .enqueue(&cx.q, vec![NewItem::new(key).dedup_key(key).unique_for(hold)])
                        .await
                        .or_fail(cx.rule, "enqueue")?;
                    out.first()
                        .copied()
                        .ok_or_else(|| cx.fail("enqueue returned no result"))
                }
            };
            // A long hold, so the check never races it on a real clock:
            // after an `ack`, and after an `ack_many` (the worker's ack).
            let long = Duration::from_secs(600);
            let mut held = Vec::new();
            for (key, batched) in [("long", false), ("batched", true)] {
                let first = enq(key, long).await?;
                held.push((key, first.id));
                let lease = cx.claim_one(LONG).await?;
                let how = if batched { "ack_many" } else { "ack" };
                if batched {
                    let acked = cx.b.ack_many(&[lease.key]).await.or_fail(cx.rule, how)?;
                    ensure!(
                        matches!(acked.as_slice(), [Ok(())]),
                        cx.rule,
                        "ack_many of a held lease answered {acked:?}"
                    );
                } else {
                    cx.b.ack(&lease.key).await.or_fail(cx.rule, how)?;
                }
                let e = enq(key, long).await?;
                ensure!(
                    e.deduplicated && e.id == first.id,
                    cx.rule,
                    "an enqueue right after the {how} of a unique-for item answered {e:?}, expected the acked id {} deduplicated",
                    first.id
                );
                cx.expect_stats([0, 0, 0, 0], "after an enqueue of a held key").await?;
            }
            // A hold is its own queue's: the key is free in another queue.
            let elsewhere = cx.own("elsewhere")?;
            let there = cx
                .b
                .enqueue(&elsewhere, vec![NewItem::new("long").dedup_key("long").unique_for(long)])
                .await;
            let _ = cx.clean(&elsewhere).await;
            let there = there.or_fail(cx.rule, "enqueue into another queue")?;
            ensure!(
                there.len() == 1 && !there[0].deduplicated,
                cx.rule,
                "an enqueue into another queue with a key held in this one answered {there:?}; expected a new item (a hold keeps its key in its own queue only)"
            );
            // Each ack added its own hold and took none of the others.
            for key in ["long", "batched"] {
                let e = enq(key, long).await?;
                ensure!(
                    e.deduplicated,
                    cx.rule,
                    "after the acks of both unique-for items the key {key:?} was free: {e:?} \
                     (an ack dropped a hold that had not run out)"
                );
            }
            // Holds that ran out are replaced by the next holder's ack, also
            // beyond the few an ack may clear in passing: many keys' holds
            // run out, then their next holders, acked, hold every key again
            // under the new ids.
            let n = 20;
            let many = |hold: Duration| {
                (0..n)
                    .map(|i| {
                        let key = format!("many-{i}");
                        NewItem::new(key.clone()).dedup_key(key).unique_for(hold)
                    })
                    .collect::<Vec<_>>()
            };
            let ack_all = |leases: Vec<leaseq_core::Lease>| {
                let cx = cx.clone();
                async move {
                    ensure!(
                        leases.len() == n,
                        cx.rule,
                        "claimed {} of {n} items",
                        leases.len()
                    );
                    let keys: Vec<_> = leases.into_iter().map(|l| l.key).collect();
                    let acked = cx.b.ack_many(&keys).await.or_fail(cx.rule, "ack_many")?;
                    ensure!(
                        acked.iter().all(Result::is_ok),
                        cx.rule,
                        "ack_many of held leases answered {acked:?}"
                    );
                    Ok::<_, crate::Violation>(())
                }
            };
            let ran_out = Duration::from_millis(300);
            cx.enqueue(many(ran_out)).await?;
            ack_all(cx.claim(n as u32, LONG).await?).await?;
            let acked_by = cx.now().await?;
            cx.wait_past(acked_by.saturating_add(ran_out)).await?;
            let next =
                cx.b.enqueue(&cx.q, many(long))
                    .await
                    .or_fail(cx.rule, "enqueue")?;
            ensure!(
                next.iter().all(|e| !e.deduplicated),
                cx.rule,
                "after their holds passed, keys were still held: {next:?}"
            );
            ack_all(cx.claim(n as u32, LONG).await?).await?;
            let again =
                cx.b.enqueue(&cx.q, many(long))
                    .await
                    .or_fail(cx.rule, "enqueue")?;
            for (i, (e, first)) in again.iter().zip(&next).enumerate() {
                ensure!(
                    e.deduplicated && e.id == first.id,
                    cx.rule,
                    "key many-{i}, held by the ack of its second holder {} after the first \
                     hold ran out, answered {e:?} (one of {n} keys whose holds ran out)",
                    first.id
                );
            }
            cx.expect_stats([0, 0, 0, 0], "after enqueues of keys held again")
                .await?;
            // A short hold: after it has passed on the backend's clock, the key is free.
            // A second: past it, a hold of 600 s taken as 600 ms has run out too.
            let hold = Duration::from_secs(1);
            let short = enq("short", hold).await?;
            let lease = cx.claim_one(LONG).await?;
            cx.b.ack(&lease.key).await.or_fail(cx.rule, "ack")?;
            let acked_by = cx.now().await?;
            if cx.tb.is_manual() {
                let e = enq("short", hold).await?;
                ensure!(
                    e.deduplicated && e.id == short.id,
                    cx.rule,
                    "within the hold the key was free: {e:?}"
                );
            }
            cx.wait_past(acked_by.saturating_add(hold)).await?;
            let e = enq("short", hold).await?;
            ensure!(
                !e.deduplicated && e.id != short.id,
                cx.rule,
                "after the hold passed the key was still held: {e:?}"
            );
            cx.expect_stats([1, 0, 0, 0], "after the hold passed").await?;
            // The long holds, taken before the short one, still hold.
            for (key, id) in held {
                let e = enq(key, long).await?;
                ensure!(
                    e.deduplicated && e.id == id,
                    cx.rule,
                    "an enqueue {hold:?} after the ack of an item held for {long:?} answered {e:?}, expected the acked id {id} deduplicated"
                );
            }
            cx.expect_stats([1, 0, 0, 0], "after enqueues of keys still held").await?;
            // A purge (an operator action) frees held keys.
            if cx.b.groups().admin.is_some() {
                cx.b.purge(&cx.q).await.or_fail(cx.rule, "purge")?;
                let e = enq("long", long).await?;
                ensure!(
                    !e.deduplicated,
                    cx.rule,
                    "after a purge the key of an acked unique-for item was still held: {e:?}"
                );
            }
            // Without a dedup key, unique_for is bad input.
            let bad = cx
                .b
                .enqueue(&cx.q, vec![NewItem::new("x").unique_for(long)])
                .await;
            ensure!(
                matches!(bad, Err(leaseq_core::Error::InvalidInput { .. })),
                Rule::Contract("enqueue"),
                "unique_for without a dedup key answered {bad:?}, expected InvalidInput"
            );
            Ok(())
        },
    )
    .await
}
