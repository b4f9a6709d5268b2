//! `ack_many`: each lease in a batch is fenced on its own (INV-3), and an
//! item acked in a batch is never claimed again (INV-10).

use std::collections::BTreeSet;

use leaseq_core::limits::MAX_ACK_BATCH;
use leaseq_core::{
    ClaimSpec, Error, ItemState, Lease, LeaseKey, LeaseToken, NewItem, QueueName,
    Result as CoreResult,
};

use crate::cx::{run, Cx, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, Violation};

/// What each slot of a batch must come back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Acked,
    Lost,
}

/// Fails unless `got` has one result per slot, each as `want` says.
fn expect_results(
    got: &[CoreResult<()>],
    want: &[(Want, &str)],
    when: &str,
) -> Result<(), Violation> {
    ensure!(
        got.len() == want.len(),
        Rule::Contract("ack_many"),
        "{when}: a batch of {} leases returned {} results",
        want.len(),
        got.len()
    );
    for (i, (r, (w, what))) in got.iter().zip(want).enumerate() {
        match (r, w) {
            (Ok(()), Want::Acked) | (Err(Error::LeaseLost { .. }), Want::Lost) => {}
            (Ok(()), Want::Lost) => {
                return Err(Violation::new(
                    Rule::Inv3,
                    format!("{when}: slot {i} ({what}) was acked; expected LeaseLost"),
                ))
            }
            (Err(e), _) => {
                return Err(Violation::new(
                    Rule::Inv3,
                    format!("{when}: slot {i} ({what}) returned `{e}`; expected {w:?}"),
                ))
            }
        }
    }
    Ok(())
}

/// Claims up to `max` items of `queue` for a long lease.
async fn claim_in(cx: &Cx, queue: &QueueName, max: u32) -> Result<Vec<Lease>, Violation> {
    let spec = ClaimSpec::new(max, LONG).or_fail(cx.rule, "building a claim")?;
    let got =
        cx.b.claim(queue, spec)
            .await
            .or_fail(cx.rule, "claim on the second queue")?;
    Ok(got.leases)
}

/// One batch over two queues mixing live leases, leases whose item was
/// reaped (and is Ready), leases whose item another worker re-claimed,
/// forged tokens and a lease named twice: results come back per slot, only
/// the live leases' items are gone, every other item is untouched, and the
/// items acked are never claimed again.
pub async fn ack_many_fences_each(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "ack_many_fences_each",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            let q2 = QueueName::new(format!("{}-2", cx.q)).or_fail(cx.rule, "naming a queue")?;
            let result = fences_each(&cx, &q2).await;
            let purged = cx.clean(&q2).await;
            result?;
            purged.or_fail(cx.rule, "purging the second queue")?;
            Ok(())
        },
    )
    .await
}

async fn fences_each(cx: &Cx, q2: &QueueName) -> Result<(), Violation> {
    let rule = cx.rule;
    // An empty batch is an empty answer.
    let empty =
        cx.b.ack_many(&[])
            .await
            .or_fail(rule, "ack_many of nothing")?;
    ensure!(
        empty.is_empty(),
        Rule::Contract("ack_many"),
        "ack_many of no leases returned {} results",
        empty.len()
    );

    cx.push_n(4).await?;
    let old = cx.claim(4, SHORT).await?;
    ensure!(old.len() == 4, rule, "claim of 4 returned {}", old.len());
    cx.expire(&old).await?;
    let r = cx.reap_all().await?;
    ensure!(
        r.requeued == 4,
        rule,
        "reap of 4 expired leases reported {r:?}"
    );
    let new = cx.claim(2, LONG).await?;
    ensure!(new.len() == 2, rule, "re-claim of 2 returned {}", new.len());
    let reclaimed: BTreeSet<_> = new.iter().map(|l| l.id()).collect();
    let old_of = |id| old.iter().find(|l| l.id() == id).map(|l| l.key.clone());
    let (Some(old_new0), Some(old_new1)) = (old_of(new[0].id()), old_of(new[1].id())) else {
        return Err(cx.fail("the re-claim returned an item the first claim did not"));
    };
    let stale: Vec<&Lease> = old
        .iter()
        .filter(|l| !reclaimed.contains(&l.id()))
        .collect();
    ensure!(stale.len() == 2, rule, "expected 2 reaped, unclaimed items");

    let enq =
        cx.b.enqueue(q2, (0..3).map(|k| NewItem::new(format!("b-{k}"))).collect())
            .await
            .or_fail(rule, "enqueue on the second queue")?;
    ensure!(enq.len() == 3, rule, "enqueue of 3 returned {}", enq.len());
    let live = claim_in(cx, q2, 3).await?;
    ensure!(
        live.len() == 3,
        rule,
        "claim of 3 on the second queue returned {}",
        live.len()
    );
    let forged = |l: &Lease| LeaseKey {
        token: LeaseToken::random(),
        ..l.key.clone()
    };

    let batch: Vec<(LeaseKey, Want, &str)> = vec![
        (stale[0].key.clone(), Want::Lost, "reaped, item Ready"),
        (live[0].key.clone(), Want::Acked, "live, second queue"),
        (forged(&new[1]), Want::Lost, "forged token on a live lease"),
        (
            old_new0,
            Want::Lost,
            "reaped and re-claimed, its new lease acked next",
        ),
        (new[0].key.clone(), Want::Acked, "live, the re-claim"),
        (
            forged(&live[1]),
            Want::Lost,
            "forged token before the live one",
        ),
        (live[1].key.clone(), Want::Acked, "live, second queue"),
        (
            live[0].key.clone(),
            Want::Lost,
            "the same lease a second time",
        ),
        (stale[1].key.clone(), Want::Lost, "reaped, item Ready"),
        (
            old_new1,
            Want::Lost,
            "reaped and re-claimed by another worker",
        ),
        (live[2].key.clone(), Want::Acked, "live, second queue"),
    ];
    let keys: Vec<LeaseKey> = batch.iter().map(|(k, _, _)| k.clone()).collect();
    let want: Vec<(Want, &str)> = batch.iter().map(|(_, w, what)| (*w, *what)).collect();

    // Over the limit: refused, and nothing acked.
    let over = vec![new[1].key.clone(); MAX_ACK_BATCH + 1];
    match cx.b.ack_many(&over).await {
        Err(Error::InvalidInput { .. }) => {}
        other => {
            return Err(Violation::new(
                Rule::Contract("ack_many"),
                format!(
                    "ack_many of {} leases returned {:?}; expected InvalidInput",
                    over.len(),
                    other.map(|v| v.len())
                ),
            ))
        }
    }

    let got = cx.b.ack_many(&keys).await.or_fail(rule, "ack_many")?;
    expect_results(&got, &want, "the mixed batch")?;

    // The acked items are gone; the others are as they were.
    for id in [new[0].id(), live[0].id(), live[1].id(), live[2].id()] {
        let q = if id == new[0].id() { &cx.q } else { q2 };
        match cx.b.item(q, id).await {
            Err(Error::NotFound { .. }) => {}
            other => {
                return Err(cx.fail(format!(
                    "item {id} was acked in the batch but item() returned {other:?}"
                )))
            }
        }
    }
    for l in &stale {
        let info = cx.must_item(l.id()).await?;
        ensure!(
            info.state == ItemState::Ready && info.attempts == 1,
            rule,
            "a stale lease in the batch changed item {}: {info:?}",
            l.id()
        );
    }
    let held = cx.must_item(new[1].id()).await?;
    ensure!(
        held.state == ItemState::Leased
            && held.due_at == Some(new[1].expires_at)
            && held.attempts == 2,
        rule,
        "stale and forged leases in the batch changed the holder's item {}: {held:?}",
        new[1].id()
    );
    cx.expect_stats([2, 0, 1, 0], "after the mixed batch")
        .await?;
    let s2 =
        cx.b.stats(q2)
            .await
            .or_fail(rule, "stats of the second queue")?;
    ensure!(
        s2.ready + s2.scheduled + s2.leased + s2.dead == 0,
        rule,
        "the second queue still holds items after all its leases were acked: {s2:?}"
    );

    // The same batch again: every token is spent now.
    let again = cx.b.ack_many(&keys).await.or_fail(rule, "ack_many again")?;
    let all_lost: Vec<(Want, &str)> = want.iter().map(|(_, w)| (Want::Lost, *w)).collect();
    expect_results(&again, &all_lost, "the same batch a second time")?;

    // INV-10: only the two reaped items are claimable; the holder can ack.
    let rest = cx.drain(LONG, 2).await?;
    let rest_ids: BTreeSet<_> = rest.iter().map(|l| l.id()).collect();
    let stale_ids: BTreeSet<_> = stale.iter().map(|l| l.id()).collect();
    ensure!(
        rest_ids == stale_ids,
        Rule::Inv10,
        "after the batch the claimable items were {rest_ids:?}, expected {stale_ids:?}"
    );
    let mut last: Vec<LeaseKey> = rest.iter().map(|l| l.key.clone()).collect();
    last.push(new[1].key.clone());
    let done =
        cx.b.ack_many(&last)
            .await
            .or_fail(rule, "ack_many of the holders")?;
    expect_results(
        &done,
        &[
            (Want::Acked, "live"),
            (Want::Acked, "live"),
            (Want::Acked, "live"),
        ],
        "the last batch",
    )?;
    cx.expect_stats([0, 0, 0, 0], "after every holder acked")
        .await?;
    Ok(())
}

/// Batches of acks racing reapers just as their leases expire: each item
/// ends either acked in its batch (and never seen again) or recovered by
/// exactly one reaper (and its slot got `LeaseLost`), never both.
pub async fn ack_many_races_reap(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "ack_many_races_reap",
        Rule::Inv3,
        Needs::NONE,
        |cx| async move {
            for round in 0..5 * scale() {
                race_round(&cx, round).await?;
            }
            Ok(())
        },
    )
    .await
}

async fn race_round(cx: &Cx, round: u32) -> Result<(), Violation> {
    const N: usize = 60;
    const BATCHES: usize = 6;
    const REAPERS: usize = 2;
    let (batches, recovered) = cx
        .race_expired_with_reapers(round, N, N / BATCHES, REAPERS, |cx, ls| async move {
            let keys: Vec<LeaseKey> = ls.iter().map(|l| l.key.clone()).collect();
            let got = cx.b.ack_many(&keys).await;
            (keys, got)
        })
        .await?;
    let batches = batches.into_iter().map(|(_, batch)| batch);
    let mut ok = BTreeSet::new();
    for (keys, got) in batches {
        let got = got.or_fail(cx.rule, &format!("round {round}: ack_many racing a reap"))?;
        ensure!(
            got.len() == keys.len(),
            Rule::Contract("ack_many"),
            "round {round}: a batch of {} returned {} results",
            keys.len(),
            got.len()
        );
        for (k, r) in keys.iter().zip(got) {
            match r {
                Ok(()) => {
                    ok.insert(k.id);
                }
                Err(Error::LeaseLost { .. }) => {}
                Err(e) => {
                    return Err(cx.fail(format!(
                        "round {round}: the ack of {} in a batch racing a reap returned `{e}`",
                        k.id
                    )))
                }
            }
        }
    }
    ensure!(
        ok.len() as u64 + recovered == N as u64,
        Rule::Inv4,
        "round {round}: batches acked {} and reapers recovered {recovered}, of {N} leases: an item was both acked and recovered, or neither",
        ok.len()
    );
    let rest = cx.drain(LONG, N).await?;
    for l in &rest {
        ensure!(
            !ok.contains(&l.id()),
            Rule::Inv10,
            "round {round}: item {} was claimed again after its batched ack succeeded",
            l.id()
        );
    }
    ensure!(
        rest.len() as u64 == recovered,
        Rule::Inv4,
        "round {round}: reapers recovered {recovered} but {} items were claimable again",
        rest.len()
    );
    let keys: Vec<LeaseKey> = rest.iter().map(|l| l.key.clone()).collect();
    let done = cx.b.ack_many(&keys).await.or_fail(cx.rule, "ack_many")?;
    ensure!(
        done.iter().all(|r| r.is_ok()),
        cx.rule,
        "round {round}: a live lease in a batch was not acked: {done:?}"
    );
    cx.expect_stats([0, 0, 0, 0], &format!("round {round}: after the race"))
        .await?;
    Ok(())
}

/// A batch is one step, not a loop over its items: an enqueue of 50 items,
/// a claim of 50 and an `ack_many` of 50 leases each cost at most a fifth
/// as many atomic steps as items ([`leaseq_core::testing::TestHooks::steps`]). This
/// proves the suite reaches the backend's own batch code, never a default
/// per-item loop (of the trait, or of a layer that does not forward).
pub async fn batches_are_single_steps(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "batches_are_single_steps",
        Rule::Contract("batches"),
        Needs::STEPS,
        |cx| async move {
            const N: usize = 50;
            const MOST: u64 = (N / 5) as u64;
            let before = cx.steps()?;
            cx.push_n(N).await?;
            let enqueue = cx.steps()? - before;
            let before = cx.steps()?;
            let leases = cx.claim(N as u32, LONG).await?;
            let claim = cx.steps()? - before;
            ensure!(leases.len() == N, cx.rule, "a claim of {N} over {N} Ready items returned {}", leases.len());
            let keys: Vec<LeaseKey> = leases.iter().map(|l| l.key.clone()).collect();
            let before = cx.steps()?;
            let acked = cx.b.ack_many(&keys).await.or_fail(cx.rule, "ack_many")?;
            let ack_many = cx.steps()? - before;
            ensure!(acked.iter().all(|r| r.is_ok()), cx.rule, "ack_many of {N} live leases: {acked:?}");
            for (what, steps) in [("an enqueue of 50 items", enqueue), ("a claim of 50", claim), ("an ack_many of 50 leases", ack_many)] {
                ensure!(
                    (1..=MOST).contains(&steps),
                    cx.rule,
                    "{what} took {steps} atomic steps (expected 1 to {MOST}): {}",
                    if steps == 0 { "the backend counted none".to_string() } else { "a loop over the items (the trait's default, or a layer that does not forward the batch operation), not one batch".to_string() }
                );
            }
            Ok(())
        },
    )
    .await
}

/// A token of another lease of the same claim fences nothing in a batch:
/// with the tokens of one claim's four leases swapped round (each slot
/// names its item with a sibling lease's token, a token of the same
/// spec), every slot of `ack_many` answers `LeaseLost` and every item stays
/// Leased under its own lease; a batch mixing two such slots with two
/// true leases acks exactly the true ones (INV-3: each lease fenced on its
/// own token, not on its claim).
pub async fn ack_many_rejects_sibling_tokens(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "ack_many_rejects_sibling_tokens",
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
            let swapped: Vec<LeaseKey> = (0..4)
                .map(|i| LeaseKey {
                    token: live[(i + 1) % 4].token(),
                    ..live[i].key.clone()
                })
                .collect();
            let res = cx.b.ack_many(&swapped).await.or_fail(cx.rule, "ack_many")?;
            ensure!(
                res.len() == 4,
                cx.rule,
                "ack_many of 4 returned {} results",
                res.len()
            );
            for (k, r) in res.iter().enumerate() {
                ensure!(
                    matches!(r, Err(Error::LeaseLost { .. })),
                    cx.rule,
                    "ack_many slot {k} named item {} with the token of its claim's lease on item \
                     {} and answered {r:?}; expected LeaseLost",
                    live[k].id(),
                    live[(k + 1) % 4].id()
                );
            }
            for l in &live {
                let info = cx.must_item(l.id()).await?;
                ensure!(
                    info.state == ItemState::Leased && info.due_at == Some(l.expires_at),
                    cx.rule,
                    "after an ack_many with sibling tokens item {} shows {info:?}; expected it \
                     Leased as claimed",
                    l.id()
                );
            }
            // Slots 0 and 2 true, 1 and 3 with a sibling's token.
            let mixed = vec![
                live[0].key.clone(),
                swapped[1].clone(),
                live[2].key.clone(),
                swapped[3].clone(),
            ];
            let res = cx.b.ack_many(&mixed).await.or_fail(cx.rule, "ack_many")?;
            let acked: Vec<bool> = res.iter().map(|r| r.is_ok()).collect();
            ensure!(
                acked == [true, false, true, false],
                cx.rule,
                "a batch of two true leases (slots 0, 2) and two sibling tokens (slots 1, 3) \
                 answered {res:?}; expected exactly the true leases acked"
            );
            for (k, l) in live.iter().enumerate() {
                let gone = cx.item(l.id()).await?.is_none();
                ensure!(
                    gone == (k % 2 == 0),
                    cx.rule,
                    "after the mixed batch item {} is {}",
                    l.id(),
                    if gone {
                        "gone, though its slot named a sibling's token"
                    } else {
                        "still there, though its own lease acked it"
                    }
                );
            }
            for l in [&live[1], &live[3]] {
                cx.b.ack(&l.key)
                    .await
                    .or_fail(cx.rule, "ack by the real holder")?;
            }
            Ok(())
        },
    )
    .await
}
