//! A storm in which replies are lost: producers and real workers run on a
//! fault layer that lets every operation run but drops its reply at a
//! steady rate (enqueue, claim, ack_many, release, fail, extend, and the
//! recovery calls themselves). Producers settle their batches with
//! `Settle::enqueue`; the worker settles everything else. The verdict, per
//! backend: nothing lost, nothing written or acked twice, no item Dead
//! without a handler run, and every outcome the workers reported matching
//! the store.

use leaseq_core::BackendExt as _;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaseq_conformance::BackendFactory;
use leaseq_core::layer::fault::{Fault, Faults, Op};
use leaseq_core::settle::Settle;
use leaseq_core::{
    handler_fn, Backend, CancellationToken, Error, ItemId, ItemState, Job, JobContext, JobOutcome,
    LeaseToken, NewItem, Permanent, QueueName, RetryPolicy, Worker,
};
use leaseq_reliability::factories::{MemoryRealClock, PgFactory, RedisClient, RedisFactory};

const ITEMS: usize = 400;
const BATCH: usize = 20;

/// Payload `i` fails its first attempt when `i % 5 == 0` (a release), and
/// for good when `i % 17 == 0` (a fail); `i % 23 == 0` runs long enough to
/// need a heartbeat.
fn plan(i: usize) -> (bool, bool, bool) {
    (
        i.is_multiple_of(5),
        i.is_multiple_of(17),
        i.is_multiple_of(23),
    )
}

#[derive(Debug, Default)]
struct Ledger {
    /// Handler runs per item.
    runs: BTreeMap<ItemId, u32>,
    /// Outcomes the workers reported per item.
    outcomes: BTreeMap<ItemId, Vec<JobOutcome>>,
}

async fn storm(name: &str, backend: Arc<dyn Backend>) {
    let q = QueueName::new(format!("lost-{}", LeaseToken::random())).expect("queue");
    let faults = Arc::new(Faults::new(backend.clone()));
    for (op, every) in [
        (Op::EnqueueOnce, 4),
        (Op::Claim, 5),
        (Op::AckMany, 3),
        (Op::Release, 2),
        (Op::Fail, 2),
        (Op::Extend, 2),
        (Op::RecoverClaim, 3),
        (Op::LeaseFate, 5),
    ] {
        faults.inject_every(op, Fault::LoseReply, every, u32::MAX);
    }
    let b: Arc<dyn Backend> = faults.clone();

    // Produce: every batch settled under its own request id.
    let settle = Settle::new().pauses(Duration::from_millis(2), Duration::from_millis(50));
    let mut payload_of = BTreeMap::new();
    for start in (0..ITEMS).step_by(BATCH) {
        let items: Vec<NewItem> = (start..start + BATCH)
            .map(|i| NewItem::new(i.to_string()).max_attempts(3))
            .collect();
        let done = settle
            .enqueue(b.as_ref(), &q, LeaseToken::random(), items)
            .await
            .unwrap_or_else(|e| panic!("{name}: a settled enqueue failed: {e}"));
        for (k, e) in done.into_iter().enumerate() {
            assert!(
                !e.deduplicated,
                "{name}: an item without a key was deduplicated"
            );
            let before = payload_of.insert(e.id, start + k);
            assert!(before.is_none(), "{name}: id {} handed out twice", e.id);
        }
    }
    let s = backend.stats(&q).await.expect("stats");
    assert_eq!(
        s.total(),
        ITEMS as u64,
        "{name}: a batch was written twice or not at all: {s:?}"
    );

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = CancellationToken::new();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (l1, l2) = (ledger.clone(), ledger.clone());
        let worker = Worker::builder(b.clone(), q.as_str())
            .concurrency(8)
            .prefetch(8)
            .lease_ttl(Duration::from_secs(3))
            .retry(
                RetryPolicy::exponential(Duration::from_millis(5))
                    .max_delay(Duration::from_millis(20)),
            )
            .on_event(move |ev| {
                let mut l = l1.lock().expect("ledger");
                l.outcomes
                    .entry(ev.id)
                    .or_default()
                    .push(ev.outcome.clone());
            })
            .build(handler_fn(move |job: Job, _ctx: JobContext| {
                let ledger = l2.clone();
                async move {
                    let i: usize = std::str::from_utf8(&job.payload)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(usize::MAX);
                    *ledger
                        .lock()
                        .expect("ledger")
                        .runs
                        .entry(job.id)
                        .or_default() += 1;
                    let (retry_once, give_up, long) = plan(i);
                    if long {
                        tokio::time::sleep(Duration::from_millis(1_500)).await;
                    }
                    if give_up {
                        return Err(Box::new(Permanent::new("gives up")) as leaseq_core::BoxError);
                    }
                    if retry_once && job.attempts == 1 {
                        return Err("first attempt fails".into());
                    }
                    Ok(())
                }
            }))
            .expect("worker");
        runs.push(tokio::spawn(worker.run(stop.clone())));
    }

    let started = Instant::now();
    loop {
        let s = backend.stats(&q).await.expect("stats");
        if s.ready + s.scheduled + s.leased == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{name}: not drained in 120 s: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    for r in runs {
        r.await.expect("join").expect("worker run");
    }

    // The verdict.
    // The workers have stopped: take the ledger out of its lock.
    let ledger = std::mem::take(&mut *ledger.lock().expect("ledger"));
    let dead_in_store: BTreeSet<ItemId> = backend
        .peek(&q, ItemState::Dead, 10_000)
        .await
        .expect("peek dead")
        .into_iter()
        .map(|i| i.id)
        .collect();
    let (mut acked, mut dead, mut twice, mut wrong) = (0, 0, Vec::new(), Vec::new());
    for (&id, &i) in &payload_of {
        let outs = ledger.outcomes.get(&id).cloned().unwrap_or_default();
        let n_acked = outs.iter().filter(|o| **o == JobOutcome::Acked).count();
        let n_dead = outs
            .iter()
            .filter(|o| matches!(o, JobOutcome::Dead { .. }))
            .count();
        if n_acked > 1 {
            twice.push(id);
        }
        for o in &outs {
            if matches!(o, JobOutcome::LeaseLost | JobOutcome::Unrecorded { .. }) {
                wrong.push(format!("{id} (payload {i}) reported {o:?}"));
            }
        }
        let in_dead = dead_in_store.contains(&id);
        let gone = matches!(backend.item(&q, id).await, Err(Error::NotFound { .. }));
        match (n_acked, n_dead, gone, in_dead) {
            (1, 0, true, false) => acked += 1,
            (0, 1, false, true) => {
                dead += 1;
                assert!(
                    ledger.runs.get(&id).copied().unwrap_or(0) > 0,
                    "{name}: item {id} went Dead without a handler run"
                );
                assert!(
                    plan(i).1,
                    "{name}: item {id} (payload {i}) went Dead but its handler never gave up"
                );
            }
            other => wrong.push(format!(
                "{id} (payload {i}): acked/dead events {:?}, gone {}, in Dead {}",
                (other.0, other.1),
                other.2,
                other.3
            )),
        }
    }
    assert!(twice.is_empty(), "{name}: acked twice: {twice:?}");
    assert!(
        wrong.is_empty(),
        "{name}: outcomes that do not match the store: {wrong:?}"
    );
    let want_dead = (0..ITEMS).filter(|&i| plan(i).1).count();
    assert_eq!((acked, dead), (ITEMS - want_dead, want_dead), "{name}");
    assert!(
        faults.fired() > 100,
        "{name}: only {} replies were lost",
        faults.fired()
    );
    eprintln!(
        "{name}: {ITEMS} items, {} replies lost, {acked} acked once, {dead} Dead after a handler gave up, 0 lost, 0 twice, {:.1} s",
        faults.fired(),
        started.elapsed().as_secs_f64()
    );
    let _ = backend.admin().expect("admin").purge(&q).await;
}

async fn on<F: BackendFactory>(factory: F) {
    match factory.backend().await {
        Ok(tb) => storm(factory.name(), tb.backend).await,
        Err(u) => leaseq_reliability::env::skip(factory.name(), u.0),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_survives_lost_replies() {
    on(MemoryRealClock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_rs_survives_lost_replies() {
    on(RedisFactory::new(RedisClient::RedisRs)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fred_survives_lost_replies() {
    on(RedisFactory::new(RedisClient::Fred)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_survives_lost_replies() {
    on(PgFactory::new("lost")).await;
}
