//! The reference model against the memory backend on a manual clock:
//! thousands of random operation sequences (`LEASEQ_MODEL_CASES`, default
//! 2,000), every answer compared. And the model has teeth: on backends with
//! a seeded fault it finds the fault.

mod teeth {
    pub(crate) mod faulty;
}
// The history teeth's wrapper, whole (its groups live in files beside it).
#[allow(dead_code)]
mod history_teeth {
    mod admin;
    mod events;
    pub(crate) mod faulty;
    mod relay;
}
use history_teeth::faulty as history_faulty;

use std::sync::Arc;

use leaseq_conformance::model::{check_model, run_ops, ItemSpec, ModelConfig, Op, Span, Verb};
use leaseq_conformance::runner::block_on;
use leaseq_conformance::{BackendFactory, Outcome, Rule, TestBackend, Unavailable};
use leaseq_core::ManualClock;
use leaseq_memory::MemoryBackend;
use teeth::faulty::{Fault, Faulty};

/// A fresh memory backend per case, on a clock the driver moves.
struct MemoryFactory;

#[leaseq_core::async_trait]
impl BackendFactory for MemoryFactory {
    fn name(&self) -> &str {
        "memory"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        Ok(TestBackend::manual(Arc::new(backend), clock))
    }
}

/// The memory backend behind a seeded fault.
struct FaultyFactory(Fault);

#[leaseq_core::async_trait]
impl BackendFactory for FaultyFactory {
    fn name(&self) -> &str {
        "memory-with-fault"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let inner = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
        Ok(TestBackend::manual(
            Arc::new(Faulty::new(inner, self.0)),
            clock,
        ))
    }
}

#[test]
fn memory_matches_the_model() {
    let config = ModelConfig::from_env(2_000)
        .max_steps(60)
        .regressions("proptest-regressions/model_memory.txt");
    assert_eq!(check_model(&MemoryFactory, &config), Ok(Outcome::Passed));
}

/// Four shards over one memory backend: every answer judged as for one
/// store but for the order of what claim, peek and redrive take.
struct ShardedFactory;

#[leaseq_core::async_trait]
impl BackendFactory for ShardedFactory {
    fn name(&self) -> &str {
        "memory sharded"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let inner = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        let sharded = leaseq_core::layer::shard::Sharded::new(Arc::new(inner), 4)
            .map_err(|e| Unavailable(e.to_string()))?;
        Ok(TestBackend::manual(Arc::new(sharded), clock))
    }
}

#[test]
fn sharded_memory_matches_the_model() {
    let config = ModelConfig::from_env(500)
        .max_steps(60)
        .regressions("proptest-regressions/model_memory_sharded.txt");
    assert_eq!(check_model(&ShardedFactory, &config), Ok(Outcome::Passed));
}

#[test]
fn without_hooks_time_passes_by_the_clock() {
    let config = ModelConfig::from_env(300).max_steps(60);
    assert_eq!(
        check_model(&FaultyFactory(Fault::HideHooks), &config),
        Ok(Outcome::Passed)
    );
}

/// The memory backend behind a seeded History fault.
struct HistoryFaultFactory(history_faulty::Fault);

#[leaseq_core::async_trait]
impl BackendFactory for HistoryFaultFactory {
    fn name(&self) -> &str {
        "memory-with-history-fault"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let inner = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
        let b = history_faulty::Faulty::new(inner, self.0);
        Ok(TestBackend::manual(Arc::new(b), clock))
    }
}

#[test]
fn the_model_catches_cancelled_items_kept_as_completed() {
    let f = HistoryFaultFactory(history_faulty::Fault::CancelReadAsCompleted);
    let verdict = check_model(&f, &ModelConfig::new(2000).max_steps(60));
    let v = verdict.expect_err("a cancelled item kept as completed is caught");
    assert_eq!(v.rule, Rule::Contract("History"), "{v}");
}

#[test]
fn the_model_catches_a_history_listed_oldest_first() {
    let f = HistoryFaultFactory(history_faulty::Fault::OldestFirst);
    let verdict = check_model(&f, &ModelConfig::new(2000).max_steps(60));
    let v = verdict.expect_err("a history listed oldest first is caught");
    assert_eq!(v.rule, Rule::Contract("History"), "{v}");
}

#[test]
fn the_model_catches_an_unfenced_ack() {
    let verdict = check_model(&FaultyFactory(Fault::UnfencedAck), &ModelConfig::new(500));
    let v = verdict.expect_err("an ack by id alone is caught");
    assert_eq!(v.rule, Rule::Inv3, "{v}");
}

#[test]
fn the_model_catches_a_redrive_of_the_wrong_item() {
    let verdict = check_model(
        &FaultyFactory(Fault::RedriveOldest),
        &ModelConfig::new(3000).max_steps(60),
    );
    let v = verdict.expect_err("a redrive_item that moves another item is caught");
    // The sweep reads every item back: the one named is still Dead, the
    // one moved instead is Ready.
    assert!(matches!(v.rule, Rule::Contract(_)), "{v}");
}

#[test]
fn the_model_catches_a_fate_that_calls_every_expired_lease_lost() {
    let verdict = check_model(
        &FaultyFactory(Fault::FateOfExpiredIsLost),
        &ModelConfig::new(500),
    );
    let v = verdict.expect_err("a lease_fate of Lost for a lease still held is caught");
    assert_eq!(v.rule, Rule::Contract("lease_fate"), "{v}");
}

#[test]
fn the_model_catches_a_recovered_lease_with_a_field_read_wrong() {
    let verdict = check_model(
        &FaultyFactory(Fault::RecoverMixesFields),
        &ModelConfig::new(500),
    );
    let v = verdict.expect_err("recover_claim that reads attempts from max attempts is caught");
    assert_eq!(v.rule, Rule::Contract("recover_claim"), "{v}");
}

#[test]
fn the_model_catches_a_double_claim() {
    let verdict = check_model(&FaultyFactory(Fault::DoubleClaim), &ModelConfig::new(500));
    let v = verdict.expect_err("a claim of a live lease is caught");
    assert!(matches!(v.rule, Rule::Inv2), "{v}");
}

#[test]
fn the_model_catches_a_listing_that_keeps_emptied_queues() {
    let verdict = check_model(
        &FaultyFactory(Fault::ListedAfterPurge),
        &ModelConfig::new(500),
    );
    let v = verdict.expect_err("a queue listed after its last item went is caught");
    assert_eq!(v.rule, Rule::Contract("queues"), "{v}");
}

#[test]
fn the_model_catches_a_listing_that_hides_dead_items() {
    let verdict = check_model(&FaultyFactory(Fault::DeadHidden), &ModelConfig::new(500));
    let v = verdict.expect_err("a queue of Dead items left out is caught");
    assert_eq!(v.rule, Rule::Contract("queues"), "{v}");
}

fn one(payload: &[u8], priority: i32, delay: Option<Span>, dedup: Option<u8>) -> ItemSpec {
    ItemSpec {
        payload: payload.to_vec(),
        priority,
        delay,
        max_attempts: 2,
        dedup,
    }
}

/// Hand-written sequences around the edges the contract names: a lease that
/// expired but was not reaped still works; after a reap the token is stale;
/// the last attempt dies in the reaper; redrive resets attempts; a dedup key
/// stays held by a Dead item and is freed by ack.
#[test]
fn regression_sequences() {
    let fenced = |pick, verb| Op::Fenced { pick, verb };
    let sequences: Vec<Vec<Op>> = vec![
        // redrive_item: the younger of two deaths moves, alone; a second
        // call finds it Ready; once acked it is NotFound; the older one
        // still moves.
        vec![
            Op::Enqueue(vec![one(b"a", 0, None, None), one(b"b", 0, None, None)]),
            Op::Claim {
                max: 2,
                ttl: Span::Long,
            },
            fenced(0, Verb::Fail(false)),
            fenced(1, Verb::Fail(false)),
            Op::RedriveItem(1),
            Op::RedriveItem(1),
            Op::Claim {
                max: 2,
                ttl: Span::Long,
            },
            fenced(2, Verb::Ack),
            Op::RedriveItem(1),
            Op::RedriveItem(0),
        ],
        vec![
            Op::Enqueue(vec![
                one(b"a", 0, None, Some(0)),
                one(b"b", 1, None, Some(0)),
            ]),
            Op::Claim {
                max: 1,
                ttl: Span::Short,
            },
            Op::ExpireLeases,
            fenced(0, Verb::Extend(Span::Short)),
            Op::Advance(Span::Medium),
            Op::Reap,
            fenced(0, Verb::Ack),
            Op::Claim {
                max: 4,
                ttl: Span::Short,
            },
            Op::ExpireLeases,
            Op::Reap,
            Op::Peek(leaseq_core::ItemState::Dead, 3),
            Op::Enqueue(vec![one(b"c", 0, None, Some(0))]),
            Op::Redrive(1),
            Op::Claim {
                max: 1,
                ttl: Span::Long,
            },
            fenced(2, Verb::Ack),
            Op::Enqueue(vec![one(b"d", 0, None, Some(0))]),
        ],
        vec![
            Op::Enqueue(vec![
                one(b"", 2, Some(Span::Short), None),
                one(b"x", 0, None, None),
                one(b"y", 0, None, None),
            ]),
            Op::Advance(Span::Medium),
            Op::Claim {
                max: 1_000,
                ttl: Span::Medium,
            },
            fenced(1, Verb::Release(Some(Span::Short))),
            fenced(2, Verb::Fail(true)),
            Op::Forged {
                pick: 0,
                verb: Verb::Ack,
            },
            Op::MakeDue,
            Op::Peek(leaseq_core::ItemState::Ready, 5),
            Op::Purge,
            fenced(0, Verb::Ack),
        ],
    ];
    for seq in sequences {
        let verdict = block_on(run_ops(&MemoryFactory, &seq, 1));
        assert_eq!(verdict, Ok(Outcome::Passed), "{seq:#?}");
    }
}
