//! Hostile input at every public entry point: a typed error or a documented
//! clamp, nothing written by a rejected call, no panic. One public check,
//! generic over a [`BackendFactory`], so any backend can run it.

use leaseq_core::BackendExt as _;
use std::time::Duration;

use leaseq_conformance::{BackendFactory, CheckResult, Outcome, Rule, Violation};
use leaseq_core::limits::{
    MAX_CLAIM, MAX_DEDUP_KEY_LEN, MAX_DELAY, MAX_ENQUEUE_BATCH, MAX_LEASE_TTL, MAX_REASON_LEN,
};
use leaseq_core::testing::IndexSnapshot;
use leaseq_core::{
    Backend, ClaimSpec, Error, ItemId, ItemState, LeaseKey, LeaseToken, LeaseTtl, NewItem,
    QueueName, QueueStats, Result,
};

const RULE: Rule = Rule::Contract("bad input");
const HOUR: Duration = Duration::from_secs(3600);

fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<(), Violation> {
    if cond {
        Ok(())
    } else {
        Err(Violation::new(RULE, msg()))
    }
}

fn ok<T>(r: Result<T>, doing: &str) -> Result<T, Violation> {
    r.map_err(|e| Violation::new(RULE, format!("{doing} failed unexpectedly: {e}")))
}

fn invalid<T: std::fmt::Debug>(r: Result<T>, what: &str) -> Result<(), Violation> {
    match r {
        Err(Error::InvalidInput { .. }) => Ok(()),
        other => Err(Violation::new(
            RULE,
            format!("{what} answered {other:?}; expected InvalidInput"),
        )),
    }
}

/// Stats and (with hooks) the raw indexes: what "nothing written" compares.
async fn state(
    b: &dyn Backend,
    q: &QueueName,
) -> Result<(QueueStats, Option<IndexSnapshot>), Violation> {
    let snap = match b.test_hooks() {
        Some(h) => Some(ok(h.snapshot(q).await, "snapshot")?),
        None => None,
    };
    Ok((ok(b.stats(q).await, "stats")?, snap))
}

/// Text with a NUL character (valid in a Rust string, so in a dedup key and
/// a failure reason) is stored, or refused as `InvalidInput`; never a
/// server error.
pub async fn nul_text(factory: &dyn BackendFactory) -> CheckResult {
    let tb = match factory.backend().await {
        Ok(tb) => tb,
        Err(u) => return Ok(Outcome::Unavailable(u.0)),
    };
    let b = tb.backend.as_ref();
    let q = ok(
        QueueName::new(format!("nul-{}", crate::env::tag())),
        "naming",
    )?;
    let result = async {
        ok(b.enqueue(&q, vec![NewItem::new("r")]).await, "enqueue")?;
        let spec = ok(ClaimSpec::new(1, HOUR), "spec")?;
        let lease = ok(b.claim(&q, spec).await, "claim")?.leases;
        let lease = lease
            .first()
            .ok_or_else(|| Violation::new(RULE, "nothing claimed"))?;
        let reason = b.fail(&lease.key, "bad\0reason").await;
        let key = b
            .enqueue(&q, vec![NewItem::new("nul").dedup_key("a\0b")])
            .await;
        let fine = |r: &Result<()>| matches!(r, Ok(()) | Err(Error::InvalidInput { .. }));
        let (reason, key) = (reason, key.map(|_| ()));
        check(fine(&reason) && fine(&key), || {
            format!(
                "text with a NUL: fail(reason) answered {reason:?}, enqueue(dedup key) \
                 answered {key:?}; expected Ok or InvalidInput"
            )
        })?;
        Ok(())
    }
    .await;
    let _ = ok(b.admin(), "the admin group")?.purge(&q).await;
    result.map(|()| Outcome::Passed)
}

/// Every hostile value tried against a backend from `factory`, on two
/// queues of its own that it purges afterwards.
pub async fn hostile_input(factory: &dyn BackendFactory) -> CheckResult {
    let tb = match factory.backend().await {
        Ok(tb) => tb,
        Err(u) => return Ok(Outcome::Unavailable(u.0)),
    };
    let b = tb.backend.as_ref();
    let tag = crate::env::tag();
    let q = ok(QueueName::new(format!("hostile-{tag}")), "naming")?;
    let other = ok(QueueName::new(format!("hostile-{tag}:ready")), "naming")?;
    let result = async {
        names(b, &tag).await?;
        items(b, &q).await?;
        claims(b, &q).await?;
        tokens(b, &q, &other).await?;
        inspection(b, &q, &tag).await
    }
    .await;
    let _ = ok(b.admin(), "the admin group")?.purge(&q).await;
    let _ = ok(b.admin(), "the admin group")?.purge(&other).await;
    result.map(|()| Outcome::Passed)
}

/// Bad names are refused by `QueueName`; odd valid ones (that look like key
/// suffixes of another queue) stay isolated from each other.
async fn names(b: &dyn Backend, tag: &str) -> Result<(), Violation> {
    let bad: Vec<String> = vec![
        String::new(),
        "x".repeat(QueueName::MAX_LEN + 1),
        "x".repeat(1 << 20),
        "ключ".into(),
        "emoji-😀".into(),
        "a b".into(),
        "a{b}".into(),
        "a\0b".into(),
        "a\nb".into(),
        "a/b".into(),
        "a'b\"".into(),
        String::from_utf8_lossy(&[b'a', 0xff, 0xfe]).into_owned(),
        "\u{feff}q".into(),
    ];
    for name in &bad {
        invalid(
            QueueName::new(name),
            &format!("QueueName::new({:.40?})", name),
        )?;
    }
    let base = format!("n{tag}");
    let odd = [
        base.clone(),
        format!("{base}:ready"),
        format!("{base}:item:1"),
        format!("{base}:"),
        format!("{base}."),
        format!("{base}:{}", "z".repeat(QueueName::MAX_LEN - base.len() - 1)),
    ];
    let mut queues = Vec::new();
    for name in &odd {
        let q = ok(QueueName::new(name), &format!("QueueName::new({name})"))?;
        ok(
            b.enqueue(&q, vec![NewItem::new(name.clone())]).await,
            "enqueue",
        )?;
        queues.push(q);
    }
    for q in &queues {
        let spec = ok(ClaimSpec::new(MAX_CLAIM, HOUR), "spec")?;
        let got = ok(b.claim(q, spec).await, "claim")?;
        let payloads: Vec<_> = got.leases.iter().map(|l| l.payload.clone()).collect();
        check(
            payloads.len() == 1 && payloads[0] == q.as_str().as_bytes(),
            || format!("queue {q} handed out {payloads:?}; expected only its own item"),
        )?;
        ok(ok(b.admin(), "the admin group")?.purge(q).await, "purge")?;
    }
    Ok(())
}

/// Payloads at and over the limit, batch sizes, priorities, attempts,
/// delays and dedup keys at their edges.
async fn items(b: &dyn Backend, q: &QueueName) -> Result<(), Violation> {
    let limit = b.capabilities().bounds.max_payload_bytes;
    let before = state(b, q).await?;
    let good = || NewItem::new("good").dedup_key("hostile-held");
    let rejected: Vec<(&str, Vec<NewItem>)> = vec![
        (
            "a payload 1 byte over",
            vec![good(), NewItem::new(vec![1u8; limit + 1])],
        ),
        (
            "a payload 4x over",
            vec![good(), NewItem::new(vec![2u8; limit * 4])],
        ),
        (
            "a batch over the limit",
            vec![NewItem::new("x"); MAX_ENQUEUE_BATCH + 1],
        ),
        (
            "a delay 1 ms over",
            vec![
                good(),
                NewItem::new("x").delay(MAX_DELAY + Duration::from_millis(1)),
            ],
        ),
        (
            "a delay of Duration::MAX",
            vec![good(), NewItem::new("x").delay(Duration::MAX)],
        ),
        (
            "max_attempts 0",
            vec![good(), NewItem::new("x").max_attempts(0)],
        ),
        (
            "an empty dedup key",
            vec![good(), NewItem::new("x").dedup_key("")],
        ),
        (
            "a dedup key 1 byte over",
            vec![
                good(),
                NewItem::new("x").dedup_key("é".repeat(MAX_DEDUP_KEY_LEN / 2) + "k"),
            ],
        ),
    ];
    for (what, batch) in rejected {
        invalid(b.enqueue(q, batch).await, &format!("enqueue with {what}"))?;
        let after = state(b, q).await?;
        check(after == before, || {
            format!("a rejected enqueue ({what}) wrote: before {before:?}, after {after:?}")
        })?;
    }
    // At the edges but valid: accepted, and shown as given.
    let edge = vec![
        NewItem::new(vec![0xffu8; limit]).priority(i32::MIN),
        NewItem::new(Vec::new())
            .priority(i32::MAX)
            .max_attempts(u32::MAX),
        NewItem::new("far").delay(MAX_DELAY),
        NewItem::new("key").dedup_key("é".repeat(MAX_DEDUP_KEY_LEN / 2)),
        NewItem::new("odd key").dedup_key("{a}:\n\u{1F600}"),
        NewItem::new("held").dedup_key("hostile-held"),
    ];
    let ids: Vec<ItemId> = ok(b.enqueue(q, edge).await, "enqueue at the edges")?
        .iter()
        .map(|e| e.id)
        .collect();
    let now = ok(b.now().await, "now")?;
    let far = ok(b.item(q, ids[2]).await, "item")?;
    check(
        far.state == ItemState::Scheduled
            && far
                .due_at
                .is_some_and(|t| t >= now.saturating_add(MAX_DELAY - HOUR)),
        || format!("an item delayed by MAX_DELAY shows {far:?}"),
    )?;
    let top = ok(b.item(q, ids[1]).await, "item")?;
    // PostgreSQL stores attempts as `integer` and clamps at i32::MAX: more
    // than two billion claims either way.
    check(top.max_attempts >= i32::MAX as u32, || {
        format!("max_attempts u32::MAX is shown as {}", top.max_attempts)
    })?;
    let key = ok(b.item(q, ids[3]).await, "item")?;
    check(
        key.dedup_key.as_deref() == Some(&*"é".repeat(MAX_DEDUP_KEY_LEN / 2)),
        || format!("a 512-byte dedup key came back as {:?}", key.dedup_key),
    )?;
    let got = ok(
        b.claim(q, ok(ClaimSpec::new(MAX_CLAIM, HOUR), "spec")?)
            .await,
        "claim",
    )?;
    let order: Vec<ItemId> = got.leases.iter().map(|l| l.id()).collect();
    check(
        order.first() == Some(&ids[1]) && order.last() == Some(&ids[0]) && order.len() == 5,
        || format!("priorities i32::MAX .. i32::MIN claimed in order {order:?} (ids {ids:?})"),
    )?;
    check(got.leases[4].payload.len() == limit, || {
        "a payload at the limit was cut".into()
    })?;
    ok(ok(b.admin(), "the admin group")?.purge(q).await, "purge")?;
    let full = vec![NewItem::new("b"); MAX_ENQUEUE_BATCH];
    let n = ok(b.enqueue(q, full).await, "a batch at the limit")?.len();
    check(n == MAX_ENQUEUE_BATCH, || {
        format!("a full batch returned {n} results")
    })?;
    let drained = ok(
        b.claim(q, ok(ClaimSpec::new(MAX_CLAIM, HOUR), "spec")?)
            .await,
        "claim",
    )?;
    check(drained.leases.len() == MAX_CLAIM as usize, || {
        format!("a claim of {MAX_CLAIM} returned {}", drained.leases.len())
    })?;
    ok(ok(b.admin(), "the admin group")?.purge(q).await, "purge")?;
    Ok(())
}

/// Claims of 0 and 1,000,000, ttls of 0 and of years: refused where they are
/// built; the longest valid lease works.
async fn claims(b: &dyn Backend, q: &QueueName) -> Result<(), Violation> {
    invalid(ClaimSpec::new(0, HOUR), "a claim of 0")?;
    invalid(ClaimSpec::new(1_000_000, HOUR), "a claim of 1,000,000")?;
    invalid(ClaimSpec::new(u32::MAX, HOUR), "a claim of u32::MAX")?;
    invalid(ClaimSpec::new(1, Duration::ZERO), "a ttl of 0")?;
    invalid(
        ClaimSpec::new(1, Duration::from_secs(5 * 365 * 86_400)),
        "a ttl of 5 years",
    )?;
    invalid(LeaseTtl::new(Duration::MAX), "a ttl of Duration::MAX")?;
    invalid(
        LeaseTtl::new(MAX_LEASE_TTL + Duration::from_millis(1)),
        "a ttl 1 ms over",
    )?;
    check(
        LeaseTtl::new(Duration::from_nanos(1))
            .map(|t| t.as_millis())
            .ok()
            == Some(1),
        || "a ttl of 1 ns is not rounded up to 1 ms".into(),
    )?;
    ok(b.enqueue(q, vec![NewItem::new("long")]).await, "enqueue")?;
    let now = ok(b.now().await, "now")?;
    let spec = ok(ClaimSpec::new(1, MAX_LEASE_TTL), "spec")?;
    let lease = ok(b.claim(q, spec).await, "claim")?.leases.pop();
    let lease = lease.ok_or_else(|| Violation::new(RULE, "the item was not claimed"))?;
    check(
        lease.expires_at >= now.saturating_add(MAX_LEASE_TTL),
        || format!("a 7-day lease expires at {} (now {now})", lease.expires_at),
    )?;
    let ttl = ok(LeaseTtl::new(MAX_LEASE_TTL), "ttl")?;
    ok(b.extend(&lease.key, ttl).await, "extend by MAX_LEASE_TTL")?;
    invalid(
        b.release(&lease.key, MAX_DELAY + Duration::from_millis(1))
            .await,
        "release with a delay 1 ms over",
    )?;
    invalid(
        b.release(&lease.key, Duration::MAX).await,
        "release with Duration::MAX",
    )?;
    ok(b.ack(&lease.key).await, "ack after rejected releases")?;
    Ok(())
}

/// Tokens from another queue, of another item, forged, or for ids that do
/// not exist: `LeaseLost` or `NotFound`, and nothing changes.
async fn tokens(b: &dyn Backend, q: &QueueName, other: &QueueName) -> Result<(), Violation> {
    ok(
        b.enqueue(q, vec![NewItem::new("a"), NewItem::new("b")])
            .await,
        "enqueue",
    )?;
    ok(b.enqueue(other, vec![NewItem::new("c")]).await, "enqueue")?;
    // One spec per claim: a spec names its claim's tokens.
    let spec = ok(ClaimSpec::new(2, HOUR), "spec")?;
    let leases = ok(b.claim(q, spec).await, "claim")?.leases;
    let spec = ok(ClaimSpec::new(2, HOUR), "spec")?;
    let theirs = ok(b.claim(other, spec).await, "claim")?.leases;
    check(leases.len() == 2 && theirs.len() == 1, || {
        "claims came back short".into()
    })?;
    let (a, bb, c) = (&leases[0].key, &leases[1].key, &theirs[0].key);
    let keys = vec![
        (
            "another queue",
            LeaseKey {
                queue: other.clone(),
                ..a.clone()
            },
        ),
        (
            "another queue's token",
            LeaseKey {
                token: c.token,
                ..a.clone()
            },
        ),
        (
            "another item's token",
            LeaseKey {
                token: bb.token,
                ..a.clone()
            },
        ),
        (
            "a forged token",
            LeaseKey {
                token: LeaseToken::random(),
                ..a.clone()
            },
        ),
        (
            "the zero token",
            LeaseKey {
                token: LeaseToken::from_u128(0),
                ..a.clone()
            },
        ),
        (
            "id 0",
            LeaseKey {
                id: ItemId::new(0),
                ..a.clone()
            },
        ),
        (
            "id u64::MAX",
            LeaseKey {
                id: ItemId::new(u64::MAX),
                ..a.clone()
            },
        ),
        (
            "id i64::MAX + 1",
            LeaseKey {
                id: ItemId::new(1 << 63),
                ..a.clone()
            },
        ),
    ];
    let before = (state(b, q).await?, state(b, other).await?);
    let ttl = ok(LeaseTtl::new(HOUR), "ttl")?;
    for (what, key) in &keys {
        let answers = [
            b.ack(key).await.map(|_| ()),
            b.extend(key, ttl).await.map(|_| ()),
            b.release(key, Duration::ZERO).await.map(|_| ()),
            b.fail(key, "x").await.map(|_| ()),
        ];
        for (verb, r) in ["ack", "extend", "release", "fail"].iter().zip(answers) {
            // An id no backend can hold may also be refused as invalid.
            let out_of_range =
                key.id.get() > i64::MAX as u64 && matches!(r, Err(Error::InvalidInput { .. }));
            check(
                out_of_range
                    || matches!(
                        r,
                        Err(Error::LeaseLost { .. }) | Err(Error::NotFound { .. })
                    ),
                || format!("{verb} with {what} answered {r:?}; expected LeaseLost"),
            )?;
        }
        let after = (state(b, q).await?, state(b, other).await?);
        check(after == before, || {
            format!("calls with {what} changed the queues")
        })?;
    }
    for key in [a, bb, c] {
        ok(b.ack(key).await, "ack with the right token after all that")?;
    }
    Ok(())
}

/// Inspection and admin calls with extreme limits and ids, failure reasons
/// far over the limit, and queues that were never used.
async fn inspection(b: &dyn Backend, q: &QueueName, tag: &str) -> Result<(), Violation> {
    for id in [0, 1 << 63, u64::MAX] {
        let r = b.item(q, ItemId::new(id)).await;
        let out_of_range = id > i64::MAX as u64 && matches!(r, Err(Error::InvalidInput { .. }));
        check(
            out_of_range || matches!(r, Err(Error::NotFound { .. })),
            || format!("item({id}) answered {r:?}; expected NotFound"),
        )?;
    }
    ok(
        b.enqueue(q, vec![NewItem::new("r").max_attempts(1)]).await,
        "enqueue",
    )?;
    let lease = ok(
        b.claim(q, ok(ClaimSpec::new(1, HOUR), "spec")?).await,
        "claim",
    )?
    .leases;
    let lease = lease
        .first()
        .ok_or_else(|| Violation::new(RULE, "nothing claimed"))?;
    let reason = format!("{}\u{1F600}", "é".repeat(1 << 19));
    ok(
        b.fail(&lease.key, &reason).await,
        "fail with a 1 MiB reason",
    )?;
    let dead = ok(b.item(q, lease.id()).await, "item")?;
    let kept = dead.last_error.unwrap_or_default();
    check(
        kept.len() <= MAX_REASON_LEN
            && kept.len() >= MAX_REASON_LEN - 4
            && reason.starts_with(&kept),
        || format!("a 1 MiB reason was kept as {} bytes", kept.len()),
    )?;
    for st in ItemState::ALL {
        let none = ok(b.peek(q, st, 0).await, "peek with limit 0")?;
        check(none.is_empty(), || {
            format!("peek({st}, 0) returned {} items", none.len())
        })?;
        let all = ok(
            b.peek(q, st, usize::MAX).await,
            "peek with limit usize::MAX",
        )?;
        let want = usize::from(st == ItemState::Dead);
        check(all.len() == want, || {
            format!("peek({st}, usize::MAX) returned {} items", all.len())
        })?;
    }
    check(
        ok(
            ok(b.admin(), "the admin group")?.redrive(q, 0).await,
            "redrive(0)",
        )? == 0,
        || "redrive(0) moved items".into(),
    )?;
    check(
        ok(
            ok(b.admin(), "the admin group")?
                .redrive(q, usize::MAX)
                .await,
            "redrive(usize::MAX)",
        )? == 1,
        || "redrive(usize::MAX) did not move the dead item".into(),
    )?;
    let unused = ok(QueueName::new(format!("never-{tag}")), "naming")?;
    check(
        // Nothing in any state, nothing completed (`None` without History).
        ok(b.stats(&unused).await, "stats")?
            == QueueStats {
                completed: b.history().ok().map(|_| 0),
                ..QueueStats::default()
            },
        || "an unused queue has items".into(),
    )?;
    check(ok(b.reap(&unused).await, "reap")?.recovered() == 0, || {
        "reap of an unused queue recovered".into()
    })?;
    check(
        ok(
            ok(b.admin(), "the admin group")?.purge(&unused).await,
            "purge",
        )? == 0,
        || "purge of an unused queue deleted".into(),
    )?;
    let claimed = ok(
        b.claim(&unused, ok(ClaimSpec::new(MAX_CLAIM, HOUR), "spec")?)
            .await,
        "claim",
    )?;
    check(claimed.leases.is_empty(), || {
        "a claim on an unused queue returned items".into()
    })?;
    Ok(())
}
