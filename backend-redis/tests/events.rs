//! Job events on Redis beyond the contract's checks (the conformance
//! suite's): a subscriber hears the changes another handle of the store
//! makes (its own client and connections, as another process would), on
//! one server and on a cluster; a queue nobody follows gets no events
//! written; an entry that does not read as events is skipped.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::Which;
use leaseq_core::events::{EventKind, EventStream, JobEvent};
use leaseq_core::{Backend, BackendExt, ItemId, Lease, NewItem, QueueName};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(30);

/// How long a test waits for an event it expects before it calls it lost:
/// a bound for a loaded machine, not a figure under test.
const WAIT: Duration = Duration::from_secs(20);

async fn next(stream: &mut EventStream) -> JobEvent {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event within the wait")
        .expect("the stream is open")
        .expect("the stream did not lag")
}

/// `b`'s subscription to `q`.
async fn subscribe(b: &dyn Backend, q: &QueueName) -> EventStream {
    b.events()
        .expect("events")
        .subscribe(q)
        .await
        .expect("subscribe")
}

/// Enqueues one item into `q` and checks that `stream` hears it next.
async fn enqueued(b: &dyn Backend, q: &QueueName, stream: &mut EventStream) -> ItemId {
    let id = b
        .enqueue(q, vec![NewItem::new("x")])
        .await
        .expect("enqueue")[0]
        .id;
    assert_eq!(next(stream).await, JobEvent::new(id, EventKind::Enqueued));
    id
}

/// With `subscriber` following queue `q`, `writer` enqueues two items,
/// claims them, completes one with a result and fails the other: the
/// subscriber hears each change, in order per job, with its data.
async fn hears_the_writer(subscriber: &dyn Backend, writer: &dyn Backend) {
    let q = QueueName::new("q").expect("name");
    let mut stream = subscribe(subscriber, &q).await;
    writer
        .enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue");
    let mut leases = writer.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), 2);
    leases.sort_by_key(Lease::id);
    writer
        .history()
        .expect("history")
        .complete(&leases[0].key, Bytes::from_static(b"ok"))
        .await
        .expect("complete");
    writer.fail(&leases[1].key, "no good").await.expect("fail");
    let started =
        |end: EventKind| vec![EventKind::Enqueued, EventKind::Started { attempt: 1 }, end];
    let want = BTreeMap::from([
        (
            leases[0].id(),
            started(EventKind::completed(Some(Bytes::from_static(b"ok")))),
        ),
        (leases[1].id(), started(EventKind::dead("no good"))),
    ]);
    let mut got: BTreeMap<ItemId, Vec<EventKind>> = BTreeMap::new();
    for _ in 0..6 {
        let event = next(&mut stream).await;
        got.entry(event.id).or_default().push(event.kind);
    }
    assert_eq!(got, want);
}

/// A handle of each client on one server: each hears the other's changes.
async fn another_handles_changes_reach_the_subscriber(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "ev-cross").await else {
        return;
    };
    let config = RedisOptions::new(&cleanup.url).prefix(&cleanup.prefix);
    let writer = common::connect(which.other(), config)
        .await
        .expect("a second handle");
    hears_the_writer(b.as_ref(), writer.as_ref()).await;
}

/// The same on a local Redis Cluster.
async fn another_handles_changes_reach_the_subscriber_on_a_cluster(which: Which) {
    let cluster = match common::cluster::shared() {
        Ok(c) => c,
        Err(e) => return common::unavailable("a local Redis Cluster", e),
    };
    let prefix = common::fresh_prefix(&format!("ev-cluster-{}", which.name()));
    let connect = |w: Which| common::connect(w, cluster.config(&prefix));
    let (subscriber, writer) = (connect(which).await, connect(which.other()).await);
    let (subscriber, writer) = (
        subscriber.expect("a cluster handle"),
        writer.expect("a second cluster handle"),
    );
    hears_the_writer(subscriber.as_ref(), writer.as_ref()).await;
    cluster.delete_prefix(&prefix);
}

/// The queue's events key and gate, and a raw connection.
struct Raw {
    keys: KeyLayout,
    conn: redis::aio::MultiplexedConnection,
}

impl Raw {
    async fn new(cleanup: &common::Cleanup, q: &QueueName) -> Self {
        Raw {
            keys: KeyLayout::new(&cleanup.prefix, q).expect("layout"),
            conn: common::raw(&cleanup.url).await,
        }
    }

    async fn exists(&mut self, key: &str) -> bool {
        self.conn.exists(key).await.expect("EXISTS")
    }
}

/// A queue nobody follows gets no events key: its scripts only asked for
/// the gate. A subscription sets the gate, with an expiry, and the next
/// change writes its event.
async fn nothing_is_written_while_nobody_follows(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "ev-gate").await else {
        return;
    };
    let q = QueueName::new("q").expect("name");
    let mut raw = Raw::new(&cleanup, &q).await;
    b.enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue");
    let c = b.claim_up_to(&q, 2, TTL).await.expect("claim");
    b.ack(&c.leases[0].key).await.expect("ack");
    b.ack_many(&[c.leases[1].key.clone()])
        .await
        .expect("ack_many");
    let (stream_key, gate) = (raw.keys.events_stream(), raw.keys.events_gate());
    assert!(!raw.exists(&stream_key).await, "events written unfollowed");
    assert!(!raw.exists(&gate).await);

    let mut stream = subscribe(b.as_ref(), &q).await;
    let ttl: i64 = raw.conn.pttl(&gate).await.expect("PTTL");
    assert!(ttl > 0 && ttl <= 30_000, "the gate expires: {ttl} ms");
    enqueued(b.as_ref(), &q, &mut stream).await;
    let len: u64 = redis::cmd("XLEN")
        .arg(&stream_key)
        .query_async(&mut raw.conn)
        .await
        .expect("XLEN");
    assert_eq!(len, 1);
    let stream_ttl: i64 = raw.conn.pttl(&stream_key).await.expect("PTTL");
    assert!(stream_ttl > 0, "the events stream expires: {stream_ttl}");
}

/// Entries that do not read as events (planted) are skipped; the events
/// after them arrive.
async fn an_entry_that_does_not_read_is_skipped(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "ev-skip").await else {
        return;
    };
    let q = QueueName::new("q").expect("name");
    let mut raw = Raw::new(&cleanup, &q).await;
    let mut stream = subscribe(b.as_ref(), &q).await;
    let key = raw.keys.events_stream();
    for (field, value) in [("e", "exploded 7"), ("e", "enqueued x"), ("e", "")] {
        let _: String = redis::cmd("XADD")
            .arg(&key)
            .arg("*")
            .arg(field)
            .arg(value)
            .query_async(&mut raw.conn)
            .await
            .expect("plant");
    }
    enqueued(b.as_ref(), &q, &mut stream).await;
}

/// Subscribers of one handle share its feed: a second stream hears the
/// same events, and one dropped leaves the other hearing.
async fn streams_of_one_handle_share_a_feed(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "ev-share").await else {
        return;
    };
    let q = QueueName::new("q").expect("name");
    let mut first = subscribe(b.as_ref(), &q).await;
    let mut second = subscribe(b.as_ref(), &q).await;
    let id = enqueued(b.as_ref(), &q, &mut first).await;
    assert_eq!(
        next(&mut second).await,
        JobEvent::new(id, EventKind::Enqueued)
    );
    drop(first);
    let lease = b.claim_one(&q, TTL).await.expect("claim").expect("a lease");
    assert_eq!(
        next(&mut second).await,
        JobEvent::new(id, EventKind::Started { attempt: 1 })
    );
    b.ack(&lease.key).await.expect("ack");
}

for_each_client!(
    another_handles_changes_reach_the_subscriber,
    another_handles_changes_reach_the_subscriber_on_a_cluster,
    nothing_is_written_while_nobody_follows,
    an_entry_that_does_not_read_is_skipped,
    streams_of_one_handle_share_a_feed
);
