//! INV-3 fencing: every transition out of Leased needs the current token;
//! a stale or forged one gets `LeaseLost` and changes nothing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Error, ItemState, LeaseKey, LeaseToken, LeaseTtl, QueueName};
use tokio::sync::Barrier;

use crate::cx::{expect_lost_of, run, Cx, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

/// Tries ack, extend, release and fail with `keys[0..4]` (one op each, and
/// `give_back` with `keys[0]` too) and expects `LeaseLost` from all of them.
async fn all_ops_lost(cx: &Cx, keys: &[LeaseKey], when: &str) -> Result<(), Violation> {
    ensure!(
        keys.len() >= 4,
        cx.rule,
        "{when}: need 4 leases, have {}",
        keys.len()
    );
    let ttl = LeaseTtl::new(LONG).or_fail(cx.rule, "ttl")?;
    expect_lost_of(cx.b.ack(&keys[0]).await, keys[0].id, &format!("ack {when}"))?;
    // The ack changed nothing, so the same key is as stale for give_back.
    expect_lost_of(
        cx.b.give_back(&keys[0]).await,
        keys[0].id,
        &format!("give_back {when}"),
    )?;
    expect_lost_of(
        cx.b.extend(&keys[1], ttl).await,
        keys[1].id,
        &format!("extend {when}"),
    )?;
    expect_lost_of(
        cx.b.release(&keys[2], Duration::ZERO).await,
        keys[2].id,
        &format!("release {when}"),
    )?;
    expect_lost_of(
        cx.b.fail(&keys[3], "stale").await,
        keys[3].id,
        &format!("fail {when}"),
    )?;
    Ok(())
}

/// Ack, extend, release and fail with a token whose lease was reaped get
/// `LeaseLost`; the items stay Ready with attempts and reason untouched.
pub async fn stale_token_after_reap(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "stale_token_after_reap",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            cx.push_n(4).await?;
            let old = cx.claim(4, SHORT).await?;
            cx.expire(&old).await?;
            let r = cx.reap_all().await?;
            ensure!(
                r.requeued == 4,
                cx.rule,
                "reap of 4 expired leases reported {r:?}"
            );
            let keys: Vec<LeaseKey> = old.iter().map(|l| l.key.clone()).collect();
            all_ops_lost(&cx, &keys, "after the lease was reaped").await?;
            for l in &old {
                let info = cx.must_item(l.id()).await?;
                ensure!(
                    info.state == ItemState::Ready
                        && info.attempts == 1
                        && info.last_error.is_none(),
                    cx.rule,
                    "a stale call changed item {}: {info:?}",
                    l.id()
                );
            }
            cx.expect_stats([4, 0, 0, 0], "after the stale calls")
                .await?;
            let again = cx.drain(LONG, 4).await?;
            ensure!(
                again.len() == 4,
                cx.rule,
                "after stale calls only {} of 4 items were claimable",
                again.len()
            );
            Ok(())
        },
    )
    .await
}

/// Ack, extend, release and fail with the token of a lease that another
/// worker has since re-claimed get `LeaseLost`; the new holder is untouched
/// and can ack.
pub async fn stale_token_after_reclaim(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "stale_token_after_reclaim",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            cx.push_n(4).await?;
            let old = cx.claim(4, SHORT).await?;
            cx.expire(&old).await?;
            cx.reap_all().await?;
            let new = cx.claim(4, LONG).await?;
            ensure!(
                new.len() == 4,
                cx.rule,
                "re-claim of 4 reaped items returned {}",
                new.len()
            );
            let keys: Vec<LeaseKey> = old.iter().map(|l| l.key.clone()).collect();
            all_ops_lost(&cx, &keys, "after another worker re-claimed the item").await?;
            for l in &new {
                let info = cx.must_item(l.id()).await?;
                ensure!(
                    info.state == ItemState::Leased
                        && info.due_at == Some(l.expires_at)
                        && info.attempts == 2,
                    cx.rule,
                    "a stale call changed the new holder's item {}: {info:?}",
                    l.id()
                );
            }
            for l in &new {
                cx.b.ack(&l.key)
                    .await
                    .or_fail(cx.rule, "ack by the current holder")?;
            }
            cx.expect_stats([0, 0, 0, 0], "after the holders acked")
                .await?;
            Ok(())
        },
    )
    .await
}

/// A forged token, or another item's token, gets `LeaseLost` and changes
/// nothing; the real holders can still ack.
pub async fn forged_token_is_rejected(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "forged_token_is_rejected",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            cx.push_n(4).await?;
            let live = cx.claim(4, LONG).await?;
            ensure!(
                live.len() == 4,
                cx.rule,
                "claim of 4 returned {}",
                live.len()
            );
            let forged: Vec<LeaseKey> = live
                .iter()
                .map(|l| LeaseKey {
                    token: LeaseToken::random(),
                    ..l.key.clone()
                })
                .collect();
            all_ops_lost(&cx, &forged, "with a forged token").await?;
            let swapped: Vec<LeaseKey> = (0..4)
                .map(|i| LeaseKey {
                    token: live[(i + 1) % 4].token(),
                    ..live[i].key.clone()
                })
                .collect();
            all_ops_lost(&cx, &swapped, "with another item's token").await?;
            let other = QueueName::new(format!("{}-other", cx.q)).or_fail(cx.rule, "queue name")?;
            let res =
                cx.b.ack(&LeaseKey {
                    queue: other,
                    ..live[0].key.clone()
                })
                .await;
            ensure!(
                matches!(res, Err(Error::LeaseLost { .. } | Error::NotFound { .. })),
                cx.rule,
                "ack naming another queue returned {res:?}"
            );
            for l in &live {
                let info = cx.must_item(l.id()).await?;
                ensure!(
                    info.state == ItemState::Leased && info.due_at == Some(l.expires_at),
                    cx.rule,
                    "a forged call changed item {}: {info:?}",
                    l.id()
                );
                cx.b.ack(&l.key)
                    .await
                    .or_fail(cx.rule, "ack by the real holder")?;
            }
            Ok(())
        },
    )
    .await
}

/// Once a lease was acked, released or failed, its token is spent: every
/// further call with it gets `LeaseLost` and changes nothing.
pub async fn spent_token_is_rejected(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "spent_token_is_rejected",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            cx.push_n(3).await?;
            let l = cx.claim(3, LONG).await?;
            ensure!(l.len() == 3, cx.rule, "claim of 3 returned {}", l.len());
            cx.b.ack(&l[0].key).await.or_fail(cx.rule, "ack")?;
            cx.b.release(&l[1].key, Duration::ZERO)
                .await
                .or_fail(cx.rule, "release")?;
            cx.b.fail(&l[2].key, "first")
                .await
                .or_fail(cx.rule, "fail")?;
            for (lease, what) in [(&l[0], "acked"), (&l[1], "released"), (&l[2], "failed")] {
                let k = lease.key.clone();
                let keys = [k.clone(), k.clone(), k.clone(), k];
                all_ops_lost(&cx, &keys, &format!("after the lease was {what}")).await?;
            }
            ensure!(
                cx.item(l[0].id()).await?.is_none(),
                cx.rule,
                "the acked item came back"
            );
            let released = cx.must_item(l[1].id()).await?;
            ensure!(
                released.state == ItemState::Ready && released.attempts == 1,
                cx.rule,
                "released item changed: {released:?}"
            );
            let failed = cx.must_item(l[2].id()).await?;
            ensure!(
                failed.state == ItemState::Dead && failed.last_error.as_deref() == Some("first"),
                cx.rule,
                "failed item changed: {failed:?}"
            );
            Ok(())
        },
    )
    .await
}

/// A reaper racing workers that ack just as their leases expire: each item
/// ends either acked (and never seen again) or recovered by exactly one
/// reaper (and its ack got `LeaseLost`), never both.
pub async fn ack_races_reap(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "ack_races_reap",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            let rounds = 5 * scale();
            for round in 0..rounds {
                ack_race_round(&cx, round).await?;
            }
            Ok(())
        },
    )
    .await
}

async fn ack_race_round(cx: &Cx, round: u32) -> Result<(), Violation> {
    const N: usize = 50;
    const REAPERS: usize = 2;
    let (acked, recovered) = cx
        .race_expired_with_reapers(round, N, 1, REAPERS, |cx, ls| async move {
            cx.b.ack(&ls[0].key).await
        })
        .await?;
    let acked = acked.into_iter().map(|(ls, res)| (ls[0].id(), res));
    let mut ok = BTreeSet::new();
    for (id, res) in acked {
        match res {
            Ok(()) => {
                ok.insert(id);
            }
            Err(Error::LeaseLost { .. }) => {}
            Err(e) => {
                return Err(cx.fail(format!(
                    "round {round}: ack of {id} racing a reap returned `{e}`"
                )))
            }
        }
    }
    ensure!(
        ok.len() as u64 + recovered == N as u64,
        Rule::Inv4,
        "round {round}: {} acks succeeded and reapers recovered {recovered}, of {N} leases: an item was both acked and recovered, or neither",
        ok.len()
    );
    let rest = cx.drain(LONG, N).await?;
    for l in &rest {
        ensure!(
            !ok.contains(&l.id()),
            Rule::Inv10,
            "round {round}: item {} was claimed again after its ack succeeded",
            l.id()
        );
    }
    ensure!(
        rest.len() as u64 == recovered,
        Rule::Inv4,
        "round {round}: reapers recovered {recovered} but {} items were claimable again",
        rest.len()
    );
    for l in &rest {
        cx.b.ack(&l.key).await.or_fail(cx.rule, "ack")?;
    }
    cx.expect_stats([0, 0, 0, 0], &format!("round {round}: after the race"))
        .await?;
    Ok(())
}

/// Workers extending their leases just as they expire and reapers run:
/// each item ends either extended (still Leased, never claimable, its
/// holder's ack works) or recovered by exactly one reaper (and its extend
/// got `LeaseLost`), never both: an extend that checks the token and then
/// writes the expiry in a second step would leave an item Ready and
/// Leased at once.
pub async fn extend_races_reap(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "extend_races_reap",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            const N: usize = 50;
            const REAPERS: usize = 2;
            let ttl = LeaseTtl::new(LONG).or_fail(cx.rule, "ttl")?;
            for round in 0..3 * scale() {
                let (extended, recovered) = cx
                    .race_expired_with_reapers(round, N, 1, REAPERS, move |cx, ls| async move {
                        cx.b.extend(&ls[0].key, ttl).await
                    })
                    .await?;
                let mut kept = Vec::new();
                for (ls, res) in extended {
                    let l = &ls[0];
                    match res {
                        Ok(_) => kept.push(l.clone()),
                        Err(Error::LeaseLost { .. }) => {}
                        Err(e) => {
                            return Err(cx.fail(format!(
                                "round {round}: extend of {} racing a reap returned `{e}`",
                                l.id()
                            )))
                        }
                    }
                }
                ensure!(
                    kept.len() as u64 + recovered == N as u64,
                    Rule::Inv4,
                    "round {round}: {} extends succeeded and reapers recovered {recovered}, of {N} \
                     leases: an item was both extended and recovered, or neither",
                    kept.len()
                );
                cx.check_indexes(&format!("round {round}: after extends raced reapers"))
                    .await?;
                cx.expect_stats(
                    [recovered, 0, kept.len() as u64, 0],
                    &format!("round {round}: after extends raced reapers"),
                )
                .await?;
                let kept_ids: BTreeSet<_> = kept.iter().map(|l| l.id()).collect();
                let rest = cx.with_rule(Rule::Inv2).drain(LONG, N).await?;
                for l in &rest {
                    ensure!(
                        !kept_ids.contains(&l.id()),
                        Rule::Inv2,
                        "round {round}: item {} was claimed again while its extended lease was live",
                        l.id()
                    );
                }
                ensure!(
                    rest.len() as u64 == recovered,
                    Rule::Inv4,
                    "round {round}: reapers recovered {recovered} but {} items were claimable again",
                    rest.len()
                );
                for l in kept.iter().chain(&rest) {
                    cx.b.ack(&l.key)
                        .await
                        .or_fail(cx.rule, "ack of a held lease")?;
                }
                cx.expect_stats([0, 0, 0, 0], &format!("round {round}: after the acks"))
                    .await?;
            }
            Ok(())
        },
    )
    .await
}

/// Workers acking just as their expired leases are reaped and re-claimed by
/// another worker: no item both acked by its old holder and handed to the
/// new one, and every new holder can ack (INV-3).
pub async fn ack_races_reclaim(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "ack_races_reclaim",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            for round in 0..5 * scale() {
                let cx = cx.round(round)?;
                reclaim_race_round(&cx, round).await?;
            }
            Ok(())
        },
    )
    .await
}

async fn reclaim_race_round(cx: &Cx, round: u32) -> Result<(), Violation> {
    const N: usize = 50;
    cx.push_n(N).await?;
    let old = cx.claim(N as u32, SHORT).await?;
    ensure!(
        old.len() == N,
        cx.rule,
        "round {round}: claim of {N} returned {}",
        old.len()
    );
    cx.expire(&old).await?;
    let gate = Arc::new(Barrier::new(N + 1));
    let mut acks = Vec::new();
    for l in old.iter().cloned() {
        let (cx, gate) = (cx.clone(), gate.clone());
        acks.push(cx.clone().spawn(async move {
            gate.wait().await;
            tokio::task::yield_now().await;
            (l.id(), cx.b.ack(&l.key).await)
        }));
    }
    let thief = {
        let (cx, gate) = (cx.clone(), gate.clone());
        cx.clone().spawn(async move {
            gate.wait().await;
            let mut got = Vec::new();
            for _ in 0..4 {
                cx.reap_all().await?;
                got.extend(cx.claim(N as u32, LONG).await?);
                tokio::task::yield_now().await;
            }
            Ok::<_, Violation>(got)
        })
    };
    let acked = cx.join(acks).await?;
    let new = cx
        .join(vec![thief])
        .await?
        .pop()
        .unwrap_or_else(|| Ok(Vec::new()))?;
    let mut ok = BTreeSet::new();
    for (id, res) in acked {
        match res {
            Ok(()) => {
                ok.insert(id);
            }
            Err(Error::LeaseLost { .. }) => {}
            Err(e) => {
                return Err(cx.fail(format!(
                    "round {round}: ack of {id} racing a re-claim returned `{e}`"
                )))
            }
        }
    }
    for l in &new {
        ensure!(
            !ok.contains(&l.id()),
            cx.rule,
            "round {round}: item {} was re-claimed by a new worker and also acked by its old, stale holder",
            l.id()
        );
    }
    for l in &new {
        cx.b.ack(&l.key)
            .await
            .or_fail(cx.rule, "ack by the new holder")?;
    }
    Ok(())
}
