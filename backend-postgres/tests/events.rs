//! Job events on PostgreSQL: a subscriber on one handle hears the changes
//! made through another (as from another process), in order, with their
//! data exactly as core's constructors shape it, even a progress value too
//! long for one notification; a queue nobody follows gets no notification;
//! an enqueue inside the caller's transaction reports at its commit only.

mod common;

use std::time::Duration;

use leaseq_core::events::{EventKind, EventStream, JobEvent, MAX_EVENT_RESULT};
use leaseq_core::limits::MAX_PROGRESS_LEN;
use leaseq_core::{Backend, BackendExt, Bytes, ItemId, NewItem, QueueName};
use leaseq_postgres::PgBackend;
use sqlx::postgres::PgListener;

/// How long to wait for an event that must come before calling it lost.
const WAIT: Duration = Duration::from_secs(10);
const TTL: Duration = Duration::from_secs(60);

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

/// A second handle on `db`'s schema: its own pool and listener, as another
/// process would have.
async fn other_handle(db: &common::TestDb) -> PgBackend {
    PgBackend::connect(&common::url(), common::options(&db.schema))
        .await
        .expect("connect")
}

/// The next `n` events of `stream`; fails on a lag, an end or a wait past
/// [`WAIT`].
async fn take(stream: &mut EventStream, n: usize) -> Vec<JobEvent> {
    let mut got = Vec::with_capacity(n);
    while got.len() < n {
        match tokio::time::timeout(WAIT, stream.next()).await {
            Ok(Some(Ok(event))) => got.push(event),
            other => panic!("after {got:?}, the stream answered {other:?}"),
        }
    }
    got
}

/// A stream of `q`'s events through the test database's own handle.
async fn follow(db: &common::TestDb, q: &QueueName) -> EventStream {
    db.backend
        .events()
        .expect("events")
        .subscribe(q)
        .await
        .expect("subscribe")
}

fn ev(id: ItemId, kind: EventKind) -> JobEvent {
    JobEvent::new(id, kind)
}

#[tokio::test]
async fn another_handles_changes_arrive_in_order_with_their_data() {
    let Some(db) = common::TestDb::new("ev_order").await else {
        return;
    };
    let q = queue("followed");
    let mut stream = follow(&db, &q).await;
    let actor = other_handle(&db).await;
    let control = actor.control().expect("control");
    let history = actor.history().expect("history");

    let ids = actor
        .enqueue(
            &q,
            vec![
                NewItem::new("a"),
                NewItem::new("b"),
                NewItem::new("c"),
                NewItem::new("d").max_attempts(1),
                NewItem::new("e").max_attempts(1),
            ],
        )
        .await
        .expect("enqueue");
    let ids: Vec<ItemId> = ids.iter().map(|e| e.id).collect();
    let mut leases = actor.claim_up_to(&q, 5, TTL).await.expect("claim").leases;
    leases.sort_by_key(|l| l.key.id);
    let [a, b, c, d, e] = &leases[..] else {
        panic!("claimed {leases:?}");
    };

    // The largest progress value takes two notifications; an empty one
    // is written as "-".
    let big = Bytes::from(vec![0xab; MAX_PROGRESS_LEN]);
    control
        .progress(&a.key, big.clone())
        .await
        .expect("progress");
    control
        .progress(&a.key, Bytes::new())
        .await
        .expect("progress");
    let result = Bytes::from(vec![7; MAX_EVENT_RESULT]);
    history
        .complete(&a.key, result.clone())
        .await
        .expect("complete");
    // A reason past the event's text bound, cut at a character boundary
    // as core cuts it (each 'é' is two bytes, the bound falls inside one
    // after the leading 'x').
    let reason = format!("x{}", "é".repeat(1_000));
    actor.fail(&b.key, &reason).await.expect("fail");
    actor.give_back(&c.key).await.expect("give_back");
    actor
        .release(&d.key, Duration::ZERO)
        .await
        .expect("release");
    let hooks = actor.test_hooks().expect("hooks");
    assert!(hooks.expire_leases(&q).await.expect("expire") >= 1);
    let reaped = actor.reap(&q).await.expect("reap");
    assert_eq!(reaped.dead, 1, "{reaped:?}");

    let mut want: Vec<JobEvent> = ids.iter().map(|&id| ev(id, EventKind::Enqueued)).collect();
    want.extend(
        leases
            .iter()
            .map(|l| ev(l.key.id, EventKind::Started { attempt: 1 })),
    );
    want.extend([
        ev(a.key.id, EventKind::Progress(big)),
        ev(a.key.id, EventKind::Progress(Bytes::new())),
        ev(a.key.id, EventKind::completed(Some(result))),
        ev(b.key.id, EventKind::dead(&reason)),
        ev(c.key.id, EventKind::Released),
        ev(d.key.id, EventKind::dead("attempts exhausted")),
        ev(e.key.id, EventKind::dead("lease expired on final attempt")),
    ]);
    let got = take(&mut stream, want.len()).await;
    // One job's events in order; jobs of one statement in any order.
    for id in &ids {
        let of = |v: &[JobEvent]| {
            v.iter()
                .filter(|e| e.id == *id)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(of(&got), of(&want), "job {id}");
    }
    let EventKind::Dead { error } = &got
        .iter()
        .find(|e| e.id == b.key.id && e.kind.name() == "dead")
        .expect("b died")
        .kind
    else {
        panic!("not dead");
    };
    assert!(error.len() < reason.len() && reason.starts_with(error.as_str()));
}

#[tokio::test]
async fn a_queue_nobody_follows_gets_no_notification() {
    let Some(db) = common::TestDb::new("ev_quiet").await else {
        return;
    };
    let (quiet, followed) = (queue("quiet"), queue("followed"));
    let mut raw = PgListener::connect(&common::url()).await.expect("listener");
    raw.listen(&format!("leaseq_{}", db.schema))
        .await
        .expect("listen");
    let mut stream = follow(&db, &followed).await;

    let b = &db.backend;
    b.push(&quiet, "x").await.expect("push");
    let lease = b
        .claim_one(&quiet, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    b.ack(&lease.key).await.expect("ack");
    let marker = b.push(&followed, "marker").await.expect("push");
    assert_eq!(
        take(&mut stream, 1).await,
        [ev(marker, EventKind::Enqueued)]
    );

    // Notifications arrive in commit order: by the marker's, every one the
    // quiet queue's changes sent has come.
    let want = format!("event followed enqueued {marker}");
    loop {
        let n = tokio::time::timeout(WAIT, raw.recv())
            .await
            .expect("the marker's notification")
            .expect("recv");
        assert!(
            !n.payload().starts_with("event quiet") && !n.payload().starts_with("eventpart quiet"),
            "an unfollowed queue sent {:?}",
            n.payload()
        );
        if n.payload() == want {
            break;
        }
    }
}

#[tokio::test]
async fn an_enqueue_in_a_transaction_reports_at_its_commit_only() {
    let Some(db) = common::TestDb::new("ev_tx").await else {
        return;
    };
    let q = queue("outbox");
    let mut stream = follow(&db, &q).await;
    let b = &db.backend;

    let mut tx = b.pool().begin().await.expect("begin");
    b.enqueue_in(&mut tx, &q, vec![NewItem::new("never")])
        .await
        .expect("enqueue_in");
    tx.rollback().await.expect("rollback");

    let mut tx = b.pool().begin().await.expect("begin");
    let kept = b
        .enqueue_in(&mut tx, &q, vec![NewItem::new("kept")])
        .await
        .expect("enqueue_in")[0]
        .id;
    tx.commit().await.expect("commit");
    // The rolled-back enqueue sent nothing: the first event is the
    // committed one's.
    assert_eq!(take(&mut stream, 1).await, [ev(kept, EventKind::Enqueued)]);
}

#[tokio::test]
async fn cancels_and_deduplicated_enqueues_report_as_memory_does() {
    let Some(db) = common::TestDb::new("ev_cancel").await else {
        return;
    };
    let q = queue("cancels");
    let mut stream = follow(&db, &q).await;
    let actor = other_handle(&db).await;
    let control = actor.control().expect("control");

    let waiting = actor.push(&q, "waiting").await.expect("push");
    let again = actor
        .enqueue(
            &q,
            vec![
                NewItem::new("k").dedup_key("k"),
                NewItem::new("k2").dedup_key("k"),
            ],
        )
        .await
        .expect("enqueue");
    assert!(again[1].deduplicated);
    control.cancel(&q, waiting).await.expect("cancel");
    let lease = actor
        .claim_one(&q, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    control.cancel(&q, lease.key.id).await.expect("cancel");
    // The requested cancel reports when the lease ends, whatever ends it.
    actor.ack(&lease.key).await.expect("ack");

    let got = take(&mut stream, 5).await;
    let k = again[0].id;
    assert_eq!(
        got,
        [
            ev(waiting, EventKind::Enqueued),
            ev(k, EventKind::Enqueued),
            ev(waiting, EventKind::Cancelled),
            ev(k, EventKind::Started { attempt: 1 }),
            ev(k, EventKind::Cancelled),
        ]
    );
}
