//! Queues are isolated: one dedup key lives once per queue, and a lease,
//! reap, purge or stats on one queue never touches another.

use std::time::Duration;

use leaseq_core::{Error, ItemState, LeaseKey, NewItem, QueueName};

use crate::cx::{run, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule};

/// One dedup key in two queues makes two items; ack, release, reap, purge
/// and stats on one queue leave the other as it was; a lease presented
/// with the other queue's name is lost.
pub async fn queues_are_isolated(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("queue isolation");
    run(
        factory,
        "queues_are_isolated",
        rule,
        Needs::DEDUP,
        |cx| async move {
            let other = QueueName::new(format!("{}-x", cx.q)).or_fail(rule, "naming a queue")?;
            let result = async {
                let key = || NewItem::new("k").dedup_key("shared-key");
                let a =
                    cx.b.enqueue(&cx.q, vec![key(), NewItem::new("a2")])
                        .await
                        .or_fail(rule, "enqueue")?;
                let b =
                    cx.b.enqueue(&other, vec![key()])
                        .await
                        .or_fail(rule, "enqueue on the other queue")?;
                ensure!(
                    !b[0].deduplicated,
                    rule,
                    "a dedup key held in one queue deduplicated an item of another queue"
                );
                let ours = cx.claim(2, SHORT).await?;
                ensure!(ours.len() == 2, rule, "claimed {} of 2", ours.len());
                let theirs =
                    cx.b.claim(
                        &other,
                        leaseq_core::ClaimSpec::new(1, LONG).or_fail(rule, "spec")?,
                    )
                    .await
                    .or_fail(rule, "claim on the other queue")?;
                ensure!(
                    theirs.leases.len() == 1 && theirs.leases[0].id() == b[0].id,
                    rule,
                    "the other queue's claim returned {:?}",
                    theirs.leases
                );
                // A lease named with the wrong queue is lost and changes nothing.
                let wrong = LeaseKey {
                    queue: other.clone(),
                    ..ours[0].key.clone()
                };
                match cx.b.ack(&wrong).await {
                    Err(Error::LeaseLost { .. }) => {}
                    r => {
                        return Err(cx.fail(format!(
                            "an ack naming the other queue returned {r:?}; expected LeaseLost"
                        )))
                    }
                }
                let mixed =
                    cx.b.ack_many(&[wrong, theirs.leases[0].key.clone()])
                        .await
                        .or_fail(rule, "ack_many over two queues")?;
                ensure!(
                    mixed[0].is_err() && mixed[1].is_ok(),
                    rule,
                    "ack_many over two queues: {mixed:?}"
                );
                // Reaping the other queue does not touch our expired leases.
                cx.expire(&ours).await?;
                let r =
                    cx.b.reap(&other)
                        .await
                        .or_fail(rule, "reap of the other queue")?;
                ensure!(
                    r.recovered() == 0,
                    rule,
                    "a reap of another queue recovered {} of this queue's leases",
                    r.recovered()
                );
                cx.expect_stats([0, 0, 2, 0], "after reaping the other queue")
                    .await?;
                // A purge of the other queue (with operator actions).
                let admin = cx.b.groups().admin;
                if let Some(admin) = admin {
                    cx.b.enqueue(&other, vec![NewItem::new("o1"), NewItem::new("o2")])
                        .await
                        .or_fail(rule, "enqueue")?;
                    ensure!(
                        admin
                            .purge(&other)
                            .await
                            .or_fail(rule, "purge of the other queue")?
                            == 2,
                        rule,
                        "purge of the other queue deleted the wrong count"
                    );
                    cx.expect_stats([0, 0, 2, 0], "after purging the other queue")
                        .await?;
                }
                let rr = cx.reap_all().await?;
                ensure!(
                    rr.recovered() == 2,
                    rule,
                    "our reap recovered {} of 2",
                    rr.recovered()
                );
                let st =
                    cx.b.stats(&other)
                        .await
                        .or_fail(rule, "stats of the other queue")?;
                ensure!(
                    admin.is_none() || st.total() == 0,
                    rule,
                    "the other queue shows {st:?} after its purge"
                );
                ensure!(a.len() == 2, rule, "enqueue results {a:?}");
                let peek =
                    cx.b.peek(&other, ItemState::Ready, 10)
                        .await
                        .or_fail(rule, "peek")?;
                ensure!(
                    admin.is_none() || peek.is_empty(),
                    rule,
                    "the other queue still lists {peek:?}"
                );
                Ok(())
            }
            .await;
            let _ = cx.clean(&other).await;
            result
        },
    )
    .await
}

/// The backend's clock follows real time: over a wait of about a second it
/// moves by about as much (not in seconds where milliseconds are due, nor
/// by a multiple), and it ticks finer than once a second. Backends on a
/// manual clock skip it.
pub async fn clock_follows_real_time(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("now");
    run(factory, "clock_follows_real_time", rule, Needs::REAL_TIME, |cx| async move {
        // Resolution: ten reads 30 ms apart must show several values.
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..10 {
            seen.insert(cx.now().await?.as_millis());
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        ensure!(seen.len() >= 4, rule, "ten reads of the backend's clock 30 ms apart gave only {} values ({seen:?}): the clock is too coarse for leases", seen.len());
        let (t0, w0) = (cx.now().await?, std::time::Instant::now());
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let (t1, w1) = (cx.now().await?, std::time::Instant::now());
        let moved = t1.as_millis().saturating_sub(t0.as_millis());
        let real = u64::try_from(w1.duration_since(w0).as_millis()).unwrap_or(u64::MAX);
        // Generous bounds for a loaded machine; a wrong unit is off by 1000x.
        ensure!(
            moved * 2 >= real && moved <= real * 2 + 500,
            rule,
            "the backend's clock moved {moved} ms while {real} ms passed"
        );
        Ok(())
    })
    .await
}
