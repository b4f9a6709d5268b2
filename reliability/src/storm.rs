//! A storm: producers and real [`Worker`]s (each on a backend handle of its
//! own, like separate processes) on one queue, a ledger of what happened,
//! and the checks a fault test runs between faults: progress resumes, the
//! indexes stay consistent (INV-1), and in the end nothing is lost or acked
//! twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaseq_core::{
    handler_fn, Backend, CancellationToken, Error, ItemId, Job, JobContext, JobOutcome, NewItem,
    QueueName, RetryPolicy, Worker,
};
use tokio::task::JoinHandle;

use crate::ledger::Ledger;

/// The items one worker is running.
type InFlight = Arc<Mutex<BTreeSet<ItemId>>>;

/// How a storm runs.
#[derive(Debug, Clone)]
pub struct StormConfig {
    /// Handler slots per worker.
    pub concurrency: usize,
    /// Lease length.
    pub lease_ttl: Duration,
    /// Each worker's reaper interval.
    pub reap_interval: Duration,
    /// Items per enqueue.
    pub batch: usize,
    /// Pause between a producer's enqueues.
    pub produce_every: Duration,
    /// Producers wait while more items than this are enqueued but not yet
    /// acked, so a long run's backlog stays bounded.
    pub max_backlog: u64,
}

impl Default for StormConfig {
    fn default() -> Self {
        StormConfig {
            concurrency: 4,
            lease_ttl: Duration::from_secs(2),
            reap_interval: Duration::from_millis(250),
            batch: 8,
            produce_every: Duration::from_millis(10),
            max_backlog: 2_000,
        }
    }
}

/// A running storm.
#[derive(Debug)]
pub struct Storm {
    queue: QueueName,
    /// What happened, as the tasks saw it.
    pub ledger: Arc<Ledger>,
    /// Calls that failed with a retryable error (producers) and backend
    /// errors the workers counted.
    pub errors: Arc<AtomicU64>,
    /// Items whose result a worker could not record for sure: the ack's
    /// reply was lost (`Unrecorded`), or a retry of it found the lease gone
    /// (`LeaseLost`), with every outcome seen for them.
    unrecorded: Arc<Mutex<BTreeMap<ItemId, Vec<String>>>>,
    producing: CancellationToken,
    shutdown: CancellationToken,
    producers: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<leaseq_core::Result<()>>>,
    metrics: Vec<leaseq_core::WorkerMetrics>,
    backends: Vec<Arc<dyn Backend>>,
    in_flight: Vec<InFlight>,
    cfg: StormConfig,
    crashes: u64,
}

async fn produce(
    b: Arc<dyn Backend>,
    q: QueueName,
    cfg: StormConfig,
    ledger: Arc<Ledger>,
    errors: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    let mut n = 0u64;
    while !stop.is_cancelled() {
        if ledger.enqueued_count() as u64 > ledger.acks() + cfg.max_backlog {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(cfg.produce_every) => {}
            }
            continue;
        }
        let items = (0..cfg.batch)
            .map(|i| NewItem::new(format!("item-{n}-{i}")))
            .collect();
        n += 1;
        match b.enqueue(&q, items).await {
            Ok(out) => ledger.enqueued(&out.iter().map(|e| e.id).collect::<Vec<_>>()),
            // Unknown whether it was written: never retried, so no payload
            // can exist twice. Such items are drained but not judged.
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(cfg.produce_every) => {}
        }
    }
}

impl Storm {
    /// Starts one producer per entry of `producers` and one worker per entry
    /// of `workers` on `queue`.
    pub fn start(
        producers: Vec<Arc<dyn Backend>>,
        workers: Vec<Arc<dyn Backend>>,
        queue: QueueName,
        cfg: StormConfig,
    ) -> leaseq_core::Result<Storm> {
        let mut storm = Storm {
            queue,
            ledger: Arc::new(Ledger::default()),
            errors: Arc::new(AtomicU64::new(0)),
            unrecorded: Arc::default(),
            producing: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            producers: Vec::new(),
            workers: Vec::new(),
            metrics: Vec::new(),
            backends: workers.clone(),
            in_flight: Vec::new(),
            cfg: cfg.clone(),
            crashes: 0,
        };
        for b in producers {
            storm.producers.push(tokio::spawn(produce(
                b,
                storm.queue.clone(),
                cfg.clone(),
                storm.ledger.clone(),
                storm.errors.clone(),
                storm.producing.clone(),
            )));
        }
        for b in workers {
            let (worker, flight) = storm.worker(b, &cfg)?;
            storm.in_flight.push(flight);
            storm.metrics.push(worker.metrics());
            let token = storm.shutdown.clone();
            storm.workers.push(tokio::spawn(worker.run(token)));
        }
        Ok(storm)
    }

    fn worker(
        &self,
        b: Arc<dyn Backend>,
        cfg: &StormConfig,
    ) -> leaseq_core::Result<(Worker, InFlight)> {
        let (ledger, events, unrecorded) = (
            self.ledger.clone(),
            self.ledger.clone(),
            self.unrecorded.clone(),
        );
        // Items this worker is running: handler started, no outcome yet.
        let flight: InFlight = Arc::default();
        let (landed, running) = (flight.clone(), flight.clone());
        Worker::builder(b, self.queue.as_str())
            .concurrency(cfg.concurrency)
            .lease_ttl(cfg.lease_ttl)
            .reap_interval(Some(cfg.reap_interval))
            .idle_wait(Duration::from_millis(200))
            .retry(RetryPolicy::exponential(Duration::from_millis(20)))
            .shutdown_deadline(Duration::from_secs(2))
            .on_event(move |e| match &e.outcome {
                _ if !landed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&e.id) =>
                {
                    // An event for an item this worker was not running.
                    events.stray(e.id);
                }
                JobOutcome::Acked => events.acked(e.id),
                JobOutcome::Dead { .. } => events.dead(e.id),
                JobOutcome::Unrecorded { .. } | JobOutcome::LeaseLost => {
                    unrecorded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(e.id)
                        .or_default()
                        .push(format!("{:?}", e.outcome));
                }
                _ => {}
            })
            .build(handler_fn(move |job: Job, _ctx: JobContext| {
                let ledger = ledger.clone();
                running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(job.id);
                async move {
                    ledger.delivered(job.id);
                    Ok::<(), Error>(())
                }
            }))
            .map(|w| (w, flight))
    }

    /// Kills worker `i` hard (its task is aborted mid-handler, as a process
    /// crash would end it: its leases are left to run out) and starts a
    /// fresh worker on the same backend handle in its place.
    pub async fn crash(&mut self, i: usize) -> leaseq_core::Result<()> {
        let i = i % self.workers.len().max(1);
        let b = self.backends[i].clone();
        let (worker, fresh_flight) = self.worker(b, &self.cfg.clone())?;
        self.metrics.push(worker.metrics());
        let fresh = tokio::spawn(worker.run(self.shutdown.clone()));
        let old = std::mem::replace(&mut self.workers[i], fresh);
        old.abort();
        // Only once the task is gone is its set of running items final.
        let _ = old.await;
        // What it was running may have been acked just before the crash,
        // with the reply never seen.
        let flight = std::mem::replace(&mut self.in_flight[i], fresh_flight);
        let mut u = self.unrecorded.lock().unwrap_or_else(|p| p.into_inner());
        for id in flight.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            u.entry(*id)
                .or_default()
                .push("in flight in a crashed worker".into());
        }
        drop(u);
        self.crashes += 1;
        Ok(())
    }

    /// Workers crashed so far.
    pub fn crashes(&self) -> u64 {
        self.crashes
    }

    /// Backend errors the workers met so far (from their metrics), plus the
    /// producers' failed enqueues.
    pub fn failures(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
            + self
                .metrics
                .iter()
                .map(|m| m.snapshot().backend_errors)
                .sum::<u64>()
    }

    /// Waits until `n` more acks than now have gone through; returns how
    /// long that took, or an error after `limit`.
    pub async fn progress(&self, n: u64, limit: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let target = self.ledger.acks() + n;
        while self.ledger.acks() < target {
            if start.elapsed() > limit {
                return Err(format!(
                    "no progress: {} of {n} acks within {limit:?}",
                    n + self.ledger.acks() - target
                ));
            }
            if let Some(dead) = self.workers.iter().position(|w| w.is_finished()) {
                return Err(format!("worker {dead} stopped by itself"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(start.elapsed())
    }

    /// Stops producing, waits until every item is done and the queue is
    /// empty (as `judge` sees it through `b`), stops the workers and gives
    /// the verdict.
    pub async fn finish(mut self, b: &dyn Backend, limit: Duration) -> Result<String, String> {
        self.producing.cancel();
        for p in self.producers.drain(..) {
            p.await.map_err(|e| format!("a producer died: {e}"))?;
        }
        let start = Instant::now();
        loop {
            let empty = matches!(b.stats(&self.queue).await, Ok(s) if s.total() == 0);
            if empty {
                break;
            }
            if start.elapsed() > limit {
                let stats = b.stats(&self.queue).await;
                return Err(format!("the queue never drained: {stats:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.shutdown.cancel();
        for w in self.workers.drain(..) {
            match w.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(format!("a worker ended with {e}")),
                Err(e) => return Err(format!("a worker died: {e}")),
            }
        }
        // An ack whose reply was lost: the item is gone, so it was done.
        let unrecorded = self
            .unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for id in self.ledger.open() {
            if unrecorded.contains_key(&id)
                && matches!(b.item(&self.queue, id).await, Err(Error::NotFound { .. }))
            {
                self.ledger.unsure(id);
            }
        }
        self.ledger.verdict().map_err(|e| {
            let seen: Vec<_> = self
                .ledger
                .open()
                .into_iter()
                .map(|id| (id, unrecorded.get(&id).cloned().unwrap_or_default()))
                .collect();
            format!("{e}; outcomes seen for the open items: {seen:?}")
        })
    }
}

/// Fails unless the queue's raw indexes are consistent (INV-1), retrying
/// the snapshot while the backend is unreachable, for up to `limit`.
pub async fn indexes_consistent(
    b: &dyn Backend,
    q: &QueueName,
    limit: Duration,
) -> Result<(), String> {
    let Some(hooks) = b.test_hooks() else {
        return Ok(());
    };
    let start = Instant::now();
    loop {
        match hooks.snapshot(q).await {
            Ok(snap) => {
                let v = snap.violations();
                return if v.is_empty() {
                    Ok(())
                } else {
                    Err(format!("INV-1: {}", v.join("; ")))
                };
            }
            Err(e) if start.elapsed() > limit => return Err(format!("snapshot: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
