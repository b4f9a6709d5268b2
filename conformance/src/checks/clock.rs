//! The clock is read inside the atomic step it stamps: a claim that read
//! the time before its step (a round trip earlier) stamps its leases with a
//! time from before transitions that step already sees.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Lease, NewItem};

use crate::cx::{run, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{scale, BackendFactory, CheckResult, Rule, TimeControl, Violation};

/// Claimers loop on an empty queue while time passes and one item is
/// enqueued: the lease a claim hands out is stamped (`expires_at` less the
/// ttl) no earlier than that item's `enqueued_at`, as the claim's step came
/// after the enqueue's. On a manual clock the time passes by a second, so a
/// claim that read the clock before its step is caught every round.
pub async fn claims_read_the_clock_in_their_step<F: BackendFactory>(factory: &F) -> CheckResult {
    let rule = Rule::Contract("now");
    run(
        factory,
        "claims_read_the_clock_in_their_step",
        rule,
        Needs::NONE,
        |cx| async move {
            for round in 0..10 * scale() {
                let stop = Arc::new(AtomicBool::new(false));
                let claimers: Vec<_> = (0..4)
                    .map(|_| {
                        let (cx, stop) = (cx.clone(), stop.clone());
                        cx.clone().spawn(async move {
                            let mut got = Vec::new();
                            while got.is_empty() && !stop.load(Ordering::SeqCst) {
                                got = cx.claim(1, LONG).await?;
                                tokio::task::yield_now().await;
                            }
                            Ok::<Vec<Lease>, Violation>(got)
                        })
                    })
                    .collect();
                // Let the claimers start, then let time pass under them.
                tokio::time::sleep(Duration::from_millis(3)).await;
                match &cx.tb.time {
                    TimeControl::Manual(clock) => clock.advance(Duration::from_secs(1)),
                    TimeControl::Real => tokio::time::sleep(Duration::from_millis(5)).await,
                }
                let id = cx.enqueue(vec![NewItem::new("late")]).await?[0];
                let mut leases = Vec::new();
                for _ in 0..10_000 {
                    if cx.stats().await?.leased == 1 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                stop.store(true, Ordering::SeqCst);
                for got in cx.join(claimers).await? {
                    leases.extend(got?);
                }
                ensure!(
                    leases.len() == 1 && leases[0].id() == id,
                    rule,
                    "round {round}: four claimers over one item {id} got {leases:?}"
                );
                let l = &leases[0];
                let ttl = u64::try_from(LONG.as_millis()).unwrap_or(u64::MAX);
                let stamped = l.expires_at.as_millis().saturating_sub(ttl);
                // 1 ms of slack for a store that rounds one stamp and truncates the other.
                ensure!(
                    stamped + 1 >= l.enqueued_at.as_millis(),
                    rule,
                    "a clock read outside the atomic step: round {round}: a claim leased item {id} with a lease stamped at {stamped} ms (expires_at {} less the ttl), before the item's enqueue at {}; the claim read the backend's clock before its step (a round trip earlier), not inside it",
                    l.expires_at,
                    l.enqueued_at
                );
                cx.b.ack(&l.key).await.or_fail(rule, "ack")?;
            }
            Ok(())
        },
    )
    .await
}
