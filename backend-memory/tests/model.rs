//! Random operation sequences against a plain reference model: after every
//! step the backend's answers and state match the model, and the raw indexes
//! keep INV-1.

mod common;

use leaseq_core::BackendExt as _;
use std::collections::BTreeMap;
use std::time::Duration;

use common::fixture;
use leaseq_core::{Backend, ClaimSpec, ItemState, Lease, LeaseTtl, NewItem, QueueStats, Released};

/// Seeded, so a failing seed replays.
struct Rng(rand::rngs::StdRng);

impl Rng {
    fn new(seed: u64) -> Self {
        use rand::SeedableRng;
        Rng(rand::rngs::StdRng::seed_from_u64(seed))
    }

    fn below(&mut self, n: u64) -> u64 {
        rand::Rng::random_range(&mut self.0, 0..n.max(1))
    }
}

#[derive(Debug, Clone)]
struct Model {
    state: ItemState,
    priority: i32,
    seq: u64,
    attempts: u32,
    max_attempts: u32,
    key: Option<String>,
    /// Due time (Scheduled) or expiry (Leased), ms.
    at: u64,
    /// The current lease's token while Leased.
    token: Option<leaseq_core::LeaseToken>,
}

async fn run(seed: u64, steps: usize) {
    let f = fixture();
    let hooks = f.backend.test_hooks().expect("hooks");
    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<u64, Model> = BTreeMap::new();
    // Acks so far: `stats` counts completions (History).
    let mut completed = 0u64;
    let mut leases: Vec<Lease> = Vec::new();
    let now = |f: &common::Fixture| {
        use leaseq_core::Clock;
        f.clock.now().as_millis()
    };
    let promote = |model: &mut BTreeMap<u64, Model>, now: u64| {
        for m in model.values_mut() {
            if m.state == ItemState::Scheduled && m.at <= now {
                m.state = ItemState::Ready;
            }
        }
    };
    for step in 0..steps {
        let t = now(&f);
        match rng.below(10) {
            0 | 1 => {
                let n = 1 + rng.below(5);
                let mut batch = Vec::new();
                for _ in 0..n {
                    let mut item = NewItem::new("p")
                        .priority(rng.below(3) as i32)
                        .max_attempts(1 + rng.below(3) as u32);
                    if rng.below(4) == 0 {
                        item = item.delay(Duration::from_millis(1 + rng.below(3_000)));
                    }
                    if rng.below(3) == 0 {
                        item = item.dedup_key(format!("k{}", rng.below(6)));
                    }
                    batch.push(item);
                }
                let out = f
                    .backend
                    .enqueue(&f.queue, batch.clone())
                    .await
                    .expect("enqueue");
                for (item, e) in batch.iter().zip(&out) {
                    let key = item.dedup_key.as_deref().map(str::to_owned);
                    let holder = key.as_ref().and_then(|k| {
                        model
                            .iter()
                            .find(|(_, m)| m.key.as_deref() == Some(k.as_str()))
                            .map(|(id, _)| *id)
                    });
                    match holder {
                        Some(id) => {
                            assert_eq!((e.id.get(), e.deduplicated), (id, true), "step {step}")
                        }
                        None => {
                            assert!(!e.deduplicated, "step {step}");
                            let delay = item.delay.as_millis() as u64;
                            model.insert(
                                e.id.get(),
                                Model {
                                    state: if delay > 0 {
                                        ItemState::Scheduled
                                    } else {
                                        ItemState::Ready
                                    },
                                    priority: item.priority,
                                    seq: e.id.get(),
                                    attempts: 0,
                                    max_attempts: item.max_attempts,
                                    key,
                                    at: t + delay,
                                    token: None,
                                },
                            );
                        }
                    }
                }
            }
            2 | 3 => {
                promote(&mut model, t);
                let max = 1 + rng.below(4) as u32;
                let ttl = 1 + rng.below(2_000);
                let spec = ClaimSpec::new(max, Duration::from_millis(ttl)).expect("spec");
                let claimed = f.backend.claim(&f.queue, spec).await.expect("claim");
                assert!(claimed.repairs.is_empty());
                let mut ready: Vec<_> = model
                    .iter()
                    .filter(|(_, m)| m.state == ItemState::Ready)
                    .map(|(id, m)| (-m.priority, m.seq, *id))
                    .collect();
                ready.sort_unstable();
                let expected: Vec<u64> = ready.iter().take(max as usize).map(|e| e.2).collect();
                let got: Vec<u64> = claimed.leases.iter().map(|l| l.id().get()).collect();
                assert_eq!(got, expected, "step {step}: claim order");
                for l in claimed.leases {
                    let m = model.get_mut(&l.id().get()).expect("modelled");
                    m.state = ItemState::Leased;
                    m.attempts += 1;
                    m.at = t + ttl;
                    m.token = Some(l.token());
                    assert_eq!((l.attempts, l.expires_at.as_millis()), (m.attempts, m.at));
                    leases.push(l);
                }
            }
            4 | 5 if !leases.is_empty() => {
                let l = leases.swap_remove(rng.below(leases.len() as u64) as usize);
                let id = l.id().get();
                // Current when the model still has the item leased under this claim.
                let current = model
                    .get(&id)
                    .is_some_and(|m| m.state == ItemState::Leased && m.token == Some(l.token()));
                let op = rng.below(4);
                let result = match op {
                    0 => f.backend.ack(&l.key).await.map(|_| None),
                    1 => f.backend.fail(&l.key, "no").await.map(|_| None),
                    2 => {
                        let delay = Duration::from_millis(rng.below(2) * (1 + rng.below(1_000)));
                        f.backend
                            .release(&l.key, delay)
                            .await
                            .map(|r| Some((r, delay)))
                    }
                    _ => {
                        let ttl = LeaseTtl::new(Duration::from_millis(1 + rng.below(2_000)))
                            .expect("ttl");
                        let until = f.backend.extend(&l.key, ttl).await;
                        if let (Ok(until), Some(m)) = (&until, model.get_mut(&id)) {
                            m.at = until.expires_at.as_millis();
                            leases.push(l.clone());
                        }
                        until.map(|_| None)
                    }
                };
                assert_eq!(
                    result.is_ok(),
                    current,
                    "step {step}: op {op} on {id}, fence"
                );
                if let Ok(outcome) = result {
                    match (op, outcome) {
                        (0, _) => {
                            model.remove(&id);
                            completed += 1;
                        }
                        (1, _) => model.get_mut(&id).expect("m").state = ItemState::Dead,
                        (2, Some((released, delay))) => {
                            let m = model.get_mut(&id).expect("m");
                            let (want, state) = if m.attempts >= m.max_attempts {
                                (Released::Dead, ItemState::Dead)
                            } else if delay.is_zero() {
                                (Released::Ready, ItemState::Ready)
                            } else {
                                (Released::Scheduled, ItemState::Scheduled)
                            };
                            assert_eq!(released, want, "step {step}");
                            m.state = state;
                            m.at = t + delay.as_millis() as u64;
                        }
                        _ => {}
                    }
                }
            }
            6 => f.clock.advance(Duration::from_millis(rng.below(1_500))),
            7 => {
                let report = f.backend.reap(&f.queue).await.expect("reap");
                let (mut requeued, mut dead) = (0, 0);
                for m in model.values_mut() {
                    if m.state == ItemState::Leased && m.at <= t {
                        if m.attempts >= m.max_attempts {
                            m.state = ItemState::Dead;
                            dead += 1;
                        } else {
                            m.state = ItemState::Ready;
                            requeued += 1;
                        }
                    }
                }
                assert_eq!(
                    (report.requeued, report.dead),
                    (requeued, dead),
                    "step {step}"
                );
            }
            8 => {
                let limit = rng.below(3) as usize;
                let moved = f
                    .backend
                    .admin()
                    .expect("admin")
                    .redrive(&f.queue, limit)
                    .await
                    .expect("redrive");
                let dead = model
                    .values()
                    .filter(|m| m.state == ItemState::Dead)
                    .count();
                assert_eq!(moved as usize, dead.min(limit), "step {step}");
                // Which ones moved is checked through the next claims' order.
                let peek_ready = f
                    .backend
                    .peek(&f.queue, ItemState::Ready, usize::MAX)
                    .await
                    .expect("peek");
                for info in peek_ready {
                    let m = model.get_mut(&info.id.get()).expect("m");
                    if m.state == ItemState::Dead {
                        m.state = ItemState::Ready;
                        m.attempts = 0;
                    }
                }
            }
            _ => {
                if rng.below(10) == 0 {
                    assert_eq!(
                        f.backend
                            .admin()
                            .expect("admin")
                            .purge(&f.queue)
                            .await
                            .expect("purge"),
                        model.len() as u64
                    );
                    model.clear();
                    leases.clear();
                }
            }
        }
        promote(&mut model, now(&f));
        let mut want = QueueStats {
            completed: Some(completed),
            ..QueueStats::default()
        };
        for m in model.values() {
            match m.state {
                ItemState::Ready => want.ready += 1,
                ItemState::Scheduled => want.scheduled += 1,
                ItemState::Leased => want.leased += 1,
                ItemState::Dead => want.dead += 1,
            }
        }
        assert_eq!(
            f.backend.stats(&f.queue).await.expect("stats"),
            want,
            "step {step}"
        );
        let snap = hooks.snapshot(&f.queue).await.expect("snapshot");
        assert!(
            snap.violations().is_empty(),
            "step {step}: {:?}",
            snap.violations()
        );
        for (id, m) in &model {
            let info = f
                .backend
                .item(&f.queue, leaseq_core::ItemId::new(*id))
                .await
                .expect("item");
            assert_eq!(
                (info.state, info.attempts),
                (m.state, m.attempts),
                "step {step}: item {id}"
            );
        }
    }
}

#[tokio::test]
async fn random_operations_match_the_model() {
    for seed in 1..=20 {
        run(seed, 400).await;
    }
}
