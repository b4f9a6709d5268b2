//! Lost replies, on both clients: claims recovered by their spec's token
//! family, lease fates, enqueues written once per request, and failures
//! classified by what they prove (`Unavailable`: certainly not applied;
//! `Backend`: may have been applied).
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::server::PrivateServer;
use common::Which;
use leaseq_core::limits::REQUEST_MEMORY;
use leaseq_core::{
    Backend, ClaimSpec, Error, ItemId, ItemState, Lease, LeaseFate, LeaseKey, LeaseToken, NewItem,
    QueueName, QueueStats,
};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;

const TTL: Duration = Duration::from_secs(60);

fn stats(ready: u64, scheduled: u64, leased: u64, dead: u64) -> QueueStats {
    QueueStats {
        ready,
        scheduled,
        leased,
        dead,
        paused: false,
        completed: None,
    }
}

/// `s` without its completion counter, which these checks do not follow.
fn counts(s: QueueStats) -> QueueStats {
    QueueStats {
        completed: None,
        ..s
    }
}

fn keys(ls: &[Lease]) -> Vec<(ItemId, LeaseToken)> {
    ls.iter().map(|l| (l.id(), l.token())).collect()
}

async fn push(b: &dyn Backend, q: &QueueName, n: usize) -> Vec<ItemId> {
    let items = (0..n).map(|i| NewItem::new(format!("p{i}"))).collect();
    let out = b.enqueue(q, items).await.expect("enqueue");
    out.into_iter().map(|e| e.id).collect()
}

/// A claim's leases carry the spec's tokens in claim order, and
/// `recover_claim` with that spec returns exactly them (ids, tokens,
/// payloads, attempts, expiry), claiming nothing; another spec recovers
/// nothing, and an acked lease is no longer recovered.
async fn recover_claim_returns_the_claims_leases(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "recover").await else {
        return;
    };
    let q = QueueName::new("rc").expect("valid");
    assert!(b
        .recover_claim(&q, &ClaimSpec::new(3, TTL).expect("spec"))
        .await
        .expect("recover on an empty queue")
        .leases
        .is_empty());
    push(b.as_ref(), &q, 5).await;
    let spec = ClaimSpec::new(3, TTL).expect("spec");
    let claimed = b.claim(&q, spec.duplicate()).await.expect("claim");
    assert_eq!(claimed.leases.len(), 3);
    let want: Vec<LeaseToken> = (0..3).map(|i| spec.token(i)).collect();
    let got: Vec<LeaseToken> = claimed.leases.iter().map(Lease::token).collect();
    assert_eq!(got, want, "the i-th lease gets spec.token(i)");

    let again = b.recover_claim(&q, &spec).await.expect("recover_claim");
    assert_eq!(keys(&again.leases), keys(&claimed.leases));
    assert_eq!(
        again.leases, claimed.leases,
        "recovered as claim returned them"
    );
    assert!(again.repairs.is_empty());
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(2, 0, 3, 0));

    let other = ClaimSpec::new(3, TTL).expect("spec");
    let none = b.recover_claim(&q, &other).await.expect("recover_claim");
    assert!(none.leases.is_empty(), "{:?}", keys(&none.leases));

    b.ack(&claimed.leases[1].key).await.expect("ack");
    let rest = b.recover_claim(&q, &spec).await.expect("recover_claim");
    assert_eq!(
        keys(&rest.leases),
        vec![keys(&claimed.leases)[0], keys(&claimed.leases)[2]]
    );

    // An expired lease no reaper took is recovered and renewed, so the
    // lost claim reply costs no attempt; once reaped, it is not.
    let hooks = b.test_hooks().expect("test hooks");
    hooks.expire_leases(&q).await.expect("expire");
    let renewed = b.recover_claim(&q, &spec).await.expect("recover_claim");
    assert_eq!(
        keys(&renewed.leases),
        vec![keys(&claimed.leases)[0], keys(&claimed.leases)[2]]
    );
    hooks.expire_leases(&q).await.expect("expire");
    b.reap(&q).await.expect("reap");
    assert!(b
        .recover_claim(&q, &spec)
        .await
        .expect("recover_claim")
        .leases
        .is_empty());
}

/// A claim that stops at its repair budget and goes on in a second round
/// numbers its slots across both rounds: tokens are `spec.token(0..n)` in
/// claim order, and `recover_claim` returns them in that order.
async fn tokens_count_across_repair_rounds(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "rounds").await else {
        return;
    };
    let q = QueueName::new("rounds").expect("valid");
    let layout = KeyLayout::new(&cleanup.prefix, &q).expect("layout");
    let first = b
        .enqueue(
            &q,
            vec![
                NewItem::new("a0").priority(2),
                NewItem::new("a1").priority(2),
            ],
        )
        .await
        .expect("enqueue");
    let second = b
        .enqueue(&q, vec![NewItem::new("b0"), NewItem::new("b1")])
        .await
        .expect("enqueue");
    // 1,100 entries without items between the two pairs (score -1): more
    // than one round's repair budget.
    let mut raw = common::raw(&cleanup.url).await;
    let dangling: Vec<(i64, String)> = (0..1_100u64)
        .map(|i| (-1, KeyLayout::member(ItemId::new(1_000_000 + i))))
        .collect();
    for chunk in dangling.chunks(500) {
        let _: i64 = redis::cmd("ZADD")
            .arg(layout.ready())
            .arg(chunk)
            .query_async(&mut raw)
            .await
            .expect("zadd");
    }
    let spec = ClaimSpec::new(4, TTL).expect("spec");
    let claimed = b.claim(&q, spec.duplicate()).await.expect("claim");
    assert_eq!(claimed.repairs.len(), 1_100);
    let ids: Vec<ItemId> = claimed.leases.iter().map(Lease::id).collect();
    let want_ids: Vec<ItemId> = first.iter().chain(&second).map(|e| e.id).collect();
    assert_eq!(ids, want_ids);
    let tokens: Vec<LeaseToken> = claimed.leases.iter().map(Lease::token).collect();
    assert_eq!(tokens, (0..4).map(|i| spec.token(i)).collect::<Vec<_>>());
    let again = b.recover_claim(&q, &spec).await.expect("recover_claim");
    assert_eq!(keys(&again.leases), keys(&claimed.leases));
}

/// `lease_fate`: Held while the token holds the item; Finished with the
/// item's state after the lease's own ack, release or fail (while the
/// lease could not have expired, and past that while no reap took it);
/// Lost once `held_until` has passed and the lease was reaped, or past the
/// traces' memory.
async fn lease_fate_names_what_happened(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "fate").await else {
        return;
    };
    let q = QueueName::new("fate").expect("valid");
    push(b.as_ref(), &q, 4).await;
    let ls = b
        .claim(&q, ClaimSpec::new(4, TTL).expect("spec"))
        .await
        .expect("claim")
        .leases;
    assert_eq!(ls.len(), 4);
    let until = ls[0].expires_at;
    let fate = |key: LeaseKey, until| {
        let b = Arc::clone(&b);
        async move { b.lease_fate(&key, until).await.expect("lease_fate") }
    };

    assert_eq!(fate(ls[0].key.clone(), until).await, LeaseFate::Held);
    b.ack(&ls[0].key).await.expect("ack");
    assert_eq!(
        fate(ls[0].key.clone(), until).await,
        LeaseFate::Finished { state: None }
    );
    b.release(&ls[1].key, Duration::ZERO)
        .await
        .expect("release");
    assert_eq!(
        fate(ls[1].key.clone(), until).await,
        LeaseFate::Finished {
            state: Some(ItemState::Ready)
        }
    );
    b.fail(&ls[2].key, "no").await.expect("fail");
    assert_eq!(
        fate(ls[2].key.clone(), until).await,
        LeaseFate::Finished {
            state: Some(ItemState::Dead)
        }
    );

    // The last lease expires and is reaped: with `held_until` in the past,
    // a reaper may have ended it.
    assert_eq!(fate(ls[3].key.clone(), until).await, LeaseFate::Held);
    let hooks = b.test_hooks().expect("test hooks");
    assert_eq!(hooks.expire_leases(&q).await.expect("expire"), 1);
    assert_eq!(b.reap(&q).await.expect("reap").requeued, 1);
    let past = b.now().await.expect("now");
    assert_eq!(fate(ls[3].key.clone(), past).await, LeaseFate::Lost);
    // The same lease asked about with a later `held_until`: only its own
    // call could have ended it (the fate trusts the caller's expiry).
    assert_eq!(
        fate(ls[3].key.clone(), until).await,
        LeaseFate::Finished {
            state: Some(ItemState::Ready)
        }
    );
    // Past its expiry, the ack's lease is still told Finished: no reap
    // took it (the takeover traces hold the reap's lease only).
    assert_eq!(
        fate(ls[0].key.clone(), past).await,
        LeaseFate::Finished { state: None }
    );
    // A token that never held the item: no reap took it either, so it
    // cannot be told from one whose own call ended it (not Held, though).
    let forged = LeaseKey {
        token: LeaseToken::random(),
        ..ls[3].key.clone()
    };
    assert_eq!(
        fate(forged, past).await,
        LeaseFate::Finished {
            state: Some(ItemState::Ready)
        }
    );
    // Past the traces' memory nothing is told Finished any more.
    let long_ago = leaseq_core::Timestamp::from_millis(0);
    assert_eq!(fate(ls[0].key.clone(), long_ago).await, LeaseFate::Lost);
    // An item of a queue that never existed is gone.
    let nowhere = LeaseKey {
        queue: QueueName::new("nowhere").expect("valid"),
        ..ls[0].key.clone()
    };
    assert_eq!(
        fate(nowhere.clone(), until).await,
        LeaseFate::Finished { state: None }
    );
    assert_eq!(fate(nowhere, long_ago).await, LeaseFate::Lost);
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(2, 0, 0, 1));
}

/// `enqueue_once` sent twice under one request writes once and returns
/// the first results; the request is remembered (with an expiry) in a key
/// of the queue's slot; a batch of another size under it is invalid; a new
/// request writes again.
async fn enqueue_once_writes_once(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "once").await else {
        return;
    };
    let q = QueueName::new("once").expect("valid");
    let batch = || {
        vec![
            NewItem::new("x"),
            NewItem::new("y").dedup_key("k"),
            NewItem::new("z").dedup_key("k"),
            NewItem::new("later").delay(Duration::from_secs(600)),
        ]
    };
    let req = LeaseToken::random();
    let first = b
        .enqueue_once(&q, req, batch())
        .await
        .expect("enqueue_once");
    assert_eq!(first.len(), 4);
    assert_eq!(
        first.iter().map(|e| e.deduplicated).collect::<Vec<_>>(),
        [false, false, true, false]
    );
    assert_eq!(first[1].id, first[2].id);
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(2, 1, 0, 0));

    let again = b.enqueue_once(&q, req, batch()).await.expect("resend");
    assert_eq!(again, first);
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(2, 1, 0, 0));

    let layout = KeyLayout::new(&cleanup.prefix, &q).expect("layout");
    let mut raw = common::raw(&cleanup.url).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(layout.request(req))
        .query_async(&mut raw)
        .await
        .expect("pttl");
    let memory = i64::try_from(REQUEST_MEMORY.as_millis()).expect("fits");
    assert!(pttl > 0 && pttl <= memory, "pttl {pttl}");

    let err = b
        .enqueue_once(&q, req, vec![NewItem::new("x")])
        .await
        .expect_err("another size under a used request");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let too_big = NewItem::new(vec![0u8; b.capabilities().bounds.max_payload_bytes + 1]);
    let err = b
        .enqueue_once(&q, LeaseToken::random(), vec![too_big])
        .await
        .expect_err("a bad batch");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(2, 1, 0, 0));

    let other = b
        .enqueue_once(&q, LeaseToken::random(), vec![NewItem::new("w")])
        .await
        .expect("a new request");
    assert!(!first.iter().any(|e| e.id == other[0].id));
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(3, 1, 0, 0));

    // An empty batch is remembered too.
    let empty = LeaseToken::random();
    assert!(b
        .enqueue_once(&q, empty, Vec::new())
        .await
        .expect("empty")
        .is_empty());
    let err = b
        .enqueue_once(&q, empty, vec![NewItem::new("v")])
        .await
        .expect_err("another size under a used request");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

/// A server that refuses connections: `connect` fails `Unavailable`.
async fn refused_connect_is_unavailable(which: Which) {
    let refused =
        RedisOptions::new("redis://127.0.0.1:1").connect_timeout(Duration::from_millis(300));
    let err = common::connect(which, refused)
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.is_retryable() && !err.may_have_applied());
}

/// Calls on a backend whose server is gone: a call cut off may have run
/// (`Backend`), but once the connection is refused calls fail
/// `Unavailable` (never sent), never as anything else.
async fn refused_calls_are_unavailable(which: Which) {
    let mut server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let config = RedisOptions::new(server.url())
        .prefix("refused")
        .response_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500));
    let b = common::connect(which, config).await.expect("connect");
    let q = QueueName::new("r").expect("valid");
    push(b.as_ref(), &q, 1).await;
    server.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let err = tokio::time::timeout(Duration::from_secs(10), b.stats(&q))
            .await
            .expect("a failed call returns")
            .expect_err("no server");
        assert!(
            matches!(
                err,
                Error::OutcomeUnknown { .. } | Error::Unavailable { .. }
            ),
            "{err:?}"
        );
        let unavailable = matches!(err, Error::Unavailable { .. });
        seen.push(format!("{err:?}"));
        if unavailable {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no call was classified Unavailable: {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Server refusals: over `maxmemory` an enqueue's first write is refused,
/// nothing is written, and the call is `Full` (refused before it ran, so
/// retryable and certainly not applied). See tests/memory.rs for the rest.
async fn out_of_memory_is_full(which: Which) {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let b = common::connect(which, RedisOptions::new(server.url()).prefix("oom"))
        .await
        .expect("connect");
    let q = QueueName::new("m").expect("valid");
    push(b.as_ref(), &q, 1).await;
    server
        .command(&["CONFIG", "SET", "maxmemory", "1"])
        .expect("config set");
    let err = b
        .enqueue(&q, vec![NewItem::new("x")])
        .await
        .expect_err("over maxmemory");
    assert!(matches!(err, Error::Full { .. }), "{err:?}");
    assert!(err.is_retryable() && !err.may_have_applied(), "{err:?}");
    let err = b
        .enqueue_once(&q, LeaseToken::random(), vec![NewItem::new("x")])
        .await
        .expect_err("over maxmemory");
    assert!(matches!(err, Error::Full { .. }), "{err:?}");
    assert!(err.is_retryable() && !err.may_have_applied(), "{err:?}");
    // The listing runs on a full server; the first enqueue of a queue
    // (which registers it in the listing) is refused like any other.
    assert_eq!(b.queues().await.expect("queues when full"), vec![q.clone()]);
    let fresh = QueueName::new("n").expect("valid");
    let err = b
        .enqueue(&fresh, vec![NewItem::new("x")])
        .await
        .expect_err("over maxmemory");
    assert!(matches!(err, Error::Full { .. }), "{err:?}");
    server
        .command(&["CONFIG", "SET", "maxmemory", "0"])
        .expect("config set");
    assert_eq!(counts(b.stats(&q).await.expect("stats")), stats(1, 0, 0, 0));
    assert_eq!(b.queues().await.expect("queues"), vec![q.clone()]);
}

/// While another script runs past the busy threshold the server answers
/// `BUSY` without running the call: `Unavailable`.
async fn busy_server_is_unavailable(which: Which) {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let b = common::connect(
        which,
        RedisOptions::new(server.url())
            .prefix("busy")
            .response_timeout(Duration::from_secs(10)),
    )
    .await
    .expect("connect");
    let q = QueueName::new("busy").expect("valid");
    push(b.as_ref(), &q, 1).await;
    server
        .command(&["CONFIG", "SET", "busy-reply-threshold", "50"])
        .expect("config set");
    // A script that spins for 2 s on its own connection.
    let url = server.url();
    let spin = tokio::spawn(async move {
        let mut raw = common::raw(&url).await;
        let _: redis::RedisResult<i64> = redis::cmd("EVAL")
            .arg(
                "local t = redis.call('TIME') \
                 local start = t[1] * 1000000 + t[2] \
                 while true do \
                   local n = redis.call('TIME') \
                   if n[1] * 1000000 + n[2] - start > 2000000 then break end \
                 end \
                 return 1",
            )
            .arg(0)
            .query_async(&mut raw)
            .await;
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        match b.stats(&q).await {
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
                break;
            }
            Ok(_) => assert!(Instant::now() < deadline, "the server never answered BUSY"),
        }
    }
    spin.await.expect("join");
    // The spinning script ends on its own (its client may have stopped
    // waiting); then the queue is as it was.
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        match b.stats(&q).await {
            Ok(s) => break s,
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
                assert!(Instant::now() < deadline, "still busy: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(counts(after), stats(1, 0, 0, 0));
}

/// A queue keeps at most `MAX_TAKEOVER_TRACES` takeover traces: a reap
/// of more drops the oldest and raises the floor, so a lease a reap took is
/// still never answered Finished (Lost, as the expiry rule alone would say),
/// while a lease acked after the reap, expired after the floor, is still
/// answered Finished.
async fn takeover_traces_are_capped(which: Which) {
    use leaseq_core::limits::MAX_CLAIM;
    use leaseq_redis::keys::MAX_TAKEOVER_TRACES;
    let Some((b, cleanup)) = common::backend(which, "takecap").await else {
        return;
    };
    let q = QueueName::new("cap").expect("valid");
    let total = MAX_TAKEOVER_TRACES + 100;
    for chunk in 0..total.div_ceil(1000) {
        let n = 1000.min(total - chunk * 1000);
        push(b.as_ref(), &q, n).await;
    }
    let mut taken: Vec<Lease> = Vec::with_capacity(total);
    while taken.len() < total {
        let ls = b
            .claim(&q, ClaimSpec::new(MAX_CLAIM, TTL).expect("spec"))
            .await
            .expect("claim")
            .leases;
        assert!(!ls.is_empty(), "the queue ran dry after {}", taken.len());
        taken.extend(ls);
    }
    let hooks = b.test_hooks().expect("test hooks");
    hooks.expire_leases(&q).await.expect("expire");
    // What the holders knew: the lease could have expired by now.
    let held_until = b.now().await.expect("now");
    let mut requeued = 0;
    while requeued < total as u64 {
        let r = b.reap(&q).await.expect("reap");
        assert!(r.requeued > 0, "the reap stalled at {requeued} of {total}");
        requeued += r.requeued;
    }
    let layout = KeyLayout::new(&cleanup.prefix, &q).expect("layout");
    let mut raw = common::raw(&common::url()).await;
    let kept: usize = redis::cmd("ZCARD")
        .arg(layout.taken())
        .query_async(&mut raw)
        .await
        .expect("zcard");
    assert_eq!(
        kept, MAX_TAKEOVER_TRACES,
        "traces kept after {total} takeovers"
    );
    let floor: Option<u64> = redis::cmd("GET")
        .arg(layout.taken_floor())
        .query_async(&mut raw)
        .await
        .expect("get");
    assert!(floor.is_some(), "the cap dropped traces but left no floor");
    // Every lease the reap took, those whose traces went included: Lost.
    for l in &taken {
        let fate = b.lease_fate(&l.key, held_until).await.expect("fate");
        assert_eq!(
            fate,
            LeaseFate::Lost,
            "item {} was taken by the reap",
            l.id()
        );
    }
    // A lease acked after the reap, asked about past its expiry: Finished.
    common::assert_a_fresh_ack_is_finished(b.as_ref(), &q).await;
}

/// While a queue still holds an earlier version's finishing traces
/// (`{p:q}:finished`, written by that version's acks until its processes
/// stop), `lease_fate` answers by them: a lease with no finishing trace is
/// Lost past its expiry (that version's reaps left no takeover trace), one
/// with a trace is Finished. Once the key is gone the takeover traces
/// answer.
async fn an_earlier_versions_finishing_traces_are_read_while_present(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "oldfin").await else {
        return;
    };
    let q = QueueName::new("old").expect("valid");
    push(b.as_ref(), &q, 2).await;
    let ls = b
        .claim(&q, ClaimSpec::new(2, TTL).expect("spec"))
        .await
        .expect("claim")
        .leases;
    assert_eq!(ls.len(), 2);
    b.ack(&ls[0].key).await.expect("ack");
    b.ack(&ls[1].key).await.expect("ack");
    let past = b.now().await.expect("now");
    let layout = KeyLayout::new(&cleanup.prefix, &q).expect("layout");
    let mut raw = common::raw(&common::url()).await;
    // The earlier version traced the first ack only.
    let member = format!("{}:{}", ls[0].id().get(), ls[0].token());
    let () = redis::cmd("ZADD")
        .arg(layout.finished_before_takeovers())
        .arg(past.as_millis())
        .arg(&member)
        .query_async(&mut raw)
        .await
        .expect("zadd");
    let fate = |k: LeaseKey| {
        let b = Arc::clone(&b);
        async move { b.lease_fate(&k, past).await.expect("fate") }
    };
    assert_eq!(
        fate(ls[0].key.clone()).await,
        LeaseFate::Finished { state: None }
    );
    assert_eq!(fate(ls[1].key.clone()).await, LeaseFate::Lost);
    let () = redis::cmd("DEL")
        .arg(layout.finished_before_takeovers())
        .query_async(&mut raw)
        .await
        .expect("del");
    assert_eq!(
        fate(ls[1].key.clone()).await,
        LeaseFate::Finished { state: None }
    );
}

for_each_client!(
    takeover_traces_are_capped,
    an_earlier_versions_finishing_traces_are_read_while_present,
    recover_claim_returns_the_claims_leases,
    tokens_count_across_repair_rounds,
    lease_fate_names_what_happened,
    enqueue_once_writes_once,
    refused_connect_is_unavailable,
    refused_calls_are_unavailable,
    out_of_memory_is_full,
    busy_server_is_unavailable,
);
