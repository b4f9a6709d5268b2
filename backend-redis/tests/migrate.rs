//! A queue written in key layout 1 (one hash per item) is refused until
//! `migrate_layout1` converts it; then every item is where it was, with its
//! fields, and a lease held across the upgrade still acks.
#![cfg(feature = "redis-rs")]

#[macro_use]
mod common;

use std::time::Duration;

use leaseq_core::{
    Backend, BackendExt, Error, ItemId, ItemState, LeaseKey, LeaseToken, NewItem, QueueName,
};
use leaseq_redis::{keys::KeyLayout, RedisOptions, RedisRsBackend};
use redis::AsyncCommands;

const HOUR_MS: u64 = 3_600_000;

/// Writes one layout 1 item: its hash and its index entry.
async fn plant(
    raw: &mut redis::aio::MultiplexedConnection,
    tag: &str,
    id: u64,
    index: &str,
    score: f64,
    fields: &[(&str, String)],
) {
    let key = format!("{tag}:item:{id}");
    let _: () = raw.hset_multiple(&key, fields).await.expect("hset");
    let _: i64 = raw
        .zadd(
            format!("{tag}:{index}"),
            KeyLayout::member(ItemId::new(id)),
            score,
        )
        .await
        .expect("zadd");
}

fn f(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
}

#[tokio::test]
async fn a_layout1_queue_is_refused_then_migrated_whole() {
    let url = common::url();
    let prefix = common::fresh_prefix("migrate");
    let config = RedisOptions::new(&url).prefix(&prefix).test_hooks(true);
    let b = match RedisRsBackend::connect(config).await {
        Ok(b) => b,
        Err(e) => return common::unavailable(&url, e),
    };
    let _cleanup = common::Cleanup {
        url: url.clone(),
        prefix: prefix.clone(),
    };
    let q = QueueName::new("old").expect("name");
    let tag = format!("{{{prefix}:old}}");
    let mut raw = common::raw(&url).await;
    let now = b.now().await.expect("now").as_millis();
    let token = LeaseToken::random();
    let expiry = now + HOUR_MS;
    let due = now + 2 * HOUR_MS;
    plant(
        &mut raw,
        &tag,
        1,
        "ready",
        0.0,
        &f(&[
            ("p", "a"),
            ("pri", "0"),
            ("att", "0"),
            ("max", "3"),
            ("st", "ready"),
            ("enq", "1000"),
        ]),
    )
    .await;
    plant(
        &mut raw,
        &tag,
        2,
        "ready",
        -5.0,
        &f(&[
            ("p", "b"),
            ("pri", "5"),
            ("att", "1"),
            ("max", "3"),
            ("st", "ready"),
            ("enq", "1001"),
        ]),
    )
    .await;
    plant(
        &mut raw,
        &tag,
        3,
        "scheduled",
        due as f64,
        &f(&[
            ("p", "c"),
            ("pri", "0"),
            ("att", "0"),
            ("max", "3"),
            ("st", "scheduled"),
            ("due", &due.to_string()),
            ("enq", "1002"),
        ]),
    )
    .await;
    plant(
        &mut raw,
        &tag,
        4,
        "leased",
        expiry as f64,
        &f(&[
            ("p", "d"),
            ("pri", "0"),
            ("att", "2"),
            ("max", "3"),
            ("st", "leased"),
            ("tok", &token.to_string()),
            ("due", &expiry.to_string()),
            ("enq", "1003"),
        ]),
    )
    .await;
    plant(
        &mut raw,
        &tag,
        5,
        "dead",
        1.0,
        &f(&[
            ("p", "e"),
            ("pri", "0"),
            ("att", "3"),
            ("max", "3"),
            ("st", "dead"),
            ("err", "boom"),
            ("enq", "1004"),
        ]),
    )
    .await;
    plant(
        &mut raw,
        &tag,
        6,
        "ready",
        0.0,
        &f(&[
            ("p", "f"),
            ("pri", "0"),
            ("att", "0"),
            ("max", "3"),
            ("st", "ready"),
            ("dk", "k6"),
            ("enq", "1005"),
        ]),
    )
    .await;
    // A stray: item 4 also in layout 1's Ready (its hash says Leased).
    let _: i64 = raw
        .zadd(
            format!("{tag}:ready"),
            KeyLayout::member(ItemId::new(4)),
            -1.0,
        )
        .await
        .expect("zadd");
    let _: () = raw
        .hset(format!("{tag}:dedup"), "k6", 6)
        .await
        .expect("hset");
    let _: () = raw.set(format!("{tag}:seq"), 6).await.expect("set");
    let _: () = raw.set(format!("{tag}:idmark"), 6).await.expect("set");
    let _: () = raw.set(format!("{tag}:dseq"), 1).await.expect("set");

    // Refused, and nothing written.
    for res in [
        b.claim_up_to(&q, 10, Duration::from_secs(60))
            .await
            .map(|_| ()),
        b.enqueue(&q, vec![NewItem::new("x")]).await.map(|_| ()),
    ] {
        match res {
            Err(Error::Corrupt { what }) => assert!(what.contains("layout 1"), "{what}"),
            other => panic!("a layout 1 queue answered {other:?}"),
        }
    }
    let items: i64 = raw.exists(format!("{tag}:items")).await.expect("exists");
    assert_eq!(items, 0, "a refused call wrote nothing");

    assert_eq!(b.migrate_layout1(&q).await.expect("migrate"), 6);
    assert_eq!(
        b.migrate_layout1(&q).await.expect("again"),
        0,
        "a second run finds nothing"
    );
    for old in ["ready", "scheduled", "leased", "dead", "item:1", "item:4"] {
        let n: i64 = raw.exists(format!("{tag}:{old}")).await.expect("exists");
        assert_eq!(n, 0, "{old} is gone");
    }

    let item = |id: u64| b.item(&q, ItemId::new(id));
    let one = item(1).await.expect("item 1");
    assert_eq!(
        (one.state, &one.payload[..], one.enqueued_at.as_millis()),
        (ItemState::Ready, &b"a"[..], 1000)
    );
    let three = item(3).await.expect("item 3");
    assert_eq!(
        (three.state, three.due_at.map(|t| t.as_millis())),
        (ItemState::Scheduled, Some(due))
    );
    let four = item(4).await.expect("item 4");
    assert_eq!(
        (
            four.state,
            four.attempts,
            four.due_at.map(|t| t.as_millis())
        ),
        (ItemState::Leased, 2, Some(expiry))
    );
    let five = item(5).await.expect("item 5");
    assert_eq!(
        (five.state, five.attempts, five.last_error.as_deref()),
        (ItemState::Dead, 3, Some("boom"))
    );
    assert_eq!(
        item(6).await.expect("item 6").dedup_key.as_deref(),
        Some("k6")
    );

    // The lease held across the upgrade: extends, then acks.
    let held = LeaseKey {
        queue: q.clone(),
        id: ItemId::new(4),
        token,
    };
    b.extend(
        &held,
        leaseq_core::LeaseTtl::new(Duration::from_secs(60)).expect("ttl"),
    )
    .await
    .expect("the old lease extends");
    b.ack(&held).await.expect("the old lease acks");

    // Claim order stays priority, then id; attempts go on.
    let claimed = b
        .claim_up_to(&q, 10, Duration::from_secs(60))
        .await
        .expect("claim");
    let got: Vec<(u64, u32)> = claimed
        .leases
        .iter()
        .map(|l| (l.id().get(), l.attempts))
        .collect();
    assert_eq!(got, vec![(2, 2), (1, 1), (6, 1)]);
    assert!(claimed.repairs.is_empty(), "{:?}", claimed.repairs);
    // The dedup key is still held by item 6, and ids go on past the counter.
    let out = b
        .enqueue(
            &q,
            vec![NewItem::new("g").dedup_key("k6"), NewItem::new("h")],
        )
        .await
        .expect("enqueue");
    assert_eq!((out[0].id.get(), out[0].deduplicated), (6, true));
    assert_eq!((out[1].id.get(), out[1].deduplicated), (7, false));
    assert!(b
        .admin()
        .expect("admin")
        .redrive_item(&q, ItemId::new(5))
        .await
        .expect("redrive"));

    let hooks = b.test_hooks().expect("hooks");
    let snap = hooks.snapshot(&q).await.expect("snapshot");
    assert_eq!(snap.violations(), Vec::<String>::new());
}
