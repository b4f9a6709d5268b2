//! The sharding layer answers as one store would where the suite's shared
//! checks cannot reach: a resend whose unkeyed part differs, a keyed tick,
//! a lost lease's id, a lease on a queue no shard can be named for, the
//! retry hint of a claim that got all it asked, the fate of an id no shard
//! hands out, and a claim whose tokens would leave their family.

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::Duration;

use leaseq_conformance::runner::block_on;
use leaseq_core::layer::shard::Sharded;
use leaseq_core::schedule::{Schedule, ScheduleTick};
use leaseq_core::{
    Backend, ClaimSpec, Error, ItemId, LeaseFate, LeaseKey, LeaseToken, LeaseTtl, ManualClock,
    NewItem, QueueLimits, QueueName, Timestamp,
};
use leaseq_memory::MemoryBackend;

const TTL: Duration = Duration::from_secs(30);

fn name(s: &str) -> QueueName {
    QueueName::new(s).expect("a valid queue name")
}

/// `k` shards over one memory backend on a manual clock, and the backend.
fn sharded(k: u16) -> (Arc<MemoryBackend>, Sharded<Arc<MemoryBackend>>, ManualClock) {
    let clock = ManualClock::new();
    let inner = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
    let layer = Sharded::new(Arc::clone(&inner), k).expect("shards");
    (inner, layer, clock)
}

fn spec(max: u32) -> ClaimSpec {
    ClaimSpec::new(max, TTL).expect("a valid spec")
}

#[test]
fn a_resend_whose_unkeyed_part_differs_writes_nothing() {
    block_on(async {
        let (_, s, _) = sharded(4);
        let q = name("once");
        // Sixteen requests, so the request's shard and the key's differ for
        // most of them (where they coincide, that shard saw one item each
        // time and answers with the first results, as one store does).
        for i in 0..16 {
            let request = LeaseToken::random();
            let key = format!("k{i}");
            let first = s
                .enqueue_once(&q, request, vec![NewItem::new("keyed").dedup_key(key)])
                .await
                .expect("first send");
            // The first batch had no unkeyed item; the resend has one.
            match s.enqueue_once(&q, request, vec![NewItem::new("a")]).await {
                Err(Error::InvalidInput { .. }) => {}
                Ok(again) => assert_eq!(again, first, "request {i}"),
                Err(e) => panic!("request {i}: {e}"),
            }
            assert_eq!(
                s.stats(&q).await.expect("stats").total(),
                i + 1,
                "request {i}: the resend wrote its item"
            );
        }
    });
}

#[test]
fn a_keyed_tick_is_refused_and_writes_nothing() {
    block_on(async {
        let (_, s, clock) = sharded(4);
        let q = name("ticks");
        let schedule =
            Schedule::every("tick", q.clone(), Duration::from_secs(1), "p").expect("schedule");
        let stored = s
            .schedule_store()
            .expect("schedule_store")
            .put_schedule(&schedule)
            .await
            .expect("put_schedule");
        clock.advance(Duration::from_secs(10));
        let tick = ScheduleTick {
            name: stored.name.clone(),
            revision: stored.revision,
            at: Timestamp::from_millis(stored.defined_at.as_millis() + 1_000),
        };
        let fired = s
            .schedule_store()
            .expect("schedule_store")
            .fire_schedule(&tick, NewItem::new("f").dedup_key("key"))
            .await;
        assert!(
            matches!(fired, Err(Error::InvalidInput { .. })),
            "{fired:?}"
        );
        assert_eq!(s.stats(&q).await.expect("stats").total(), 0);
        let listed = s
            .schedule_store()
            .expect("schedule_store")
            .schedules()
            .await
            .expect("schedules");
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0].last_tick, None,
            "a refused fire recorded its tick"
        );
    });
}

#[test]
fn a_lost_lease_is_reported_with_the_callers_id() {
    block_on(async {
        let (_, s, _) = sharded(4);
        let q = name("lost");
        s.enqueue(&q, vec![NewItem::new("a")])
            .await
            .expect("enqueue");
        let lease = s.claim(&q, spec(1)).await.expect("claim").leases[0]
            .key
            .clone();
        s.ack(&lease).await.expect("ack");
        let ttl = LeaseTtl::new(TTL).expect("ttl");
        for got in [
            s.ack(&lease).await.err(),
            s.extend(&lease, ttl).await.err(),
            s.fail(&lease, "late").await.err(),
        ] {
            assert!(
                matches!(got, Some(Error::LeaseLost { id }) if id == lease.id),
                "{got:?} for lease {}",
                lease.id
            );
        }
    });
}

#[test]
fn a_lease_on_a_queue_no_shard_can_be_named_for_is_lost_alone() {
    block_on(async {
        let (_, s, _) = sharded(4);
        let good = name("good");
        s.enqueue(&good, vec![NewItem::new("a")])
            .await
            .expect("enqueue");
        let held = s.claim(&good, spec(1)).await.expect("claim").leases[0]
            .key
            .clone();
        let stray = LeaseKey {
            queue: name(&"x".repeat(QueueName::MAX_LEN)),
            id: ItemId::new(9),
            token: LeaseToken::random(),
        };
        let acked = s
            .ack_many(&[held.clone(), stray.clone()])
            .await
            .expect("ack_many answers per lease");
        assert!(acked[0].is_ok(), "{acked:?}");
        assert!(
            matches!(acked[1], Err(Error::LeaseLost { id }) if id == stray.id),
            "{acked:?}"
        );
        assert_eq!(s.stats(&good).await.expect("stats").total(), 0);
        let item = s.item(&stray.queue, stray.id).await;
        assert!(matches!(item, Err(Error::NotFound { .. })), "{item:?}");
    });
}

#[test]
fn a_claim_that_got_all_it_asked_has_no_retry_hint() {
    block_on(async {
        let (inner, s, _) = sharded(2);
        let q = name("lim");
        s.throttles()
            .expect("throttles")
            .set_queue_limits(&q, QueueLimits::NONE.concurrency(4))
            .await
            .expect("limits");
        s.enqueue(&q, (0..8).map(|i| NewItem::new(format!("{i}"))).collect())
            .await
            .expect("enqueue");
        // Shard 0's share (2 of 4) taken through its physical queue.
        let shard0 = s.shard(&q, 0).expect("shard name");
        let taken = inner
            .claim(&shard0, spec(2))
            .await
            .expect("claim on shard 0");
        assert_eq!(taken.leases.len(), 2);
        let got = s.claim(&q, spec(2)).await.expect("claim");
        assert_eq!(got.leases.len(), 2, "shard 1 has room for both");
        assert_eq!(got.retry_after, None, "no limit held this claim back");
    });
}

#[test]
fn the_fate_of_an_id_no_shard_hands_out_follows_the_clock() {
    block_on(async {
        let (_, s, _) = sharded(4);
        let q = name("fate");
        s.enqueue(&q, vec![NewItem::new("a")])
            .await
            .expect("enqueue");
        let now = s.now().await.expect("now");
        let ahead = Timestamp::from_millis(now.as_millis() + 60_000);
        for id in [0u64, 2] {
            let key = LeaseKey {
                queue: q.clone(),
                id: ItemId::new(id),
                token: LeaseToken::random(),
            };
            let f = s.lease_fate(&key, ahead).await.expect("lease_fate");
            assert_eq!(
                f,
                LeaseFate::Finished { state: None },
                "id {id}, held_until ahead"
            );
            let f = s.lease_fate(&key, now).await.expect("lease_fate");
            assert_eq!(f, LeaseFate::Lost, "id {id}, held_until reached");
        }
    });
}

#[test]
fn a_claim_whose_tokens_would_leave_their_family_is_refused() {
    block_on(async {
        let (_, s, _) = sharded(4);
        let q = name("tokens");
        s.enqueue(&q, (0..8).map(|i| NewItem::new(format!("{i}"))).collect())
            .await
            .expect("enqueue");
        let family = LeaseToken::random().as_u128() & ClaimSpec::FAMILY_MASK;
        let near_end = LeaseToken::from_u128(family | 0xFFFF_FF00);
        let spec = ClaimSpec::with_request(8, TTL, near_end).expect("valid on one store");
        let got = s.claim(&q, spec).await;
        assert!(matches!(got, Err(Error::InvalidInput { .. })), "{got:?}");
        assert_eq!(
            s.stats(&q).await.expect("stats").leased,
            0,
            "nothing was leased"
        );
    });
}
