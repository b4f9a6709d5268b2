//! Calls whose reply was lost, on PostgreSQL: claims recovered by their
//! spec's tokens, the fate of a lease, enqueues written once under a request
//! id, and errors that say whether a call may have been applied.

mod common;

use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{
    Backend, BackendExt, ClaimSpec, Enqueued, Error, ItemId, ItemState, LeaseFate, LeaseToken,
    NewItem, QueueName, Timestamp,
};
use leaseq_postgres::{PgBackend, PgOptions};

const LONG: Duration = Duration::from_secs(300);

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

fn stats4(s: leaseq_core::QueueStats) -> [u64; 4] {
    [s.ready, s.scheduled, s.leased, s.dead]
}

/// A moment the backend's clock has certainly passed.
async fn past(b: &PgBackend) -> Timestamp {
    let t = b.now().await.expect("now");
    tokio::time::sleep(Duration::from_millis(5)).await;
    t
}

#[tokio::test]
async fn claim_uses_the_specs_tokens_and_recover_claim_finds_them() {
    let Some(db) = common::TestDb::new("lrrec").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("rec");
    b.enqueue(
        &queue,
        vec![
            NewItem::new("a"),
            NewItem::new("b").priority(5),
            NewItem::new("c"),
            NewItem::new("d").priority(9),
            NewItem::new("e"),
        ],
    )
    .await
    .expect("enqueue");
    let spec = ClaimSpec::new(3, LONG).expect("spec");
    let claimed = b.claim(&queue, spec.duplicate()).await.expect("claim");
    let payloads: Vec<_> = claimed.leases.iter().map(|l| l.payload.clone()).collect();
    assert_eq!(payloads, vec!["d", "b", "a"], "claim order");
    let tokens: Vec<LeaseToken> = claimed.leases.iter().map(|l| l.token()).collect();
    assert_eq!(tokens, (0..3).map(|i| spec.token(i)).collect::<Vec<_>>());

    let again = b.recover_claim(&queue, &spec).await.expect("recover");
    assert_eq!(
        again.leases, claimed.leases,
        "the same leases, in claim order"
    );
    assert!(again.repairs.is_empty());
    assert_eq!(
        stats4(b.stats(&queue).await.expect("stats")),
        [2, 0, 3, 0],
        "recover_claim claims nothing"
    );

    let other = ClaimSpec::new(3, LONG).expect("spec");
    assert!(b
        .recover_claim(&queue, &other)
        .await
        .expect("recover another")
        .leases
        .is_empty());
    // A spec whose request is another slot of the same family recovers the
    // whole family (what a layer's sub-claims rely on).
    let sub = ClaimSpec::with_request(1, LONG, spec.token(7)).expect("sub spec");
    assert_eq!(
        b.recover_claim(&queue, &sub)
            .await
            .expect("recover sub")
            .leases
            .len(),
        3
    );

    // An acked lease is no longer recovered; expired ones that no reap
    // took come back renewed, and once a reap took them, not at all.
    b.ack(&claimed.leases[0].key).await.expect("ack");
    let rest = b.recover_claim(&queue, &spec).await.expect("recover");
    assert_eq!(rest.leases, claimed.leases[1..]);
    let hooks = b.test_hooks().expect("hooks");
    hooks.expire_leases(&queue).await.expect("expire");
    let now = b.now().await.expect("now");
    let renewed = b
        .recover_claim(&queue, &spec)
        .await
        .expect("recover after expiry")
        .leases;
    let ids =
        |ls: &[leaseq_core::Lease]| ls.iter().map(|l| (l.id(), l.token())).collect::<Vec<_>>();
    assert_eq!(
        ids(&renewed),
        ids(&claimed.leases[1..]),
        "renewed, in claim order"
    );
    assert!(renewed.iter().all(|l| l.expires_at > now), "{renewed:?}");
    assert_eq!(b.reap(&queue).await.expect("reap").recovered(), 0);
    hooks.expire_leases(&queue).await.expect("expire");
    assert_eq!(b.reap(&queue).await.expect("reap").requeued, 2);
    assert!(b
        .recover_claim(&queue, &spec)
        .await
        .expect("recover after the reap")
        .leases
        .is_empty());
}

#[tokio::test]
async fn tokens_skip_the_rows_a_claim_moves_aside() {
    let Some(db) = common::TestDb::new("lrrep").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("rep");
    let ids: Vec<ItemId> = b
        .enqueue(
            &queue,
            (0..3).map(|i| NewItem::new(format!("i{i}"))).collect(),
        )
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    let hooks = b.test_hooks().expect("hooks");
    // A ghost at the head of the Ready index is deleted by the claim and
    // takes no slot: the three real items get the first three tokens.
    let ghost = ItemId::new(ids[2].get() + 1_000);
    hooks
        .plant_dangling_ready(&queue, ghost)
        .await
        .expect("plant");
    let spec = ClaimSpec::new(3, LONG).expect("spec");
    let claimed = b.claim(&queue, spec.duplicate()).await.expect("claim");
    assert_eq!(claimed.repairs.len(), 1, "{:?}", claimed.repairs);
    let got: Vec<_> = claimed.leases.iter().map(|l| (l.id(), l.token())).collect();
    let want: Vec<_> = ids
        .iter()
        .copied()
        .zip((0..3).map(|i| spec.token(i)))
        .collect();
    assert_eq!(got, want);
    let again = b.recover_claim(&queue, &spec).await.expect("recover");
    assert_eq!(again.leases, claimed.leases);
}

#[tokio::test]
async fn lease_fate_tells_held_finished_and_lost() {
    let Some(db) = common::TestDb::new("lrfate").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("fate");
    b.enqueue(
        &queue,
        (0..5)
            .map(|i| NewItem::new(format!("f{i}")).max_attempts(5))
            .collect(),
    )
    .await
    .expect("enqueue");
    let ls = b
        .claim(&queue, ClaimSpec::new(5, LONG).expect("spec"))
        .await
        .expect("claim")
        .leases;
    assert_eq!(ls.len(), 5);
    let until = ls[0].expires_at;

    let fate = |i: usize, until: Timestamp| {
        let key = ls[i].key.clone();
        async move { b.lease_fate(&key, until).await.expect("lease_fate") }
    };
    assert_eq!(fate(0, until).await, LeaseFate::Held);

    b.ack(&ls[0].key).await.expect("ack");
    assert_eq!(fate(0, until).await, LeaseFate::Finished { state: None });

    b.release(&ls[1].key, Duration::ZERO)
        .await
        .expect("release");
    assert_eq!(
        fate(1, until).await,
        LeaseFate::Finished {
            state: Some(ItemState::Ready)
        }
    );
    b.release(&ls[2].key, Duration::from_secs(60))
        .await
        .expect("release with delay");
    assert_eq!(
        fate(2, until).await,
        LeaseFate::Finished {
            state: Some(ItemState::Scheduled)
        }
    );

    b.fail(&ls[3].key, "no").await.expect("fail");
    assert_eq!(
        fate(3, until).await,
        LeaseFate::Finished {
            state: Some(ItemState::Dead)
        }
    );

    // The last lease runs out and is reaped: its token no longer holds the
    // item, and the caller's expiry has passed.
    let hooks = b.test_hooks().expect("hooks");
    hooks.expire_leases(&queue).await.expect("expire");
    // An expired lease that was not reaped yet still holds its item.
    let before = past(b).await;
    assert_eq!(fate(4, before).await, LeaseFate::Held);
    let report = b.reap(&queue).await.expect("reap");
    assert_eq!(report.requeued, 1);
    assert_eq!(fate(4, past(b).await).await, LeaseFate::Lost);
    // An acked lease asked about after its expiry: no reap took it, so its
    // own ack ended it (takeover traces).
    assert_eq!(
        fate(0, past(b).await).await,
        LeaseFate::Finished { state: None }
    );
    // An item that never existed is gone.
    let mut forged = ls[0].key.clone();
    forged.id = ItemId::new(u64::MAX);
    assert_eq!(
        b.lease_fate(&forged, until).await.expect("lease_fate"),
        LeaseFate::Finished { state: None }
    );
}

#[tokio::test]
async fn enqueue_once_writes_once_and_returns_the_first_results() {
    let Some(db) = common::TestDb::new("lronce").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("once");
    let holder = b.push(&queue, "holder").await.expect("push");
    let batch = || {
        vec![
            NewItem::new("x"),
            NewItem::new("dup").dedup_key("k1"),
            NewItem::new("y").delay(Duration::from_secs(60)),
            NewItem::new("z").dedup_key("k2"),
        ]
    };
    b.enqueue(&queue, vec![NewItem::new("k1 holder").dedup_key("k1")])
        .await
        .expect("key holder");
    let req = LeaseToken::random();
    let first = b.enqueue_once(&queue, req, batch()).await.expect("first");
    assert_eq!(first.len(), 4);
    assert_eq!(
        first.iter().map(|e| e.deduplicated).collect::<Vec<_>>(),
        [false, true, false, false]
    );
    assert!(first.iter().all(|e| e.id != holder));
    let after_first = stats4(b.stats(&queue).await.expect("stats"));
    assert_eq!(after_first, [4, 1, 0, 0]);

    let again = b.enqueue_once(&queue, req, batch()).await.expect("again");
    assert_eq!(again, first);
    assert_eq!(stats4(b.stats(&queue).await.expect("stats")), after_first);

    // The request id is per queue.
    let elsewhere = b
        .enqueue_once(&q("once-other"), req, batch())
        .await
        .expect("other queue");
    assert!(elsewhere.iter().all(|e| !e.deduplicated));

    // Another size under a used request is bad input; nothing is written.
    let err = b
        .enqueue_once(&queue, req, vec![NewItem::new("x")])
        .await
        .expect_err("another size");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    assert_eq!(stats4(b.stats(&queue).await.expect("stats")), after_first);

    // Bad batches are refused before anything is written.
    let err = b
        .enqueue_once(
            &queue,
            LeaseToken::random(),
            vec![NewItem::new("n").dedup_key("a\0b")],
        )
        .await
        .expect_err("NUL in a key");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let err = b
        .enqueue_once(
            &queue,
            LeaseToken::random(),
            vec![NewItem::new("n").max_attempts(0)],
        )
        .await
        .expect_err("0 attempts");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");

    // An empty batch is remembered too.
    let empty = LeaseToken::random();
    assert!(b
        .enqueue_once(&queue, empty, Vec::new())
        .await
        .expect("empty")
        .is_empty());
    assert!(matches!(
        b.enqueue_once(&queue, empty, vec![NewItem::new("late")])
            .await,
        Err(Error::InvalidInput { .. })
    ));

    // A new request writes again.
    let other = b
        .enqueue_once(&queue, LeaseToken::random(), batch())
        .await
        .expect("new request");
    assert!(other
        .iter()
        .all(|e| !first.iter().any(|f| f.id == e.id) || e.deduplicated));
    // x and y are new; dup's and z's keys are held (by the first batch).
    assert_eq!(stats4(b.stats(&queue).await.expect("stats")), [5, 2, 0, 0]);
}

async fn request_rows(b: &PgBackend, schema: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM \"{schema}\".leaseq_requests"
    ))
    .fetch_one(b.pool())
    .await
    .expect("count requests")
}

#[tokio::test]
async fn expired_requests_are_forgotten_and_reaped() {
    let Some(db) = common::TestDb::new("lrexp").await else {
        return;
    };
    let b = &db.backend;
    let queue = q("exp");
    let req = LeaseToken::random();
    let first = b
        .enqueue_once(&queue, req, vec![NewItem::new("a")])
        .await
        .expect("first");
    b.enqueue_once(
        &q("exp-other"),
        LeaseToken::random(),
        vec![NewItem::new("b")],
    )
    .await
    .expect("other queue");
    assert_eq!(request_rows(b, &db.schema).await, 2);
    b.reap(&queue).await.expect("reap");
    assert_eq!(request_rows(b, &db.schema).await, 2, "nothing expired yet");

    sqlx::query(&format!(
        "UPDATE \"{}\".leaseq_requests SET expires_at = now() - interval '1 second'",
        db.schema
    ))
    .execute(b.pool())
    .await
    .expect("age the requests");
    // A resend after the memory ran out is a new request.
    let second = b
        .enqueue_once(&queue, req, vec![NewItem::new("a")])
        .await
        .expect("after expiry");
    assert_ne!(second, first);
    assert_eq!(b.stats(&queue).await.expect("stats").ready, 2);
    // ... and is remembered afresh.
    assert_eq!(
        b.enqueue_once(&queue, req, vec![NewItem::new("a")])
            .await
            .expect("resend"),
        second
    );

    // Reap forgets the expired requests of its own queue only.
    b.reap(&q("exp-other")).await.expect("reap");
    assert_eq!(request_rows(b, &db.schema).await, 1);
}

#[tokio::test]
async fn concurrent_enqueue_once_with_one_request_writes_once() {
    let Some(db) = common::TestDb::new("lrconc").await else {
        return;
    };
    let b = Arc::new(db.backend.clone());
    let queue = q("conc");
    const ROUNDS: usize = 10;
    const CALLERS: usize = 4;
    const ITEMS: usize = 5;
    for round in 0..ROUNDS {
        let req = LeaseToken::random();
        let start = Arc::new(tokio::sync::Barrier::new(CALLERS));
        let tasks: Vec<_> = (0..CALLERS)
            .map(|_| {
                let b = b.clone();
                let queue = queue.clone();
                let start = start.clone();
                tokio::spawn(async move {
                    let items = (0..ITEMS)
                        .map(|i| NewItem::new(format!("r{round}-{i}")))
                        .collect();
                    start.wait().await;
                    b.enqueue_once(&queue, req, items).await
                })
            })
            .collect();
        let mut results: Vec<Vec<Enqueued>> = Vec::new();
        for t in tasks {
            results.push(t.await.expect("join").expect("enqueue_once"));
        }
        assert!(
            results.windows(2).all(|w| w[0] == w[1]),
            "round {round}: {results:?}"
        );
        assert_eq!(
            b.stats(&queue).await.expect("stats").ready,
            ((round + 1) * ITEMS) as u64,
            "round {round}: written once"
        );
    }
}

fn unreachable_options() -> PgOptions {
    common::options("unreachable")
        .acquire_timeout(Duration::from_millis(300))
        .migrate_on_connect(false)
}

const NOWHERE: &str = "postgres://postgres@127.0.0.1:1/test";

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let err = PgBackend::connect(NOWHERE, unreachable_options())
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(!err.may_have_applied() && err.is_retryable());

    // A backend on a lazy pool meets the dead server on its first call.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(300))
        .connect_lazy(NOWHERE)
        .expect("lazy pool");
    let b = PgBackend::from_pool(pool, unreachable_options())
        .await
        .expect("no statement runs yet");
    let queue = q("nowhere");
    let spec = ClaimSpec::new(1, LONG).expect("spec");
    let results = [
        b.stats(&queue).await.map(|_| ()),
        b.claim(&queue, spec.duplicate()).await.map(|_| ()),
        b.recover_claim(&queue, &spec).await.map(|_| ()),
        b.enqueue(&queue, vec![NewItem::new("x")]).await.map(|_| ()),
        b.enqueue_once(&queue, LeaseToken::random(), vec![NewItem::new("x")])
            .await
            .map(|_| ()),
    ];
    for (i, r) in results.into_iter().enumerate() {
        assert!(
            matches!(r, Err(Error::Unavailable { .. })),
            "call {i}: {r:?}"
        );
    }
}
