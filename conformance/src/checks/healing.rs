//! INV-6 self-healing (a dangling index entry is removed on contact and
//! never fails or stalls a claim) and INV-1 single home, via test hooks.

use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::testing::TestHooks;
use leaseq_core::{ItemId, ItemState, NewItem};

use crate::cx::{run, Cx, Needs, Rng, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

/// An id no backend in a test has handed out (ids are small counters).
fn ghost_id(rng: &mut Rng) -> ItemId {
    ItemId::new((1 << 40) + rng.below(1 << 20))
}

/// How many ids [`plant_ghost`] tries before it gives up.
const GHOST_TRIES: usize = 16;

/// Plants a dangling Ready entry for a [`ghost_id`] no item has, and
/// returns it. A store whose ids are shared by every queue, and whose
/// counter a planted id moves on (a SQL sequence set past it), hands the
/// ids after a ghost to whatever check enqueues next: a random pick can
/// meet one, and the hook refuses it (`InvalidInput`: the item exists).
/// Another pick is tried then, up to [`GHOST_TRIES`]; any other error fails
/// the check.
async fn plant_ghost(cx: &Cx, rng: &mut Rng) -> Result<ItemId, Violation> {
    let hooks = hooks(cx)?;
    let mut taken = Vec::new();
    while taken.len() < GHOST_TRIES {
        let ghost = ghost_id(rng);
        match hooks.plant_dangling_ready(&cx.q, ghost).await {
            Ok(()) => return Ok(ghost),
            Err(leaseq_core::Error::InvalidInput { .. }) => taken.push(ghost),
            Err(e) => return Err(cx.fail(format!("plant_dangling_ready({ghost}) failed: {e}"))),
        }
    }
    Err(cx.fail(format!(
        "plant_dangling_ready refused {GHOST_TRIES} random ids as taken ({taken:?}); \
         cannot plant a dangling entry"
    )))
}

/// The hooks, to plant corruption with: repairs are expected from here on.
fn hooks(cx: &Cx) -> Result<&dyn TestHooks, Violation> {
    cx.mark_planted();
    cx.hooks().ok_or_else(|| cx.fail("test hooks vanished"))
}

/// A claim that meets a dangling id at the head of Ready removes it,
/// reports the repair, and still returns every real item asked for (INV-6).
pub async fn claim_heals_dangling_id(factory: &dyn BackendFactory) -> CheckResult {
    let needs = Needs::HOOKS.and(Needs::GLOBAL_ORDER);
    run(factory, "claim_heals_dangling_id", Rule::Inv6, needs, |cx| async move {
        let mut rng = Rng::seeded();
        let real = cx.push_n(2).await?;
        let ghost = plant_ghost(&cx, &mut rng).await?;
        let spec = leaseq_core::ClaimSpec::new(2, LONG).or_fail(cx.rule, "spec")?;
        let claimed = cx.b.claim(&cx.q, spec).await.or_fail(cx.rule, "a claim meeting a dangling id")?;
        let got: Vec<ItemId> = claimed.leases.iter().map(|l| l.id()).collect();
        ensure!(
            got == real,
            cx.rule,
            "a claim of 2 meeting dangling id {ghost} returned {got:?}, expected the real items {real:?}"
        );
        ensure!(
            claimed.repairs.iter().any(|r| r.id == ghost),
            cx.rule,
            "the claim removed dangling id {ghost} without reporting it (repairs: {:?})",
            claimed.repairs
        );
        cx.check_indexes("after the claim healed a dangling id").await?;
        ensure!(cx.claim(5, LONG).await?.is_empty(), cx.rule, "a claim after healing found an item");
        Ok(())
    })
    .await
}

/// The ghost loop: a leftover id whose item was acked is skipped and
/// removed by the claim; reaps never bring it back and the queue drains to
/// empty (INV-6).
pub async fn acked_ghost_is_removed(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "acked_ghost_is_removed",
        Rule::Inv6,
        Needs::HOOKS,
        |cx| async move {
            let a = cx.push_n(1).await?[0];
            let lease = cx.claim_one(SHORT).await?;
            cx.b.ack(&lease.key).await.or_fail(cx.rule, "ack")?;
            hooks(&cx)?
                .plant_dangling_ready(&cx.q, a)
                .await
                .or_fail(cx.rule, "plant_dangling_ready hook")?;
            let b = cx.push_n(1).await?[0];
            let got = cx.claim(1, SHORT).await?;
            let got: Vec<ItemId> = got.iter().map(|l| l.id()).collect();
            ensure!(
                got == vec![b],
                cx.rule,
                "a claim of 1 behind the acked ghost {a} returned {got:?}, expected [{b}]"
            );
            for round in 0..3 {
                cx.wait_past(cx.now().await?.saturating_add(SHORT)).await?;
                let r = cx.reap_all().await?;
                ensure!(
                    round > 0 || r.requeued == 1,
                    cx.rule,
                    "reap {round} reported {r:?}"
                );
                let again = cx.claim(10, SHORT).await?;
                ensure!(
                    again.iter().all(|l| l.id() != a),
                    cx.rule,
                    "the acked ghost {a} was claimed after reap {round}"
                );
                for l in again {
                    cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
                }
            }
            cx.expect_stats([0, 0, 0, 0], "after draining past the ghost")
                .await?;
            cx.check_indexes("after draining past the ghost").await?;
            Ok(())
        },
    )
    .await
}

/// Several dangling ids ahead of one real item never stall a claim of one:
/// it skips them all and returns the real item (INV-6).
pub async fn dangling_ids_never_stall_a_claim(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "dangling_ids_never_stall_a_claim",
        Rule::Inv6,
        // A claim of one meets every planted id only in one global order.
        Needs::HOOKS.and(Needs::GLOBAL_ORDER),
        |cx| async move {
            let mut rng = Rng::seeded();
            let only = cx.claim(5, LONG).await?;
            ensure!(only.is_empty(), cx.rule, "a fresh queue had items");
            plant_ghost(&cx, &mut rng).await?;
            let spec = leaseq_core::ClaimSpec::new(5, LONG).or_fail(cx.rule, "spec")?;
            let c =
                cx.b.claim(&cx.q, spec)
                    .await
                    .or_fail(cx.rule, "a claim meeting only a dangling id")?;
            ensure!(
                c.leases.is_empty(),
                cx.rule,
                "a claim over only a dangling id returned {:?}",
                c.leases
            );
            cx.expect_stats([0, 0, 0, 0], "after healing the lone dangling id")
                .await?;
            let real = cx.push_n(1).await?[0];
            for _ in 0..3 {
                plant_ghost(&cx, &mut rng).await?;
            }
            let got: Vec<ItemId> = cx.claim(1, LONG).await?.iter().map(|l| l.id()).collect();
            ensure!(
                got == vec![real],
                cx.rule,
                "a claim of 1 behind three dangling ids returned {got:?}, expected [{real}]"
            );
            cx.check_indexes("after skipping three dangling ids")
                .await?;
            Ok(())
        },
    )
    .await
}

/// Through enqueue, delay, claim, release, fail, reap and (with the Admin
/// group) redrive, every item sits in exactly the index of its state, once
/// (INV-1).
pub async fn indexes_stay_consistent(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "indexes_stay_consistent",
        Rule::Inv1,
        Needs::HOOKS,
        |cx| async move {
            let mut ids = cx.push_n(6).await?;
            if cx.b.capabilities().delays {
                ids.extend(cx.enqueue(vec![NewItem::new("later").delay(LONG)]).await?);
            }
            agree(&cx, &ids, "after enqueue").await?;
            let l = cx.claim(4, SHORT).await?;
            ensure!(l.len() == 4, cx.rule, "claim of 4 returned {}", l.len());
            agree(&cx, &ids, "after claim").await?;
            cx.b.release(&l[0].key, Duration::ZERO)
                .await
                .or_fail(cx.rule, "release")?;
            cx.b.fail(&l[1].key, "x").await.or_fail(cx.rule, "fail")?;
            cx.b.ack(&l[2].key).await.or_fail(cx.rule, "ack")?;
            ids.retain(|id| *id != l[2].id());
            agree(&cx, &ids, "after release, fail and ack").await?;
            cx.wait_past(l[3].expires_at).await?;
            cx.reap_all().await?;
            agree(&cx, &ids, "after reap").await?;
            if cx.b.groups().admin.is_some() {
                cx.b.redrive(&cx.q, 10).await.or_fail(cx.rule, "redrive")?;
                agree(&cx, &ids, "after redrive").await?;
            }
            Ok(())
        },
    )
    .await
}

/// Fails unless the snapshot is consistent and each item is in the index
/// of the state `item()` reports.
async fn agree(cx: &Cx, ids: &[ItemId], when: &str) -> Result<(), Violation> {
    cx.check_indexes(when).await?;
    let snap = hooks(cx)?
        .snapshot(&cx.q)
        .await
        .or_fail(cx.rule, "snapshot")?;
    for id in ids {
        let info = cx.must_item(*id).await?;
        let homes: Vec<ItemState> = snap
            .indexes
            .iter()
            .filter(|(_, v)| v.contains(id))
            .map(|(s, _)| *s)
            .collect();
        ensure!(
            homes == vec![info.state],
            cx.rule,
            "{when}: item {id} is {} but sits in the indexes {homes:?}",
            info.state
        );
    }
    Ok(())
}

/// Poison is quarantined, never contagious: an item whose stored values
/// the backend cannot use (planted with `TestHooks::plant_poison`, each
/// kind the store can hold) is moved aside by the claim that meets it (to
/// Dead, or removed), reported as a repair, and never leased; the healthy
/// items around it are claimed by that same claim, each on its first
/// attempt. Each kind is planted in a fresh queue of its own. When the
/// hook plants no kind at all, the check is skipped, saying so: nothing
/// was tested.
pub async fn poison_is_quarantined(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "poison_is_quarantined",
        Rule::Inv6,
        Needs::HOOKS,
        |cx| async move {
            let mut planted_any = false;
            for poison in leaseq_core::testing::Poison::ALL {
                let cx = cx.fresh(&format!("{poison:?}").to_lowercase())?;
                // The victim sits between healthy items, so a claim that
                // judges an item by what it learned of the ones before it
                // (values it found valid, say) is caught leasing it.
                let mut healthy = cx.push_n(1).await?;
                let victim = cx.enqueue(vec![NewItem::new("victim")]).await?[0];
                healthy.extend(cx.push_n(2).await?);
                healthy.sort_unstable();
                let planted = hooks(&cx)?
                    .plant_poison(&cx.q, victim, poison)
                    .await
                    .or_fail(cx.rule, "plant_poison hook")?;
                if !planted {
                    continue;
                }
                planted_any = true;
                // With one global order the first claim meets the poison at
                // the head; with order per shard, claims visit shards in
                // turn, so claim until some claim has met it.
                let global = cx.b.capabilities().order == leaseq_core::Order::Global;
                let mut leases = Vec::new();
                let mut met = false;
                for _ in 0..if global { 1 } else { 16 } {
                    let spec = leaseq_core::ClaimSpec::new(3, LONG).or_fail(cx.rule, "spec")?;
                    let claimed = match cx.b.claim(&cx.q, spec).await {
                        Ok(c) => c,
                        Err(e) => {
                            return Err(cx.fail(format!(
                                "{poison:?} in one item made the claim fail ({e}): poison must be moved aside, not stall the queue"
                            )))
                        }
                    };
                    met |= claimed.repairs.iter().any(|r| r.id == victim);
                    leases.extend(claimed.leases);
                    if met && leases.len() >= healthy.len() {
                        break;
                    }
                }
                let mut got: Vec<ItemId> = leases.iter().map(|l| l.id()).collect();
                got.sort_unstable();
                ensure!(
                    got == healthy,
                    cx.rule,
                    "with {poison:?} in item {victim}, claims returned {got:?}; expected the healthy {healthy:?} (poison is never leased)"
                );
                ensure!(
                    leases.iter().all(|l| l.attempts == 1),
                    cx.rule,
                    "healthy items spent attempts on poison: {leases:?}"
                );
                ensure!(
                    met,
                    cx.rule,
                    "the claim moved {poison:?} item {victim} aside without reporting it as a repair"
                );
                if let Some(info) = cx.item(victim).await? {
                    ensure!(
                        info.state == ItemState::Dead,
                        cx.rule,
                        "the {poison:?} item is {:?}, expected Dead (quarantined) or removed",
                        info.state
                    );
                }
                for l in &leases {
                    cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
                }
                cx.check_indexes(&format!("after quarantining {poison:?}")).await?;
            }
            if !planted_any {
                cx.skip(format!(
                    "the backend's test hooks plant no poison (TestHooks::plant_poison answered \
                     false for every kind of {:?}), so no quarantine was tested",
                    leaseq_core::testing::Poison::ALL
                ));
            }
            Ok(())
        },
    )
    .await
}

/// A lease whose expiry lies past the lease horizon
/// ([`leaseq_core::limits::LEASE_HORIZON`]: what a server clock that ran
/// ahead while the lease was taken leaves once it is set right, planted
/// with `TestHooks::postpone_leases`) is expired: a reap recovers it, and
/// reports it as a repair of the Leased index, and its token is fenced
/// afterwards. A live lease moved ahead by less, within the horizon, is
/// neither recovered nor reported (INV-6).
pub async fn leases_past_the_horizon_expire(factory: &dyn BackendFactory) -> CheckResult {
    use leaseq_core::limits::{LEASE_HORIZON, MAX_LEASE_TTL};
    run(
        factory,
        "leases_past_the_horizon_expire",
        Rule::Inv6,
        Needs::HOOKS,
        |cx| async move {
            let ids = cx.push_n(3).await?;
            let far = cx.claim(2, LONG).await?;
            ensure!(far.len() == 2, cx.rule, "claimed {} of the first 2 items", far.len());
            let moved = hooks(&cx)?
                .postpone_leases(&cx.q, LEASE_HORIZON)
                .await
                .or_fail(cx.rule, "postpone_leases hook")?;
            if moved.is_none() {
                cx.skip("the backend's test hooks cannot move a lease's expiry (TestHooks::postpone_leases is None)");
                return Ok(());
            }
            ensure!(moved == Some(2), cx.rule, "postpone_leases moved {moved:?} of 2 live leases");
            let near = cx.claim_one(LONG).await?;
            // Every lease further ahead: the first two still past the
            // horizon, the last one just within it.
            let within = MAX_LEASE_TTL - LONG - Duration::from_secs(3600);
            hooks(&cx)?
                .postpone_leases(&cx.q, within)
                .await
                .or_fail(cx.rule, "postpone_leases hook")?;
            let report = cx.reap_all().await?;
            let mut repaired: Vec<ItemId> = report
                .repairs
                .iter()
                .filter(|r| r.index == ItemState::Leased)
                .map(|r| r.id)
                .collect();
            repaired.sort_unstable();
            repaired.dedup();
            let mut want: Vec<ItemId> = far.iter().map(|l| l.id()).collect();
            want.sort_unstable();
            ensure!(
                report.requeued == 2 && repaired == want,
                cx.rule,
                "after two leases were moved past the lease horizon and one within it, reap recovered {} and reported Leased repairs for {repaired:?} (the two past it are {want:?}, the one within {}); a lease past the horizon holds its item for as long as the clock was wrong",
                report.recovered(),
                near.id()
            );
            cx.expect_stats([2, 0, 1, 0], "after the reap").await?;
            for l in &far {
                crate::cx::expect_lost_of(cx.b.ack(&l.key).await, l.id(), "ack of a lease reaped past the horizon")?;
            }
            let again = cx.claim(2, LONG).await?;
            let mut got: Vec<ItemId> = again.iter().map(|l| l.id()).collect();
            got.sort_unstable();
            ensure!(got == want, cx.rule, "after the reap the claim got {got:?}; the recovered items are {want:?} (of {ids:?})");
            cx.b.ack(&near.key).await.or_fail(cx.rule, "ack of the lease within the horizon")?;
            cx.check_indexes("after the horizon reap").await?;
            Ok(())
        },
    )
    .await
}
