//! Bad input: every `InvalidInput` case is rejected before anything is
//! written, and odd-but-valid payloads round-trip.

use std::time::Duration;

use leaseq_core::limits::{MAX_DEDUP_KEY_LEN, MAX_DELAY, MAX_ENQUEUE_BATCH};
use leaseq_core::testing::IndexSnapshot;
use leaseq_core::{Error, ItemState, NewItem, QueueStats};

use crate::cx::{run, Cx, Needs, LONG};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("input validation");

async fn state(cx: &Cx) -> Result<(QueueStats, Option<IndexSnapshot>), Violation> {
    let snap = match cx.hooks() {
        Some(h) => Some(h.snapshot(&cx.q).await.or_fail(RULE, "snapshot hook")?),
        None => None,
    };
    Ok((cx.stats().await?, snap))
}

/// Each bad batch (payload over the limit, zero attempts, delay over the
/// limit, empty or long dedup key, too many items) is rejected with
/// `InvalidInput` and writes nothing, not even its good items.
pub async fn bad_enqueue_writes_nothing(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "bad_enqueue_writes_nothing",
        RULE,
        Needs::NONE,
        |cx| async move {
            cx.push_n(1).await?;
            let before = state(&cx).await?;
            let limit = cx.b.capabilities().bounds.max_payload_bytes;
            let good = || NewItem::new("good").dedup_key("held-by-nothing");
            let mut cases: Vec<(&str, Vec<NewItem>)> = vec![
                (
                    "max_attempts 0",
                    vec![good(), NewItem::new("x").max_attempts(0)],
                ),
                (
                    "delay over the limit",
                    vec![
                        good(),
                        NewItem::new("x").delay(MAX_DELAY + Duration::from_secs(1)),
                    ],
                ),
                (
                    "empty dedup key",
                    vec![good(), NewItem::new("x").dedup_key("")],
                ),
                (
                    "long dedup key",
                    vec![
                        good(),
                        NewItem::new("x").dedup_key("k".repeat(MAX_DEDUP_KEY_LEN + 1)),
                    ],
                ),
                (
                    "too many items",
                    vec![NewItem::new("x"); MAX_ENQUEUE_BATCH + 1],
                ),
            ];
            if limit < 64 << 20 {
                cases.push((
                    "payload over the limit",
                    vec![good(), NewItem::new(vec![7u8; limit + 1])],
                ));
            }
            for (what, batch) in cases {
                let res = cx.b.enqueue(&cx.q, batch).await;
                ensure!(
                    matches!(res, Err(Error::InvalidInput { .. })),
                    RULE,
                    "enqueue with {what} returned {:?}, expected InvalidInput",
                    res.map(|v| v.len())
                );
                let after = state(&cx).await?;
                ensure!(
                    after == before,
                    RULE,
                    "a rejected enqueue ({what}) wrote: before {before:?}, after {after:?}"
                );
            }
            if cx.b.capabilities().dedup {
                let e =
                    cx.b.enqueue(&cx.q, vec![good()])
                        .await
                        .or_fail(RULE, "enqueue")?;
                ensure!(
                    e.len() == 1 && !e[0].deduplicated,
                    RULE,
                    "a rejected batch left its dedup key held: {e:?}"
                );
            }
            Ok(())
        },
    )
    .await
}

/// `release` with a delay over the limit is `InvalidInput` and leaves the
/// lease as it was; the holder can still ack.
pub async fn bad_release_keeps_lease(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "bad_release_keeps_lease",
        RULE,
        Needs::NONE,
        |cx| async move {
            cx.push_n(1).await?;
            let lease = cx.claim_one(LONG).await?;
            let res =
                cx.b.release(&lease.key, MAX_DELAY + Duration::from_secs(1))
                    .await;
            ensure!(
                matches!(res, Err(Error::InvalidInput { .. })),
                RULE,
                "release with a delay over the limit returned {res:?}"
            );
            let info = cx.must_item(lease.id()).await?;
            ensure!(
                info.state == ItemState::Leased
                    && info.due_at == Some(lease.expires_at)
                    && info.attempts == 1,
                RULE,
                "a rejected release changed the item: {info:?}"
            );
            cx.b.ack(&lease.key)
                .await
                .or_fail(RULE, "ack after a rejected release")?;
            Ok(())
        },
    )
    .await
}

/// An empty payload, every byte value, and a payload exactly at the limit
/// round-trip unchanged.
pub async fn edge_payloads_round_trip(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "edge_payloads_round_trip",
        RULE,
        Needs::NONE,
        |cx| async move {
            let limit = cx.b.capabilities().bounds.max_payload_bytes;
            let mut payloads: Vec<Vec<u8>> =
                vec![Vec::new(), (0..=255u8).collect(), b"\0\r\n\"'{}".to_vec()];
            if limit <= 4 << 20 {
                payloads.push((0..limit).map(|i| (i % 251) as u8).collect());
            }
            for p in payloads {
                let len = p.len();
                let id = cx.enqueue(vec![NewItem::new(p.clone())]).await?[0];
                let lease = cx.claim_one(LONG).await?;
                ensure!(
                    lease.id() == id && lease.payload.as_ref() == p.as_slice(),
                    RULE,
                    "a payload of {len} bytes did not round-trip (got {} bytes)",
                    lease.payload.len()
                );
                cx.b.ack(&lease.key).await.or_fail(RULE, "ack")?;
            }
            Ok(())
        },
    )
    .await
}

/// One answer per hostile input, the same on every backend: a NUL in a
/// dedup key is `InvalidInput` and writes nothing; a peek over
/// `MAX_PEEK` returns `MAX_PEEK` items; an id over `i64::MAX` is
/// `NotFound` for `item` and `LeaseLost` for a fenced call.
pub async fn hostile_inputs_have_one_answer(factory: &dyn BackendFactory) -> CheckResult {
    let rule = Rule::Contract("hostile input");
    run(
        factory,
        "hostile_inputs_have_one_answer",
        rule,
        Needs::NONE,
        |cx| async move {
            match cx
                .b
                .enqueue(
                    &cx.q,
                    vec![NewItem::new("x"), NewItem::new("y").dedup_key("a\0b")],
                )
                .await
            {
                Err(leaseq_core::Error::InvalidInput { .. }) => {}
                other => {
                    return Err(cx.fail(format!(
                        "a NUL in a dedup key returned {other:?}; expected InvalidInput"
                    )))
                }
            }
            cx.expect_stats([0, 0, 0, 0], "after a refused batch")
                .await?;
            let huge = leaseq_core::ItemId::new(u64::MAX);
            match cx.b.item(&cx.q, huge).await {
                Err(leaseq_core::Error::NotFound { .. }) => {}
                other => {
                    return Err(cx.fail(format!(
                        "item({huge}) returned {other:?}; expected NotFound"
                    )))
                }
            }
            let lease = leaseq_core::LeaseKey {
                queue: cx.q.clone(),
                id: huge,
                token: leaseq_core::LeaseToken::random(),
            };
            crate::cx::expect_lost(cx.b.ack(&lease).await, "an ack naming an id over i64::MAX")?;
            let n = leaseq_core::limits::MAX_PEEK + 1;
            cx.push_n(n).await?;
            let got =
                cx.b.peek(&cx.q, ItemState::Ready, n * 2)
                    .await
                    .or_fail(rule, "peek")?;
            ensure!(
                got.len() == leaseq_core::limits::MAX_PEEK,
                rule,
                "a peek of {} over {n} Ready items returned {}; expected MAX_PEEK = {}",
                n * 2,
                got.len(),
                leaseq_core::limits::MAX_PEEK
            );
            Ok(())
        },
    )
    .await
}
