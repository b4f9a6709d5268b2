//! The Control group: cancel ends a waiting item at once and a leased one
//! when its lease ends, whatever the lease reports; pause holds every claim
//! that starts after it returned; snooze spends no attempt; run now moves a
//! waiting item to Ready; progress is fenced and belongs to one lease. Each
//! race (cancel against claim, ack, reap and another cancel; pause against
//! claims) settles each item exactly once.
//!
//! For backends that offer [`leaseq_core::Control`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{
    BackendExt, Bytes, Cancelled, Error, ItemId, ItemState, Lease, LeaseKey, LeaseToken, LeaseTtl,
    NewItem, Order, Released,
};

use crate::cx::{expect_lost, run, Cx, Needs, LONG, SHORT};
use crate::groupwise::Groupwise as _;
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

const CANCEL: Rule = Rule::Contract("cancel");
const PAUSE: Rule = Rule::Contract("pause");
const SNOOZE: Rule = Rule::Contract("snooze");
const RUN_NOW: Rule = Rule::Contract("run_now");
const PROGRESS: Rule = Rule::Contract("progress");

/// Items raced per round in the race checks.
const RACED: usize = 60;

/// Cancels `id`: the answer, or `None` for `NotFound`; any other error
/// fails the check.
async fn cancel(cx: &Cx, id: ItemId) -> Result<Option<Cancelled>, Violation> {
    match cx.b.cancel(&cx.q, id).await {
        Ok(c) => Ok(Some(c)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(cx.fail(format!("cancel({id}) failed: {e}"))),
    }
}

/// A Ready, a Scheduled and a Dead item are each cancelled at once: the
/// answer names the state they were in, they are gone from `item`, stats
/// and claims, a second cancel is `NotFound`, and a dedup key they held is
/// free. Their neighbours keep their states. Unknown ids are `NotFound`.
pub async fn cancel_ends_waiting_items_at_once(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "cancel_ends_waiting_items_at_once", CANCEL, Needs::CONTROL, |cx| async move {
        let caps = cx.b.capabilities();
        let dead = cx.enqueue(vec![NewItem::new("dead").max_attempts(1)]).await?[0];
        let lease = cx.claim_one(LONG).await?;
        cx.b.fail(&lease.key, "dead on purpose").await.or_fail(CANCEL, "fail")?;
        let mut ready = NewItem::new("ready");
        if caps.dedup {
            ready = ready.dedup_key("cancel-key");
        }
        let ids = cx.enqueue(vec![ready, NewItem::new("kept")]).await?;
        let (ready, kept) = (ids[0], ids[1]);
        let mut expect = vec![(dead, ItemState::Dead), (ready, ItemState::Ready)];
        if caps.delays {
            let later = cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?[0];
            expect.push((later, ItemState::Scheduled));
        }
        for &(id, was) in &expect {
            let got = cancel(&cx, id).await?;
            ensure!(
                got == Some(Cancelled::Now { was }),
                CANCEL,
                "cancel of the {was:?} item {id} answered {got:?}; expected Now {{ was: {was:?} }}"
            );
            let again = cancel(&cx, id).await?;
            ensure!(again.is_none(), CANCEL, "a second cancel of item {id} answered {again:?}; expected NotFound");
            ensure!(cx.item(id).await?.is_none(), CANCEL, "item {id} is still there after its cancel");
        }
        cx.expect_stats([1, 0, 0, 0], "after cancelling every item but one").await?;
        if caps.dedup {
            let out = cx
                .b
                .enqueue(&cx.q, vec![NewItem::new("again").dedup_key("cancel-key")])
                .await
                .or_fail(CANCEL, "enqueue")?;
            ensure!(
                !out[0].deduplicated,
                CANCEL,
                "the dedup key of a cancelled item is still held by {}",
                out[0].id
            );
        }
        let claimed = cx.drain(LONG, 10).await?;
        let got: Vec<ItemId> = claimed.iter().map(Lease::id).collect();
        ensure!(got.first() == Some(&kept), CANCEL, "after the cancels a drain returned {got:?}; expected {kept} first and no cancelled item");
        let unknown = cancel(&cx, ItemId::new(u64::MAX / 2)).await?;
        ensure!(unknown.is_none(), CANCEL, "cancel of an id never handed out answered {unknown:?}");
        Ok(())
    })
    .await
}

/// How a cancel-requested lease ends, one item each.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Ack,
    AckMany,
    Release,
    GiveBack,
    Fail,
    Snooze,
    Reap,
}

/// A leased item is marked, not ended: cancel answers `Requested` (again
/// on a second call), `item` shows the request, the lease stays valid and
/// `extend` answers `cancel_requested`. Whatever then ends the lease (ack,
/// ack_many, release, give-back, fail, snooze, or expiry and a reap), the
/// item is gone and never claimed again; release and snooze answer
/// `Released::Cancelled` and the reap counts it as cancelled. An item
/// nobody cancelled, released beside them, comes back as usual.
pub async fn cancelled_lease_ends_whatever_it_reports(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "cancelled_lease_ends_whatever_it_reports", CANCEL, Needs::CONTROL, |cx| async move {
        let endings = [
            Ending::Ack,
            Ending::AckMany,
            Ending::Release,
            Ending::GiveBack,
            Ending::Fail,
            Ending::Snooze,
            Ending::Reap,
        ];
        let ids = cx.push_n(endings.len() + 1).await?;
        let mut leases = cx.claim(ids.len() as u32, LONG).await?;
        ensure!(leases.len() == ids.len(), CANCEL, "claimed {} of {}", leases.len(), ids.len());
        leases.sort_by_key(Lease::id);
        // The last lease in id order is nobody's to cancel (behind a
        // sharding layer ids do not follow the push order).
        let bystander = leases[endings.len()].id();
        let ttl = LeaseTtl::new(LONG).or_fail(CANCEL, "ttl")?;
        for lease in &leases[..endings.len()] {
            let id = lease.id();
            for round in ["first", "second"] {
                let got = cancel(&cx, id).await?;
                ensure!(got == Some(Cancelled::Requested), CANCEL, "the {round} cancel of the leased item {id} answered {got:?}; expected Requested");
            }
            let info = cx.must_item(id).await?;
            ensure!(
                info.state == ItemState::Leased && info.cancel_requested,
                CANCEL,
                "item {id} after a cancel request shows {:?} with cancel_requested {}; expected Leased and true",
                info.state,
                info.cancel_requested
            );
            let beat = cx.b.extend(&lease.key, ttl).await.or_fail(CANCEL, "extend of a cancel-requested lease")?;
            ensure!(beat.cancel_requested, CANCEL, "extend of the cancel-requested lease on item {id} did not say so");
        }
        let quiet = cx.b.extend(&leases[endings.len()].key, ttl).await.or_fail(CANCEL, "extend")?;
        ensure!(!quiet.cancel_requested, CANCEL, "extend of a lease nobody cancelled answered cancel_requested");
        let mut reaped = None;
        for (lease, ending) in leases.iter().zip(endings) {
            let key = &lease.key;
            let what = format!("{ending:?} of cancel-requested item {}", key.id);
            match ending {
                Ending::Ack => cx.b.ack(key).await.or_fail(CANCEL, &what)?,
                Ending::AckMany => {
                    let out = cx.b.ack_many(std::slice::from_ref(key)).await.or_fail(CANCEL, &what)?;
                    ensure!(matches!(out.as_slice(), [Ok(())]), CANCEL, "{what} answered {out:?}");
                }
                Ending::Release | Ending::Snooze => {
                    let got = match ending {
                        Ending::Release => cx.b.release(key, Duration::ZERO).await,
                        _ => cx.b.snooze(key, Duration::ZERO).await,
                    }
                    .or_fail(CANCEL, &what)?;
                    ensure!(got == Released::Cancelled, CANCEL, "{what} answered {got:?}; expected Released::Cancelled");
                }
                Ending::GiveBack => cx.b.give_back(key).await.or_fail(CANCEL, &what)?,
                Ending::Fail => cx.b.fail(key, "stopped").await.or_fail(CANCEL, &what)?,
                Ending::Reap => {
                    let short = LeaseTtl::new(SHORT).or_fail(CANCEL, "ttl")?;
                    let until = cx.b.extend(key, short).await.or_fail(CANCEL, "extend")?.expires_at;
                    cx.wait_past(until).await?;
                    reaped = Some(cx.reap_all().await?);
                }
            }
            ensure!(cx.item(key.id).await?.is_none(), CANCEL, "after the {what}, the item is still there");
        }
        let report = reaped.unwrap_or_default();
        ensure!(
            report.cancelled == 1 && report.requeued == 0 && report.dead == 0,
            CANCEL,
            "the reap of one expired cancel-requested lease reported {report:?}; expected cancelled 1"
        );
        cx.b.release(&leases[endings.len()].key, Duration::ZERO).await.or_fail(CANCEL, "release")?;
        let back = cx.drain(LONG, 10).await?;
        let got: Vec<ItemId> = back.iter().map(Lease::id).collect();
        ensure!(got == vec![bystander], CANCEL, "after the endings a drain returned {got:?}; expected only the item nobody cancelled, {bystander}");
        Ok(())
    })
    .await
}

/// Cancels race claims: for each item either the cancel answers `Now` and
/// no claim ever returns it, or a claim leases it and the cancel answers
/// `Requested`; a lease of a cancel-requested item that is released ends
/// it. Nothing is left afterwards.
pub async fn cancel_races_claims(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "cancel_races_claims", CANCEL, Needs::CONTROL, |cx| async move {
        for round in 0..3 * scale() {
            let ids = cx.push_n(RACED).await?;
            let claimers = 2;
            let results = cx
                .at_once(claimers + 1, move |cx, i| {
                    let ids = ids.clone();
                    async move {
                        if i == claimers {
                            let mut answers = BTreeMap::new();
                            for id in ids {
                                answers.insert(id, cancel(&cx, id).await?);
                            }
                            Ok::<_, Violation>((answers, Vec::new()))
                        } else {
                            let mut got = Vec::new();
                            for _ in 0..RACED {
                                got.extend(cx.claim(3, LONG).await?);
                                tokio::task::yield_now().await;
                            }
                            Ok((BTreeMap::new(), got))
                        }
                    }
                })
                .await?;
            let mut answers = BTreeMap::new();
            let mut leased: Vec<Lease> = Vec::new();
            for r in results {
                let (a, l) = r?;
                answers.extend(a);
                leased.extend(l);
            }
            leased.extend(cx.drain(LONG, RACED).await?);
            for lease in &leased {
                let answer = answers.get(&lease.id()).copied().flatten();
                ensure!(
                    answer == Some(Cancelled::Requested),
                    CANCEL,
                    "round {round}: item {} was claimed, but its cancel answered {answer:?}; \
                     a cancel racing a claim answers Requested when the claim won and the item is \
                     never delivered after Now",
                    lease.id()
                );
                let released = cx.b.release(&lease.key, Duration::ZERO).await.or_fail(CANCEL, "release")?;
                ensure!(released == Released::Cancelled, CANCEL, "round {round}: release of the cancel-requested item {} answered {released:?}", lease.id());
            }
            for (id, answer) in &answers {
                ensure!(answer.is_some(), CANCEL, "round {round}: cancel of the unfinished item {id} answered NotFound");
            }
            let s = cx.stats().await?;
            ensure!(s.total() == 0, CANCEL, "round {round}: after every item was cancelled, stats show {s:?}");
        }
        Ok(())
    })
    .await
}

/// Cancel-requested leases expire while their acks race reapers: every
/// item ends exactly once. Half the acks race two reapers, the other half
/// come after the reapers finished (a worker slower than its lease): those
/// leases are lost, and the reapers end their items Cancelled, each once,
/// never requeued.
pub async fn cancel_races_ack_and_reap(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "cancel_races_ack_and_reap", CANCEL, Needs::CONTROL, |cx| async move {
        for round in 0..3 * scale() {
            cx.push_n(RACED).await?;
            let leases = cx.claim(RACED as u32, SHORT).await?;
            ensure!(leases.len() == RACED, CANCEL, "round {round}: claimed {} of {RACED}", leases.len());
            for lease in &leases {
                let got = cancel(&cx, lease.id()).await?;
                ensure!(got == Some(Cancelled::Requested), CANCEL, "round {round}: cancel of leased item {} answered {got:?}", lease.id());
            }
            cx.expire(&leases).await?;
            let (mut early, mut late) = (Vec::new(), Vec::new());
            for (i, lease) in leases.into_iter().enumerate() {
                if i % 2 == 0 {
                    early.push(lease);
                } else {
                    late.push(lease);
                }
            }
            let early = Arc::new(early);
            let reapers = 2;
            let results = cx
                .at_once(reapers + 1, move |cx, i| {
                    let early = early.clone();
                    async move {
                        if i < reapers {
                            return cx.reap_all().await.map(|r| (r, 0u64));
                        }
                        let mut acked = 0u64;
                        for lease in early.iter() {
                            if cx.b.ack(&lease.key).await.is_ok() {
                                acked += 1;
                            }
                            tokio::task::yield_now().await;
                        }
                        Ok((leaseq_core::ReapReport::default(), acked))
                    }
                })
                .await?;
            let (mut reaped, mut acked) = (leaseq_core::ReapReport::default(), 0);
            for r in results {
                let (r, a) = r?;
                reaped.requeued += r.requeued;
                reaped.dead += r.dead;
                reaped.cancelled += r.cancelled;
                acked += a;
            }
            for lease in &late {
                expect_lost(cx.b.ack(&lease.key).await, "an ack after reapers took the expired lease")?;
            }
            ensure!(
                reaped.requeued == 0 && reaped.dead == 0 && reaped.cancelled + acked == RACED as u64,
                CANCEL,
                "round {round}: of {RACED} expired cancel-requested leases, {acked} were acked and \
                 the reapers reported {reaped:?}; each should end once, by its ack or as \
                 cancelled by a reap, none requeued"
            );
            let s = cx.stats().await?;
            ensure!(s.total() == 0, CANCEL, "round {round}: after the race stats show {s:?}; every item should be gone");
        }
        Ok(())
    })
    .await
}

/// Racing cancels of one item: of a waiting item exactly one answers `Now`
/// and the others `NotFound`; of a leased item every one answers
/// `Requested`.
pub async fn racing_cancels_answer_once(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "racing_cancels_answer_once", CANCEL, Needs::CONTROL, |cx| async move {
        for round in 0..10 * scale() {
            let id = cx.push_n(1).await?[0];
            let answers = cx.at_once(4, move |cx, _| async move { cancel(&cx, id).await }).await?;
            let answers: Vec<_> = answers.into_iter().collect::<Result<_, _>>()?;
            let now = answers.iter().filter(|a| matches!(a, Some(Cancelled::Now { .. }))).count();
            let missing = answers.iter().filter(|a| a.is_none()).count();
            ensure!(now == 1 && missing == 3, CANCEL, "round {round}: four racing cancels of one Ready item answered {answers:?}; expected one Now and three NotFound");
            let id = cx.push_n(1).await?[0];
            let lease = cx.claim_one(LONG).await?;
            let answers = cx.at_once(4, move |cx, _| async move { cancel(&cx, id).await }).await?;
            for a in answers {
                let a = a?;
                ensure!(a == Some(Cancelled::Requested), CANCEL, "round {round}: a racing cancel of the leased item {id} answered {a:?}");
            }
            cx.b.ack(&lease.key).await.or_fail(CANCEL, "ack")?;
            ensure!(cx.item(id).await?.is_none(), CANCEL, "round {round}: the acked cancel-requested item {id} is still there");
        }
        Ok(())
    })
    .await
}

/// How long a cancel signal may take to arrive: generous, since the check
/// asks whether it comes at all, not how fast.
const SIGNAL_WAIT: Duration = Duration::from_secs(5);

/// A cancel request reaches the worker that holds the lease through the
/// cancel signal, not only at its next heartbeat: a subscription fires
/// after a cancel answered `Requested`, and again for the next one.
pub async fn cancel_signal_reaches_the_holder(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "cancel_signal_reaches_the_holder", CANCEL, Needs::CONTROL, |cx| async move {
        let control = cx.b.control().or_fail(CANCEL, "control")?;
        let mut signal = control.cancel_signal(&cx.q).await.or_fail(CANCEL, "cancel_signal")?;
        let ids = cx.push_n(2).await?;
        let leases = cx.claim(2, LONG).await?;
        ensure!(leases.len() == 2, CANCEL, "claimed {} of 2", leases.len());
        for (round, id) in ids.into_iter().enumerate() {
            let got = cancel(&cx, id).await?;
            ensure!(got == Some(Cancelled::Requested), CANCEL, "cancel of the leased item {id} answered {got:?}");
            let fired = tokio::time::timeout(SIGNAL_WAIT, signal.changed()).await.is_ok();
            ensure!(fired, CANCEL, "cancel {round}: the cancel signal did not fire within {SIGNAL_WAIT:?} of a cancel request on item {id}; a worker would learn of it only at its next heartbeat");
        }
        for lease in &leases {
            cx.b.ack(&lease.key).await.or_fail(CANCEL, "ack")?;
        }
        Ok(())
    })
    .await
}

/// A pause holds every claim of every handle until the resume: claims
/// answer no leases and `paused`; `is_paused` and stats say so; enqueues
/// go on; a lease held before the pause still extends and acks. Pausing
/// twice changes nothing. After the resume claims lease again, in order.
pub async fn pause_holds_every_claim(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "pause_holds_every_claim", PAUSE, Needs::CONTROL, |cx| async move {
        let ids = cx.push_n(2).await?;
        let held = cx.claim_one(LONG).await?;
        ensure!(!cx.b.is_paused(&cx.q).await.or_fail(PAUSE, "is_paused")?, PAUSE, "a queue never paused says it is paused");
        for _ in 0..2 {
            cx.b.pause(&cx.q).await.or_fail(PAUSE, "pause")?;
        }
        ensure!(cx.b.is_paused(&cx.q).await.or_fail(PAUSE, "is_paused")?, PAUSE, "is_paused is false after pause returned");
        let spec = leaseq_core::ClaimSpec::new(10, LONG).or_fail(PAUSE, "spec")?;
        let claimed = cx.b.claim(&cx.q, spec).await.or_fail(PAUSE, "claim")?;
        ensure!(
            claimed.leases.is_empty() && claimed.paused,
            PAUSE,
            "a claim on the paused queue leased {} items (paused flag {}); expected none, flagged paused",
            claimed.leases.len(),
            claimed.paused
        );
        cx.push_n(3).await?;
        let s = cx.stats().await?;
        ensure!(s.paused && s.ready == 4 && s.leased == 1, PAUSE, "stats of the paused queue after more enqueues are {s:?}; expected paused, 4 ready, 1 leased");
        let ttl = LeaseTtl::new(LONG).or_fail(PAUSE, "ttl")?;
        cx.b.extend(&held.key, ttl).await.or_fail(PAUSE, "extend of a lease held before the pause")?;
        cx.b.ack(&held.key).await.or_fail(PAUSE, "ack of a lease held before the pause")?;
        ensure!(cx.claim(10, LONG).await?.is_empty(), PAUSE, "a claim leased items of the paused queue");
        cx.b.resume(&cx.q).await.or_fail(PAUSE, "resume")?;
        let s = cx.stats().await?;
        ensure!(!s.paused, PAUSE, "stats still say paused after the resume");
        let back = cx.drain(LONG, 10).await?;
        // Claim order holds over the whole queue only with a global order.
        let global = cx.b.capabilities().order == Order::Global;
        ensure!(back.len() == 4 && (!global || back[0].id() == ids[1]), PAUSE, "after the resume a drain returned {:?}; expected the 4 waiting items, {} first", back.iter().map(Lease::id).collect::<Vec<_>>(), ids[1]);
        for l in back {
            cx.b.ack(&l.key).await.or_fail(PAUSE, "ack")?;
        }
        Ok(())
    })
    .await
}

/// Claimers run while the queue is paused: no claim that starts after the
/// pause returned leases an item, and none is lost: after the resume every
/// item is claimed once.
pub async fn pause_races_claims(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "pause_races_claims", PAUSE, Needs::CONTROL, |cx| async move {
        for round in 0..3 * scale() {
            let ids = cx.push_n(RACED * 2).await?;
            let paused = Arc::new(AtomicBool::new(false));
            let flag = paused.clone();
            let results = cx
                .at_once(3, move |cx, i| {
                    let paused = flag.clone();
                    async move {
                        if i == 0 {
                            tokio::task::yield_now().await;
                            cx.b.pause(&cx.q).await.or_fail(PAUSE, "pause")?;
                            paused.store(true, Ordering::SeqCst);
                            return Ok::<_, Violation>(Vec::new());
                        }
                        let mut got = Vec::new();
                        for _ in 0..RACED {
                            let after_pause = paused.load(Ordering::SeqCst);
                            let leases = cx.claim(1, LONG).await?;
                            ensure!(
                                !after_pause || leases.is_empty(),
                                PAUSE,
                                "round {round}: a claim that started after pause returned leased item {}",
                                leases[0].id()
                            );
                            got.extend(leases);
                            tokio::task::yield_now().await;
                        }
                        Ok(got)
                    }
                })
                .await?;
            let mut seen = Vec::new();
            for r in results {
                seen.extend(r?);
            }
            ensure!(paused.load(Ordering::SeqCst), PAUSE, "the pause did not return");
            cx.b.resume(&cx.q).await.or_fail(PAUSE, "resume")?;
            seen.extend(cx.drain(LONG, ids.len()).await?);
            let mut got: Vec<ItemId> = seen.iter().map(Lease::id).collect();
            got.sort();
            let mut ids = ids;
            ids.sort();
            ensure!(got == ids, PAUSE, "round {round}: across the pause and resume, claims returned {} leases for {} items (each should be claimed once)", got.len(), ids.len());
            for l in seen {
                cx.b.ack(&l.key).await.or_fail(PAUSE, "ack")?;
            }
        }
        Ok(())
    })
    .await
}

/// Snooze puts a leased item back to wait without spending an attempt,
/// also on its last attempt (never to Dead); it is fenced; a zero delay
/// makes it Ready.
pub async fn snooze_spends_no_attempt(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "snooze_spends_no_attempt", SNOOZE, Needs::CONTROL.and(Needs::DELAYS), |cx| async move {
        let id = cx.enqueue(vec![NewItem::new("snoozy").max_attempts(1)]).await?[0];
        let lease = cx.claim_one(LONG).await?;
        let stale = LeaseKey { token: LeaseToken::random(), ..lease.key.clone() };
        expect_lost(cx.b.snooze(&stale, Duration::ZERO).await, "snooze with a forged token")?;
        let before = cx.now().await?;
        let got = cx.b.snooze(&lease.key, LONG).await.or_fail(SNOOZE, "snooze")?;
        ensure!(got == Released::Scheduled, SNOOZE, "snooze of the item on its last attempt answered {got:?}; expected Scheduled");
        let info = cx.must_item(id).await?;
        ensure!(
            info.state == ItemState::Scheduled && info.attempts == 0,
            SNOOZE,
            "after a snooze item {id} is {:?} with {} attempts; expected Scheduled with 0 (no attempt spent)",
            info.state,
            info.attempts
        );
        let due = cx.due_of(id).await?;
        ensure!(due >= before.saturating_add(LONG), SNOOZE, "the snoozed item is due at {due}, before now + delay ({})", before.saturating_add(LONG));
        expect_lost(cx.b.snooze(&lease.key, Duration::ZERO).await, "a second snooze with the spent token")?;
        ensure!(cx.b.run_now(&cx.q, id).await.or_fail(SNOOZE, "run_now")?, SNOOZE, "run_now of the snoozed item did not move it");
        let again = cx.claim_one(LONG).await?;
        ensure!(again.attempts == 1, SNOOZE, "the claim after a snooze counts attempt {}; expected 1", again.attempts);
        let got = cx.b.snooze(&again.key, Duration::ZERO).await.or_fail(SNOOZE, "snooze")?;
        ensure!(got == Released::Ready, SNOOZE, "snooze with no delay answered {got:?}; expected Ready");
        let last = cx.claim_one(LONG).await?;
        cx.b.ack(&last.key).await.or_fail(SNOOZE, "ack")?;
        Ok(())
    })
    .await
}

/// Run now moves a waiting Scheduled item to Ready at once, in its place in
/// claim order; other states answer false and change nothing; unknown ids
/// are `NotFound`; run_all_now moves at most `limit`, earliest due first.
pub async fn run_now_moves_waiting_items(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "run_now_moves_waiting_items",
        RUN_NOW,
        Needs::CONTROL.and(Needs::DELAYS),
        |cx| async move {
            let ids = cx
                .enqueue(vec![
                    NewItem::new("a").delay(LONG * 3),
                    NewItem::new("b").delay(LONG * 2),
                    NewItem::new("c").delay(LONG),
                    NewItem::new("ready"),
                ])
                .await?;
            ensure!(
                cx.b.run_now(&cx.q, ids[0])
                    .await
                    .or_fail(RUN_NOW, "run_now")?,
                RUN_NOW,
                "run_now of a Scheduled item answered false"
            );
            ensure!(
                !cx.b
                    .run_now(&cx.q, ids[0])
                    .await
                    .or_fail(RUN_NOW, "run_now")?,
                RUN_NOW,
                "run_now of a Ready item answered true"
            );
            ensure!(
                cx.must_item(ids[0]).await?.state == ItemState::Ready,
                RUN_NOW,
                "the item run now is not Ready"
            );
            match cx.b.run_now(&cx.q, ItemId::new(u64::MAX / 2)).await {
                Err(Error::NotFound { .. }) => {}
                other => {
                    return Err(cx.fail(format!(
                        "run_now of an unknown id answered {other:?}; expected NotFound"
                    )))
                }
            }
            // Due order and claim order hold over the whole queue only with
            // a global order; per shard, only the counts are checked.
            let global = cx.b.capabilities().order == Order::Global;
            let moved = cx.b.run_all_now(&cx.q, 1).await.or_fail(RUN_NOW, "run_all_now")?;
            ensure!(moved == 1, RUN_NOW, "run_all_now with limit 1 moved {moved}");
            let states = [cx.must_item(ids[1]).await?.state, cx.must_item(ids[2]).await?.state];
            ensure!(
                !global || states == [ItemState::Scheduled, ItemState::Ready],
                RUN_NOW,
                "after run_all_now with limit 1 the items due second and first are {states:?}; expected only the earliest due moved"
            );
            let moved = cx.b.run_all_now(&cx.q, 100).await.or_fail(RUN_NOW, "run_all_now")?;
            ensure!(moved == 1, RUN_NOW, "the second run_all_now moved {moved}; expected the one item left");
            let mut order: Vec<ItemId> = cx.drain(LONG, 4).await?.iter().map(Lease::id).collect();
            let mut want = ids.clone();
            if !global {
                order.sort();
                want.sort();
            }
            ensure!(order == want, RUN_NOW, "items run now are claimed in order {order:?}; expected enqueue order {want:?}");
            Ok(())
        },
    )
    .await
}

/// Progress is fenced and belongs to one lease: the holder's value shows
/// in `item`; a forged token gets `LeaseLost` and writes nothing; an
/// oversized value is `InvalidInput`; after a release the item shows none,
/// and its next lease starts with none.
pub async fn progress_is_fenced_and_per_lease(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "progress_is_fenced_and_per_lease",
        PROGRESS,
        Needs::CONTROL,
        |cx| async move {
            let id = cx.push_n(1).await?[0];
            let lease = cx.claim_one(LONG).await?;
            cx.b.progress(&lease.key, Bytes::from_static(b"40%"))
                .await
                .or_fail(PROGRESS, "progress")?;
            cx.b.progress(&lease.key, Bytes::from_static(b"50%"))
                .await
                .or_fail(PROGRESS, "progress")?;
            let shown = cx.must_item(id).await?.progress;
            ensure!(
                shown.as_deref() == Some(&b"50%"[..]),
                PROGRESS,
                "item shows progress {shown:?}; expected the last value written, 50%"
            );
            let forged = LeaseKey {
                token: LeaseToken::random(),
                ..lease.key.clone()
            };
            expect_lost(
                cx.b.progress(&forged, Bytes::from_static(b"99%")).await,
                "progress with a forged token",
            )?;
            let big = Bytes::from(vec![b'x'; leaseq_core::limits::MAX_PROGRESS_LEN + 1]);
            match cx.b.progress(&lease.key, big).await {
                Err(Error::InvalidInput { .. }) => {}
                other => {
                    return Err(cx.fail(format!(
                        "progress over MAX_PROGRESS_LEN answered {other:?}; expected InvalidInput"
                    )))
                }
            }
            let shown = cx.must_item(id).await?.progress;
            ensure!(
                shown.as_deref() == Some(&b"50%"[..]),
                PROGRESS,
                "after refused writes item shows progress {shown:?}; expected 50%"
            );
            cx.b.release(&lease.key, Duration::ZERO)
                .await
                .or_fail(PROGRESS, "release")?;
            let shown = cx.must_item(id).await?.progress;
            ensure!(
                shown.is_none(),
                PROGRESS,
                "a Ready item shows the progress {shown:?} of a lease that ended"
            );
            expect_lost(
                cx.b.progress(&lease.key, Bytes::from_static(b"late")).await,
                "progress of a released lease",
            )?;
            let next = cx.claim_one(LONG).await?;
            let shown = cx.must_item(id).await?.progress;
            ensure!(
                shown.is_none(),
                PROGRESS,
                "a new lease shows the progress {shown:?} of the one before"
            );
            cx.b.ack(&next.key).await.or_fail(PROGRESS, "ack")?;
            Ok(())
        },
    )
    .await
}

/// How [`resent_claim_starts_without_progress`] ends the first lease.
#[derive(Debug, Clone, Copy)]
enum FirstEnd {
    /// Expired, then reaped back to Ready.
    Reap,
    /// Released to Ready at once.
    Release,
}

/// Claims the only item with a spec, records progress under the lease,
/// ends the lease by `end`, and claims again with the same spec sent again
/// ([`leaseq_core::ClaimSpec::duplicate`], a worker resending a claim whose
/// reply it lost): the new lease, under the same token, must show no
/// progress.
async fn resent_claim_starts_without_progress(cx: &Cx, end: FirstEnd) -> Result<(), Violation> {
    let id = cx
        .enqueue(vec![NewItem::new("resent").max_attempts(3)])
        .await?[0];
    // A lease the check lets run out only when a reaper is to take it.
    let ttl = match end {
        FirstEnd::Reap => SHORT,
        FirstEnd::Release => LONG,
    };
    let spec = leaseq_core::ClaimSpec::new(1, ttl).or_fail(PROGRESS, "spec")?;
    let first =
        cx.b.claim(&cx.q, spec.duplicate())
            .await
            .or_fail(PROGRESS, "claim")?
            .leases;
    let Some(first) = first.into_iter().next() else {
        return Err(cx.fail("a claim returned nothing while an item was claimable"));
    };
    ensure!(
        first.id() == id,
        PROGRESS,
        "claimed {} instead of {id}",
        first.id()
    );
    cx.b.progress(&first.key, Bytes::from_static(b"50%"))
        .await
        .or_fail(PROGRESS, "progress")?;
    let shown = cx.must_item(id).await?.progress;
    ensure!(
        shown.as_deref() == Some(&b"50%"[..]),
        PROGRESS,
        "item shows progress {shown:?}; expected 50%, written under its lease"
    );
    let how = match end {
        FirstEnd::Reap => {
            cx.expire(std::slice::from_ref(&first)).await?;
            let reaped = cx.reap_all().await?;
            ensure!(
                reaped.requeued == 1,
                PROGRESS,
                "the reap of the one expired lease requeued {}; expected 1",
                reaped.requeued
            );
            "reaped"
        }
        FirstEnd::Release => {
            cx.b.release(&first.key, Duration::ZERO)
                .await
                .or_fail(PROGRESS, "release")?;
            "released"
        }
    };
    let again =
        cx.b.claim(&cx.q, spec)
            .await
            .or_fail(PROGRESS, "the claim sent again")?
            .leases;
    let Some(second) = again.into_iter().next() else {
        return Err(cx.fail(format!(
            "the claim sent again after the lease was {how} leased nothing"
        )));
    };
    ensure!(
        second.id() == id,
        PROGRESS,
        "the claim sent again leased {} instead of {id}",
        second.id()
    );
    let shown = cx.must_item(id).await?.progress;
    let same = if second.key.token == first.key.token {
        "under the same token"
    } else {
        "under another token"
    };
    ensure!(
        shown.is_none(),
        PROGRESS,
        "a claim sent again after the lease was {how} leased item {id} {same}, and the new lease \
         shows the old one's progress {shown:?}; a lease starts with none"
    );
    Ok(())
}

/// A lease's progress ends with the lease when a reaper takes it: a claim
/// sent again after its reply was lost (the same spec, so the same token)
/// leases the requeued item under the reaped lease's token, and must not
/// show the reaped lease's progress as its own.
pub async fn progress_ends_with_its_lease_under_a_resent_claim(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run(
        factory,
        "progress_ends_with_its_lease_under_a_resent_claim",
        PROGRESS,
        Needs::CONTROL,
        |cx| async move { resent_claim_starts_without_progress(&cx, FirstEnd::Reap).await },
    )
    .await
}

/// As [`progress_ends_with_its_lease_under_a_resent_claim`], the first
/// lease ending by `release(0)`: the claim sent again leases the item
/// under the released lease's token, with no progress.
pub async fn progress_ends_with_a_released_lease_under_a_resent_claim(
    factory: &dyn BackendFactory,
) -> CheckResult {
    run(
        factory,
        "progress_ends_with_a_released_lease_under_a_resent_claim",
        PROGRESS,
        Needs::CONTROL,
        |cx| async move { resent_claim_starts_without_progress(&cx, FirstEnd::Release).await },
    )
    .await
}

/// A pause holds due Scheduled items too: an item whose delay falls due
/// while the queue is paused is counted Ready by stats but no claim leases
/// it (claims answer `paused`) until the resume, after which it is claimed
/// in its place. (A due Scheduled item is Ready to every caller, and no
/// claim that starts after the pause leases an item.)
pub async fn pause_holds_due_scheduled_items(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "pause_holds_due_scheduled_items",
        PAUSE,
        Needs::CONTROL.and(Needs::DELAYS),
        |cx| async move {
            let ids = cx
                .enqueue(vec![
                    NewItem::new("due while paused").delay(Duration::from_millis(300)),
                    NewItem::new("due while paused too").delay(Duration::from_millis(300)),
                ])
                .await?;
            cx.b.pause(&cx.q).await.or_fail(PAUSE, "pause")?;
            match (cx.tb.is_manual(), cx.hooks()) {
                (false, Some(h)) => {
                    h.make_due(&cx.q).await.or_fail(PAUSE, "make_due hook")?;
                }
                _ => {
                    let due = cx.due_of(ids[1]).await?;
                    cx.wait_past(due).await?;
                }
            }
            let spec = leaseq_core::ClaimSpec::new(10, LONG).or_fail(PAUSE, "spec")?;
            let claimed = cx.b.claim(&cx.q, spec).await.or_fail(PAUSE, "claim")?;
            let got: Vec<ItemId> = claimed.leases.iter().map(Lease::id).collect();
            ensure!(
                got.is_empty() && claimed.paused,
                PAUSE,
                "a claim on the paused queue leased {got:?} (paused flag {}), items whose delay \
                 fell due during the pause; expected none, flagged paused",
                claimed.paused
            );
            let s = cx.stats().await?;
            ensure!(
                s.paused && s.ready == 2 && s.scheduled == 0 && s.leased == 0,
                PAUSE,
                "stats of the paused queue with two due items are {s:?}; expected paused, 2 ready"
            );
            cx.b.resume(&cx.q).await.or_fail(PAUSE, "resume")?;
            let back = cx.drain(LONG, 10).await?;
            let mut got: Vec<ItemId> = back.iter().map(Lease::id).collect();
            got.sort();
            let mut want = ids.clone();
            want.sort();
            ensure!(
                got == want,
                PAUSE,
                "after the resume a drain returned {got:?}; expected the two due items {want:?}"
            );
            for l in back {
                cx.b.ack(&l.key).await.or_fail(PAUSE, "ack")?;
            }
            Ok(())
        },
    )
    .await
}

/// A leased item whose cancel was requested ends Cancelled, not acked,
/// whichever finishing call ends its lease: an `ack` or an `ack_many` of
/// it starts no unique-for hold, so its dedup key is free at once (as for
/// an item cancelled while waiting), while an item with the same setup
/// acked without a cancel keeps its key held.
pub async fn cancelled_lease_holds_no_key(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "cancelled_lease_holds_no_key",
        CANCEL,
        Needs::CONTROL.and(Needs::UNIQUE_FOR),
        |cx| async move {
            let keys = ["by ack", "by ack_many", "not cancelled"];
            let items = keys
                .iter()
                .map(|k| NewItem::new(*k).dedup_key(*k).unique_for(LONG))
                .collect();
            let ids = cx.enqueue(items).await?;
            let claimed = cx.claim(3, LONG).await?;
            // In the order of `ids` (a sharded backend's ids need not rise
            // with enqueue order).
            let leases: Vec<Lease> = ids
                .iter()
                .filter_map(|id| claimed.iter().find(|l| l.id() == *id).cloned())
                .collect();
            ensure!(
                leases.len() == 3 && claimed.len() == 3,
                CANCEL,
                "a claim of 3 leased {:?}; expected {ids:?}",
                claimed.iter().map(Lease::id).collect::<Vec<_>>()
            );
            for id in &ids[..2] {
                let c = cancel(&cx, *id).await?;
                ensure!(
                    c == Some(Cancelled::Requested),
                    CANCEL,
                    "cancel of leased item {id} answered {c:?}; expected Requested"
                );
            }
            cx.b.ack(&leases[0].key).await.or_fail(CANCEL, "ack")?;
            let res =
                cx.b.ack_many(&[leases[1].key.clone()])
                    .await
                    .or_fail(CANCEL, "ack_many")?;
            ensure!(
                matches!(res.as_slice(), [Ok(())]),
                CANCEL,
                "ack_many of a cancel-requested lease answered {res:?}"
            );
            cx.b.ack(&leases[2].key).await.or_fail(CANCEL, "ack")?;
            for (k, id) in keys.iter().zip(&ids) {
                ensure!(
                    cx.item(*id).await?.is_none(),
                    CANCEL,
                    "item {id} ({k}) is still there after its lease ended"
                );
            }
            let again =
                cx.b.enqueue(
                    &cx.q,
                    keys.iter()
                        .map(|k| NewItem::new(*k).dedup_key(*k))
                        .collect(),
                )
                .await
                .or_fail(CANCEL, "enqueue with the keys again")?;
            for (k, e) in keys[..2].iter().zip(&again) {
                ensure!(
                    !e.deduplicated,
                    CANCEL,
                    "the key of the item cancelled while leased and ended {k} is still held \
                     (enqueue answered {e:?}); a cancelled item starts no unique-for hold"
                );
            }
            ensure!(
                again[2].deduplicated && again[2].id == ids[2],
                CANCEL,
                "the key of the item acked without a cancel is not held: enqueue answered {:?}; \
                 expected the acked item {}",
                again[2],
                ids[2]
            );
            for l in cx.drain(LONG, 10).await? {
                cx.b.ack(&l.key).await.or_fail(CANCEL, "ack")?;
            }
            Ok(())
        },
    )
    .await
}
