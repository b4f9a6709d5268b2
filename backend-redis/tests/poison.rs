//! Poison is quarantined, never contagious, on both clients: an item whose
//! fields the decoder would reject (planted with `TestHooks::plant_poison`)
//! is moved to Dead with a reason ("quarantined: …") by whichever script
//! meets it first (claim, promotion, reap, recover_claim, release, item,
//! peek), reported, and never leased; healthy items go on.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Which;
use leaseq_core::testing::{Poison, TestHooks};
use leaseq_core::{
    Backend, BackendExt, ClaimSpec, ItemId, ItemState, NewItem, QueueName, Released,
};

const TTL: Duration = Duration::from_secs(60);

async fn push(b: &dyn Backend, q: &QueueName, n: usize, tag: &str) -> Vec<ItemId> {
    let items = (0..n).map(|i| NewItem::new(format!("{tag}{i}"))).collect();
    let out = b.enqueue(q, items).await.expect("enqueue");
    out.into_iter().map(|e| e.id).collect()
}

fn hooks(b: &Arc<dyn Backend>) -> &dyn TestHooks {
    b.test_hooks().expect("hooks on")
}

async fn plant(b: &Arc<dyn Backend>, q: &QueueName, id: ItemId, p: Poison) {
    assert!(
        hooks(b).plant_poison(q, id, p).await.expect("plant"),
        "{p:?} is a value an item hash can hold"
    );
}

async fn assert_quarantined(b: &dyn Backend, q: &QueueName, id: ItemId, p: Poison) {
    let info = b.item(q, id).await.expect("item on a quarantined item");
    assert_eq!(info.state, ItemState::Dead, "{p:?}: {info:?}");
    let reason = info.last_error.unwrap_or_default();
    assert!(reason.starts_with("quarantined: "), "{p:?}: {reason}");
}

async fn assert_consistent(b: &Arc<dyn Backend>, q: &QueueName) {
    let snap = hooks(b).snapshot(q).await.expect("snapshot");
    assert_eq!(snap.violations(), Vec::<String>::new());
}

/// A claim meeting each kind moves it to Dead, reports it, leases the
/// healthy items around it on their first attempt, and `item` then shows
/// the quarantined item (its fields made safe to decode).
async fn claim_quarantines_every_kind(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "pclaim").await else {
        return;
    };
    for (n, p) in Poison::ALL.into_iter().enumerate() {
        let q = QueueName::new(format!("c{n}")).expect("valid");
        // The victim sits between healthy items: a claim that judged it by
        // what it learned of the item before would lease it.
        let mut healthy = push(b.as_ref(), &q, 1, "h").await;
        let victim = push(b.as_ref(), &q, 1, "v").await[0];
        healthy.extend(push(b.as_ref(), &q, 1, "h2").await);
        plant(&b, &q, victim, p).await;
        let claimed = b
            .claim(&q, ClaimSpec::new(5, TTL).expect("spec"))
            .await
            .expect("a claim meeting poison");
        let got: Vec<ItemId> = claimed.leases.iter().map(|l| l.id()).collect();
        assert_eq!(got, healthy, "{p:?}");
        assert!(claimed.leases.iter().all(|l| l.attempts == 1), "{p:?}");
        let repair = claimed
            .repairs
            .iter()
            .find(|r| r.id == victim)
            .unwrap_or_else(|| panic!("{p:?}: no repair in {:?}", claimed.repairs));
        assert_eq!(repair.index, ItemState::Ready);
        assert!(repair.problem.starts_with("quarantined: "), "{repair:?}");
        assert_quarantined(b.as_ref(), &q, victim, p).await;
        let dead = b.peek(&q, ItemState::Dead, 10).await.expect("peek dead");
        assert_eq!(
            dead.iter().map(|i| i.id).collect::<Vec<_>>(),
            vec![victim],
            "{p:?}"
        );
        assert!(b
            .claim_up_to(&q, 5, TTL)
            .await
            .expect("claim")
            .leases
            .is_empty());
        assert_consistent(&b, &q).await;
    }
}

/// `item` and `peek` never fail on poison: they quarantine a Ready or
/// Scheduled item as a claim would, and a Ready listing leaves it out.
async fn inspection_quarantines_instead_of_failing(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "pinspect").await else {
        return;
    };
    for (n, p) in Poison::ALL.into_iter().enumerate() {
        let q = QueueName::new(format!("i{n}")).expect("valid");
        let ids = push(b.as_ref(), &q, 3, "x").await;
        plant(&b, &q, ids[0], p).await;
        plant(&b, &q, ids[1], p).await;
        // `item` on the first: shown Dead, quarantined.
        assert_quarantined(b.as_ref(), &q, ids[0], p).await;
        // `peek` of Ready meets the second: left out, moved to Dead.
        let ready = b.peek(&q, ItemState::Ready, 10).await.expect("peek ready");
        assert_eq!(
            ready.iter().map(|i| i.id).collect::<Vec<_>>(),
            vec![ids[2]],
            "{p:?}"
        );
        assert_quarantined(b.as_ref(), &q, ids[1], p).await;
        let s = b.stats(&q).await.expect("stats");
        assert_eq!((s.ready, s.dead), (1, 2), "{p:?}");
        assert_consistent(&b, &q).await;
    }
    // A Scheduled item made due with poison: promotion quarantines it.
    let q = QueueName::new("sched").expect("valid");
    let id = b
        .enqueue(
            &q,
            vec![NewItem::new("later").delay(Duration::from_secs(3600))],
        )
        .await
        .expect("enqueue")[0]
        .id;
    plant(&b, &q, id, Poison::PriorityOutOfRange).await;
    hooks(&b).make_due(&q).await.expect("make due");
    let claimed = b
        .claim(&q, ClaimSpec::new(1, TTL).expect("spec"))
        .await
        .expect("claim");
    assert!(claimed.leases.is_empty());
    assert!(
        claimed
            .repairs
            .iter()
            .any(|r| r.id == id && r.index == ItemState::Scheduled),
        "{:?}",
        claimed.repairs
    );
    assert_quarantined(b.as_ref(), &q, id, Poison::PriorityOutOfRange).await;
}

/// Poison planted on items already leased: `recover_claim` quarantines it
/// instead of returning a lease the decoder would reject, `release` sends
/// it to Dead, inspection leaves it to its holder, a reap quarantines it
/// once expired, and an ack still removes it.
async fn leased_poison_is_quarantined(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "pleased").await else {
        return;
    };
    let q = QueueName::new("l").expect("valid");
    let claim = |n: u32| {
        let (b, q) = (b.clone(), q.clone());
        async move {
            let spec = ClaimSpec::new(n, TTL).expect("spec");
            // Kept to recover the claim with.
            let c = b.claim(&q, spec.duplicate()).await.expect("claim");
            assert_eq!(c.leases.len(), n as usize);
            (spec, c.leases)
        }
    };

    // recover_claim
    let ids = push(b.as_ref(), &q, 2, "a").await;
    let (spec, leases) = claim(2).await;
    plant(&b, &q, ids[0], Poison::MissingPayload).await;
    let recovered = b.recover_claim(&q, &spec).await.expect("recover_claim");
    assert_eq!(
        recovered.leases.iter().map(|l| l.id()).collect::<Vec<_>>(),
        vec![ids[1]]
    );
    assert!(
        recovered.repairs.iter().any(|r| r.id == ids[0]),
        "{:?}",
        recovered.repairs
    );
    assert_quarantined(b.as_ref(), &q, ids[0], Poison::MissingPayload).await;
    assert!(b
        .ack(&leases[0].key)
        .await
        .is_err_and(|e| e.is_lease_lost()));
    b.ack(&leases[1].key)
        .await
        .expect("ack of the healthy lease");

    // release
    let id = push(b.as_ref(), &q, 1, "b").await[0];
    let (_, leases) = claim(1).await;
    plant(&b, &q, id, Poison::BadMaxAttempts).await;
    let released = b
        .release(&leases[0].key, Duration::ZERO)
        .await
        .expect("release");
    assert_eq!(released, Released::Dead);
    assert_quarantined(b.as_ref(), &q, id, Poison::BadMaxAttempts).await;

    // inspection, then reap
    let ids = push(b.as_ref(), &q, 2, "c").await;
    let _ = claim(2).await;
    plant(&b, &q, ids[0], Poison::NotANumber).await;
    plant(&b, &q, ids[1], Poison::NegativeAttempts).await;
    let inspected = b.item(&q, ids[0]).await.expect("item on leased poison");
    assert_eq!(inspected.state, ItemState::Leased, "left to its holder");
    assert_eq!(hooks(&b).expire_leases(&q).await.expect("expire"), 2);
    let report = b.reap(&q).await.expect("reap");
    assert_eq!(report.recovered(), 0, "{report:?}");
    for id in &ids {
        assert!(
            report
                .repairs
                .iter()
                .any(|r| r.id == *id && r.problem.starts_with("quarantined: ")),
            "{report:?}"
        );
    }
    assert_quarantined(b.as_ref(), &q, ids[0], Poison::NotANumber).await;
    assert_quarantined(b.as_ref(), &q, ids[1], Poison::NegativeAttempts).await;

    // ack
    let id = push(b.as_ref(), &q, 1, "d").await[0];
    let (_, leases) = claim(1).await;
    plant(&b, &q, id, Poison::AttemptsAtLimit).await;
    b.ack(&leases[0].key)
        .await
        .expect("ack of a poisoned lease");
    assert!(b
        .item(&q, id)
        .await
        .is_err_and(|e| matches!(e, leaseq_core::Error::NotFound { .. })));

    let s = b.stats(&q).await.expect("stats");
    assert_eq!((s.ready, s.leased, s.dead), (0, 0, 4), "{s:?}");
    assert_consistent(&b, &q).await;
}

/// Redrive resets attempts, so items quarantined for their attempts come
/// back (and are claimed on their first attempt); items whose other fields
/// are still unusable stay in Dead, never stall a redrive, and never come
/// back to Ready.
async fn redrive_brings_back_only_usable_items(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "predrive").await else {
        return;
    };
    let q = QueueName::new("r").expect("valid");
    // Deaths in this order: the unusable ones first (oldest), then usable.
    let kinds = [
        Poison::BadMaxAttempts,
        Poison::PriorityOutOfRange,
        Poison::MissingPayload,
        Poison::AttemptsAtLimit,
        Poison::NegativeAttempts,
        Poison::NotANumber,
    ];
    let ids = push(b.as_ref(), &q, kinds.len(), "r").await;
    for (id, p) in ids.iter().zip(kinds) {
        plant(&b, &q, *id, p).await;
        assert_quarantined(b.as_ref(), &q, *id, p).await;
    }
    // Named one by one: an unusable one stays in Dead and says why; a
    // usable one comes back.
    for (id, p) in ids.iter().zip(kinds).take(3) {
        let got = b.admin().expect("admin").redrive_item(&q, *id).await;
        let stays = matches!(
            &got,
            Err(leaseq_core::Error::Corrupt { what }) if what.contains("still unusable")
        );
        assert!(stays, "redrive_item of {p:?}: {got:?}");
        assert_quarantined(b.as_ref(), &q, *id, p).await;
    }
    assert!(b
        .admin()
        .expect("admin")
        .redrive_item(&q, ids[3])
        .await
        .expect("redrive_item"));
    assert!(!b
        .admin()
        .expect("admin")
        .redrive_item(&q, ids[3])
        .await
        .expect("redrive_item"));
    // One at a time: each call steps over the three left in Dead.
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&q, 1)
            .await
            .expect("redrive"),
        1
    );
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&q, 100)
            .await
            .expect("redrive"),
        1
    );
    assert_eq!(
        b.admin()
            .expect("admin")
            .redrive(&q, 100)
            .await
            .expect("redrive"),
        0
    );
    let s = b.stats(&q).await.expect("stats");
    assert_eq!((s.ready, s.dead), (3, 3));
    let claimed = b.claim_up_to(&q, 10, TTL).await.expect("claim");
    let mut got: Vec<ItemId> = claimed.leases.iter().map(|l| l.id()).collect();
    got.sort_unstable();
    assert_eq!(got, ids[3..].to_vec());
    assert!(claimed.leases.iter().all(|l| l.attempts == 1));
    assert!(claimed.repairs.is_empty(), "{:?}", claimed.repairs);
    assert_consistent(&b, &q).await;
}

for_each_client!(
    claim_quarantines_every_kind,
    inspection_quarantines_instead_of_failing,
    leased_poison_is_quarantined,
    redrive_brings_back_only_usable_items,
);
