//! Claims on a backend that runs one write at a time (SQLite's writer, a
//! busy server): a claim is not cut short by the acks still waiting their
//! turn, so the worker makes as few round trips as its prefetch allows.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq::{
    async_trait, Backend, CancellationToken, ClaimSpec, Claimed, ItemId, LayeredBackend, LeaseKey,
    QueueName, Result, Worker,
};
use support::{events, noop_handler, queue, tokio_backend};

/// Runs claims and acks one at a time, each taking `write` (like a single
/// writer connection), and records what every claim asked for and the ids
/// of every ack batch.
#[derive(Debug)]
struct SerialWriter {
    inner: Arc<dyn Backend>,
    write: Duration,
    turn: tokio::sync::Mutex<()>,
    claims: Mutex<Vec<u32>>,
    acks: Mutex<Vec<Vec<ItemId>>>,
}

#[async_trait]
impl LayeredBackend for SerialWriter {
    type Inner = Arc<dyn Backend>;
    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }
    async fn claim(&self, q: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let _turn = self.turn.lock().await;
        tokio::time::sleep(self.write).await;
        self.claims.lock().expect("lock").push(spec.max());
        self.inner.claim(q, spec).await
    }
    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        let _turn = self.turn.lock().await;
        tokio::time::sleep(self.write).await;
        let ids = leases.iter().map(|l| l.id).collect();
        self.acks.lock().expect("lock").push(ids);
        self.inner.ack_many(leases).await
    }
}

// On a paused clock: handler times and the writer's turns are the
// runtime's, so the claim sizes follow the worker's rule, not how busy the
// machine running the test is (on a real clock, a loaded machine measured
// slower handlers and rightly claimed less ahead).
#[tokio::test(start_paused = true)]
async fn claims_stay_full_while_acks_wait_their_turn() {
    // A prefetch of twice the concurrency: the claim-ahead buffer of
    // `concurrency` jobs fills every claim.
    claims_stay_full(Some(16), 16).await;
    // The default: microsecond handlers widen the buffer to the prefetch.
    claims_stay_full(None, leaseq::WorkerBuilder::DEFAULT_PREFETCH).await;
}

/// Drains a queue with `prefetch` (the worker's default when `None`) and
/// checks that most claims ask for `full` items.
async fn claims_stay_full(prefetch: Option<u32>, full: u32) {
    const JOBS: usize = 1_200;
    const CONCURRENCY: usize = 8;
    let serial = Arc::new(SerialWriter {
        inner: tokio_backend(),
        write: Duration::from_micros(300),
        turn: tokio::sync::Mutex::new(()),
        claims: Mutex::new(Vec::new()),
        acks: Mutex::new(Vec::new()),
    });
    let backend: Arc<dyn Backend> = serial.clone();
    let q = queue("whole");
    let items: Vec<_> = (0..JOBS)
        .map(|i| leaseq::NewItem::new(format!("{i}")))
        .collect();
    for batch in items.chunks(JOBS / 2) {
        backend.enqueue(&q, batch.to_vec()).await.expect("enqueue");
    }
    let (on_event, mut events) = events();
    let mut builder = Worker::builder(backend.clone(), "whole");
    if let Some(k) = prefetch {
        builder = builder.prefetch(k);
    }
    let worker = builder
        .concurrency(CONCURRENCY)
        .reap_interval(None)
        .on_event(on_event)
        .build(noop_handler())
        .expect("worker");
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    for _ in 0..JOBS {
        events.next().await;
    }
    stop.cancel();
    run.await.expect("join").expect("run");
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);

    let acks = serial.acks.lock().expect("lock").clone();
    let acked: HashSet<ItemId> = acks.iter().flatten().copied().collect();
    assert_eq!(acked.len(), JOBS, "every job acked");
    assert_eq!(acks.iter().map(Vec::len).sum::<usize>(), JOBS, "once");
    // Once handlers are known to be short a claim asks for the whole
    // prefetch although a claim's worth of acks is on its way and another
    // gathers behind it; the queue runs dry only at the end. With room for
    // one claim of acks, most claims got what the gathering acks left.
    let asked = serial.claims.lock().expect("lock").clone();
    let whole = asked.iter().filter(|&&n| n == full).count();
    assert!(
        whole * 10 >= asked.len() * 8,
        "prefetch {prefetch:?}: too few claims of {full}: {asked:?}"
    );
}
