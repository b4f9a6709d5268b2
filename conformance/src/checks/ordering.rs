//! INV-8 order: higher priority first, FIFO by enqueue order within a
//! priority, absent retries.

use leaseq_core::{ItemId, ItemState, NewItem};

use crate::cx::{run, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule};

/// Within one priority, claims follow enqueue order, across batches and
/// claim sizes; `peek(Ready)` shows the same order (INV-8).
pub async fn fifo_within_priority<F: BackendFactory>(factory: &F) -> CheckResult {
    run(
        factory,
        "fifo_within_priority",
        Rule::Inv8,
        Needs::GLOBAL_ORDER,
        |cx| async move {
            let mut ids = Vec::new();
            for batch in [1usize, 7, 1, 30, 11] {
                let items = (0..batch)
                    .map(|i| NewItem::new(format!("b{batch}-{i}")))
                    .collect();
                ids.extend(cx.enqueue(items).await?);
            }
            let peeked: Vec<ItemId> =
                cx.b.peek(&cx.q, ItemState::Ready, ids.len())
                    .await
                    .or_fail(cx.rule, "peek")?
                    .into_iter()
                    .map(|i| i.id)
                    .collect();
            ensure!(
                peeked == ids,
                cx.rule,
                "peek(Ready) order {peeked:?} is not enqueue order {ids:?}"
            );
            let mut got = Vec::new();
            for size in [1u32, 3, 1, 10, 5, 50] {
                got.extend(cx.claim(size, LONG).await?.into_iter().map(|l| l.id()));
            }
            ensure!(
                got == ids,
                cx.rule,
                "claim order {got:?} is not enqueue order {ids:?}"
            );
            Ok(())
        },
    )
    .await
}

/// Higher priority is claimed first, FIFO within each priority, whatever
/// the enqueue order (INV-8).
pub async fn priority_then_fifo<F: BackendFactory>(factory: &F) -> CheckResult {
    run(
        factory,
        "priority_then_fifo",
        Rule::Inv8,
        Needs::PRIORITIES.and(Needs::GLOBAL_ORDER),
        |cx| async move {
            let prios = [0, 5, -3, 5, 0, 10, -3, 10, 0, i32::MAX, i32::MIN, 5];
            let mut enq = Vec::new();
            for (i, p) in prios.iter().enumerate() {
                let id = cx
                    .enqueue(vec![NewItem::new(format!("p{p}-{i}")).priority(*p)])
                    .await?[0];
                enq.push((*p, i, id));
            }
            let mut want = enq.clone();
            want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let want: Vec<ItemId> = want.into_iter().map(|w| w.2).collect();
            let mut got = Vec::new();
            for size in [2u32, 1, 4, 10] {
                got.extend(cx.claim(size, LONG).await?.into_iter().map(|l| l.id()));
            }
            ensure!(
                got == want,
                cx.rule,
                "claim order {got:?}, expected by priority then FIFO {want:?}"
            );
            let late_low = cx.enqueue(vec![NewItem::new("low").priority(-1)]).await?[0];
            let late_high = cx.enqueue(vec![NewItem::new("high").priority(1)]).await?[0];
            let got: Vec<ItemId> = cx
                .claim(2, LONG)
                .await?
                .into_iter()
                .map(|l| l.id())
                .collect();
            ensure!(
                got == vec![late_high, late_low],
                cx.rule,
                "a later, higher priority item was not first: {got:?}"
            );
            Ok(())
        },
    )
    .await
}
